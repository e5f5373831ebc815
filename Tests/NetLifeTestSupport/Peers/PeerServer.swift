#if canImport(Testing)   // built only for the tests: see Package.swift
// The far end of a data socket in integration tests: a TCP server on 127.0.0.1 with a port from the
// kernel (read back with getsockname), whose accepted connections are `Peer`s that report exactly what the
// kernel said (bytes, FIN, RST).

import Foundation
import Testing

/// A listening TCP socket on 127.0.0.1, port 0.
public final class PeerServer {
    /// The listening socket.
    public let fd: Int32
    /// The port the kernel chose.
    public let port: UInt16

    /// Listens on 127.0.0.1 with a port from the kernel; nil when it cannot.
    public init?() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let port = UInt16(bigEndian: address.sin_port)
        guard fd >= 0, bound == 0, listen(fd, 16) == 0, port != 0 else {
            if fd >= 0 { Foundation.close(fd) }
            return nil
        }
        self.fd = fd
        self.port = port
    }

    /// The address a `[socket]` section connects to.
    public var address: String { "127.0.0.1:\(port)" }

    /// Waits up to `timeout` for a connection.
    public func accept(timeout: TimeInterval = 5) -> Peer? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) == 1 else { return nil }
        let client = Foundation.accept(fd, nil, nil)
        return client >= 0 ? Peer(fd: client) : nil
    }

    /// Closes the listening socket.
    /// Closes the socket once: a second close would close whatever descriptor another test has got since
    /// under the same number.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        Foundation.close(fd)
    }
    private var isClosed = false
}
#endif
