#if canImport(Testing)   // built only for the tests: see Package.swift
// What the unit tests of several modules share: running a loop until a condition holds, bounded in time (or,
// for a manual clock, serving its sockets' I/O alone), a bound TCP socket, and socket pairs with helpers to
// read, write and check what crossed them.

import Glibc
import NetLifeEvent

/// Runs `loop` until `condition` holds or `timeout` passes; returns whether the condition held.
@discardableResult
public func runLoop(_ loop: EventLoop, timeout: Duration = .seconds(5), until condition: @escaping () -> Bool) -> Bool {
    if condition() { return true }
    let deadline = MonotonicTime.now() + timeout
    var poller: EventTimer?
    poller = EventTimer(loop: loop) {
        if condition() || MonotonicTime.now() >= deadline { loop.stop() } else { poller?.arm(after: .milliseconds(1)) }
    }
    poller?.arm(after: .milliseconds(1))
    try? loop.run()
    poller?.close()
    poller = nil
    return condition()
}

/// Serves what a loop's sockets have ready until `condition` holds: non-blocking turns only, no waiting and no
/// time passing (for a loop with a manual clock; a loopback connect is answered within a few turns).
@discardableResult
public func serve(_ loop: EventLoop, until condition: () -> Bool) -> Bool {
    for _ in 0..<10_000 {
        if condition() { return true }
        loop.runOnce()
    }
    return condition()
}

/// A TCP socket bound to a port of 127.0.0.1 the kernel chose, not listening: the kernel refuses connections
/// to it until it listens. Nil when a call fails.
public func boundTCPSocket() -> (fd: CInt, address: SocketAddress)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    var local = sockaddr_in()
    local.sin_family = sa_family_t(AF_INET)
    local.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &local) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0, let address = try? SocketCalls.localAddress(of: fd) else {
        close(fd)
        return nil
    }
    return (fd, address)
}

/// A connected pair of non-blocking Unix stream sockets.
public func socketPair() -> (CInt, CInt) {
    var fds: [CInt] = [-1, -1]
    let result = socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &fds)
    precondition(result == 0)
    return (fds[0], fds[1])
}

/// A connected pair of blocking Unix stream sockets, as a program's NETLIFE_EVENTS pair is made.
public func blockingSocketPair() -> (CInt, CInt) {
    var fds: [CInt] = [-1, -1]
    let result = socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &fds)
    precondition(result == 0)
    return (fds[0], fds[1])
}

/// Reads what is available on a non-blocking descriptor (on a blocking one: what one read returns).
public func readAvailable(_ fd: CInt) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: 65536)
    let count = read(fd, &buffer, buffer.count)
    return count > 0 ? Array(buffer[0..<count]) : []
}

/// Writes all of `text` to a descriptor.
public func writeAll(_ fd: CInt, _ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

/// `count` bytes of a pattern that shows any reordering, loss or repetition.
public func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) } }
#endif
