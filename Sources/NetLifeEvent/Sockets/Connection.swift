// A connected stream socket with an input and an output evbuffer, driven by plain libevent read and write
// events rather than bufferevents: libevent 2.1's bufferevent reads at most 4 KiB per call. Reads are sized
// by a `ReadSizer`. Bulk reads go straight into the input buffer's blocks (reserved space, read, commit: no
// copy), up to `readsPerCallback` of them per readable event before the delegate hears of the bytes once;
// a chatty connection's small reads land in the loop's scratch area and are offered to the delegate before
// any buffering. Writes go out with `evbuffer_write` (writev, or sendfile for file segments) or `send`.
//
// The stored properties the read and write callbacks touch are private, with public computed views: Swift
// checks exclusive access to a class's public stored properties at run time (another module might access
// them), and those checks were a quarter of the instructions per echoed message (Benchmarks/README.md).
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

    private unowned let loop: EventLoop
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
    private var inputStorage: EventBuffer?
    private var outputStorage: EventBuffer?
    /// What the connection reads and writes through instead of the socket (TLS), if anything.
    private var transportStorage: ConnectionTransport?
    /// The bytes in `output`, without making it.
    private var outputCount: Int { outputStorage?.count ?? 0 }
    /// The receiver of this connection's events. Cleared when the connection closes.
    public var delegate: ConnectionDelegate? {
        get { currentDelegate }
        set { currentDelegate = newValue }
    }
    private var currentDelegate: ConnectionDelegate?
    /// Told once, after the delegate, when the connection closes.
    public weak var tracker: ConnectionTracker?
    /// The current state.
    public var state: State { currentState }
    /// When `output` holds more than this many bytes, reading pauses until it drains (back-pressure).
    public var outputHighWaterMark: Int {
        get { highWaterMark }
        set { highWaterMark = newValue }
    }
    private var highWaterMark = 4 << 20
    /// How long `close(.afterFlush)` waits for a peer that takes none of the bytes still to send (neither
    /// from the output buffer nor from the kernel's send queue) before resetting. A slow reader that keeps
    /// taking bytes is served to the end.
    public var flushTimeout: Duration {
        get { .nanoseconds(flushTimeoutNanoseconds) }
        set { flushTimeoutNanoseconds = newValue.nanoseconds }
    }
    private var flushTimeoutNanoseconds: Int64 = 5_000_000_000
    /// The peer's end of input has been seen.
    public var inputEnded: Bool { endOfInputSeen }
    /// Told of each read callback of an ordinary connection; watches a reading `.control` one.
    private let context: ReadContext
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

    private var readEvent: OpaquePointer?
    private var writeEvent: OpaquePointer?
    /// While closing after a flush: the timer that watches the peer take the bytes still to send.
    private var flushWatch: FlushWatch?
    /// The read and write events on a restricted-mode base while a restricted run serves this connection.
    private var restrictedEvents: (read: OpaquePointer, write: OpaquePointer)?

    // The small fields last, together: Swift lays stored properties out in declaration order, and one byte
    // between two pointers costs eight. The object's size is paid by every idle connection.
    private var descriptor: CInt
    /// Where the loop keeps this connection (`LoopOwned`).
    var loopSlot: Int32 = -1
    private var currentState: State = .open
    /// The priority of the read and write events.
    private let priority: EventPriority
    /// The size of the next read.
    private var readSizer = ReadSizer()
    private var endOfInputSeen = false
    private var readInterest = false
    private var writeInterest = false
    private var readsPausedByOwner = false
    private var readsPausedByBackPressure = false
    /// What the connection has left to do at the next turn (`ReadContext.serveAtNextTurn`).
    private var readAtNextTurn = false
    private var flushAtNextTurn = false
    /// The peer's FIN has been reported (EV_CLOSED): a short read no longer means nothing is left, since no
    /// further report comes for the end of input.
    private var peerFinReported = false
    /// A transport's read waits for the socket to be writable (a handshake message to send), or its write
    /// for the socket to be readable: the other event drives it.
    private var readWaitsForWrite = false
    private var writeWaitsForRead = false

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

    // MARK: Reading

    /// Stops delivering reads until `resumeReading()`; the kernel keeps buffering what the peer sends.
    /// Used while an app is suspended.
    public func pauseReading() {
        readsPausedByOwner = true
        updateReadInterest()
    }

    /// Delivers reads again after `pauseReading()`.
    public func resumeReading() {
        readsPausedByOwner = false
        updateReadInterest()
    }

    /// Whether reads are being delivered now.
    public var isReading: Bool { readInterest }

    /// Whether `output` holds more than `outputHighWaterMark` bytes.
    public var isOutputHigh: Bool { outputCount > highWaterMark }

    /// Stops reading while `output` holds more than `outputHighWaterMark` bytes (a peer that sends faster
    /// than it reads); reading resumes and the delegate hears `connectionDidDrainOutput` once it is written.
    /// Returns whether reading is paused for that reason.
    @discardableResult
    public func pauseReadingIfOutputIsHigh() -> Bool {
        guard currentState == .open, isOutputHigh else { return false }
        if !readsPausedByBackPressure {
            readsPausedByBackPressure = true
            updateReadInterest()
        }
        return true
    }

    private func updateReadInterest() {
        guard let readEvent else { return }
        let wanted = (currentState == .open && !endOfInputSeen && !readsPausedByOwner && !readsPausedByBackPressure)
            || (writeWaitsForRead && currentState != .closed)
        guard wanted != readInterest else { return }
        // Bytes a transport took from the socket and has not handed over: the socket will not report them.
        if wanted, currentState == .open, let transportStorage, transportStorage.hasBufferedInput { serveAtNextTurn(read: true) }
        // No array of the two events: this runs for each of 10,000 connections on suspend and resume.
        setInterest(wanted, readEvent)
        if let restricted = restrictedEvents { setInterest(wanted, restricted.read) }
        readInterest = wanted
        if priority == .control {
            if wanted { context.add(descriptor) } else { context.remove(descriptor) }
        }
    }

    private func setInterest(_ wanted: Bool, _ event: OpaquePointer) {
        if wanted {
            libeventMustSucceed("event_add") { event_add(event, nil) }
        } else {
            event_del(event)
        }
    }

    /// `events` are libevent's (EV_CLOSED: the peer's FIN has arrived).
    fileprivate func readable(events: Int16 = 0) {
        if priority == .normal { context.ordinaryCallbackRan() }
        if writeWaitsForRead {
            writeWaitsForRead = false
            flush()
            updateReadInterest()
        }
        guard currentState == .open else { return }
        if events & Int16(EV_CLOSED) != 0 { peerFinReported = true }
        if let transportStorage {
            // The read event may be on for a write that waits for it, while reads are paused.
            guard !endOfInputSeen, !readsPausedByOwner, !readsPausedByBackPressure else { return }
            return read(through: transportStorage)
        }
        // A chatty connection (its reads are small) with nothing buffered reads into the loop's scratch area,
        // where the delegate may consume the bytes at once; a bulk one reads into the input buffer's blocks.
        if readSizer.isSmallest, inputStorage?.isEmpty ?? true { return readSmall() }
        let buffer = input
        var received = 0
        var ended = false
        var failure: Errno?
        // Until a read comes back short (the socket is empty), or the share of this turn is used up.
        var moreToRead = true
        for _ in 0..<Self.readsPerCallback {
            let size = readSizer.size
            let got = buffer.read(from: descriptor, atMost: size)
            if got > 0 {
                received += got
                readSizer.record(got)
                if got < size {
                    moreToRead = peerFinReported
                    break
                }
            } else {
                if got == 0 {
                    ended = true
                    moreToRead = false
                } else {
                    switch Self.lastReadFailure() {
                    case .empty: moreToRead = false
                    case .interrupted: break
                    case .failed(let error):
                        failure = error
                        moreToRead = false
                    }
                }
                break
            }
        }
        if received > 0 {
            currentDelegate?.connectionDidRead(self)
            guard currentState == .open else { return }
            pauseReadingIfOutputIsHigh()
            // An end of input found after bytes is found again by the next read (a read at end of stream keeps
            // returning 0), once the delegate wants reads again; an error is final.
            if ended {
                ended = false
                moreToRead = true
            }
        }
        if moreToRead { serveAtNextTurn(read: true) }
        if let failure {
            fail(SystemError("read", failure))
        } else if ended {
            inputDidEnd()
        }
    }

    /// The most reads through a transport, and the bytes after which it makes no more, per readable event
    /// before the delegate is told: a TLS record holds at most 16 KiB, so a read returns at most that.
    static let transportReadsPerCallback = 64
    static let transportBytesPerCallback = 512 << 10
    static let transportReadSize = 16 << 10

    /// `readable` through a transport: reads until it wants the socket to become readable (it is empty),
    /// or this turn's share is used up.
    private func read(through transport: ConnectionTransport) {
        let buffer = input
        var received = 0
        var ended = false
        var failure: SystemError?
        var moreToRead = true
        reading: for _ in 0..<Self.transportReadsPerCallback {
            guard received < Self.transportBytesPerCallback else { break }
            switch buffer.receive(atMost: Self.transportReadSize, { transport.receive(into: $0) }) {
            case .transferred(let got):
                received += got
                continue reading
            case .wantsRead:
                moreToRead = false
            case .wantsWrite:
                moreToRead = false
                readWaitsForWrite = true
                setWriteInterest(true)
            case .ended:
                ended = true
                moreToRead = false
            case .failed(let error):
                failure = error
                moreToRead = false
            }
            break reading
        }
        if received > 0 {
            currentDelegate?.connectionDidRead(self)
            guard currentState == .open else { return }
            pauseReadingIfOutputIsHigh()
            if ended {
                ended = false
                moreToRead = true
            }
        }
        if moreToRead { serveAtNextTurn(read: true) }
        if let failure {
            fail(failure)
        } else if ended {
            inputDidEnd()
        }
    }

    /// What a read that returned -1 ran into.
    private enum ReadFailure {
        /// Nothing to read (EAGAIN).
        case empty
        /// A signal (EINTR): read again, at the next turn.
        case interrupted
        case failed(Errno)
    }

    private static func lastReadFailure() -> ReadFailure {
        switch Errno.current {
        case .wouldBlock: .empty
        case .interrupted: .interrupted
        case let error: .failed(error)
        }
    }

    /// The peer ended its side: no more reads; the delegate decides (by default, flush and close).
    private func inputDidEnd() {
        endOfInputSeen = true
        updateReadInterest()
        if let delegate = currentDelegate { delegate.connectionDidReachEnd(self) } else { close(.afterFlush) }
    }

    /// One read into the scratch area, offered to the delegate (`connection(_:consumeSmallRead:)`), appended
    /// to `input` if not consumed.
    private func readSmall() {
        let scratch = context.scratch
        let got = netlife_read(descriptor, scratch.baseAddress, scratch.count)
        if got > 0 {
            readSizer.record(got)
            let bytes = UnsafeRawBufferPointer(rebasing: scratch[0..<got])
            guard let delegate = currentDelegate else { return input.append(bytes) }
            if !delegate.connection(self, consumeSmallRead: bytes) {
                input.append(bytes)
                delegate.connectionDidRead(self)
            }
            // A full scratch area may have left bytes in the socket; after the FIN, the end is still to read.
            if got == scratch.count || peerFinReported, currentState == .open { serveAtNextTurn(read: true) }
            // An echo's reply went out whole: no output buffer was made, none to weigh.
            guard currentState == .open, outputStorage != nil else { return }
            pauseReadingIfOutputIsHigh()
        } else if got == 0 {
            inputDidEnd()
        } else {
            switch Self.lastReadFailure() {
            case .empty: break
            case .interrupted: serveAtNextTurn(read: true)
            case .failed(let error): fail(SystemError("read", error))
            }
        }
    }

    /// Puts the connection on the next-turn list, to read or to flush then.
    private func serveAtNextTurn(read: Bool = false, flush: Bool = false) {
        let listed = readAtNextTurn || flushAtNextTurn
        readAtNextTurn = readAtNextTurn || read
        flushAtNextTurn = flushAtNextTurn || flush
        if !listed { context.serveAtNextTurn(self) }
    }

    /// The next turn came (`ReadContext`): flush and read what was left.
    func servedAgain() {
        let read = readAtNextTurn
        let flush = flushAtNextTurn
        readAtNextTurn = false
        flushAtNextTurn = false
        if flush { self.flush() }
        if read, readInterest { readable() }
    }

    // MARK: Writing

    /// Writes as much of `output` as the socket takes now, and waits for writability for the rest.
    /// The corresponding C function is `evbuffer_write` (writev or sendfile).
    public func flush() {
        guard currentState != .closed else { return }
        var unsent = 0
        if let outputStorage {
            // An empty buffer makes no system call.
            guard write(from: outputStorage) else { return }
            unsent = outputStorage.count
        }
        outputWritten(unsent: unsent)
    }

    /// Sends every byte of `buffer` and leaves it empty, as `output.moveAll(from: buffer)` then `flush()`
    /// would; when nothing is queued in `output`, the bytes go to the socket straight from `buffer` and only
    /// what the socket refused moves to `output` (an echo relays its input with one call and no block
    /// changing hands). On a closed connection the bytes are dropped.
    public func send(_ buffer: EventBuffer) {
        guard currentState != .closed else { return buffer.removeAll() }
        guard outputCount == 0, transportStorage == nil else {
            output.moveAll(from: buffer)
            return flush()
        }
        guard write(from: buffer) else { return }
        // What the socket refused waits in `output` for writability (no second write now: the socket is full).
        if !buffer.isEmpty { output.moveAll(from: buffer) }
        outputWritten(unsent: outputCount)
    }

    /// Sends `bytes`, as `output.append(bytes)` then `flush()` would; when nothing is queued in `output`, they
    /// go to the socket straight from where they are, and only what the socket refused is copied to `output`.
    /// On a closed connection the bytes are dropped. The corresponding C function is `send`.
    public func send(_ bytes: UnsafeRawBufferPointer) {
        guard currentState != .closed, let base = bytes.baseAddress, !bytes.isEmpty else { return }
        guard outputCount == 0, transportStorage == nil else {
            output.append(bytes)
            return flush()
        }
        var sent = netlife_send(descriptor, base, bytes.count, CInt(MSG_NOSIGNAL | MSG_DONTWAIT))
        if sent < 0 {
            let error = Errno.current
            guard error == .wouldBlock || error == .interrupted else { return fail(SystemError("send", error)) }
            sent = 0
        }
        if sent < bytes.count { output.append(UnsafeRawBufferPointer(rebasing: bytes[sent...])) }
        outputWritten(unsent: bytes.count - sent)
    }

    /// Writes from `buffer` until it is empty or the socket is full (EAGAIN), at most `writesPerFlush` times;
    /// past that the connection flushes again at the next turn. False when the connection failed (and is
    /// closed).
    private func write(from buffer: EventBuffer) -> Bool {
        if let transportStorage { return write(from: buffer, through: transportStorage) }
        var total = 0
        for _ in 0..<Self.writesPerFlush {
            guard total < Self.bytesPerFlush else { break }
            var error: CInt = 0
            let written = netlife_evbuffer_write(buffer.pointer, descriptor, &error)
            if written < 0 {
                if error == EINTR { continue }
                guard error == EAGAIN else {
                    fail(SystemError("writev", Errno(rawValue: error)))
                    return false
                }
                return true
            }
            if written == 0 || buffer.isEmpty { return true }
            total += Int(written)
        }
        serveAtNextTurn(flush: true)
        return true
    }

    /// `write(from:)` through a transport: slices of the buffer's front until it is empty, the transport waits
    /// for the socket, or this turn's share is sent. A slice refused (the socket full) is offered again, the
    /// same bytes, when the socket is writable.
    private func write(from buffer: EventBuffer, through transport: ConnectionTransport) -> Bool {
        var total = 0
        let slice = transport.bytesPerSend
        while !buffer.isEmpty {
            guard total < transport.bytesPerTurn else {
                serveAtNextTurn(flush: true)
                return true
            }
            switch buffer.withContiguousFront(maxBytes: slice, { transport.send($0) }) {
            case .transferred(let sent):
                buffer.drain(sent)
                total += sent
            case .wantsWrite:
                return true
            case .wantsRead:
                writeWaitsForRead = true
                updateReadInterest()
                return true
            case .ended:
                fail(SystemError("SSL_write", Errno(rawValue: EPIPE)))
                return false
            case .failed(let error):
                fail(error)
                return false
            }
        }
        return true
    }

    /// After a write: `unsent` bytes wait in `output`.
    @inline(__always)
    private func outputWritten(unsent: Int) {
        if unsent == 0 {
            setWriteInterest(readWaitsForWrite)
            if readsPausedByBackPressure {
                readsPausedByBackPressure = false
                updateReadInterest()
                if currentState == .open { currentDelegate?.connectionDidDrainOutput(self) }
            }
            if currentState == .closing { finishClose(error: nil, how: .now) }
        } else {
            setWriteInterest(true)
        }
    }

    private func setWriteInterest(_ wanted: Bool) {
        guard wanted != writeInterest else { return }
        if wanted {
            let event: OpaquePointer
            if let writeEvent {
                event = writeEvent
            } else {
                // Made on first need: most connections never fill the kernel's send buffer. event_new fails
                // only when memory is exhausted; the connection then ends with that error.
                let context = Unmanaged.passUnretained(self).toOpaque()
                do {
                    event = try libevent("event_new") { event_new(loop.base, descriptor, Int16(EV_WRITE | EV_PERSIST | EV_ET), connectionWritable, context) }
                } catch {
                    return fail(error)
                }
                if priority != .normal { event_priority_set(event, priority.rawValue) }
                writeEvent = event
            }
            libeventMustSucceed("event_add") { event_add(event, nil) }
            if let restricted = restrictedEvents { libeventMustSucceed("event_add") { event_add(restricted.write, nil) } }
        } else {
            if let writeEvent { event_del(writeEvent) }
            if let restricted = restrictedEvents { event_del(restricted.write) }
        }
        writeInterest = wanted
    }

    // MARK: Restricted mode

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

    // MARK: Closing

    /// Closes the connection as `mode` says. The delegate's `connectionDidClose` follows (at once for
    /// `.now` and `.reset`, after the flush for `.afterFlush`).
    public func close(_ mode: CloseMode) {
        switch (state, mode) {
        case (.closed, _):
            return
        case (_, .afterFlush):
            guard currentState == .open else { return }
            currentState = .closing
            updateReadInterest()
            flush()
            if currentState == .closing {
                let timer = EventTimer(loop: loop) { [weak self] in self?.flushTimerFired() }
                flushWatch = FlushWatch(timer: timer, unsent: unsentBytes, lastProgress: .now())
                timer.arm(after: FlushWatch.interval(of: flushTimeout))
            }
        case (_, .now), (_, .reset):
            finishClose(error: nil, how: mode)
        }
    }

    /// Dissolves the TCP connection in place, as iOS reclaims a suspended app's socket: the peer sees RST at
    /// once; the descriptor stays, and the owner's next read or write on it fails (ENOTCONN, EPIPE) and
    /// closes it through the error path. Returns whether it reset a connection now: false when the kernel
    /// holds none to reset (an earlier reclaim dissolved it, or the peer reset it), so that a reclaim counts
    /// only what it reset itself.
    @discardableResult
    public func makeDefunct() throws(SystemError) -> Bool {
        guard currentState != .closed else { return false }
        // The kernel knows whether a connection is left: a dissolved one is in TCP's CLOSE state. A socket
        // that is not TCP (nil) is left to `disconnect`, which refuses it.
        if let state = SocketCalls.tcpState(fd), !ProcessSockets.isReset(state) { return false }
        try SocketCalls.disconnect(fd)
        return true
    }

    /// The memory the connection holds: its buffers and the kernel's queues both ways (what a memory-pressure
    /// decision weighs).
    public var heldBytes: Int {
        guard currentState != .closed else { return 0 }
        let buffers = (inputStorage?.count ?? 0) + outputCount
        // A dissolved connection (reclaimed: TCP's CLOSE state) has no kernel queues left, whatever SIOCOUTQ
        // says: Linux moves a disconnected socket's write sequence on by its window (about 64 KiB), which
        // SIOCOUTQ then reports as unsent.
        if SocketCalls.tcpState(fd) == .closed { return buffers }
        return buffers + max(0, Int(netlife_unsent_bytes(fd))) + max(0, Int(netlife_unread_bytes(fd)))
    }

    /// The bytes the peer has not taken yet: those in `output` and those in the kernel's send queue. Writing
    /// moves bytes from one to the other; only the peer's reading makes the sum smaller.
    private var unsentBytes: Int {
        outputCount + max(0, Int(netlife_unsent_bytes(fd)))
    }

    /// The flush timer: the peer has taken no byte for `flushTimeout` (reset), or it has (look again, no later
    /// than the timeout after its last progress).
    private func flushTimerFired() {
        guard currentState == .closing, let watch = flushWatch else { return }
        let now = MonotonicTime.now()
        let unsent = unsentBytes
        if unsent < watch.unsent {
            watch.unsent = unsent
            watch.lastProgress = now
        }
        let stalled = now - watch.lastProgress
        if stalled >= flushTimeout {
            finishClose(error: nil, how: .reset)
        } else {
            watch.timer.arm(after: min(FlushWatch.interval(of: flushTimeout), flushTimeout - stalled))
        }
    }

    private func fail(_ error: SystemError) {
        finishClose(error: error, how: .now)
    }

    private func finishClose(error: SystemError?, how: CloseMode) {
        guard currentState != .closed else { return }
        currentState = .closed
        leaveRestrictedMode()
        flushWatch?.timer.close()
        flushWatch = nil
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        readEvent = nil
        writeEvent = nil
        if readInterest, priority == .control { context.remove(descriptor) }
        if readAtNextTurn || flushAtNextTurn { context.forget(self) }
        readAtNextTurn = false
        flushAtNextTurn = false
        readInterest = false
        writeInterest = false
        // A transport says goodbye (TLS close_notify) before the FIN, and releases its state.
        transportStorage?.close(cleanly: error == nil && how != .reset)
        transportStorage = nil
        switch how {
        case .reset:
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        case .now, .afterFlush:
            // Send FIN before close(), and discard what the peer sent and nobody will read: closing a socket
            // with unread input makes the kernel send RST instead of FIN.
            if error == nil {
                _ = shutdown(fd, CInt(SHUT_WR))
                discardPendingInput()
            }
        }
        SocketCalls.close(fd)
        descriptor = -1
        inputStorage?.removeAll()
        outputStorage?.removeAll()
        let delegate = currentDelegate
        let tracker = self.tracker
        currentDelegate = nil
        self.tracker = nil
        delegate?.connectionDidClose(self, error: error)
        tracker?.connectionClosed(self)
        loop.releaseAfterCallback(self)
    }

    private func discardPendingInput() {
        let scratch = context.scratch
        // At most 16 reads, stopping at the first that finds nothing (`where` would filter, not stop).
        for _ in 0..<16 {
            if Glibc.recv(fd, scratch.baseAddress, scratch.count, CInt(MSG_DONTWAIT)) <= 0 { break }
        }
    }

    fileprivate func writable() {
        if readWaitsForWrite {
            readWaitsForWrite = false
            if currentState == .open, readInterest { readable() }
        }
        flush()
    }
}

// The callbacks take no reference of their own to the connection (a retain and release per message): the
// loop keeps it alive until the callback has returned, even when it closes inside
// (`EventLoop.releaseAfterCallback`).

private func connectionReadable(_: CInt, _ events: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<Connection>.fromOpaque(context)._withUnsafeGuaranteedRef { $0.readable(events: events) }
}

private func connectionWritable(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<Connection>.fromOpaque(context)._withUnsafeGuaranteedRef { $0.writable() }
}

/// What a connection closing after a flush keeps to tell a slow reader from a stalled one: the bytes the peer
/// had not taken at the last look, and when it last took some. The timer looks every tenth of the timeout, so
/// a stall is found between 1 and 1.1 timeouts after the peer's last progress (a look every whole timeout
/// found it up to 2 timeouts after). Only a closing connection has one.
private final class FlushWatch {
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
