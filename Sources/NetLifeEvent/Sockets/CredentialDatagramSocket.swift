// A Unix datagram socket that receives with the sender's credentials (SO_PASSCRED): the kernel writes the
// sending process's pid, uid and gid into every datagram, so a receiver can tell who sent it without trusting
// a word of it. netlifed gives one to each process app's program as its NOTIFY_SOCKET (systemd's notify
// protocol). It is bound to an abstract name (Linux's `@` namespace): nothing on disk to create, protect or
// remove, and reachable by a program that runs as another user without a directory it may enter; anyone in
// the network namespace may send to it, which is why every datagram's sender is checked by its credentials.
// Reads never block, are bounded in size (a longer datagram is dropped whole) and descriptors a sender passes
// along are closed on arrival.

@preconcurrency import Glibc
internal import CLibevent

/// One datagram and who sent it.
public struct CredentialDatagram: Equatable, Sendable {
    /// Its bytes (empty when it was too long: see `truncated`).
    public var bytes: [UInt8]
    /// The sender's pid as the kernel saw it (0 if none came).
    public var senderPID: Int32
    public var senderUID: UInt32
    /// Whether it was longer than the receive buffer (its bytes are then dropped).
    public var truncated: Bool
}

/// A bound `AF_UNIX` `SOCK_DGRAM` socket with SO_PASSCRED, non-blocking, close-on-exec. Loop thread only.
public final class CredentialDatagramSocket {
    /// The socket's descriptor (-1 once closed).
    public private(set) var descriptor: CInt
    /// The name as NOTIFY_SOCKET spells it: `@` and the abstract name.
    public let address: String

    /// Binds a new socket to the abstract name `name` (without its leading NUL; at most 107 bytes). The
    /// corresponding C functions are `socket`, `setsockopt(SO_PASSCRED)` and `bind`.
    public init(abstractName name: String) throws(SystemError) {
        let bytes = Array(name.utf8)
        var address = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, !bytes.contains(0) else {
            throw SystemError("bind(@\(name.prefix(64)))", Errno(rawValue: ENAMETOOLONG))
        }
        let fd = try sys("socket") { socket(AF_UNIX, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue) | CInt(SOCK_NONBLOCK.rawValue), 0) }
        do {
            var on: CInt = 1
            _ = try sys("setsockopt(SO_PASSCRED)") { setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<CInt>.size)) }
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw[0] = 0
                for (index, byte) in bytes.enumerated() { raw[index + 1] = byte }
            }
            // An abstract name's length is exact: no terminating NUL.
            let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + bytes.count)
            _ = try withUnsafePointer(to: &address) { pointer throws(SystemError) in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress throws(SystemError) in
                    try sys("bind(@\(name))") { bind(fd, socketAddress, length) }
                }
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        descriptor = fd
        self.address = "@" + name
    }

    /// The next datagram, at most `limit` bytes (a longer one comes back `truncated`, without its bytes), or nil
    /// when none waits. The corresponding C function is `recvmsg`.
    public func receive(limit: Int) throws(SystemError) -> CredentialDatagram? {
        guard descriptor >= 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: max(1, limit))
        var sender = netlife_peer_credentials()
        var truncated: CInt = 0
        let count: Int
        do {
            count = try sys("recvmsg") {
                buffer.withUnsafeMutableBytes { netlife_recv_with_credentials(descriptor, $0.baseAddress, $0.count, &sender, &truncated) }
            }
        } catch {
            if error.errno == .wouldBlock { return nil }
            throw error
        }
        let whole = truncated == 0 && count <= buffer.count
        return CredentialDatagram(bytes: whole ? Array(buffer.prefix(count)) : [], senderPID: sender.pid,
                                  senderUID: sender.uid, truncated: !whole)
    }

    /// Closes the socket (its abstract name is free again). Calling it again does nothing.
    public func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }
}
