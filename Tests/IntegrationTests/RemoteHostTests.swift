// `netlifectl -H [USER@]HOST` against a real sshd: the test makes a throwaway host key and user key, and ssh
// reaches the "far host" through `sshd -i` run for each connection (ProxyCommand), so no sshd listens and none
// is left running. The far side's netlifectl --bridge speaks to the daemon's socket: replies, --json, exit
// statuses and watch are those of the same command run on the host itself, and the daemon judges the request
// by the ssh user.

import Foundation
import Testing
import NetLifeTestSupport

/// A throwaway ssh setup: keys, an sshd configuration, and an ssh configuration whose host `netlife-test`
/// is an sshd run for the connection. The far side's PATH holds a netlifectl every user may run.
private final class ThrowawaySSH {
    let directory = TemporaryDirectory()
    /// `NETLIFE_SSH`: ssh with this setup's configuration.
    var command: String { "/usr/bin/ssh -F \(directory.file("ssh_config"))" }

    init() throws {
        chmod(directory.path, 0o755)
        for key in ["id", "host"] {
            let made = run(["/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "netlife-test", "-f", directory.file(key)])
            guard made.status == 0 else { throw TestFailure("ssh-keygen: \(made)") }
        }
        try FileManager.default.copyItem(atPath: product("netlifectl"), toPath: directory.file("netlifectl"))
        chmod(directory.file("netlifectl"), 0o755)
        directory.write("authorized_keys", "environment=\"PATH=\(directory.path):/usr/bin:/bin\" " + directory.read("id.pub"))
        chmod(directory.file("authorized_keys"), 0o644)
        directory.write("sshd_config", """
            HostKey \(directory.file("host"))
            AuthorizedKeysFile \(directory.file("authorized_keys"))
            PermitRootLogin prohibit-password
            PermitUserEnvironment PATH
            StrictModes no
            UsePAM no
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            PidFile none
            LogLevel ERROR

            """)
        directory.write("ssh_config", """
            Host netlife-test
              User root
              IdentityFile \(directory.file("id"))
              IdentitiesOnly yes
              ProxyCommand /usr/sbin/sshd -i -f \(directory.file("sshd_config"))
              StrictHostKeyChecking no
              UserKnownHostsFile /dev/null
              LogLevel ERROR
              BatchMode yes

            """)
        // sshd checks for its privilege separation directory (which its package's unit makes at boot).
        mkdir("/run/sshd", 0o755)
    }

    /// netlifectl on this host with `arguments`, which name the far host.
    func ctl(_ arguments: [String], timeout: TimeInterval = 30) -> ProcessResult {
        run(["/usr/bin/env", "NETLIFE_SSH=\(command)", product("netlifectl")] + arguments, timeout: timeout)
    }

    func remove() { directory.remove() }
}

@Suite(.serialized, .timeLimit(.minutes(3)),
       .enabled(if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/sbin/sshd"), "sshd -i and the test user need root"))
struct RemoteHostTests {
    @Test func aCommandOnAnotherHostRepliesAndExitsAsOnThisOne() throws {
        let ssh = try ThrowawaySSH()
        defer { ssh.remove() }
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        let remote = { (arguments: [String]) in ssh.ctl(["-H", "netlife-test", "--control", daemon.controlPath] + arguments) }

        for arguments in [["status"], ["--json", "status"], ["status", "echo"], ["version"]] {
            let far = remote(arguments)
            let near = daemon.ctl(arguments)
            #expect(far.status == 0 && far.status == near.status, "\(arguments): \(far)")
            #expect(far.stdout == near.stdout, "\(arguments): the same reply: \(far.stdout) vs \(near.stdout)")
        }
        let refusedFar = remote(["foreground", "nosuch"])
        let refusedNear = daemon.ctl("foreground", "nosuch")
        #expect(refusedFar.status == 1 && refusedNear.status == 1, "\(refusedFar)")
        #expect(refusedFar.stderr == refusedNear.stderr)
        #expect(remote(["interrupt", "begin"]).status == 2, "a usage error is found on this host, before ssh")

        // A transition asked over ssh happens, and its reply is the transition's.
        let background = remote(["background", "echo"])
        #expect(background.status == 0 && background.stdout.hasPrefix("echo: background"), "\(background)")
        #expect(daemon.state("echo") == "background")

        let noDaemon = ssh.ctl(["-H", "netlife-test", "--control", daemon.directory.file("none.sock"), "status"])
        #expect(noDaemon.status == 3, "\(noDaemon)")
        #expect(noDaemon.stderr.contains("netlifed is not running (socket \(daemon.directory.file("none.sock")))"), "the far side says why: \(noDaemon)")
        // A user whose login prints instead of running the bridge (nobody's shell is nologin): the message
        // says the far host's login answered, with what it printed, not that netlifed sent bad JSON.
        let noLogin = ssh.ctl(["-H", "nobody@netlife-test", "--control", daemon.controlPath, "status"])
        #expect(noLogin.status == 3, "\(noLogin)")
        #expect(noLogin.stderr.contains("nobody@netlife-test answered with something other than netlifed's reply: \"This account is currently not available.\""),
                "\(noLogin)")
        let badHost = ssh.ctl(["-H", "-oProxyCommand=/bin/false", "status"])
        #expect(badHost.status == 2 && badHost.stderr.contains("is not a host"), "an option is never passed to ssh as a host: \(badHost)")
    }

    @Test func aWatchOnAnotherHostFollowsItsEvents() throws {
        let ssh = try ThrowawaySSH()
        defer { ssh.remove() }
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        let watcher = try BackgroundProcess(["/usr/bin/env", "NETLIFE_SSH=\(ssh.command)", product("netlifectl"),
                                             "-H", "netlife-test", "--control", daemon.controlPath, "watch", "echo"])
        // The watch begins once ssh has logged in: transitions are asked until one shows in it.
        #expect(waitUntil(timeout: 15) {
            _ = daemon.ctl(daemon.state("echo") == "active" ? "background" : "foreground", "echo")
            return watcher.output.contains(" done: ")
        }, "\(watcher.output)")
        #expect(watcher.output.contains("asked by uid 0"), "\(watcher.output)")
        daemon.stop()
        let ended = watcher.wait(timeout: 10).result
        #expect(ended.status == 3, "the daemon stopped: the watch ends with exit status 3, as on this host: \(ended)")
    }

    @Test func theFarDaemonJudgesTheRequestByTheSSHUser() throws {
        let ssh = try ThrowawaySSH()
        defer { ssh.remove() }
        let user = try TestUser()
        defer { user.remove() }
        // The user logs in with the throwaway key and runs the bridge with its own shell; its password field
        // says "no password" rather than "locked" (useradd's "!"), which sshd without PAM would refuse.
        #expect(run(["/usr/sbin/usermod", "-s", "/bin/sh", "-p", "*", "-d", user.home.path, user.name]).status == 0)
        let daemon = try TestDaemon(config: """
            [daemon]
            control-group = \(user.group)

            [app mine]
            auto-suspend = never
            allow-users = \(user.name)

            [listener mine.main]
            address = 127.0.0.1:0
            service = echo

            [app theirs]
            auto-suspend = never
            allow-users = root

            [listener theirs.main]
            address = 127.0.0.1:0
            service = echo
            """)
        defer { daemon.stop() }
        chmod(daemon.directory.path, 0o755)
        let asUser = { (arguments: [String]) in
            ssh.ctl(["-H", "\(user.name)@netlife-test", "--control", daemon.controlPath] + arguments)
        }
        let mine = asUser(["background", "mine"])
        #expect(mine.status == 0, "\(mine)")
        let theirs = asUser(["background", "theirs"])
        let theirsHere = user.ctl(daemon.controlPath, "background", "theirs")
        #expect(theirs.status == 4 && theirsHere.status == 4, "refused as on the host itself: \(theirs)")
        #expect(theirs.stderr == theirsHere.stderr)
        #expect(asUser(["reload"]).status == 4)
        #expect(daemon.state("mine") == "background" && daemon.state("theirs") == "active")
        let log = daemon.log.split(separator: "\n").filter { $0.contains("asked: background mine") }
        #expect(log.contains { $0.contains("uid \(user.uid)") }, "attributed to the ssh user: \(log)")
    }
}
