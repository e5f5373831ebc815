// Timers on the loop: libevent timer events that can be armed, re-armed and cancelled.

internal import CLibevent

/// A timer that calls its handler on the loop thread when it fires.
///
/// A timer made with `init` stays registered until `close()`; `EventLoop.schedule(after:_:)` makes a
/// one-shot timer that closes itself after firing or when cancelled. Arming, cancelling or closing a closed
/// timer does nothing: an owner whose session ended while a reply was in flight need not know.
public final class EventTimer {
    private unowned let loop: EventLoop
    /// Where the loop keeps this object (`LoopOwned`).
    var loopSlot: Int32 = -1
    private var event: OpaquePointer?
    private let handler: () -> Void
    private let closesAfterFiring: Bool
    /// Whether the timer is armed and will fire.
    public private(set) var isArmed = false
    /// When the armed timer is due, on the loop's clock.
    private(set) var deadline = MonotonicTime(nanoseconds: 0)

    /// Creates an unarmed timer. The corresponding C function is `evtimer_new`.
    public init(loop: EventLoop, _ handler: @escaping () -> Void) {
        self.loop = loop
        self.handler = handler
        self.closesAfterFiring = false
        registerEvent()
    }

    private init(oneShotOn loop: EventLoop, _ handler: @escaping () -> Void) {
        self.loop = loop
        self.handler = handler
        self.closesAfterFiring = true
        registerEvent()
    }

    private func registerEvent() {
        loop.assertInLoop()
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = try! libevent("evtimer_new") { netlife_evtimer_new(loop.base, eventTimerFired, context) }
        loop.retain(self)
    }

    /// Arms the timer to fire once after `delay`, replacing any earlier deadline; does nothing once the timer
    /// is closed. The corresponding C function is `event_add`.
    public func arm(after delay: Duration) {
        guard event != nil else { return }
        deadline = loop.now + delay
        if let clock = loop.manualClock {
            clock.arm(self)
            isArmed = true
            return
        }
        add(after: delay)
    }

    private func add(after delay: Duration) {
        guard let event else { return }
        // libevent measures the delay from the time it cached when this loop iteration began; a timer armed
        // late in a long callback would fire early by that much.
        event_base_update_cache_time(loop.base)
        var tv = delay.timeval
        libeventMustSucceed("event_add") { event_add(event, &tv) }
        isArmed = true
    }

    /// Disarms the timer; a one-shot timer is closed as well. The corresponding C function is `event_del`.
    public func cancel() {
        if closesAfterFiring { close(); return }
        guard let event, isArmed else { return }
        loop.manualClock?.disarm(self)
        event_del(event)
        isArmed = false
    }

    /// Disarms and frees the timer. Calling it again does nothing.
    public func close() {
        guard let event else { return }
        loop.manualClock?.disarm(self)
        event_free(event)
        self.event = nil
        isArmed = false
        loop.release(self)
    }

    /// Whether the timer has been closed (it can no longer fire).
    public var isClosed: Bool { event == nil }

    func fire() {
        loop.readContext.callbackBegins()
        // The loop keeps time with CLOCK_MONOTONIC_COARSE (see `EventLoop.init`), which lags the precise clock
        // by up to one tick (4 ms): by it, a timer can come due a little before its deadline. The handler
        // never runs early; the timer waits out the rest.
        let early = deadline - loop.now
        if early > .zero { return add(after: early) }
        isArmed = false
        if closesAfterFiring { close() }
        handler()
    }

    static func oneShot(on loop: EventLoop, after delay: Duration, _ handler: @escaping () -> Void) -> EventTimer {
        let timer = EventTimer(oneShotOn: loop, handler)
        timer.arm(after: delay)
        return timer
    }
}

extension EventLoop {
    /// Calls `handler` once after `delay`. The returned timer can be cancelled; it need not be kept.
    @discardableResult
    public func schedule(after delay: Duration, _ handler: @escaping () -> Void) -> EventTimer {
        EventTimer.oneShot(on: self, after: delay, handler)
    }
}

private func eventTimerFired(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<EventTimer>.fromOpaque(context!).takeUnretainedValue().fire()
}
