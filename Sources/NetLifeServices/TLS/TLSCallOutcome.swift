// What a non-blocking SSL_read_ex, SSL_write_ex or handshake step that moved no byte means for the
// connection: wait for the socket to become readable or writable, the peer's end, or a broken connection.
// Pure: the shell (TLSTransport) reads SSL_get_error, errno and OpenSSL's error queue and hands them here.

import COpenSSL
import NetLifeEvent

enum TLSCallOutcome {
    /// The meaning of a call to `function` that failed with `sslError` (`SSL_get_error`), `errno` as the call
    /// left it, and the first error of OpenSSL's queue, if any.
    static func result(of function: String, sslError: CInt, errno: Errno, queued: OpenSSLError?) -> TransportResult {
        switch sslError {
        case SSL_ERROR_WANT_READ:
            return .wantsRead
        case SSL_ERROR_WANT_WRITE:
            return .wantsWrite
        case SSL_ERROR_ZERO_RETURN:
            // close_notify, or (SSL_OP_IGNORE_UNEXPECTED_EOF) the socket's end without one.
            return .ended
        case SSL_ERROR_SYSCALL:
            if let queued { return .failed(SystemError(function, openSSL: queued)) }
            if errno.rawValue != 0 { return .failed(SystemError(function, errno)) }
            // The socket ended with no error and no TLS error queued: its end.
            return .ended
        case SSL_ERROR_SSL:
            return .failed(SystemError(function, openSSL: queued ?? OpenSSLError(code: 0, text: "TLS protocol error")))
        default:
            // WANT_X509_LOOKUP, WANT_ASYNC and the like: the server sets up nothing that asks for them.
            return .failed(SystemError(function, openSSL: queued ?? OpenSSLError(code: 0, text: "unexpected SSL_get_error \(sslError)")))
        }
    }
}
