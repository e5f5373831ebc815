// The loop-stall watchdog: its arithmetic, a stall reported from its thread, a threshold changed in place
// (the thread takes it at once, no thread is added), and a stop that wakes and joins the thread at once.

import Foundation
import NetLifeEvent
import Synchronization
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct LoopStallWatchdogTests {
    @Test func thePolicyLooksEveryTenthAndBeatsEveryQuarterOfTheThreshold() {
        #expect(StallPolicy.pollInterval(threshold: .seconds(2)) == .milliseconds(200))
        #expect(StallPolicy.pollInterval(threshold: .milliseconds(50)) == .milliseconds(10), "at least every 10 ms")
        #expect(StallPolicy.heartbeatInterval(threshold: .seconds(2)) == .milliseconds(500))
        let beat = MonotonicTime(nanoseconds: 1_000_000_000)
        #expect(StallPolicy.stall(now: beat + .milliseconds(500), lastBeat: beat, threshold: .milliseconds(500)) == nil)
        #expect(StallPolicy.stall(now: beat + .milliseconds(501), lastBeat: beat, threshold: .milliseconds(500)) == .milliseconds(501))
        #expect(StallPolicy.stall(now: beat, lastBeat: beat + .seconds(1), threshold: .zero) == nil, "a beat after now is no stall")
    }

    @Test func aLoopThatDoesNotTurnIsReportedFromTheWatchingThread() throws {
        let loop = try EventLoop()
        let reports = Atomic<Int>(0)
        let underThreshold = Atomic<Int>(0)
        let watchdog = LoopStallWatchdog(threshold: .milliseconds(100)) { stalled, threshold in
            // Counted here, judged on the test's thread.
            if stalled <= threshold { underThreshold.add(1, ordering: .relaxed) }
            reports.add(1, ordering: .relaxed)
        }
        watchdog.start(on: loop)
        // The loop does not run: nothing beats.
        #expect(waitUntil(timeout: 2) { reports.load(ordering: .relaxed) > 0 })
        watchdog.stop()
        #expect(underThreshold.load(ordering: .relaxed) == 0)
        #expect(loop.registeredObjectCount == 0, "the heartbeat is closed")
    }

    @Test func aTurningLoopIsNotReported() throws {
        let loop = try EventLoop()
        let reports = Atomic<Int>(0)
        let watchdog = LoopStallWatchdog(threshold: .milliseconds(100)) { _, _ in reports.add(1, ordering: .relaxed) }
        watchdog.start(on: loop)
        runLoop(loop, timeout: .milliseconds(400)) { false }
        watchdog.stop()
        #expect(reports.load(ordering: .relaxed) == 0)
    }

    @Test func aNewThresholdTakesEffectAtOnceOnTheSameThread() throws {
        let loop = try EventLoop()
        let reports = Atomic<Int>(0)
        let watchdog = LoopStallWatchdog(threshold: .seconds(600)) { _, _ in reports.add(1, ordering: .relaxed) }
        watchdog.start(on: loop)
        defer { watchdog.stop() }
        // Many changes on the one thread (DaemonLifecycleTests counts the daemon's threads).
        for round in 0..<100 { watchdog.threshold = round % 2 == 0 ? .seconds(300) : .seconds(600) }
        #expect(watchdog.threshold == .seconds(600))
        #expect(watchdog.isRunning)
        // Lowered while the thread sleeps for a minute: it looks again at once.
        let changed = Date()
        watchdog.threshold = .milliseconds(100)
        #expect(waitUntil(timeout: 2) { reports.load(ordering: .relaxed) > 0 })
        #expect(Date().timeIntervalSince(changed) < 1, "the thread took the new threshold at once")
    }

    @Test func stopWakesAndJoinsTheThreadAtOnce() throws {
        let loop = try EventLoop()
        let watchdog = LoopStallWatchdog(threshold: .seconds(600)) { _, _ in }
        watchdog.start(on: loop)
        #expect(watchdog.isRunning)
        usleep(20_000)
        let started = Date()
        watchdog.stop()
        #expect(Date().timeIntervalSince(started) < 0.5, "stop() waited \(Date().timeIntervalSince(started)) s for a thread polling every minute")
        #expect(!watchdog.isRunning)
        watchdog.stop()
    }
}

