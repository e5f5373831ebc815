#if canImport(Testing)   // built only for the tests: see Package.swift
// What the unit tests of several modules share: running a loop until a condition holds, bounded in time, and
// socket pairs with helpers to read, write and check what crossed them.

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
