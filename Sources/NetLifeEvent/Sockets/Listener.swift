// A listening socket served by libevent's evconnlistener: accepts in a loop until EAGAIN, hands each new
// non-blocking, close-on-exec descriptor to the owner, and reports accept errors it cannot retry.

@preconcurrency import Glibc
internal import CLibevent

/// A socket accepted by a `Listener`: the owner takes the descriptor.
public struct AcceptedSocket {
    /// The connected, non-blocking descriptor. Its owner must close it.
    public var fd: CInt
    /// The peer's address as the kernel gave it; formatted only when asked for (`peer`), which is rare.
    private var address: sockaddr_storage?

    init(fd: CInt, peer: UnsafePointer<sockaddr>?) {
        self.fd = fd
        guard let peer else { return }
        var storage = sockaddr_storage()
        let length = peer.pointee.sa_family == sa_family_t(AF_INET6) ? MemoryLayout<sockaddr_in6>.size
            : peer.pointee.sa_family == sa_family_t(AF_INET) ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_un>.size
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: peer, count: length)) }
        address = storage
    }

    /// The peer's address (an empty Unix path for unnamed Unix clients).
    public var peer: SocketAddress {
        guard var storage = address else { return .unix("") }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) }
        } ?? .unix("")
    }
}

/// A TCP or Unix-stream listening socket on the loop.
///
/// Listening and accepting are two steps: once `listen` returns the kernel completes connections into the
/// backlog, and `connect` succeeds; the socket is registered with the loop (`evconnlistener_new`, one
/// `epoll_ctl`) when accepting starts. A listener made with `startAccepting: false` listens without
/// accepting until `startAccepting()`, so that an app's `foreground` can reply once its 1,000 sockets listen
/// and register them right after (`AppSockets.startAccepting(after:on:)`).
public final class Listener {
    private unowned let loop: EventLoop
    /// libevent's listener, once accepting.
    private var listener: OpaquePointer?
    /// The listening descriptor while it does not accept yet; -1 once libevent's listener holds it, or
    /// after `close()`.
    private var idleDescriptor: CInt = -1
    /// Where the loop keeps this object (`LoopOwned`).
    var loopSlot: Int32 = -1
    private let onAccept: (AcceptedSocket) -> Void
    private let onError: (SystemError) -> Void
    /// The address the socket is bound to, with the real port.
    public let address: SocketAddress
    /// Whether accepting is paused (`pause()`), for example while descriptors are exhausted.
    public private(set) var isPaused = false

    /// Binds and listens on `address`, and starts accepting.
    ///
    /// - Parameters:
    ///   - backlog: the kernel's accept queue length.
    ///   - unixMode: the permissions a Unix socket is created with.
    ///   - onAccept: called on the loop thread for each accepted connection.
    ///   - onError: called when `accept` fails with an error that retrying cannot fix (EMFILE, ENFILE,
    ///     ENOBUFS, ENOMEM). The listener stays enabled; the owner decides whether to pause it.
    /// The corresponding C function is `evconnlistener_new`.
    public convenience init(loop: EventLoop, address: SocketAddress, backlog: CInt = 511, unixMode: UInt32 = 0o600,
                            onAccept: @escaping (AcceptedSocket) -> Void,
                            onError: @escaping (SystemError) -> Void) throws(SystemError) {
        try self.init(loop: loop, address: address, backlog: backlog, unixMode: unixMode, prepared: nil,
                      startAccepting: true, onAccept: onAccept, onError: onError)
    }

    /// The same, binding `prepared` (a socket made ahead for `address`, see `PreparedSocket`) instead of a
    /// new socket when it is not nil; with `startAccepting` false the socket listens, and accepting waits for
    /// `startAccepting()`.
    public init(loop: EventLoop, address: SocketAddress, backlog: CInt = 511, unixMode: UInt32 = 0o600,
                prepared: consuming PreparedSocket?, startAccepting: Bool,
                onAccept: @escaping (AcceptedSocket) -> Void,
                onError: @escaping (SystemError) -> Void) throws(SystemError) {
        loop.assertInLoop()
        self.loop = loop
        self.onAccept = onAccept
        self.onError = onError
        let (fd, bound) = try SocketCalls.listen(on: address, backlog: backlog, unixMode: unixMode, prepared: prepared)
        self.address = bound
        idleDescriptor = fd
        if startAccepting {
            do {
                try self.startAccepting()
            } catch {
                SocketCalls.close(fd)
                throw error
            }
        }
        loop.retain(self)
    }

    /// Registers the listening socket with the loop: connections are accepted from the next loop turn (those
    /// the kernel completed meanwhile first), or after `resume()` if the listener is paused. Nothing happens
    /// when it accepts already or is closed. It fails only when memory is exhausted; the socket still listens.
    /// The corresponding C function is `evconnlistener_new`.
    public func startAccepting() throws(SystemError) {
        guard listener == nil, idleDescriptor >= 0 else { return }
        let fd = idleDescriptor
        let context = Unmanaged.passUnretained(self).toOpaque()
        // Backlog 0: the socket is already listening. CLOSE_ON_FREE: evconnlistener_free closes it.
        var flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC
        if isPaused { flags |= LEV_OPT_DISABLED }
        let listener = try libevent("evconnlistener_new") { evconnlistener_new(loop.base, connectionArrived, context, UInt32(flags), 0, fd) }
        evconnlistener_set_error_cb(listener, acceptFailed)
        self.listener = listener
        idleDescriptor = -1
    }

    /// Stops accepting; connections wait in the kernel's queue. The corresponding C function is
    /// `evconnlistener_disable`.
    public func pause() {
        guard isOpen, !isPaused else { return }
        if let listener { evconnlistener_disable(listener) }
        isPaused = true
    }

    /// Accepts again after `pause()`. The corresponding C function is `evconnlistener_enable`.
    public func resume() {
        guard isOpen, isPaused else { return }
        if let listener { evconnlistener_enable(listener) }
        isPaused = false
    }

    /// Whether the listener is still open (listening, accepting or not).
    public var isOpen: Bool { listener != nil || idleDescriptor >= 0 }

    /// Whether the socket is registered with the loop (`startAccepting()`).
    public var isAccepting: Bool { listener != nil }

    /// Closes the listening socket: from now on the kernel refuses new connections (ECONNREFUSED), and the
    /// connections still in its accept queue are reset. A Unix socket's file is removed.
    public func close() {
        if let listener {
            evconnlistener_free(listener)
            self.listener = nil
        } else if idleDescriptor >= 0 {
            SocketCalls.close(idleDescriptor)
            idleDescriptor = -1
        } else {
            return
        }
        if case .unix(let path) = address { unlink(path) }
        loop.release(self)
    }

    fileprivate func accepted(fd: CInt, peer: UnsafeMutablePointer<sockaddr>?) {
        loop.readContext.callbackBegins()
        onAccept(AcceptedSocket(fd: fd, peer: peer.map { UnsafePointer($0) }))
    }

    fileprivate func failed(_ error: Errno) {
        loop.readContext.callbackBegins()
        onError(SystemError("accept", error))
    }
}

private func connectionArrived(_: OpaquePointer?, _ fd: CInt, _ peer: UnsafeMutablePointer<sockaddr>?, _: CInt, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<Listener>.fromOpaque(context!).takeUnretainedValue().accepted(fd: fd, peer: peer)
}

private func acceptFailed(_ listener: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    let error = Errno.current
    Unmanaged<Listener>.fromOpaque(context!).takeUnretainedValue().failed(error)
}

extension Listener: LoopSource {
    var closeRank: Int { 2 }
    func closeForLoopShutdown() { close() }
}
