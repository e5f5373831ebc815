// Timers that belong to an app: while the app is suspended none of its code runs, so a timer that comes due
// then waits, and fires when the app runs again. A terminated or killed app's timers are cancelled.

import NetLifeEvent

/// A one-shot timer of an app. Made with `App.schedule(after:_:)`.
public final class AppTimer {
    private weak var app: App?
    private let handler: () -> Void
    private var timer: EventTimer?
    /// Whether the timer came due while the app was suspended and waits for it to run again.
    public private(set) var isDeferred = false

    init(app: App, after delay: Duration, handler: @escaping () -> Void) {
        self.app = app
        self.handler = handler
        timer = app.loop.schedule(after: delay) { [weak self] in
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
        app?.forget(self)
    }

    private func fire() {
        guard let app else { return }
        if app.state == .suspended {
            isDeferred = true
            return
        }
        app.forget(self)
        handler()
    }

    /// Runs a timer that came due while the app was suspended.
    func fireDeferred() {
        guard isDeferred else { return }
        isDeferred = false
        app?.forget(self)
        handler()
    }
}

extension App {
    /// Calls `handler` once after `delay`, on the loop thread, as app code: if the app is suspended when the
    /// timer comes due, the call waits until the app runs again; if the app is terminated first, it never
    /// happens. Use this rather than `EventLoop.schedule(after:_:)` for an app's own work.
    @discardableResult
    public func schedule(after delay: Duration, _ handler: @escaping () -> Void) -> AppTimer {
        loop.assertInLoop()
        let timer = AppTimer(app: self, after: delay, handler: handler)
        appTimers[ObjectIdentifier(timer)] = timer
        return timer
    }

    func forget(_ timer: AppTimer) {
        appTimers[ObjectIdentifier(timer)] = nil
    }

    /// Runs the timers that came due while the app was suspended, in no particular order.
    func fireDeferredTimers() {
        for timer in appTimers.values where timer.isDeferred { timer.fireDeferred() }
    }

    /// Cancels every timer of the app (it stops running).
    func cancelAppTimers() {
        for timer in Array(appTimers.values) { timer.cancel() }
    }
}
