// The control socket itself: permissions, bad and oversized requests answered with errors
// while the daemon keeps serving, the connection limit, peers of another uid refused, and netlifectl's exit
// statuses and help.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct ControlSocketTests {
    @Test func socketIsMode0600InADirectoryOfMode0700() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let socketMode = try FileManager.default.attributesOfItem(atPath: daemon.controlPath)[.posixPermissions] as? Int
        let directory = (daemon.controlPath as NSString).deletingLastPathComponent
        let directoryMode = try FileManager.default.attributesOfItem(atPath: directory)[.posixPermissions] as? Int
        #expect(socketMode == 0o600)
        #expect(directoryMode == 0o700)
    }

    /// A host is left as it was found: the directory netlifed made for its socket (/run/netlifed when run by
    /// hand as root) goes when it exits, unless something else is in it by then.
    @Test func theSocketsDirectoryGoesAtExitIfTheDaemonMadeItAndNothingElseIsInIt() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let directory = (daemon.controlPath as NSString).deletingLastPathComponent
        #expect(FileManager.default.fileExists(atPath: directory))
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit())
        #expect(!FileManager.default.fileExists(atPath: directory), "\(daemon.log)")

        let kept = try TestDaemon(config: echoConfig(port: 0))
        defer { kept.stop() }
        let keptDirectory = (kept.controlPath as NSString).deletingLastPathComponent
        kept.directory.write("control/notes", "not the daemon's")
        kept.signal(SIGTERM)
        #expect(kept.waitForExit())
        #expect(kept.directory.read("control/notes") == "not the daemon's")
        #expect(!FileManager.default.fileExists(atPath: kept.controlPath))
        #expect(FileManager.default.fileExists(atPath: keptDirectory))
    }

    @Test func malformedUnknownAndOversizedRequestsGetErrorsAndTheDaemonKeepsServing() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let connection = try #require(RawControlClient(path: daemon.controlPath))
        defer { connection.close() }
        connection.send("{not json\n")
        #expect(errorCode(of: connection.reply()) == "bad-request")
        connection.send("[1, 2]\n")
        #expect(errorCode(of: connection.reply()) == "bad-request")
        connection.send("{\"cmd\": \"fly\"}\n")
        #expect(errorCode(of: connection.reply()) == "unknown-command")
        connection.send("{\"cmd\": \"status\", \"protocol\": 99}\n")
        #expect(errorCode(of: connection.reply()) == "protocol-version")
        connection.send("{\"cmd\": \"background\"}\n")
        #expect(errorCode(of: connection.reply()) == "bad-request")
        connection.send("{\"cmd\": \"upload\", \"app\": \"echo\", \"file\": \"/no/such/file\", \"url\": \"http://127.0.0.1/f\"}\n")
        #expect(errorCode(of: connection.reply()) == "bad-request")
        // The same connection still works after errors.
        connection.send("{\"cmd\": \"status\"}\n")
        #expect(connection.reply()?["ok"] as? Bool == true)

        let oversized = try #require(RawControlClient(path: daemon.controlPath))
        defer { oversized.close() }
        oversized.send("{\"cmd\": \"status\", \"pad\": \"" + String(repeating: "x", count: 70 * 1024) + "\"}\n")
        #expect(errorCode(of: oversized.reply()) == "request-too-large")
        #expect(oversized.reply(timeout: 1) == nil, "the connection is closed after an oversized request")
        #expect(daemon.ctl("status").status == 0, "the daemon keeps serving")
    }

    @Test func aRequestFromAClientThatHalfClosesIsStillAnswered() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let connection = try #require(RawControlClient(path: daemon.controlPath))
        defer { connection.close() }
        connection.send("{\"cmd\": \"version\"}")
        shutdown(connection.fd, Int32(SHUT_WR))
        let reply = connection.reply()
        #expect(reply?["ok"] as? Bool == true)
        #expect(reply?["protocol"] as? Int == 1)
    }

    @Test func atMost32ControlConnectionsAndANewcomerEvictsTheLongestWaiting() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        var connections: [RawControlClient] = []
        defer { connections.forEach { $0.close() } }
        for _ in 0..<32 {
            let connection = try #require(RawControlClient(path: daemon.controlPath))
            connection.send("{\"cmd\": \"version\"}\n")
            #expect(connection.reply()?["ok"] as? Bool == true)
            connections.append(connection)
        }
        // All 32 wait for their next request: the newcomer is served, and the one that has waited longest is
        // told why it is closed.
        let extra = try #require(RawControlClient(path: daemon.controlPath))
        defer { extra.close() }
        extra.send("{\"cmd\": \"version\"}\n")
        #expect(extra.reply()?["ok"] as? Bool == true)
        #expect(errorCode(of: connections[0].reply()) == "too-many-connections")
        #expect(connections[0].reply(timeout: 1) == nil, "then it is closed")
        connections[1].send("{\"cmd\": \"version\"}\n")
        #expect(connections[1].reply()?["ok"] as? Bool == true, "the others are untouched")
    }

    @Test(.enabled(if: getuid() == 0, "connecting as another uid needs root"))
    func aPeerWithAnotherUidIsRefused() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        // Open the path up, as a careless administrator might: SO_PEERCRED must still refuse the peer.
        let directory = (daemon.controlPath as NSString).deletingLastPathComponent
        chmod(directory, 0o755)
        chmod(daemon.controlPath, 0o666)
        chmod(daemon.directory.path, 0o755)
        let result = run(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          product("netlifectl"), "--control", daemon.controlPath, "status"])
        #expect(result.status == 4, "not permitted: \(result)")
        #expect(result.stderr.contains("refused a control connection from uid 65534"), "\(result)")
        #expect(daemon.log.contains("refused a control connection from uid 65534"))
        #expect(daemon.ctl("status").status == 0)
    }

    @Test(.enabled(if: getuid() == 0, "connecting as another uid needs root"))
    func membersOfTheControlGroupAreAllowed() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, daemonLines: "control-group = nogroup"))
        defer { daemon.stop() }
        let directory = (daemon.controlPath as NSString).deletingLastPathComponent
        let socketAttributes = try FileManager.default.attributesOfItem(atPath: daemon.controlPath)
        let directoryAttributes = try FileManager.default.attributesOfItem(atPath: directory)
        #expect(socketAttributes[.posixPermissions] as? Int == 0o660)
        #expect(directoryAttributes[.posixPermissions] as? Int == 0o750)
        #expect(socketAttributes[.groupOwnerAccountName] as? String == "nogroup")
        #expect(directoryAttributes[.groupOwnerAccountName] as? String == "nogroup")
        chmod(daemon.directory.path, 0o755)
        let member = run(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          product("netlifectl"), "--control", daemon.controlPath, "status"])
        #expect(member.status == 0, "\(member)")
        let outsider = run(["/usr/bin/setpriv", "--reuid=65534", "--regid=1", "--clear-groups",
                            product("netlifectl"), "--control", daemon.controlPath, "status"])
        #expect(outsider.status != 0, "a peer outside the group cannot use the socket: \(outsider)")
    }

    @Test func netlifectlExitStatusesAndHelp() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let missing = directory.file("nothing.sock")
        let unreachable = run([product("netlifectl"), "--control", missing, "status"])
        #expect(unreachable.status == 3)
        #expect(unreachable.stderr == "netlifectl: netlifed is not running (socket \(missing))\n")

        let unknown = run([product("netlifectl"), "--control", missing, "fly"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("unknown command 'fly'"))
        #expect(unknown.stderr.contains("See 'netlifectl --help'."))
        // A family's second word missing or wrong says which words it takes.
        let family = run([product("netlifectl"), "--control", missing, "interrupt", "a"])
        #expect(family.status == 2 && family.stderr.hasPrefix("netlifectl: interrupt needs begin or end, got 'a'\n"), "\(family)")
        #expect(run([product("netlifectl"), "--control", missing, "task"]).stderr.hasPrefix("netlifectl: task needs begin, end or list\n"))
        let missingArgument = run([product("netlifectl"), "--control", missing, "background"])
        #expect(missingArgument.status == 2)
        #expect(missingArgument.stderr.contains("USAGE: netlifectl background APP"))

        let help = run([product("netlifectl"), "--help"])
        #expect(help.status == 0)
        let sections = ["OVERVIEW:", "USAGE:", "OPTIONS:", "SUBCOMMANDS:"].map { help.stdout.range(of: $0)?.lowerBound }
        #expect(sections.allSatisfy { $0 != nil })
        #expect(sections.compactMap { $0 } == sections.compactMap { $0 }.sorted(), "sections in OVERVIEW/USAGE/OPTIONS/SUBCOMMANDS order")
        for command in ["status [APP]", "launch APP [--background]", "task begin APP [--name N]", "mode APP idle|continuous"] {
            #expect(help.stdout.contains(command))
        }
        #expect(run([product("netlifectl"), "help"]).stdout == help.stdout)
        // Not a terminal: the help fits 80 columns (it ran past 200 before).
        let wide = help.stdout.split(separator: "\n").filter { $0.count > 80 }
        #expect(wide.isEmpty, "lines over 80 columns: \(wide)")
    }
}
