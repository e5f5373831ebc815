// The one checked path of OpenSSL calls. OpenSSL reports why a call failed in a per-thread error queue, not
// in errno: the queue is cleared before each call, and a failure becomes a `SystemError` carrying the first
// queued error as `ERR_error_string_n` writes it (or errno, for a failure of the socket under it).

@preconcurrency import Glibc
import COpenSSL
import NetLifeEvent

enum OpenSSLCalls {
    /// Takes the first error of OpenSSL's queue and empties it; nil when the queue is empty. The
    /// corresponding C functions are `ERR_get_error`, `ERR_error_string_n` and `ERR_clear_error`.
    static func takeQueuedError() -> OpenSSLError? {
        let code = ERR_get_error()
        guard code != 0 else { return nil }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        ERR_clear_error()
        let bytes = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return OpenSSLError(code: UInt(code), text: String(decoding: bytes, as: UTF8.self))
    }

    /// The error of a failed call to `function`: OpenSSL's queued error, else errno, else EPROTO.
    static func failure(_ function: String) -> SystemError {
        let error = Errno.current
        if let queued = takeQueuedError() { return SystemError(function, openSSL: queued) }
        return SystemError(function, error.rawValue == 0 ? Errno(rawValue: EPROTO) : error)
    }

    /// Calls an OpenSSL function that returns 1 on success.
    static func check(_ function: String, _ call: () -> CInt) throws(SystemError) {
        ERR_clear_error()
        errno = 0
        guard call() == 1 else { throw failure(function) }
    }

    /// Calls an OpenSSL function that returns a pointer, NULL on failure.
    static func make<Pointer>(_ function: String, _ call: () -> Pointer?) throws(SystemError) -> Pointer {
        ERR_clear_error()
        errno = 0
        if let pointer = call() { return pointer }
        throw failure(function)
    }
}
