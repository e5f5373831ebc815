// How a connection ends: after a flush (watched for a peer that takes nothing), at once, by a reset, or made
// defunct in place; and the one path every end goes through.

@preconcurrency import Glibc
internal import CLibevent

extension Connection {
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
                flushWatch = FlushWatch(timer: timer, unsent: unsentBytes, lastProgress: loop.now)
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
        if let state = SocketCalls.tcpState(fd), !state.holdsAConnection { return false }
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
    var unsentBytes: Int {
        outputCount + max(0, Int(netlife_unsent_bytes(fd)))
    }

    /// The flush timer: the peer has taken no byte for `flushTimeout` (reset), or it has (look again, no later
    /// than the timeout after its last progress).
    func flushTimerFired() {
        guard currentState == .closing, let watch = flushWatch else { return }
        let now = loop.now
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

    func fail(_ error: SystemError) {
        finishClose(error: error, how: .now)
    }

    func finishClose(error: SystemError?, how: CloseMode) {
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

    func discardPendingInput() {
        let scratch = context.scratch
        // At most 16 reads, stopping at the first that finds nothing (`where` would filter, not stop).
        for _ in 0..<16 {
            if Glibc.recv(fd, scratch.baseAddress, scratch.count, CInt(MSG_DONTWAIT)) <= 0 { break }
        }
    }

    func writable() {
        context.callbackBegins()
        if readWaitsForWrite {
            readWaitsForWrite = false
            if currentState == .open, readInterest { readable() }
        }
        flush()
    }
}

extension Connection: LoopSource {
    var closeRank: Int { 0 }
    func closeForLoopShutdown() { close(.now) }
}
