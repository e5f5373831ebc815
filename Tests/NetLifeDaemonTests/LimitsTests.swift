// The limits of what a client or a config can ask for (issue: hardening): duration ranges, linear JSON
// parsing, background task counts and names.

@testable import NetLifeDaemon
import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeServices
import Testing


@Suite struct LimitsTests {
    @Test(arguments: [
        ("[app a]\ntask-time = 9223372036s\n", "t.conf:2: task-time must be between 1s and 24h, got '9223372036s'"),
        ("[app a]\nlaunch-budget = 0\n", "t.conf:2: launch-budget must be between 10ms and 1h, got '0'"),
        ("[app a]\nbackground-budget = 0\n", "t.conf:2: background-budget must be between 10ms and 1h, got '0'"),
        ("[app a]\nexpiration-budget = 2h\n", "t.conf:2: expiration-budget must be between 10ms and 1h, got '2h'"),
        ("[app a]\nauto-suspend = 25h\n", "t.conf:2: auto-suspend must be between 0 and 24h, got '25h'"),
        ("[daemon]\nloop-stall = 5ms\n", "t.conf:2: loop-stall must be between 100ms and 10m, got '5ms'"),
        ("[daemon]\nkeepalive-min = 500ms\n", "t.conf:2: keepalive-min must be between 1s and 24h, got '500ms'"),
        ("[daemon]\ncontrol = /tmp/" + String(repeating: "d", count: 110) + "/c.sock\n", "t.conf:2: control must be an absolute path of at most 107 bytes"),
    ])
    func durationsAndPathsOutsideTheirRangeAreErrors(config: String, expected: String) {
        let found = configErrors(config)
        #expect(found.count == 1 && found[0].hasPrefix(expected), "\(found)")
    }

    @Test func theCompressedTimingsOfTestsStillFit() {
        #expect(configErrors("[daemon]\nloop-stall = 100ms\nkeepalive-min = 1s\n[app a]\nlaunch-budget = 10ms\ntask-time = 1s\nexpiration-lead = 0\nexpiration-grace = 0\nauto-suspend = 0\n") == [])
    }

    @Test func durationsPrintInTheirLargestUnit() {
        #expect((Duration.milliseconds(10)).configText == "10ms")
        #expect((Duration.seconds(3600)).configText == "1h")
        #expect((Duration.seconds(90)).configText == "90s")
        #expect((Duration.zero).configText == "0")
    }

    @Test func aLargeObjectParsesInLinearTimeAndDuplicatesAreStillFound() throws {
        // 64 KiB of distinct keys: quadratic duplicate detection made this take hundreds of milliseconds.
        var text = "{\"cmd\":\"status\""
        var index = 0
        while text.utf8.count < 64 * 1024 - 32 {
            text += ",\"k\(index)\":\(index)"
            index += 1
        }
        text += "}"
        let started = MonotonicTime.now()
        let value = try JSON.parse(text)
        let elapsed = MonotonicTime.now() - started
        #expect(value["cmd"] == "status")
        #expect(value["k\(index - 1)"]?.intValue == index - 1)
        // A generous bound (debug build, sanitizers, a loaded machine); the quadratic parser took seconds here.
        #expect(elapsed < .milliseconds(500), "\(index) keys parsed in \(elapsed)")
        #expect(throws: JSONParseError.self) { try JSON.parse("{\"k1\":1," + String(repeating: "\"x\":0,", count: 1) + "\"k1\":2}") }
    }

    @Test func backgroundTasksAreBoundedInNumberAndNameLength() {
        var registry = BackgroundTaskRegistry(budgets: Budgets())
        let now = MonotonicTime(nanoseconds: 1)
        for _ in 0..<BackgroundTaskRegistry.maxOpenTasks {
            #expect(registry.begin(name: nil, origin: .control, now: now, allowed: true) != BackgroundTaskRegistry.invalid)
        }
        #expect(registry.isFull)
        #expect(registry.begin(name: nil, origin: .api, now: now, allowed: true) == BackgroundTaskRegistry.invalid)
        _ = registry.end(1)
        let long = String(repeating: "é", count: 200)   // 400 bytes
        let id = registry.begin(name: long, origin: .api, now: now, allowed: true)
        let name = registry.tasks.first { $0.id == id }?.name ?? ""
        #expect(name.utf8.count <= BackgroundTaskRegistry.maxNameBytes && name.utf8.count >= BackgroundTaskRegistry.maxNameBytes - 1)
        #expect(long.hasPrefix(name))
    }
}
