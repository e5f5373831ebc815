// The unit's ExecReload= command, run as systemd would run it against a real netlifed: it returns once the
// reload has finished and exits non-zero when the new config has errors, so that `systemctl reload` fails
// on a broken config instead of succeeding at once.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1)))
struct UnitReloadTests {
    static let repository = URL(fileURLWithPath: repositoryDirectory)

    /// The unit's ExecReload= as words, with the installed netlifectl replaced by the built one and
    /// $MAINPID by `pid`.
    static func execReload(pid: Int32) throws -> [String] {
        let unit = try String(contentsOf: repository.appendingPathComponent("systemd/netlifed.service"), encoding: .utf8)
        let line = try #require(unit.split(separator: "\n").last { $0.hasPrefix("ExecReload=") }, "no ExecReload=")
        return line.dropFirst("ExecReload=".count).split(separator: " ").map { word in
            word == "$MAINPID" ? String(pid) : word == "/usr/local/bin/netlifectl" ? product("netlifectl") : String(word)
        }
    }

    @Test func execReloadWaitsForTheReloadAndFailsOnABrokenConfig() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let command = try Self.execReload(pid: daemon.pid)
        // systemd runs it with no --control: the daemon's socket comes from the environment here.
        var environment = ProcessInfo.processInfo.environment
        environment["NETLIFE_CONTROL"] = daemon.controlPath

        daemon.directory.write("netlifed.conf", echoConfig(port: 0) + "\n[app second]\n[listener second.main]\naddress = 127.0.0.1:0\nservice = echo\n")
        let good = run(command, environment: environment)
        #expect(good.status == 0, "\(good)")
        #expect(daemon.ctl("status", "second").status == 0, "the reload had finished when the command returned")
        #expect(daemon.state("second") == "active")

        daemon.directory.write("netlifed.conf", "[app echo]\nlaunch = whenever\n")
        let broken = run(command, environment: environment)
        #expect(broken.status != 0, "a broken config fails the reload: \(broken)")
        #expect(broken.stderr.contains("launch must be foreground, background or no"), "\(broken)")
        #expect(daemon.state("second") == "active", "nothing changed")
    }
}
