// A layer between a Connection's buffers and its socket that reads and writes the socket itself: TLS. The
// connection keeps its one driver (the read and write callbacks, the per-turn shares, the close); a
// transport only turns plaintext into what goes on the wire and back, and says when it must wait for the
// socket to become readable or writable. The layer that links the library (OpenSSL, seen by NetLifeServices
// alone) implements it, so that NetLifeEvent stays free of it.

/// What one transport call did.
public enum TransportResult: Equatable, Sendable {
    /// This many bytes (more than 0) were read or written.
    case transferred(Int)
    /// Nothing can move until the socket is readable (the socket is empty, or a handshake waits for the peer).
    case wantsRead
    /// Nothing can move until the socket is writable (the socket is full).
    case wantsWrite
    /// The peer ended its side (a reading call only).
    case ended
    /// The connection is broken: a socket error, or the peer broke the protocol.
    case failed(SystemError)
}

/// A transport that a connection reads and writes through instead of the socket. Called on the loop thread.
public protocol ConnectionTransport: AnyObject {
    /// Reads bytes into `buffer` (at most its count).
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> TransportResult
    /// Writes a prefix of `bytes`. After `.wantsRead` or `.wantsWrite`, the next call passes the same bytes
    /// again (the front of the output, unchanged, possibly followed by more).
    func send(_ bytes: UnsafeRawBufferPointer) -> TransportResult
    /// Whether bytes the transport has already taken from the socket wait to be read: the socket will not
    /// report them.
    var hasBufferedInput: Bool { get }
    /// The most bytes of output sent in one loop turn, after which the rest waits for the next turn.
    var bytesPerTurn: Int { get }
    /// The largest slice of output passed to one `send`.
    var bytesPerSend: Int { get }
    /// The connection closes: say goodbye when `cleanly` (best effort, without waiting), then release
    /// everything. Called once, before the descriptor is closed.
    func close(cleanly: Bool)
}
