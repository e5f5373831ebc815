// Socket helpers in the manner of redis' anet.c: each one does one job and reports which syscall failed.

@preconcurrency import Glibc
internal import CLibevent

/// The credentials of the process at the other end of a Unix socket, as the kernel recorded them at
/// `connect()` time (SO_PEERCRED).
public struct PeerCredentials: Equatable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// The supplementary groups the peer had when it connected (SO_PEERGROUPS).
    public var groups: [UInt32] = []

    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }
}

/// A stream socket made before the listener that binds it: `socket()` (with SO_REUSEADDR for TCP), not
/// bound, so it reserves no port and accepts nothing, and its address already in the kernel's form. A
/// listener closed on `background` gets one while the app waits in the background, and its reopen on
/// `foreground` is then `bind` and `listen` alone: `socket()` is the dearest of a reopen's calls (it
/// allocates the kernel's socket, inode and file). Closed when dropped.
public struct PreparedSocket: ~Copyable {
    /// The descriptor, -1 once handed over (`release()`).
    private var fd: CInt
    /// The address it is made for.
    public let address: SocketAddress
    private var storage = sockaddr_storage()
    private var length: socklen_t = 0

    /// A socket for `address`. The corresponding C functions are `socket` and `setsockopt(SO_REUSEADDR)`.
    public init(for address: SocketAddress) throws(SystemError) {
        let family = address.family
        let fd = try sys("socket") { socket(family, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0) }
        var storage = sockaddr_storage()
        var length: socklen_t = 0
        do {
            if family != AF_UNIX {
                var one: CInt = 1
                try sys("setsockopt(SO_REUSEADDR)") { setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size)) }
            }
            try address.withSockAddr { pointer, count throws(SystemError) in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: Int(count))) }
                length = count
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
        self.address = address
        self.storage = storage
        self.length = length
    }

    /// Binds the socket to its address. The corresponding C function is `bind`.
    fileprivate func bind() throws(SystemError) {
        var storage = storage
        let fd = fd, length = length
        try withUnsafePointer(to: &storage) { pointer throws(SystemError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address throws(SystemError) in
                _ = try sys("bind") { Glibc.bind(fd, address, length) }
            }
        }
    }

    /// Hands the descriptor over; the caller closes it.
    fileprivate consuming func release() -> CInt {
        let fd = self.fd
        self.fd = -1
        return fd
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }
}

/// Socket system calls used by netlife.
public enum SocketCalls {
    /// Creates a bound, listening, non-blocking stream socket and returns it with the address the kernel
    /// bound (the real port when the requested port was 0).
    ///
    /// TCP sockets get SO_REUSEADDR so that a listener reopened after `background` binds its old port while
    /// closed connections still sit in TIME_WAIT. A Unix socket is bound under a umask that leaves exactly
    /// `unixMode`, so it never exists with wider permissions (no chmod after bind).
    /// The corresponding C functions are `socket`, `setsockopt`, `bind`, `listen` and `getsockname` (port 0).
    ///
    /// A `prepared` socket made for `address` is bound instead of a new one: the listener then costs only
    /// `bind`, `listen` (and the loop's `epoll_ctl`).
    public static func listen(on address: SocketAddress, backlog: CInt, unixMode: UInt32 = 0o600) throws(SystemError) -> (fd: CInt, bound: SocketAddress) {
        try listen(on: address, backlog: backlog, unixMode: unixMode, prepared: nil)
    }

    /// `listen(on:backlog:unixMode:)` with a socket made ahead, or nil. (No default argument: with Swift
    /// 6.3.1 a defaulted `nil` for this noncopyable parameter, called from another module, crashed in memmove
    /// on a null pointer; an explicit `nil` does not.)
    public static func listen(on address: SocketAddress, backlog: CInt, unixMode: UInt32 = 0o600,
                              prepared: consuming PreparedSocket?) throws(SystemError) -> (fd: CInt, bound: SocketAddress) {
        var fd: CInt = -1
        do {
            // A prepared socket made for another address (or none) is replaced by a new one.
            let socket: PreparedSocket
            if let ready = prepared.take(), ready.address == address { socket = ready } else { socket = try PreparedSocket(for: address) }
            if case .unix = address {
                let previous = umask(~unixMode & 0o777)
                defer { umask(previous) }
                try socket.bind()
            } else {
                try socket.bind()
            }
            fd = socket.release()
            try sys("listen") { Glibc.listen(fd, backlog) }
            // Only port 0 needs the kernel's answer: a listener reopened on `foreground` already knows its
            // port (the address it kept from the first open), and 1,000 reopens skip 1,000 getsockname calls.
            guard address.port == 0 else { return (fd, address) }
            return (fd, try localAddress(of: fd))
        } catch {
            if fd >= 0 { Glibc.close(fd) }
            throw error
        }
    }

    /// The local address of a socket. The corresponding C function is `getsockname`.
    public static func localAddress(of fd: CInt) throws(SystemError) -> SocketAddress {
        try address(of: fd, "getsockname", getsockname)
    }

    /// The address of a connected socket's peer. The corresponding C function is `getpeername`.
    public static func peerAddress(of fd: CInt) throws(SystemError) -> SocketAddress {
        try address(of: fd, "getpeername", getpeername)
    }

    /// An address the kernel writes for `fd` through `call` (getsockname or getpeername).
    private static func address(of fd: CInt, _ name: String,
                                _ call: (CInt, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?) -> CInt) throws(SystemError) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        try withUnsafeMutablePointer(to: &storage) { pointer throws(SystemError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address throws(SystemError) in
                _ = try sys(name) { call(fd, address, &length) }
            }
        }
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) ?? .unix("") }
        }
    }

    /// The credentials of the peer of a connected Unix socket. The corresponding C call is
    /// `getsockopt(SO_PEERCRED)`.
    public static func peerCredentials(of fd: CInt) throws(SystemError) -> PeerCredentials {
        var credentials = netlife_peer_credentials()
        try sys("getsockopt(SO_PEERCRED)") { netlife_get_peer_credentials(fd, &credentials) }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: try peerGroups(of: fd))
    }

    /// The supplementary groups of a Unix socket's peer as they were when it connected: read from the
    /// kernel's record of the connection, not from /proc (whose pid may be another process by then).
    public static func peerGroups(of fd: CInt) throws(SystemError) -> [UInt32] {
        var groups = [gid_t](repeating: 0, count: 64)
        var count = CInt(groups.count)
        if netlife_get_peer_groups(fd, &groups, &count) != 0 {
            guard errno == ERANGE, count > 0, count <= 65536 else { throw SystemError("getsockopt(SO_PEERGROUPS)", Errno.current) }
            groups = [gid_t](repeating: 0, count: Int(count))
            try sys("getsockopt(SO_PEERGROUPS)") { netlife_get_peer_groups(fd, &groups, &count) }
        }
        return Array(groups.prefix(Int(count)))
    }

    /// Turns off Nagle's algorithm, so that small request/response exchanges are not delayed.
    public static func setNoDelay(_ fd: CInt) {
        var one: CInt = 1
        _ = try? sys("setsockopt(TCP_NODELAY)") { setsockopt(fd, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size)) }
    }

    /// Dissolves a TCP connection without closing the descriptor: the peer gets RST, and the next read on
    /// `fd` fails. This emulates iOS socket resource reclaim. The corresponding C call is
    /// `connect(fd, AF_UNSPEC)`.
    public static func disconnect(_ fd: CInt) throws(SystemError) {
        try sys("connect(AF_UNSPEC)") { netlife_disconnect(fd) }
    }

    /// Connects a blocking Unix stream socket to `path`, for command-line clients such as netlifectl.
    /// The corresponding C functions are `socket` and `connect`.
    public static func connectUnixBlocking(path: String) throws(SystemError) -> CInt {
        let fd = try sys("socket") { socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0) }
        do {
            _ = try SocketAddress.unix(path).withSockAddr { pointer, length throws(SystemError) in
                try sys("connect") { Glibc.connect(fd, pointer, length) }
            }
            return fd
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Makes `fd` non-blocking, if it is not already (one `fcntl(F_GETFL)` when it is). A descriptor adopted
    /// from elsewhere (a socketpair end, one inherited or handed over) may be blocking, and one blocking read
    /// or write on the loop holds every app. The corresponding C function is `fcntl`.
    public static func makeNonBlocking(_ fd: CInt) throws(SystemError) {
        let flags = try sys("fcntl(F_GETFL)") { fcntl(fd, F_GETFL) }
        guard flags & O_NONBLOCK == 0 else { return }
        _ = try sys("fcntl(F_SETFL, O_NONBLOCK)") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    /// Whether a connection waits in the accept queue of the listening socket `fd` (it is readable), without
    /// waiting. The corresponding C function is `poll` with a zero timeout.
    public static func hasPendingConnection(_ fd: CInt) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0 && descriptor.revents & Int16(POLLIN) != 0
    }

    /// Closes a descriptor. EINTR is not retried: on Linux the descriptor is released even then.
    public static func close(_ fd: CInt) {
        _ = Glibc.close(fd)
    }
}

extension SocketCalls {
    /// Sends one datagram to the Unix datagram socket at `path` (a leading `@` names an abstract socket),
    /// as sd_notify does, without blocking: a receiver whose queue is full gets EAGAIN, not a stalled loop.
    /// The corresponding C functions are `socket` and `sendto`.
    public static func sendUnixDatagram(to path: String, _ message: String) throws(SystemError) {
        let fd = try sys("socket") { socket(AF_UNIX, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue) | CInt(SOCK_NONBLOCK.rawValue), 0) }
        defer { Glibc.close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { throw SystemError("sendto(\(path))", Errno(rawValue: ENAMETOOLONG)) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            if pathBytes.first == UInt8(ascii: "@") { raw[0] = 0 }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == UInt8(ascii: "@") ? 0 : 1))
        var bytes = Array(message.utf8)
        _ = try withUnsafePointer(to: &address) { pointer throws(SystemError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer throws(SystemError) in
                try sys("sendto") { sendto(fd, &bytes, bytes.count, CInt(MSG_NOSIGNAL) | CInt(MSG_DONTWAIT), sockaddrPointer, length) }
            }
        }
    }
}
