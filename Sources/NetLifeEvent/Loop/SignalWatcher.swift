// Signals delivered through the loop: libevent installs the handler and turns the signal into a callback
// on the loop thread, where it is safe to do anything.

@preconcurrency import Glibc
internal import CLibevent

/// Calls a handler on the loop thread each time a signal arrives.
public final class SignalWatcher {
    private unowned let loop: EventLoop
    /// Where the loop keeps this object (`LoopOwned`).
    var loopSlot: Int32 = -1
    private var event: OpaquePointer?
    private let handler: () -> Void
    /// The signal number watched.
    public let signal: CInt

    /// Starts watching `signal`. The corresponding C function is `evsignal_new`.
    public init(loop: EventLoop, signal: CInt, _ handler: @escaping () -> Void) throws(SystemError) {
        loop.assertInLoop()
        self.loop = loop
        self.signal = signal
        self.handler = handler
        let context = Unmanaged.passUnretained(self).toOpaque()
        let event = try libevent("evsignal_new") { netlife_evsignal_new(loop.base, signal, signalArrived, context) }
        do {
            try libevent("event_add") { event_add(event, nil) }
        } catch {
            event_free(event)
            throw error
        }
        self.event = event
        loop.retain(self)
    }

    /// Stops watching; the signal's previous disposition is restored.
    public func close() {
        guard let event else { return }
        event_free(event)
        self.event = nil
        loop.release(self)
    }

    fileprivate func deliver() {
        loop.readContext.callbackBegins()
        handler()
    }
}

private func signalArrived(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<SignalWatcher>.fromOpaque(context!).takeUnretainedValue().deliver()
}

/// Process-wide signal set-up for a daemon: an empty signal mask (a parent such as Foundation.Process may
/// have blocked signals, and the mask is inherited), and SIGPIPE ignored so that writing to a closed
/// socket returns EPIPE instead of killing the process.
public func prepareProcessSignals() {
    var empty = sigset_t()
    sigemptyset(&empty)
    sigprocmask(SIG_SETMASK, &empty, nil)
    signal(SIGPIPE, SIG_IGN)
}

/// Ignores `signals` from now on. A daemon calls this as it tears down after a clean shutdown, right after
/// closing its watchers (closing one restores the default disposition): a second SIGTERM arriving during the
/// last steps of exit must not turn a clean exit into "killed by signal".
public func ignoreSignals(_ signals: [CInt]) {
    for number in signals { signal(number, SIG_IGN) }
}
