// Avahi's poll abstraction (AvahiPoll) on the daemon's event loop: Avahi asks for watches of its D-Bus
// socket and for timeouts, and gets IOWatchers and EventTimers. Everything then runs on the loop thread,
// with no thread of Avahi's own (no avahi_threaded_poll).

@preconcurrency import Glibc
import CAvahi
import NetLife
import NetLifeEvent

/// An `AvahiPoll` whose watches and timeouts live on `loop`. Hand `api` to `avahi_client_new`; call
/// `close()` only after `avahi_client_free` (which frees the client's watches and timeouts through it).
final class AvahiLoopPoll {
    let loop: EventLoop
    let logger: Logger
    /// The table of functions Avahi calls; stable in memory until `close()`.
    let api: UnsafeMutablePointer<AvahiPoll>
    fileprivate var watches: [ObjectIdentifier: AvahiLoopWatch] = [:]
    fileprivate var timeouts: [ObjectIdentifier: AvahiLoopTimeout] = [:]
    private var isClosed = false

    init(loop: EventLoop, logger: Logger) {
        self.loop = loop
        self.logger = logger
        api = .allocate(capacity: 1)
        api.initialize(to: AvahiPoll(
            userdata: nil,
            watch_new: avahiWatchNew, watch_update: avahiWatchUpdate, watch_get_events: avahiWatchGetEvents,
            watch_free: avahiWatchFree,
            timeout_new: avahiTimeoutNew, timeout_update: avahiTimeoutUpdate, timeout_free: avahiTimeoutFree))
        api.pointee.userdata = Unmanaged.passUnretained(self).toOpaque()
    }

    /// Stops every watch and timeout Avahi left behind and frees the table. Idempotent.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        for watch in watches.values { watch.watcher.close() }
        for timeout in timeouts.values { timeout.timer.close() }
        watches = [:]
        timeouts = [:]
        api.deinitialize(count: 1)
        api.deallocate()
    }

    fileprivate static func from(_ api: UnsafePointer<AvahiPoll>?) -> AvahiLoopPoll {
        Unmanaged<AvahiLoopPoll>.fromOpaque(api!.pointee.userdata!).takeUnretainedValue()
    }
}

/// One `AvahiWatch`: a descriptor Avahi (D-Bus) wants to hear about.
private final class AvahiLoopWatch {
    let descriptor: CInt
    let callback: AvahiWatchCallback
    let userdata: UnsafeMutableRawPointer?
    weak var poll: AvahiLoopPoll?
    var watcher: IOWatcher!
    /// What happened, for `watch_get_events` while the callback runs.
    var happened = AvahiWatchEvent(rawValue: 0)

    init(descriptor: CInt, callback: @escaping AvahiWatchCallback, userdata: UnsafeMutableRawPointer?, poll: AvahiLoopPoll) {
        self.descriptor = descriptor
        self.callback = callback
        self.userdata = userdata
        self.poll = poll
    }

    var pointer: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    static func from(_ pointer: OpaquePointer?) -> AvahiLoopWatch {
        Unmanaged<AvahiLoopWatch>.fromOpaque(UnsafeRawPointer(pointer!)).takeUnretainedValue()
    }

    func watch(_ event: AvahiWatchEvent) {
        var events: IOWatcher.Events = []
        if event.rawValue & AVAHI_WATCH_IN.rawValue != 0 { events.insert(.readable) }
        if event.rawValue & AVAHI_WATCH_OUT.rawValue != 0 { events.insert(.writable) }
        do {
            try watcher.watch(events)
        } catch {
            poll?.logger.error("mDNS: cannot watch Avahi's descriptor \(descriptor): \(error)")
        }
    }

    func fire(_ events: IOWatcher.Events) {
        var raw: UInt32 = 0
        if events.contains(.readable) { raw |= AVAHI_WATCH_IN.rawValue }
        if events.contains(.writable) { raw |= AVAHI_WATCH_OUT.rawValue }
        happened = AvahiWatchEvent(rawValue: raw)
        // The callback may free this watch (watch_free): `self` stays alive until this method returns.
        callback(pointer, descriptor, happened, userdata)
        happened = AvahiWatchEvent(rawValue: 0)
    }
}

/// One `AvahiTimeout`: a wall-clock deadline Avahi wants a callback at.
private final class AvahiLoopTimeout {
    let callback: AvahiTimeoutCallback
    let userdata: UnsafeMutableRawPointer?
    weak var poll: AvahiLoopPoll?
    var timer: EventTimer!

    init(callback: @escaping AvahiTimeoutCallback, userdata: UnsafeMutableRawPointer?, poll: AvahiLoopPoll) {
        self.callback = callback
        self.userdata = userdata
        self.poll = poll
    }

    var pointer: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    static func from(_ pointer: OpaquePointer?) -> AvahiLoopTimeout {
        Unmanaged<AvahiLoopTimeout>.fromOpaque(UnsafeRawPointer(pointer!)).takeUnretainedValue()
    }

    /// Avahi gives absolute times from gettimeofday; nil disarms.
    func arm(_ deadline: UnsafePointer<timeval>?) {
        guard let deadline else {
            timer.cancel()
            return
        }
        var now = timeval()
        gettimeofday(&now, nil)
        let microseconds = (deadline.pointee.tv_sec - now.tv_sec) * 1_000_000 + (deadline.pointee.tv_usec - now.tv_usec)
        timer.arm(after: .microseconds(max(0, microseconds)))
    }

    func fire() { callback(pointer, userdata) }
}

private func avahiWatchNew(_ api: UnsafePointer<AvahiPoll>?, _ fd: CInt, _ event: AvahiWatchEvent,
                           _ callback: AvahiWatchCallback?, _ userdata: UnsafeMutableRawPointer?) -> OpaquePointer? {
    let poll = AvahiLoopPoll.from(api)
    guard let callback else { return nil }
    let watch = AvahiLoopWatch(descriptor: fd, callback: callback, userdata: userdata, poll: poll)
    watch.watcher = IOWatcher(loop: poll.loop, descriptor: fd) { [weak watch] events in watch?.fire(events) }
    watch.watch(event)
    poll.watches[ObjectIdentifier(watch)] = watch
    return watch.pointer
}

private func avahiWatchUpdate(_ pointer: OpaquePointer?, _ event: AvahiWatchEvent) {
    AvahiLoopWatch.from(pointer).watch(event)
}

private func avahiWatchGetEvents(_ pointer: OpaquePointer?) -> AvahiWatchEvent {
    AvahiLoopWatch.from(pointer).happened
}

private func avahiWatchFree(_ pointer: OpaquePointer?) {
    let watch = AvahiLoopWatch.from(pointer)
    watch.watcher.close()
    watch.poll?.watches[ObjectIdentifier(watch)] = nil
}

private func avahiTimeoutNew(_ api: UnsafePointer<AvahiPoll>?, _ deadline: UnsafePointer<timeval>?,
                             _ callback: AvahiTimeoutCallback?, _ userdata: UnsafeMutableRawPointer?) -> OpaquePointer? {
    let poll = AvahiLoopPoll.from(api)
    guard let callback else { return nil }
    let timeout = AvahiLoopTimeout(callback: callback, userdata: userdata, poll: poll)
    timeout.timer = EventTimer(loop: poll.loop) { [weak timeout] in timeout?.fire() }
    timeout.arm(deadline)
    poll.timeouts[ObjectIdentifier(timeout)] = timeout
    return timeout.pointer
}

private func avahiTimeoutUpdate(_ pointer: OpaquePointer?, _ deadline: UnsafePointer<timeval>?) {
    AvahiLoopTimeout.from(pointer).arm(deadline)
}

private func avahiTimeoutFree(_ pointer: OpaquePointer?) {
    let timeout = AvahiLoopTimeout.from(pointer)
    timeout.timer.close()
    timeout.poll?.timeouts[ObjectIdentifier(timeout)] = nil
}
