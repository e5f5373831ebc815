// netlifed's end of a process app's lifecycle channel (the NETLIFE_EVENTS socketpair): the shell that carries
// bytes between the program and LifecycleChannelState, which decides.
//
// A program is untrusted, so every way it can make this end do work or hold memory is bounded:
// - the descriptor is non-blocking (Connection makes it so where it adopts it): a program that never reads
//   cannot block a write, and one that never writes cannot block a read;
// - at most `bytesPerTurn` are handed to the codec a loop turn. Bytes already read and not yet handed over
//   are handed over at the next turns (a zero-delay timer re-arms the session), with the socket's reads
//   paused meanwhile: what the session holds is one read callback's share (Connection.readsPerCallback x
//   256 KiB) at most, however much the program writes, and nothing waits for more bytes to arrive before it
//   is handled;
// - what waits to be sent is `pendingBytes`, which the owner weighs against
//   LifecycleChannelState.maxPendingOutputBytes before each line (a program that does not read is cut off).

import NetLifeEvent

/// netlifed's end of a program's NETLIFE_EVENTS socketpair: what comes in goes to `onBytes`, at most
/// `bytesPerTurn` a loop turn; lines go out through the connection's buffer.
public final class LifecycleChannelSession: ConnectionDelegate {
    /// The most bytes handed to `onBytes` in one loop turn.
    public static let bytesPerTurn = 64 * 1024

    private let connection: Connection
    private let onBytes: ([UInt8]) -> Void
    private let onClose: () -> Void
    /// Fires at the next loop turn while bytes read wait to be handed over.
    private var nextTurn: EventTimer?

    /// Adopts `fd` (made non-blocking) on `loop`. `onBytes` gets what the program sent, in order; `closed` is
    /// called once when the program closes its end or the connection fails (not after `close()`). On failure
    /// `fd` is closed.
    public init(loop: EventLoop, fd: CInt, onBytes: @escaping ([UInt8]) -> Void, closed onClose: @escaping () -> Void) throws(SystemError) {
        connection = try Connection(loop: loop, fd: fd)
        self.onBytes = onBytes
        self.onClose = onClose
        nextTurn = EventTimer(loop: loop) { [weak self] in self?.handOver() }
        connection.delegate = self
    }

    /// Bytes waiting to be sent to the program.
    public var pendingBytes: Int { connection.output.count }

    /// Bytes read from the program and not yet handed to `onBytes`.
    public var bufferedBytes: Int { connection.input.count }

    /// Whether the session still carries bytes (not closed by either side).
    public var isOpen: Bool { connection.state == .open }

    /// Sends `line` (which ends with its newline).
    public func send(_ line: String) {
        connection.output.append(line)
        connection.flush()
    }

    /// Closes netlifed's end; `closed` is not called.
    public func close() {
        nextTurn?.close()
        nextTurn = nil
        connection.delegate = nil
        connection.close(.now)
    }

    public func connectionDidRead(_ connection: Connection) {
        handOver()
    }

    /// Hands at most `bytesPerTurn` of what was read to `onBytes`; the rest waits for the next turn, with the
    /// socket's reads paused until it has all been handed over.
    private func handOver() {
        guard connection.state == .open else { return }
        let bytes = connection.input.peekBytes(limit: Self.bytesPerTurn)
        connection.input.drain(bytes.count)
        if connection.input.isEmpty {
            connection.resumeReading()
        } else {
            connection.pauseReading()
            nextTurn?.arm(after: .zero)
        }
        if !bytes.isEmpty { onBytes(bytes) }
    }

    public func connectionDidReachEnd(_ connection: Connection) {
        close()
        onClose()
    }

    public func connectionDidClose(_ connection: Connection, error: SystemError?) {
        connection.delegate = nil
        nextTurn?.close()
        nextTurn = nil
        onClose()
    }
}
