// A connection's writes: flushing `output` to the socket (writev, sendfile for file segments) or through a
// transport, a turn's share at a time, and the write event that waits for room.

@preconcurrency import Glibc
internal import CLibevent

extension Connection {
    /// Writes as much of `output` as the socket takes now, and waits for writability for the rest.
    /// The corresponding C function is `evbuffer_write` (writev or sendfile).
    public func flush() {
        guard currentState != .closed else { return }
        var unsent = 0
        if let outputStorage {
            // An empty buffer makes no system call.
            if !outputStorage.isEmpty { moves &+= 1 }
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
        moves &+= 1
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
        moves &+= 1
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
    func write(from buffer: EventBuffer) -> Bool {
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
    func write(from buffer: EventBuffer, through transport: ConnectionTransport) -> Bool {
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
    func outputWritten(unsent: Int) {
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

    func setWriteInterest(_ wanted: Bool) {
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
}
