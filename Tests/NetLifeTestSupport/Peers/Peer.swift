#if canImport(Testing)   // built only for the tests: see Package.swift
// A network peer for tests: blocking TCP sockets with timeouts that report exactly what the kernel said
// (ECONNREFUSED, FIN, RST, bytes), with reads until a text or an end, sends that wait for room, a reset, and a
// peer with a small fixed receive window.

import Foundation
import Testing

/// What a connect() attempt got.
public enum ConnectResult: Equatable {
    case connected(Int32)
    case failed(Int32)
}

/// Connects to `host`:`port` (127.0.0.1 unless given) and returns the socket or the errno.
public func connectTCP(host: String = "127.0.0.1", port: UInt16, timeout: TimeInterval = 2) -> ConnectResult {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    precondition(fd >= 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr(host)
    var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - floor(timeout)) * 1_000_000))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if result == 0 {
        // A connect to a closed port in the ephemeral range can, rarely, become a TCP self-connect (the kernel
        // picked the same source port): that is what a refused connect looks like here.
        var local = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        if UInt16(bigEndian: local.sin_port) == port && local.sin_addr.s_addr == address.sin_addr.s_addr {
            close(fd)
            return .failed(ECONNREFUSED)
        }
        return .connected(fd)
    }
    let error = errno
    close(fd)
    return .failed(error)
}

/// Connects to 127.0.0.1:`port` and closes at once; returns 0 or the errno (ECONNREFUSED: nothing listens).
public func tcpConnect(port: UInt16) -> Int32 {
    switch connectTCP(port: port) {
    case .connected(let fd):
        close(fd)
        return 0
    case .failed(let error):
        return error
    }
}

/// A connected test peer.
public final class Peer {
    /// The peer's socket.
    public let fd: Int32

    /// A peer on a connected socket, which it now owns.
    public init(fd: Int32) { self.fd = fd }

    /// Connects or records an issue and returns nil.
    public static func connect(host: String = "127.0.0.1", port: UInt16, sourceLocation: SourceLocation = #_sourceLocation) -> Peer? {
        switch connectTCP(host: host, port: port) {
        case .connected(let fd): return Peer(fd: fd)
        case .failed(let error):
            Issue.record("connect to port \(port) failed: \(String(cString: strerror(error)))", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// Sends `text` (what one send takes).
    public func send(_ text: String) {
        var bytes = Array(text.utf8)
        _ = Foundation.send(fd, &bytes, bytes.count, Int32(MSG_NOSIGNAL))
    }

    /// Sends `bytes` (what one send takes); returns what send returned.
    public func send(bytes: [UInt8]) -> Int {
        var bytes = bytes
        return Foundation.send(fd, &bytes, bytes.count, Int32(MSG_NOSIGNAL))
    }

    /// What one read saw.
    public enum ReadResult: Equatable {
        case bytes([UInt8])
        /// The peer sent FIN.
        case endOfStream
        /// The read failed; ECONNRESET means RST.
        case error(Int32)
        /// Nothing arrived within the timeout.
        case timedOut
    }

    /// Waits up to `timeout` for data, FIN or an error.
    public func read(timeout: TimeInterval = 2, max: Int = 65536) -> ReadResult {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, Int32(timeout * 1000))
        if ready == 0 { return .timedOut }
        var buffer = [UInt8](repeating: 0, count: max)
        let count = recv(fd, &buffer, max, Int32(MSG_DONTWAIT))
        if count > 0 { return .bytes(Array(buffer[0..<count])) }
        if count == 0 { return .endOfStream }
        return .error(errno)
    }

    /// Reads until `count` bytes arrived (or something else happened) and returns them as text.
    public func readText(count: Int, timeout: TimeInterval = 2) -> String {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while received.count < count && Date() < deadline {
            guard case .bytes(let bytes) = read(timeout: max(0.01, deadline.timeIntervalSinceNow)) else { break }
            received += bytes
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Sends `text` and returns what comes back (the echo).
    public func roundTrip(_ text: String, timeout: TimeInterval = 2) -> String {
        send(text)
        return readText(count: text.utf8.count, timeout: timeout)
    }

    /// Closes the socket.
    /// Closes the socket once: a second close would close whatever descriptor another test has got since
    /// under the same number.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        Foundation.close(fd)
    }
    private var isClosed = false
}

extension Peer {
    /// Reads until the text received contains `text` (or `timeout` passes); returns everything received.
    public func readUntil(_ text: String, timeout: TimeInterval = 3) -> String {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard case .bytes(let bytes) = read(timeout: max(0.01, deadline.timeIntervalSinceNow)) else { break }
            received += bytes
            if String(decoding: received, as: UTF8.self).contains(text) { break }
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Reads until what arrived contains `text`, the peer ends, or `timeout` passes; returns all of it.
    public func read(untilContaining text: String, timeout: TimeInterval = 3) -> String {
        readUntil(text, timeout: timeout)
    }

    /// The first event that is not bytes (FIN, an error, or a timeout), skipping bytes that arrive first.
    public func readEnd(timeout: TimeInterval) -> ReadResult {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let result = read(timeout: max(0, deadline.timeIntervalSinceNow))
            if case .bytes = result, Date() < deadline { continue }
            return result
        }
    }
}

/// A TCP peer whose receive buffer is small and fixed (set before connect, so the kernel does not grow it):
/// what the daemon writes then piles up in its own buffers instead of the kernel's.
public func connectSmallWindowPeer(port: UInt16, receiveBuffer: Int32 = 16384) -> Peer? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    var size = receiveBuffer
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard result == 0 else { close(fd); return nil }
    return Peer(fd: fd)
}

extension Peer {
    /// Sends all of `bytes`, waiting for room up to `timeout`; returns how many went out.
    public func sendAll(_ bytes: [UInt8], timeout: TimeInterval = 10) -> Int {
        sendAllBytes(fd: fd, bytes, timeout: timeout)
    }

    /// Closes with SO_LINGER 0, so that the daemon sees a reset.
    public func reset() {
        var linger = Foundation.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Foundation.linger>.size))
        Foundation.close(fd)
    }
}

/// Sends all of `bytes` on a socket, waiting for room up to `timeout`; returns how many went out.
public func sendAllBytes(fd: Int32, _ bytes: [UInt8], timeout: TimeInterval) -> Int {
    var offset = 0
    let deadline = Date().addingTimeInterval(timeout)
    while offset < bytes.count && Date() < deadline {
        let sent = bytes[offset...].withUnsafeBytes {
            Foundation.send(fd, $0.baseAddress, min($0.count, 1 << 16), Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        if sent > 0 { offset += sent; continue }
        if sent < 0 && errno != EAGAIN && errno != EINTR { break }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        _ = poll(&poller, 1, 50)
    }
    return offset
}

/// Calls `body` with `path` as a Unix socket address.
public func withUnixAddress<Result>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.utf8) }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}
#endif
