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
        // A warm-up of 1,000 hook runs, then 3,000 measured; a tenth of each under a sanitizer, where the
        // resident size is not judged.
        #expect(driveHookRuns(client, app: "a", cycles: sanitizerScaled(250)) == 0)
        let before = daemon.probe.residentBytes
        let cycles = sanitizerScaled(750)
        #expect(driveHookRuns(client, app: "a", cycles: cycles) == 0)
        let after = daemon.probe.residentBytes
        print("\(cycles * 4) hook runs: RSS \(before / 1024) KiB -> \(after / 1024) KiB (\((after - before) / (cycles * 4)) bytes per run)")
        if rssIsMeaningful { #expect(after - before < 300 * 1024, "RSS grew by \((after - before) / 1024) KiB over 3,000 hook runs") }
    }
}
