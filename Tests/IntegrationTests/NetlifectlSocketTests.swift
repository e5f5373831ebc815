// netlifectl finds the system daemon: a user without a daemon of its own reaches /run/netlifed/control.sock
// (as a member of its control-group), is told both sockets when neither answers (exit 3), and --json and
// --control work after the command as before it.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1)))
struct NetlifectlSocketTests {
    /// Runs `script` with sh in a mount namespace of its own whose /run is an empty tmpfs (the host's /run is
    /// untouched), with this process's environment less the variables that name a control socket.
    static func withPrivateRun(_ script: String) -> ProcessResult {
        var environment = ProcessInfo.processInfo.environment
        environment["NETLIFE_CONTROL"] = nil
        environment["NOTIFY_SOCKET"] = nil
        return run(["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                    "mount -t tmpfs tmpfs /run || exit 90\n" + script],
                   environment: environment, timeout: 30)
    }

    @Test func jsonAndControlWorkAfterTheCommand() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        for arguments in [["--json", "status"], ["status", "--json"], ["status", "echo", "--json"]] {
            let result = daemon.ctl(arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            let reply = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            #expect((reply?["apps"] as? [[String: Any]])?.first?["name"] as? String == "echo", "\(arguments): \(result)")
        }
        let after = run([product("netlifectl"), "status", "--control", daemon.controlPath, "--json"])
        #expect(after.status == 0, "\(after)")
        #expect(after.stdout.hasPrefix("{\"ok\":true"), "\(after)")
        let equals = run([product("netlifectl"), "version", "--control=\(daemon.controlPath)"])
        #expect(equals.status == 0, "\(equals)")
    }

    /// In a mount namespace of its own with /run on a tmpfs, so that neither a system daemon nor a
    /// /run/netlifed left on the host changes what netlifectl finds.
    @Test func aUserWithoutItsOwnDaemonIsToldBothSockets() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        // nobody may look into it: its missing netlifed/control.sock is then "not there", not "not allowed".
        chmod(directory.path, 0o755)
        let result = Self.withPrivateRun("""
            XDG_RUNTIME_DIR='\(directory.path)' setpriv --reuid=65534 --regid=65534 --clear-groups '\(product("netlifectl"))' status
            echo "netlifectl exit $?"
            """)
        #expect(result.stdout == "netlifectl exit 3\n", "\(result)")
        #expect(result.stderr == "netlifectl: netlifed is not running (no socket at \(directory.path)/netlifed/control.sock nor at /run/netlifed/control.sock)\n")
    }

    /// A system daemon on /run/netlifed/control.sock with `control-group = nogroup`, in a mount namespace of
    /// its own with /run on a tmpfs (the host's /run is untouched); nobody, a member of nogroup, runs
    /// netlifectl with no socket of its own.
    @Test func aGroupMemberWithoutItsOwnDaemonReachesTheSystemDaemon() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("netlifed.conf", echoConfig(port: 0, daemonLines: "control-group = nogroup"))
        chmod(directory.path, 0o755)
        let result = Self.withPrivateRun("""
            set -u
            '\(product("netlifed"))' --config '\(directory.file("netlifed.conf"))' --control /run/netlifed/control.sock \
                > '\(directory.file("netlifed.log"))' 2>&1 &
            daemon=$!
            trap 'kill $daemon; wait $daemon' EXIT
            tries=0
            until [ -S /run/netlifed/control.sock ]; do
                tries=$((tries + 1)); [ $tries -gt 200 ] && exit 91; sleep 0.05
            done
            XDG_RUNTIME_DIR='\(directory.path)' setpriv --reuid=65534 --regid=65534 --clear-groups \
                '\(product("netlifectl"))' status --json
            echo "netlifectl exit $?"
            """)
        #expect(result.stdout.contains("netlifectl exit 0"), "\(result)\nlog: \(directory.read("netlifed.log"))")
        #expect(result.stdout.contains("\"name\":\"echo\""), "\(result)")
    }
}
