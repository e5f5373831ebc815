// A loop on a manual clock: its time moves only with advance(by:), its timers fire in deadline order at
// their deadlines within the step, a timer armed by a handler within the step fires in it, and a cancelled or
// closed timer never fires.

import NetLifeEvent
import Testing

@Suite struct ManualClockTests {
    static let start = MonotonicTime(nanoseconds: 1_000_000_000_000)

    @Test func timeStandsStillUntilItIsAdvanced() throws {
        let loop = try EventLoop(manualClockAt: Self.start)
        defer { loop.close() }
        #expect(loop.now == Self.start)
        loop.runOnce()
        #expect(loop.now == Self.start)
        loop.advance(by: .milliseconds(1500))
        #expect(loop.now == Self.start + .milliseconds(1500))
    }

    @Test func timersFireInDeadlineOrderEachAtItsDeadline() throws {
        let loop = try EventLoop(manualClockAt: Self.start)
        defer { loop.close() }
        var fired: [(String, Duration)] = []
        loop.schedule(after: .seconds(3)) { fired.append(("c", loop.now - Self.start)) }
        loop.schedule(after: .seconds(1)) { fired.append(("a", loop.now - Self.start)) }
        loop.schedule(after: .seconds(2)) { fired.append(("b", loop.now - Self.start)) }
        loop.advance(by: .milliseconds(2500))
        #expect(fired.map(\.0) == ["a", "b"])
        #expect(fired.map(\.1) == [.seconds(1), .seconds(2)])
        loop.advance(by: .seconds(1))
        #expect(fired.map(\.0) == ["a", "b", "c"])
        #expect(loop.armedManualTimers == 0)
    }

    @Test func aTimerArmedByAHandlerWithinTheStepFiresInIt() throws {
        let loop = try EventLoop(manualClockAt: Self.start)
        defer { loop.close() }
        /// Re-arms its timer from the timer's own handler (the timer is held weakly: no cycle).
        final class Ticker {
            var ticks = 0
            weak var timer: EventTimer?
        }
        let ticker = Ticker()
        let timer = EventTimer(loop: loop) { [ticker] in
            ticker.ticks += 1
            ticker.timer?.arm(after: .milliseconds(100))
        }
        ticker.timer = timer
        timer.arm(after: .milliseconds(100))
        loop.advance(by: .seconds(1))
        #expect(ticker.ticks == 10, "every 100 ms of a 1 s step")
        timer.close()
    }

    @Test func aCancelledOrClosedTimerNeverFiresAndReArmingReplacesTheDeadline() throws {
        let loop = try EventLoop(manualClockAt: Self.start)
        defer { loop.close() }
        var fired: [String] = []
        let cancelled = loop.schedule(after: .seconds(1)) { fired.append("cancelled") }
        cancelled.cancel()
        let closed = EventTimer(loop: loop) { fired.append("closed") }
        closed.arm(after: .seconds(1))
        closed.close()
        let moved = EventTimer(loop: loop) { fired.append("moved") }
        moved.arm(after: .seconds(1))
        moved.arm(after: .seconds(5))
        loop.advance(by: .seconds(2))
        #expect(fired.isEmpty)
        loop.advance(by: .seconds(3))
        #expect(fired == ["moved"])
        moved.close()
    }
}
