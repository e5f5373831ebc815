// A file descriptor watched on the loop: libevent tells when it becomes readable or writable. For code that
// drives a C library's own sockets (Avahi's D-Bus connection) from the loop, without a thread of its own.

internal import CLibevent

/// Calls a handler on the loop thread while a descriptor is readable or writable, as asked.
///
/// The watcher does not own the descriptor: closing the watcher stops watching and leaves the descriptor
/// open. The events watched can change at any time (`watch(_:)`), from inside the handler too. Watching
/// no events, or a closed watcher, does nothing.
public final class IOWatcher {
    /// What to watch for, and what happened.
    public struct Events: OptionSet, Sendable, CustomStringConvertible {
        public let rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        /// Data can be read, or the peer hung up, or an error is pending.
        public static let readable = Events(rawValue: Int16(EV_READ))
        /// Data can be written.
        public static let writable = Events(rawValue: Int16(EV_WRITE))

        public var description: String {
            [contains(.readable) ? "readable" : nil, contains(.writable) ? "writable" : nil]
                .compactMap { $0 }.joined(separator: "+")
        }
    }

    private unowned let loop: EventLoop
    private var event: OpaquePointer?
    private let handler: (Events) -> Void
    /// Where the loop keeps this object (`LoopOwned`).
    var loopSlot: Int32 = -1
    /// The descriptor watched.
    public let descriptor: CInt
    /// The events currently watched (empty: none).
    public private(set) var events: Events = []
    /// Whether `close()` has run.
    public private(set) var isClosed = false

    /// Creates a watcher of `descriptor` that watches nothing until `watch(_:)` is called.
    public init(loop: EventLoop, descriptor: CInt, _ handler: @escaping (Events) -> Void) {
        loop.assertInLoop()
        self.loop = loop
        self.descriptor = descriptor
        self.handler = handler
        loop.retain(self)
    }

    /// Watches `events` from now on, replacing what was watched before. The corresponding C functions are
    /// `event_new` and `event_add`; an event's kinds are fixed when it is made, so a change makes a new one.
    public func watch(_ newEvents: Events) throws(SystemError) {
        guard !isClosed, newEvents != events else { return }
        freeEvent()
        guard !newEvents.isEmpty else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        let flags = newEvents.rawValue | Int16(EV_PERSIST)
        let made = try libevent("event_new") { event_new(loop.base, descriptor, flags, ioWatcherFired, context) }
        do {
            try libevent("event_add") { event_add(made, nil) }
        } catch {
            event_free(made)
            throw error
        }
        event = made
        events = newEvents
    }

    /// Stops watching; the descriptor stays open. Calling it again does nothing.
    public func close() {
        guard !isClosed else { return }
        freeEvent()
        isClosed = true
        loop.release(self)
    }

    private func freeEvent() {
        // libevent copies a callback's fields before calling it, so an event may be freed by its own handler.
        if let event { event_free(event) }
        event = nil
        events = []
    }

    fileprivate func fire(_ what: Int16) {
        loop.readContext.callbackBegins()
        handler(Events(rawValue: what).intersection([.readable, .writable]))
    }
}

extension IOWatcher: LoopSource {
    var closeRank: Int { 2 }
    func closeForLoopShutdown() { close() }
}

private func ioWatcherFired(_: CInt, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<IOWatcher>.fromOpaque(context!).takeUnretainedValue().fire(what)
}
