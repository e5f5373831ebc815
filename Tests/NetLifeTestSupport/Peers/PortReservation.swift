#if canImport(Testing)   // built only for the tests: see Package.swift
// Ports held by the test itself: a reservation that a config can name before netlifed listens on it, and a
// squatter bound without SO_REUSEADDR that shows whether anyone else holds a port.

import Foundation

/// A socket of the test bound to 127.0.0.1:`port` without SO_REUSEADDR (so its bind fails if anyone holds
/// the port), listening if asked.
public struct TCPSquatter {
    /// The squatting socket.
    public let fd: Int32
    /// Whether the bind (and the listen, if asked) succeeded.
    public let bound: Bool

    /// Binds 127.0.0.1:`port`, and listens if `listening`.
    public init(port: UInt16, listening: Bool = false) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let fd = self.fd
        bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        } && (!listening || listen(fd, 1) == 0)
    }

    /// Closes the socket.
    public func close() { Foundation.close(fd) }
}

/// A port that a config names before netlifed opens the listener (a test that checks the port while nothing
/// listens on it yet): a TCP socket bound to `127.0.0.1:0` with SO_REUSEADDR that never listens. While it is
/// held, connects to the port are refused, no one else's bind takes the port, and netlifed, whose listeners set
/// SO_REUSEADDR too, can still bind and listen on it. This replaces picking a port by binding and closing one,
/// which races with every other test.
public final class PortReservation {
    /// The reserved port.
    public let port: UInt16
    private let fd: Int32

    /// Reserves a port from the kernel on 127.0.0.1.
    public init() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        precondition(fd >= 0, "socket: \(String(cString: strerror(errno)))")
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        precondition(bound, "cannot bind 127.0.0.1:0: \(String(cString: strerror(errno)))")
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    /// Gives the port back.
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
