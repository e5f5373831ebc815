// A connection's reads: pausing and resuming them (an owner, back-pressure), the edge-triggered read event,
// reads into the input buffer or the loop's scratch area, through a transport, and the end of input.

@preconcurrency import Glibc
internal import CLibevent

extension Connection {
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

    func updateReadInterest() {
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

    func setInterest(_ wanted: Bool, _ event: OpaquePointer) {
        if wanted {
            libeventMustSucceed("event_add") { event_add(event, nil) }
        } else {
            event_del(event)
        }
    }

    /// `events` are libevent's (EV_CLOSED: the peer's FIN has arrived).
    func readable(events: Int16 = 0) {
        // The turn's clock (LoopTurnTimes); the calls from the write side and the next turn find it started.
        context.callbackBegins()
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
            moves &+= 1
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
    func read(through transport: ConnectionTransport) {
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
            moves &+= 1
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
    enum ReadFailure {
        /// Nothing to read (EAGAIN).
        case empty
        /// A signal (EINTR): read again, at the next turn.
        case interrupted
        case failed(Errno)
    }

    static func lastReadFailure() -> ReadFailure {
        switch Errno.current {
        case .wouldBlock: .empty
        case .interrupted: .interrupted
        case let error: .failed(error)
        }
    }

    /// The peer ended its side: no more reads; the delegate decides (by default, flush and close).
    func inputDidEnd() {
        endOfInputSeen = true
        updateReadInterest()
        if let delegate = currentDelegate { delegate.connectionDidReachEnd(self) } else { close(.afterFlush) }
    }

    /// One read into the scratch area, offered to the delegate (`connection(_:consumeSmallRead:)`), appended
    /// to `input` if not consumed.
    func readSmall() {
        let scratch = context.scratch
        let got = netlife_read(descriptor, scratch.baseAddress, scratch.count)
        if got > 0 {
            moves &+= 1
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
    func serveAtNextTurn(read: Bool = false, flush: Bool = false) {
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
}

extension Connection: NextTurnServed {}
