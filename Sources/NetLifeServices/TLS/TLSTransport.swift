// One TLS connection's OpenSSL state, as the `ConnectionTransport` a Connection reads and writes through:
// a thin shell around non-blocking SSL_read_ex and SSL_write_ex on the socket (the handshake is done by the
// first of them, SSL_set_accept_state). Each call that moves no byte is turned into "wait for readable",
// "wait for writable", "ended" or a `SystemError` by the pure TLSCallOutcome; the Connection waits on the
// loop. Nothing here blocks, loops on the socket or holds bytes of its own beyond OpenSSL's record buffers.

@preconcurrency import Glibc
import COpenSSL
import NetLifeEvent

/// The server side of a TLS connection on an accepted socket.
final class TLSTransport: ConnectionTransport {
    private var ssl: OpaquePointer?

    /// The bytes of output encrypted per loop turn before the rest waits for the next: 256 KiB, 16 records,
    /// about 65 µs of AES-256-GCM here (`openssl speed`: 4 GB/s) plus 16 writes, as Connection's 256 KiB
    /// per flush of plaintext. While 1 GiB went out, `status` round trips stayed at a median of 0.12 ms
    /// (TLSServiceTests); other sizes were not compared.
    let bytesPerTurn = 256 << 10
    /// The slice of output offered to one SSL_write_ex (which, with partial writes, sends one record of it).
    let bytesPerSend = 64 << 10

    /// A server-side TLS state for the connected socket `fd`, with `context`'s certificate. The corresponding
    /// C functions are `SSL_new`, `SSL_set_fd` and `SSL_set_accept_state`.
    init(context: TLSServerContext, fd: CInt) throws(SystemError) {
        let ssl = try OpenSSLCalls.make("SSL_new") { SSL_new(context.pointer) }
        do {
            try OpenSSLCalls.check("SSL_set_fd") { SSL_set_fd(ssl, fd) }
        } catch {
            SSL_free(ssl)
            throw error
        }
        SSL_set_accept_state(ssl)
        self.ssl = ssl
    }

    /// The corresponding C function is `SSL_read_ex`.
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> TransportResult {
        guard let ssl, let base = buffer.baseAddress, buffer.count > 0 else { return .failed(Self.closedError("SSL_read_ex")) }
        ERR_clear_error()
        errno = 0
        var got = 0
        let done = SSL_read_ex(ssl, base, buffer.count, &got)
        if done == 1 && got > 0 { return .transferred(got) }
        return outcome("SSL_read_ex", ssl, done)
    }

    /// The corresponding C function is `SSL_write_ex`.
    func send(_ bytes: UnsafeRawBufferPointer) -> TransportResult {
        guard let ssl, let base = bytes.baseAddress, bytes.count > 0 else { return .failed(Self.closedError("SSL_write_ex")) }
        ERR_clear_error()
        errno = 0
        var sent = 0
        let done = SSL_write_ex(ssl, base, bytes.count, &sent)
        if done == 1 && sent > 0 { return .transferred(sent) }
        return outcome("SSL_write_ex", ssl, done)
    }

    private func outcome(_ function: String, _ ssl: OpaquePointer, _ returned: CInt) -> TransportResult {
        let error = Errno.current
        let sslError = SSL_get_error(ssl, returned)
        return TLSCallOutcome.result(of: function, sslError: sslError, errno: error, queued: OpenSSLCalls.takeQueuedError())
    }

    /// The corresponding C function is `SSL_has_pending`.
    var hasBufferedInput: Bool {
        guard let ssl else { return false }
        return SSL_has_pending(ssl) == 1
    }

    /// Sends close_notify when `cleanly` and the handshake is done (one non-blocking attempt: the peer's
    /// answer is not waited for, as nginx does not), then frees the state. The corresponding C functions are
    /// `SSL_shutdown` and `SSL_free`.
    func close(cleanly: Bool) {
        guard let ssl else { return }
        if cleanly && SSL_is_init_finished(ssl) == 1 {
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
        }
        ERR_clear_error()
        SSL_free(ssl)
        self.ssl = nil
    }

    /// The name of the negotiated protocol version, `TLSv1.3`; nil before the handshake is done.
    var protocolVersion: String? {
        guard let ssl, SSL_is_init_finished(ssl) == 1, let name = SSL_get_version(ssl) else { return nil }
        return String(cString: name)
    }

    private static func closedError(_ function: String) -> SystemError {
        SystemError(function, Errno(rawValue: ENOTCONN))
    }
}
