// Timers that belong to an app. While the app is suspended none of its code runs, and its clock stands still,
// as iOS freezes a suspended app's run loop: each timer is frozen with the time it had left, and runs on with
// that time when the app runs again (in the foreground, the background, or a wake-up). A request timeout of
// 2 s, 1.5 s of it gone when the app was suspended, still has 0.5 s after a suspension of any length. A
// terminated or killed app's timers are cancelled.

import NetLifeEvent

/// A one-shot timer of an app. Made with `App.schedule(after:_:)`.
public final class AppTimer {
    private weak var set: AppTimers?
    private let loop: EventLoop
    private let handler: () -> Void
    private var timer: EventTimer?
    /// When it comes due, while it runs.
    private var deadline: MonotonicTime
    /// While the app is suspended: the time it had left when it was frozen.
    private var frozenRemaining: Duration?

    fileprivate init(set: AppTimers, loop: EventLoop, after delay: Duration, frozen: Bool, handler: @escaping () -> Void) {
        self.set = set
        self.loop = loop
        self.handler = handler
        deadline = loop.now + delay
        if frozen { frozenRemaining = delay } else { arm(after: delay) }
    }

    /// Whether the timer will still fire.
    public var isPending: Bool { timer != nil || frozenRemaining != nil }

    /// Whether it is frozen (its app is suspended).
    public var isFrozen: Bool { frozenRemaining != nil }

    /// Cancels the timer.
    public func cancel() {
        timer?.cancel()
        timer = nil
        frozenRemaining = nil
        set?.forget(self)
    }

    private func arm(after delay: Duration) {
        timer = loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            timer = nil
            fire()
        }
    }

    private func fire() {
        guard let set else { return }
        set.forget(self)
        handler()
    }

    /// The app is suspended: stop the clock, keeping the time left.
    fileprivate func freeze(now: MonotonicTime) {
        guard let running = timer else { return }
        running.cancel()
        timer = nil
        frozenRemaining = max(.zero, deadline - now)
    }

    /// The app runs again: the clock goes on with the time it had left.
    fileprivate func thaw(now: MonotonicTime) {
        guard let remaining = frozenRemaining else { return }
        frozenRemaining = nil
        deadline = now + remaining
        arm(after: remaining)
    }
}

/// The pending timers of one app.
final class AppTimers {
    private let loop: EventLoop
    private var timers: [ObjectIdentifier: AppTimer] = [:]
    /// While true, the app is suspended and its timers are frozen.
    private(set) var isSuspended = false

    init(loop: EventLoop) { self.loop = loop }

    /// A new timer that calls `handler` after `delay` of the app's running time, as app code.
    func schedule(after delay: Duration, _ handler: @escaping () -> Void) -> AppTimer {
        let timer = AppTimer(set: self, loop: loop, after: delay, frozen: isSuspended, handler: handler)
        timers[ObjectIdentifier(timer)] = timer
        return timer
    }

    fileprivate func forget(_ timer: AppTimer) {
        timers[ObjectIdentifier(timer)] = nil
    }

    /// The app is suspended: every timer stops with the time it has left.
    func suspend() {
        guard !isSuspended else { return }
        isSuspended = true
        let now = loop.now
        for timer in timers.values { timer.freeze(now: now) }
    }

    /// The app runs again: every timer goes on with the time it had left (one with none fires on the next
    /// loop turn).
    func resume() {
        guard isSuspended else { return }
        isSuspended = false
        let now = loop.now
        for timer in Array(timers.values) { timer.thaw(now: now) }
    }

    /// Cancels every timer (the app stops running).
    func cancelAll() {
        for timer in Array(timers.values) { timer.cancel() }
        isSuspended = false
    }
}
