// The one way an app's watchdogs wait: a timer armed for an instant that a pure core computed (a pipeline's
// budget, an expiration handler's budget, the background time's grace), which asks that core again when it
// fires. Arming it for nil disarms it; a disarmed or closed timer never calls back, so no generation check
// is needed after a kill.

import NetLifeEvent

/// A timer armed for a deadline rather than a delay.
final class DeadlineTimer {
    private var timer: EventTimer?
    private unowned let loop: EventLoop

    /// `handler` runs on the loop thread when the deadline passes.
    init(loop: EventLoop, _ handler: @escaping () -> Void) {
        self.loop = loop
        timer = EventTimer(loop: loop, handler)
    }

    /// Arms the timer for `deadline` (at once if it has passed), or disarms it for nil.
    func arm(at deadline: MonotonicTime?) {
        guard let deadline else { return cancel() }
        timer?.arm(after: max(.zero, deadline - loop.now))
    }

    /// Disarms the timer.
    func cancel() {
        timer?.cancel()
    }

    /// Frees the timer; it can never fire again.
    func close() {
        timer?.close()
        timer = nil
    }
}
