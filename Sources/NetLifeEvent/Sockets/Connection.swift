// A connected stream socket with an input and an output evbuffer, driven by plain libevent read and write
// events rather than bufferevents: libevent 2.1's bufferevent reads at most 4 KiB per call. Reads are sized
// by a `ReadSizer`. Bulk reads go straight into the input buffer's blocks (reserved space, read, commit: no
// copy), up to `readsPerCallback` of them per readable event before the delegate hears of the bytes once;
// a chatty connection's small reads land in the loop's scratch area and are offered to the delegate before
// any buffering. Writes go out with `evbuffer_write` (writev, or sendfile for file segments) or `send`.
//
// The stored properties the read and write callbacks touch are internal, with public computed views: Swift
// checks exclusive access to a class's public stored properties at run time (another module might access
// them), and those checks were a quarter of the instructions per echoed message (Benchmarks/README.md).
// Internal rather than private since the connection's concerns are one file each (Connection+Reading,
// +Writing, +Closing, +RestrictedMode); no other type of the module touches them, and release builds are
// whole-module, where every access is in sight.
//
// The read and write events are edge-triggered (EV_ET, as nginx registers its connections): epoll reports a
// socket when something new arrives, in the order of arrival. With level-triggered events the sockets that
// were ready in one turn stay at the head of epoll's ready list in the next, and a socket whose message came
// just after the poll is served at the end of the turn after, behind all of them, and again and again: at
// 1,000 busy connections that doubled the latency of a few per cent of messages (Benchmarks/README.md). The
// price of edges is that a connection must not stop with bytes it could still read or write and wait for a
// report: it reads until a read comes back short (or, once the peer's FIN is reported, EV_CLOSED, until the
// end of input), and writes until the buffer is empty or the socket is full; one that used up its share of a
// turn first is served again at the next turn (`ReadContext`).
//
// The connection is an explicit state machine (open -> closing -> closed) with one driver: the read and
// write callbacks below. The delegate is told about bytes, end of input and the close, on the loop thread.

@preconcurrency import Glibc
internal import CLibevent

/// What the owner of a connection is told. Callbacks run on the loop thread.
public protocol ConnectionDelegate: AnyObject {
    /// New bytes were appended to `connection.input`.
    func connectionDidRead(_ connection: Connection)
    /// The bytes of a small read, offered before they are buffered, while `connection.input` is empty;
    /// valid only during the call. Returns whether the delegate consumed them all (then they are not
    /// appended to `input` and `connectionDidRead` is not called). The default consumes nothing. An echo
    /// sends them straight back from here: no buffer block is made for a 64-byte message.
    func connection(_ connection: Connection, consumeSmallRead bytes: UnsafeRawBufferPointer) -> Bool
    /// The peer ended its side (read returned 0). The default flushes the output and closes.
    func connectionDidReachEnd(_ connection: Connection)
    /// The connection is closed; `error` says why when it was not a plain close.
    func connectionDidClose(_ connection: Connection, error: SystemError?)
    /// The output that had passed `outputHighWaterMark` has been written out; reads are delivered again.
    func connectionDidDrainOutput(_ connection: Connection)
}

extension ConnectionDelegate {
    public func connection(_ connection: Connection, consumeSmallRead bytes: UnsafeRawBufferPointer) -> Bool { false }
    public func connectionDidReachEnd(_ connection: Connection) { connection.close(.afterFlush) }
    public func connectionDidClose(_ connection: Connection, error: SystemError?) {}
    public func connectionDidDrainOutput(_ connection: Connection) {}
}

/// The object that keeps track of a set of connections (a listener's), told when one closes. Held weakly:
/// a tracker that is gone simply is not told.
public protocol ConnectionTracker: AnyObject {
    /// `connection` has closed, after its delegate was told.
    func connectionClosed(_ connection: Connection)
}

/// A connected stream socket on the loop, non-blocking from its adoption on.
public final class Connection {
    /// The life of a connection.
    public enum State: Equatable, Sendable {
        /// Reading and writing.
        case open
        /// Writing what is left in `output`, then closing; no more reads are delivered.
        case closing
        /// Closed: the descriptor is released; the buffers are empty and stay usable until the connection is
        /// deallocated.
        case closed
    }

    /// The loop it lives on (its time, `loop.now`, is what its owner's deadlines count from).
    public unowned let loop: EventLoop
    /// The socket descriptor; -1 once closed.
    public var fd: CInt { descriptor }
    /// Bytes received and not yet consumed by the delegate. Valid (and empty once closed) for the
    /// connection's whole lifetime. Made on first use: an idle connection holds no buffer.
    public var input: EventBuffer {
        if let inputStorage { return inputStorage }
        let buffer = EventBuffer.allocate()
        inputStorage = buffer
        return buffer
    }
    /// Bytes to send; call `flush()` after appending. Valid (and empty once closed) for the connection's
    /// whole lifetime. Made on first use.
    public var output: EventBuffer {
        if let outputStorage { return outputStorage }
        let buffer = EventBuffer.allocate()
        // The output drains to the socket: file segments then go out with sendfile, not mapped and copied.
        // Through a transport, its bytes are read (and encrypted) instead: file segments are mapped.
        if transportStorage == nil { buffer.setDrainsToDescriptor() }
        outputStorage = buffer
        return buffer
    }
    var inputStorage: EventBuffer?
    var outputStorage: EventBuffer?
    /// What the connection reads and writes through instead of the socket (TLS), if anything.
    var transportStorage: ConnectionTransport?
    /// The bytes in `output`, without making it.
    var outputCount: Int { outputStorage?.count ?? 0 }
    /// The receiver of this connection's events. Cleared when the connection closes.
    public var delegate: ConnectionDelegate? {
        get { currentDelegate }
        set { currentDelegate = newValue }
    }
    var currentDelegate: ConnectionDelegate?
    /// Told once, after the delegate, when the connection closes.
    public weak var tracker: ConnectionTracker?
    /// The current state.
    public var state: State { currentState }
    /// When `output` holds more than this many bytes, reading pauses until it drains (back-pressure).
    public var outputHighWaterMark: Int {
        get { highWaterMark }
        set { highWaterMark = newValue }
    }
    var highWaterMark = 4 << 20
    /// How long `close(.afterFlush)` waits for a peer that takes none of the bytes still to send (neither
    /// from the output buffer nor from the kernel's send queue) before resetting. A slow reader that keeps
    /// taking bytes is served to the end.
    public var flushTimeout: Duration {
        get { .nanoseconds(flushTimeoutNanoseconds) }
        set { flushTimeoutNanoseconds = newValue.nanoseconds }
    }
    var flushTimeoutNanoseconds: Int64 = 5_000_000_000
    /// The peer's end of input has been seen.
    public var inputEnded: Bool { endOfInputSeen }
    /// Reads that brought bytes and sends with bytes to go, so far: what tells a connection in use from one
    /// that only stays open (an app's idle detection compares it between two looks).
    public internal(set) var moves: UInt64 = 0
    /// Told of each read callback of an ordinary connection; watches a reading `.control` one.
    let context: ReadContext
    /// The most reads one readable event makes before the delegate is told: a bulk stream is echoed with one
    /// write per 2 reads of 256 KiB, and one connection cannot hold the loop for more than 512 KiB. (4, as
    /// SwiftNIO's `maxMessagesPerRead`, made the stream burstier and slower: ReadSizer.largestShift.)
    public static let readsPerCallback = 2
    /// The most writes one flush makes, and the bytes after which it makes no more, before the rest waits for
    /// the next turn: a write stops short of the socket's room when a file segment goes out alone (sendfile)
    /// or a writev reaches 128 blocks. A flush's first write takes what the socket has room for, so a read
    /// callback's share (2 x 256 KiB) goes out in one call; one write may be larger (a 2 MiB file piece).
    static let writesPerFlush = 16
    static let bytesPerFlush = 256 << 10

    var readEvent: OpaquePointer?
    var writeEvent: OpaquePointer?
    /// While closing after a flush: the timer that watches the peer take the bytes still to send.
    var flushWatch: FlushWatch?
    /// The read and write events on a restricted-mode base while a restricted run serves this connection.
    var restrictedEvents: (read: OpaquePointer, write: OpaquePointer)?

    // The small fields last, together: Swift lays stored properties out in declaration order, and one byte
    // between two pointers costs eight. The object's size is paid by every idle connection.
    var descriptor: CInt
    /// Where the loop keeps this connection (`LoopOwned`).
    var loopSlot: Int32 = -1
    var currentState: State = .open
    /// The priority of the read and write events.
    let priority: EventPriority
    /// The size of the next read.
    var readSizer = ReadSizer()
    var endOfInputSeen = false
    var readInterest = false
    var writeInterest = false
    var readsPausedByOwner = false
    var readsPausedByBackPressure = false
    /// What the connection has left to do at the next turn (`ReadContext.serveAtNextTurn`).
    var readAtNextTurn = false
    var flushAtNextTurn = false
    /// The peer's FIN has been reported (EV_CLOSED): a short read no longer means nothing is left, since no
    /// further report comes for the end of input.
    var peerFinReported = false
    /// A transport's read waits for the socket to be writable (a handshake message to send), or its write
    /// for the socket to be readable: the other event drives it.
    var readWaitsForWrite = false
    var writeWaitsForRead = false

    /// Takes ownership of the connected descriptor `fd`, makes it non-blocking if it is not, and starts
    /// reading, its events served at `priority`. If the connection cannot be set up, `fd` is closed and the
    /// error thrown. The corresponding C functions are `fcntl`, `event_new` and `event_priority_set`.
    public init(loop: EventLoop, fd: CInt, priority: EventPriority = .normal) throws(SystemError) {
        loop.assertInLoop()
        self.loop = loop
        self.descriptor = fd
        self.priority = priority
        self.context = loop.readContext
        // The read event only fails when memory is exhausted.
        let context = Unmanaged.passUnretained(self).toOpaque()
        do {
            // Checked here, where every connection's descriptor is adopted, rather than trusted of each
            // caller: a blocking socketpair end once let a program that never read its replies block a
            // writev, and the whole loop, until the loop watchdog aborted the daemon.
            try SocketCalls.makeNonBlocking(fd)
            readEvent = try libevent("event_new") { event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST | EV_ET | EV_CLOSED), connectionReadable, context) }
            if priority != .normal { event_priority_set(readEvent, priority.rawValue) }
        } catch {
            SocketCalls.close(fd)
            throw error
        }
        loop.retain(self)
        updateReadInterest()
    }

    /// The buffers belong to the connection for its whole life, so that a service holding `input` or `output`
    /// after the close sees empty buffers, never freed ones. (The one teardown done in `deinit`: the owner
    /// table releases a connection only after `close`, so nothing else can run here.)
    deinit {
        inputStorage?.free()
        outputStorage?.free()
    }

    /// Reads and writes through `transport` (TLS) from now on, rather than the socket: `input` receives what
    /// it decrypts, and what is queued in `output`, file segments included, is written through it in slices of
    /// `transport.bytesPerSend`, at most `transport.bytesPerTurn` bytes per loop turn. Set it as soon as the
    /// connection is accepted, before any byte is read or queued. On a closed connection it is closed at once.
    public func use(_ transport: ConnectionTransport) {
        guard currentState != .closed else { return transport.close(cleanly: false) }
        transportStorage = transport
        outputStorage?.clearDrainsToDescriptor()
    }

    /// Whether the connection reads and writes through a transport.
    public var hasTransport: Bool { transportStorage != nil }
}

// The callbacks take no reference of their own to the connection (a retain and release per message): the
// loop keeps it alive until the callback has returned, even when it closes inside
// (`EventLoop.releaseAfterCallback`).

func connectionReadable(_: CInt, _ events: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<Connection>.fromOpaque(context)._withUnsafeGuaranteedRef { $0.readable(events: events) }
}

func connectionWritable(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<Connection>.fromOpaque(context)._withUnsafeGuaranteedRef { $0.writable() }
}

/// What a connection closing after a flush keeps to tell a slow reader from a stalled one: the bytes the peer
/// had not taken at the last look, and when it last took some. The timer looks every tenth of the timeout, so
/// a stall is found between 1 and 1.1 timeouts after the peer's last progress (a look every whole timeout
/// found it up to 2 timeouts after). Only a closing connection has one.
final class FlushWatch {
    let timer: EventTimer
    var unsent: Int
    var lastProgress: MonotonicTime

    init(timer: EventTimer, unsent: Int, lastProgress: MonotonicTime) {
        self.timer = timer
        self.unsent = unsent
        self.lastProgress = lastProgress
    }

    static func interval(of timeout: Duration) -> Duration { timeout / 10 }
}
