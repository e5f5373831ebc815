// Values that cannot work are refused with an error naming them: durations out of their range (file, line
// and range), a control path too long for a Unix socket address; a task time of a day runs without overflow.
// Against the real netlifed.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct ConfigRangeTests {
    @Test func checkConfigRejectsDurationsOutsideTheirRangeNamingFileLineAndRange() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("bad.conf", """
            [daemon]
            loop-stall = 5ms
            [app a]
            task-time = 9223372036s
            launch-budget = 0
            background-budget = 0
            """)
        let path = directory.file("bad.conf")
        let result = run([product("netlifed"), "--check-config", path])
        #expect(result.status == 1, "\(result)")
        let expected = [
            "\(path):2: loop-stall must be between 100ms and 10m, got '5ms'",
            "\(path):4: task-time must be between 1s and 24h, got '9223372036s'",
            "\(path):5: launch-budget must be between 10ms and 1h, got '0'",
            "\(path):6: background-budget must be between 10ms and 1h, got '0'",
        ]
        let lines = result.stderr.split(separator: "\n").map(String.init)
        for line in expected { #expect(lines.contains(line), "missing '\(line)' in:\n\(result.stderr)") }
    }

    @Test func theCompressedTimingsOfTestsStayValid() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("good.conf", """
            [daemon]
            loop-stall = 100ms
            keepalive-min = 1s
            [app a]
            launch-budget = 10ms
            background-budget = 10ms
            foreground-budget = 10ms
            terminate-budget = 10ms
            expiration-budget = 10ms
            keepalive-budget = 10ms
            task-time = 1s
            expiration-lead = 0
            expiration-grace = 0
            auto-suspend = 0
            """)
        let result = run([product("netlifed"), "--check-config", directory.file("good.conf")])
        #expect(result.status == 0, "\(result)")
    }

    @Test func aTaskTimeOfOneDayRunsWithoutOverflow() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: "auto-suspend = never\ntask-time = 24h\nexpiration-lead = 23h"))
        defer { daemon.stop() }
        #expect(daemon.ctl("task", "begin", "a").status == 0)
        #expect(daemon.ctl("background", "a").status == 0)
        let remaining = daemon.status("a")["backgroundTimeRemaining"] as? Double ?? 0
        #expect(remaining > 86_000 && remaining <= 86_400, "\(remaining)")
        #expect(daemon.isRunning)
    }

    @Test func aControlPathOver107BytesIsRefusedAndNothingIsBound() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("netlifed.conf", "[app a]\nlaunch = no\n")
        let socketDirectory = directory.file("control")
        let name = String(repeating: "s", count: 108 - socketDirectory.utf8.count - 1)
        let long = socketDirectory + "/" + name
        #expect(long.utf8.count == 108)
        let result = run([product("netlifed"), "--config", directory.file("netlifed.conf"), "--control", long], timeout: 5)
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("107"), "the message names the limit: \(result.stderr)")
        let bound = (FileManager.default.enumerator(atPath: directory.path)?.allObjects as? [String] ?? []).filter {
            var info = stat()
            return lstat(directory.file($0), &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
        }
        #expect(bound.isEmpty, "sockets bound: \(bound)")

        directory.write("long.conf", "[daemon]\ncontrol = \(long)\n[app a]\nlaunch = no\n")
        let check = run([product("netlifed"), "--check-config", directory.file("long.conf")])
        #expect(check.status == 1, "\(check)")
        #expect(check.stderr.contains("\(directory.file("long.conf")):2:"), "\(check)")
    }
}
