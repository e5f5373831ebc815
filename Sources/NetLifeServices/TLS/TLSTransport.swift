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
    /// The socket, for the look at a client's first byte (`isPlainHTTP`).
    private let fd: CInt
    /// Whether the client's first byte has been looked at.
    private var firstByteSeen = false

    /// What a client that speaks plain HTTP to the TLS port is answered, as nginx answers it, before the
    /// connection closes (OpenSSL would only see a record that is none, and close without a word).
    static let plainHTTPAnswer: [UInt8] = {
        let body = "400 Bad Request: this port speaks HTTPS: use an https:// URL\n"
        return Array(("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n"
                      + "Connection: close\r\n\r\n" + body).utf8)
    }()

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
        self.fd = fd
    }

    /// Whether the client began with plain HTTP instead of a TLS record: a TLS connection's first byte is a
    /// record type (22, a handshake), an HTTP request's an upper-case method letter. Looked at once, without
    /// taking the byte (MSG_PEEK). The corresponding C function is `recv`.
    private func beganWithPlainHTTP() -> Bool? {
        var byte: UInt8 = 0
        let got = recv(fd, &byte, 1, CInt(MSG_PEEK) | CInt(MSG_DONTWAIT))
        // Nothing yet: wait. The end or an error: OpenSSL's call reports it.
        guard got == 1 else { return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? nil : false }
        return byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")
    }

    /// Answers a plain HTTP client with 400 (its request read first, so that the close sends a FIN, not a
    /// reset that could discard the answer). The corresponding C functions are `recv` and `send`.
    private func answerPlainHTTP() {
        var scratch = [UInt8](repeating: 0, count: 16 << 10)
        _ = recv(fd, &scratch, scratch.count, CInt(MSG_DONTWAIT))
        _ = Self.plainHTTPAnswer.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT) | CInt(MSG_NOSIGNAL)) }
    }

    /// The corresponding C function is `SSL_read_ex`.
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> TransportResult {
        guard let ssl, let base = buffer.baseAddress, buffer.count > 0 else { return .failed(Self.closedError("SSL_read_ex")) }
        if !firstByteSeen {
            switch beganWithPlainHTTP() {
            case nil: return .wantsRead
            case true?:
                firstByteSeen = true
                answerPlainHTTP()
                return .failed(SystemError("plain HTTP on a TLS port (answered 400)", Errno(rawValue: EPROTO)))
            case false?:
                firstByteSeen = true
            }
        }
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
