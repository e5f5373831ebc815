// An outbound TCP (or Unix) connect that never blocks the loop: a non-blocking socket, connect(), and the
// loop tells when it has completed (the socket turns writable; SO_ERROR says how it went). The result is a
// connected descriptor for `Connection`, or the error.

@preconcurrency import Glibc
internal import CLibevent

/// One connect attempt. It reports once, on the loop thread, unless cancelled first.
public final class OutboundConnector {
    private unowned let loop: EventLoop
    private var fd: CInt
    private var watcher: IOWatcher?
    private var timer: EventTimer?
    private var handler: ((Result<CInt, SystemError>) -> Void)?
    /// Where it connects.
    public let address: SocketAddress

    /// Starts connecting to `address`; `handler` gets the connected, non-blocking descriptor (the caller
    /// owns it from then on) or the error, at the latest after `timeout`. A failure to even start is
    /// reported the same way, on a later loop turn, never from inside `init`.
    /// The corresponding C functions are `socket`, `connect` and `getsockopt(SO_ERROR)`.
    public init(loop: EventLoop, address: SocketAddress, timeout: Duration = .seconds(10),
                _ handler: @escaping (Result<CInt, SystemError>) -> Void) {
        loop.assertInLoop()
        self.loop = loop
        self.address = address
        self.handler = handler
        self.fd = -1
        do {
            fd = try sys("socket") { socket(address.family, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0) }
            // Done at once (a Unix socket) or in progress: either way the socket turns writable.
            try address.withSockAddr { pointer, length throws(SystemError) in
                if Glibc.connect(fd, pointer, length) == 0 || errno == EINPROGRESS || errno == EINTR { return }
                throw SystemError("connect", Errno.current)
            }
            let watcher = IOWatcher(loop: loop, descriptor: fd) { [weak self] _ in self?.completed() }
            self.watcher = watcher
            try watcher.watch(.writable)
            timer = loop.schedule(after: timeout) { [weak self] in
                self?.finish(.failure(SystemError("connect", Errno(rawValue: ETIMEDOUT))))
            }
        } catch {
            // Reported on the next turn, so that the owner has finished setting up when it hears.
            let failure = error
            timer = loop.schedule(after: .zero) { [weak self] in self?.finish(.failure(failure)) }
        }
    }

    private func completed() {
        var error: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) < 0 { error = errno }
        if error == 0 {
            finish(.success(fd))
        } else {
            finish(.failure(SystemError("connect", Errno(rawValue: error))))
        }
    }

    private func finish(_ result: Result<CInt, SystemError>) {
        guard let handler else { return }
        self.handler = nil
        watcher?.close()
        watcher = nil
        timer?.close()
        timer = nil
        if case .failure = result, fd >= 0 { SocketCalls.close(fd) }
        fd = -1
        handler(result)
    }

    /// Gives up: the socket is closed and the handler is not called.
    public func cancel() {
        handler = nil
        watcher?.close()
        watcher = nil
        timer?.close()
        timer = nil
        if fd >= 0 { SocketCalls.close(fd) }
        fd = -1
    }
}
