// An app's own timers (Timers/AppTimer), as app code schedules them.

import NetLifeEvent

extension App {
    /// Calls `handler` once after `delay` of the app's running time, on the loop thread, as app code: while
    /// the app is suspended the time stands still (the handler runs `delay` of running time after this call);
    /// if the app is terminated first, it never happens. Use this rather than `EventLoop.schedule(after:_:)`
    /// for an app's own work.
    @discardableResult
    public func schedule(after delay: Duration, _ handler: @escaping () -> Void) -> AppTimer {
        loop.assertInLoop()
        return timers.schedule(after: delay, handler)
    }
}
