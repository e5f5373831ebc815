// A connection served by a restricted run of the loop (`EventLoop.runRestricted`): its events moved to the
// restricted base for the run, and back.

@preconcurrency import Glibc
internal import CLibevent

extension EventLoop {
    /// Runs a nested loop that serves only `connections` (their reads and writes) until `condition` holds or
    /// `timeout` passes, like running a CFRunLoop in a private mode: no timer, no listener, no other
    /// connection and no signal of the main loop is served meanwhile, and the main loop is never re-entered.
    /// Returns whether `condition` holds.
    ///
    /// It blocks the loop thread for up to `timeout`; callers bound it by a budget.
    public func runRestricted(serving connections: [Connection], timeout: Duration, until condition: () -> Bool) -> Bool {
        runRestricted(serving: connections.map { $0 as any RestrictedModeServed }, timeout: timeout, until: condition)
    }
}

extension Connection: RestrictedModeServed {
    var isOpen: Bool { currentState != .closed }

    /// Mirrors this connection's read and write interest onto `base`, for a restricted-mode run.
    func enterRestrictedMode(base: OpaquePointer) {
        guard currentState != .closed, restrictedEvents == nil else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        // event_new fails only when memory is exhausted; the connection then ends with that error.
        let read: OpaquePointer
        let write: OpaquePointer
        do throws(SystemError) {
            read = try libevent("event_new") { event_new(base, descriptor, Int16(EV_READ | EV_PERSIST), connectionReadable, context) }
            do throws(SystemError) {
                write = try libevent("event_new") { event_new(base, descriptor, Int16(EV_WRITE | EV_PERSIST), connectionWritable, context) }
            } catch {
                event_free(read)
                throw error
            }
        } catch {
            return fail(error)
        }
        restrictedEvents = (read, write)
        if readInterest { libeventMustSucceed("event_add") { event_add(read, nil) } }
        if writeInterest { libeventMustSucceed("event_add") { event_add(write, nil) } }
    }

    /// Ends what `enterRestrictedMode(base:)` began.
    func leaveRestrictedMode() {
        guard let restricted = restrictedEvents else { return }
        event_free(restricted.read)
        event_free(restricted.write)
        restrictedEvents = nil
        // The restricted run's (level-triggered) events may have left bytes the loop's edge-triggered ones
        // will not be told of again.
        if currentState != .closed { serveAtNextTurn(read: true, flush: true) }
    }
}
