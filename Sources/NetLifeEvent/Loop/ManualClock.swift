// A loop whose time moves only when a test says so, as swift-nio's EmbeddedEventLoop: the loop's `now`
// stands still, and its timers fire, in deadline order, when `advance(by:)` moves time past them. A timer a
// handler arms for a moment within the step fires in the same step. Sockets, signals and children still go
// through libevent (`runOnce()`); only time is the test's. Shells read the time from their loop (`loop.now`),
// never from the system clock, so that a test of an app's timers and budgets runs in microseconds.

internal import CLibevent

/// The time of a loop made with `EventLoop(manualClockAt:)`, and its armed timers.
final class ManualClock {
    var now: MonotonicTime
    /// Armed timers, by the order they were armed (ties of a deadline fire in that order).
    private var armed: [(order: UInt64, timer: EventTimer)] = []
    private var nextOrder: UInt64 = 0

    init(now: MonotonicTime) { self.now = now }

    func arm(_ timer: EventTimer) {
        disarm(timer)
        armed.append((nextOrder, timer))
        nextOrder &+= 1
    }

    func disarm(_ timer: EventTimer) {
        armed.removeAll { $0.timer === timer }
    }

    /// The armed timer due first at or before `limit`, taken off the list.
    func takeDue(by limit: MonotonicTime) -> EventTimer? {
        var best: Int?
        for index in armed.indices where armed[index].timer.deadline <= limit {
            if let current = best {
                let (a, b) = (armed[index], armed[current])
                if a.timer.deadline < b.timer.deadline || (a.timer.deadline == b.timer.deadline && a.order < b.order) { best = index }
            } else {
                best = index
            }
        }
        return best.map { armed.remove(at: $0).timer }
    }

    /// How many timers are armed.
    var armedCount: Int { armed.count }
}

extension EventLoop {
    /// Moves a manual clock's time forward by `duration`, firing each timer that comes due on the way at its
    /// deadline, in deadline order; the time is then `now + duration`. Loop thread only; traps on a loop that
    /// keeps real time it does nothing (and asserts in debug builds: a test's mistake).
    public func advance(by duration: Duration) {
        assertInLoop()
        guard let clock = manualClock else { return assertionFailure("advance(by:) needs a loop made with a manual clock") }
        let target = clock.now + duration
        while let timer = clock.takeDue(by: target) {
            clock.now = max(clock.now, timer.deadline)
            timer.fire()
        }
        clock.now = target
        readContext.turnStartedAt = 0
    }

    /// How many timers a manual clock holds armed (0 on a loop that keeps real time).
    public var armedManualTimers: Int { manualClock?.armedCount ?? 0 }

    /// Runs one non-blocking turn of the loop: what sockets, signals and children have ready is served.
    public func runOnce() {
        assertInLoop()
        _ = event_base_loop(base, EVLOOP_NONBLOCK | EVLOOP_ONCE)
        readContext.turnStartedAt = 0
    }
}
