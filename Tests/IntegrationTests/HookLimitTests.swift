// Hooks at their limits: one that writes a lot runs to its end (its output is a blocking pipe), and
// thousands of hook runs leak no memory. Against the real netlifed.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct HookLimitTests {
    @Test func aHookThatWritesALotRunsToTheEndWithBlockingOutput() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: """
            auto-suspend = never
            background-budget = 20s
            on-did-enter-background = /usr/bin/seq 1 200000
            """))
        defer { daemon.stop() }
        let result = daemon.ctl("background", "a", timeout: 30)
        #expect(result.status == 0, "\(result)")
        let log = daemon.log
        #expect(!log.contains("Resource temporarily unavailable"), "the hook saw EAGAIN on its output")
        #expect(!log.contains("hook on-did-enter-background failed"), "\(log.split(separator: "\n").filter { $0.contains("failed") })")
        #expect(log.contains("hook on-did-enter-background: dropped "))
        #expect(daemon.state("a") == "background")
    }

    @Test func hookRunsLeakNoMemory() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: trueHooksOnEveryEvent))
        defer { daemon.stop() }
        let client = try #require(RawControlClient(path: daemon.controlPath))
        defer { client.close() }
        #expect(driveHookRuns(client, app: "a", cycles: 250) == 0)  // warm-up: 1,000 hook runs
        let before = daemon.probe.residentBytes
        #expect(driveHookRuns(client, app: "a", cycles: 750) == 0)  // 3,000 hook runs
        let after = daemon.probe.residentBytes
        print("3,000 hook runs: RSS \(before / 1024) KiB -> \(after / 1024) KiB (\((after - before) / 3000) bytes per run)")
        if rssIsMeaningful { #expect(after - before < 300 * 1024, "RSS grew by \((after - before) / 1024) KiB over 3,000 hook runs") }
    }
}

/// `true` as the hook of every transition event, and no auto-suspend: each background/foreground cycle runs
/// four hooks.
let trueHooksOnEveryEvent = """
    auto-suspend = never
    on-will-resign-active = /bin/true
    on-did-enter-background = /bin/true
    on-will-enter-foreground = /bin/true
    on-did-become-active = /bin/true
    """

/// Sends background/foreground pairs for `app`, in batches of pipelined requests, and returns how many
/// replies were not ok (or missing).
func driveHookRuns(_ client: RawControlClient, app: String, cycles: Int) -> Int {
    var failures = 0
    var done = 0
    while done < cycles {
        let batch = min(25, cycles - done)
        let pair = "{\"cmd\":\"background\",\"app\":\"\(app)\"}\n{\"cmd\":\"foreground\",\"app\":\"\(app)\"}\n"
        client.send(String(repeating: pair, count: batch))
        for index in 0..<(2 * batch) {
            guard let line = client.line(timeout: 10) else { return failures + 2 * (cycles - done) - index }
            if !isOK(line) { failures += 1 }
        }
        done += batch
    }
    return failures
}
