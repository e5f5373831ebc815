// Timers that belong to an app: while the app is suspended none of its code runs, so a timer that comes due
// then waits, and fires when the app runs again. A terminated or killed app's timers are cancelled.

import NetLifeEvent

/// A one-shot timer of an app. Made with `App.schedule(after:_:)`.
public final class AppTimer {
    private weak var set: AppTimers?
    private let handler: () -> Void
    private var timer: EventTimer?
    /// Whether the timer came due while the app was suspended and waits for it to run again.
    public private(set) var isDeferred = false

    fileprivate init(set: AppTimers, loop: EventLoop, after delay: Duration, handler: @escaping () -> Void) {
        self.set = set
        self.handler = handler
        timer = loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            timer = nil
            fire()
        }
    }

    /// Whether the timer will still fire.
    public var isPending: Bool { timer != nil || isDeferred }

    /// Cancels the timer.
    public func cancel() {
        timer?.cancel()
        timer = nil
        isDeferred = false
        set?.forget(self)
    }

    private func fire() {
        guard let set else { return }
        if set.isSuspended {
            isDeferred = true
            return
        }
        set.forget(self)
        handler()
    }

    /// Runs a timer that came due while the app was suspended.
    fileprivate func fireDeferred() {
        guard isDeferred else { return }
        isDeferred = false
        set?.forget(self)
        handler()
    }
}

/// The pending timers of one app.
final class AppTimers {
    private let loop: EventLoop
    private var timers: [ObjectIdentifier: AppTimer] = [:]
    /// While true, timers that come due wait (the app is suspended).
    var isSuspended = false

    init(loop: EventLoop) { self.loop = loop }

    /// A new timer that calls `handler` after `delay`, as app code.
    func schedule(after delay: Duration, _ handler: @escaping () -> Void) -> AppTimer {
        let timer = AppTimer(set: self, loop: loop, after: delay, handler: handler)
        timers[ObjectIdentifier(timer)] = timer
        return timer
    }

    fileprivate func forget(_ timer: AppTimer) {
        timers[ObjectIdentifier(timer)] = nil
    }

    /// Runs the timers that came due while the app was suspended, in no particular order.
    func fireDeferred() {
        for timer in timers.values where timer.isDeferred { timer.fireDeferred() }
    }

    /// Cancels every timer (the app stops running).
    func cancelAll() {
        for timer in Array(timers.values) { timer.cancel() }
    }
}

extension App {
    /// Calls `handler` once after `delay`, on the loop thread, as app code: if the app is suspended when the
    /// timer comes due, the call waits until the app runs again; if the app is terminated first, it never
    /// happens. Use this rather than `EventLoop.schedule(after:_:)` for an app's own work.
    @discardableResult
    public func schedule(after delay: Duration, _ handler: @escaping () -> Void) -> AppTimer {
        loop.assertInLoop()
        return timers.schedule(after: delay, handler)
    }
}
