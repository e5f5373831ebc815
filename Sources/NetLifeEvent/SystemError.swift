// Errors of C calls, and the helpers every C call of netlife goes through.
//
// As in swift-nio and swift-system: a failing call throws an error that names the function and carries
// errno; errnos that can only mean a bug in netlife (EBADF, EFAULT) trap instead of being thrown.

@preconcurrency import Glibc

/// A POSIX error number, printed as `strerror` prints it.
public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: CInt
    public init(rawValue: CInt) { self.rawValue = rawValue }

    /// The calling thread's current `errno`.
    public static var current: Errno { Errno(rawValue: errno) }

    public var description: String { String(cString: strerror(rawValue)) }

    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
}

/// A C call that failed: which function, and the errno it left, or for a library that reports through an
/// error queue of its own (OpenSSL), that library's error.
public struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The C function that failed, for example `bind`.
    public var function: String
    /// The error number it reported (EPROTO for an OpenSSL error).
    public var errno: Errno
    /// OpenSSL's error, when the failing call is OpenSSL's and its error queue said why.
    public var openSSL: OpenSSLError?

    public init(_ function: String, _ errno: Errno) {
        self.function = function
        self.errno = errno
    }

    /// A failed OpenSSL call, with the first error of OpenSSL's queue.
    public init(_ function: String, openSSL: OpenSSLError) {
        self.function = function
        self.errno = Errno(rawValue: EPROTO)
        self.openSSL = openSSL
    }

    public var description: String {
        if let openSSL { return "\(function): \(openSSL)" }
        return "\(function): \(errno)"
    }

    /// What `body` throws, or nil when it returns: for a caller that reports the error as a value.
    public static func catching(_ body: () throws(SystemError) -> Void) -> SystemError? {
        do {
            try body()
            return nil
        } catch {
            return error
        }
    }
}

/// An error from OpenSSL's error queue (`ERR_get_error`), as `ERR_error_string_n` writes it. Read by the
/// module that links OpenSSL; carried here so that a failed handshake ends a connection through the same
/// `SystemError` as a failed `read`.
public struct OpenSSLError: Hashable, Sendable, CustomStringConvertible {
    /// The packed error code (library and reason).
    public var code: UInt
    /// `error:0A00010B:SSL routines::wrong version number`.
    public var text: String

    public init(code: UInt, text: String) {
        self.code = code
        self.text = text
    }

    public var description: String { text }
}

/// Calls a system call that returns -1 and sets `errno` on failure; retries on EINTR.
///
/// - Parameter function: the C function's name, carried by the error (made only when the call fails).
/// - Throws: `SystemError` naming `function` and the errno.
@discardableResult
public func sys<Result: FixedWidthInteger>(_ function: @autoclosure () -> String, _ call: () -> Result) throws(SystemError) -> Result {
    while true {
        errno = 0
        let result = call()
        if result != -1 { return result }
        let error = Errno.current
        if error == .interrupted { continue }
        let name = function()
        trapIfBug(name, error)
        throw SystemError(name, error)
    }
}

/// Calls a libevent function that returns a pointer, NULL on failure.
///
/// libevent does not always set errno, so it is cleared first; an unset errno is reported as EINVAL.
func libevent<Pointer>(_ function: String, _ call: () -> Pointer?) throws(SystemError) -> Pointer {
    errno = 0
    if let pointer = call() { return pointer }
    let error = errno == 0 ? Errno(rawValue: EINVAL) : Errno.current
    trapIfBug(function, error)
    throw SystemError(function, error)
}

/// Calls a libevent function that returns a negative number on failure.
func libevent(_ function: String, _ call: () -> CInt) throws(SystemError) {
    errno = 0
    if call() >= 0 { return }
    let error = errno == 0 ? Errno(rawValue: EINVAL) : Errno.current
    trapIfBug(function, error)
    throw SystemError(function, error)
}

/// Calls a libevent function that can fail only when memory is exhausted or netlife misuses it.
func libeventMustSucceed(_ function: String, _ call: () -> CInt) {
    errno = 0
    let result = call()
    precondition(result >= 0, "\(function) failed: \(Errno.current)")
}

/// Traps on an errno that can only mean a bug in netlife (EBADF, EFAULT).
func trapIfBug(_ function: String, _ error: Errno) {
    precondition(error.rawValue != EBADF && error.rawValue != EFAULT,
                 "\(function) failed with \(error): a bug in netlife (bad descriptor or address)")
}
