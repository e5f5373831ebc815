// netlifed's end of the lifecycle channel on a real loop and socketpair, as a program that misbehaves drives
// it: a blocking descriptor is made non-blocking (a program that never reads cannot block the loop), bytes
// already read are handed over without waiting for more, and what the session holds stays bounded however
// much a program writes.

@testable import NetLifeDaemon
import Glibc
import NetLifeEvent
import NetLifeTestSupport
import Testing

/// A socketpair whose ends are blocking, as a program's NETLIFE_EVENTS pair is made.
private func blockingPair() -> (CInt, CInt) {
    var fds: [CInt] = [-1, -1]
    _ = socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &fds)
    return (fds[0], fds[1])
}

/// Writes what the socket takes now of `bytes[offset...]`, without blocking; returns the new offset.
private func writeSome(_ fd: CInt, _ bytes: [UInt8], from offset: Int) -> Int {
    guard offset < bytes.count else { return offset }
    let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT | MSG_NOSIGNAL)) }
    return written > 0 ? offset + written : offset
}

@Suite(.timeLimit(.minutes(1)))
struct LifecycleChannelSessionTests {
    @Test func aBlockingDescriptorIsMadeNonBlockingAndAProgramThatNeverReadsCannotBlockASend() throws {
        let loop = try EventLoop()
        let (ours, program) = blockingPair()
        defer { close(program) }
        let session = try LifecycleChannelSession(loop: loop, fd: ours, onBytes: { _ in }, closed: {})
        defer { session.close() }
        #expect(fcntl(ours, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(program, F_GETFL) & O_NONBLOCK == 0, "the program's end is left as it was")
        // 2 MB of answers to a program that reads none: far more than the kernel's queue holds. Each send
        // returns (a blocking writev here would hang the test until its time limit).
        let line = String(repeating: "x", count: 99) + "\n"
        for _ in 0..<20_000 { session.send(line) }
        #expect(session.pendingBytes > 1_000_000, "what the kernel did not take waits in the session")
        #expect(session.pendingBytes < 2_000_000)
    }

    @Test func bytesAlreadyReadAreHandedOverWithoutWaitingForMore() throws {
        let loop = try EventLoop()
        let (ours, program) = socketPair()
        defer { close(program) }
        var handed: [UInt8] = []
        var largestHandOver = 0
        let session = try LifecycleChannelSession(loop: loop, fd: ours, onBytes: { bytes in
            handed += bytes
            largestHandOver = max(largestHandOver, bytes.count)
        }, closed: {})
        defer { session.close() }
        // 200,000 blank lines and a hello, written once; nothing follows them.
        let input = [UInt8](repeating: UInt8(ascii: "\n"), count: 200_000) + Array("{\"hello\":1}\n".utf8)
        var offset = 0
        let complete = runLoop(loop, timeout: .seconds(10)) {
            offset = writeSome(program, input, from: offset)
            return handed.count == input.count
        }
        #expect(complete, "handed over \(handed.count) of \(input.count) bytes")
        let inOrder = handed == input
        #expect(inOrder, "every byte handed over once, in order")
        #expect(largestHandOver <= LifecycleChannelSession.bytesPerTurn)
    }

    @Test func whatTheSessionHoldsStaysBoundedWhileAProgramWritesOneEndlessLine() throws {
        let loop = try EventLoop()
        let (ours, program) = socketPair()
        var handedCount = 0
        var largestHeld = 0
        var state = LifecycleChannelState()
        var errors = 0
        let session = try LifecycleChannelSession(loop: loop, fd: ours, onBytes: { bytes in
            handedCount += bytes.count
            errors += state.receive(bytes, now: .now()) { _ in 0 }.count
        }, closed: {})
        defer { session.close() }
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        var written = 0
        var offset = 0
        let total = 32 << 20
        let complete = runLoop(loop, timeout: .seconds(20)) {
            largestHeld = max(largestHeld, session.bufferedBytes)
            while written < total {
                let next = writeSome(program, chunk, from: offset)
                if next == offset { break }
                written += next - offset
                offset = next == chunk.count ? 0 : next
            }
            return handedCount == total
        }
        close(program)
        #expect(complete, "handed over \(handedCount) of \(total) bytes")
        #expect(largestHeld <= Connection.readsPerCallback * (256 << 10), "held \(largestHeld) bytes at most")
        #expect(errors == 1, "one overlong line, refused once as it passed the limit")
    }

    @Test func theProgramClosingItsEndIsSeenAfterEverythingItSentWasHandedOver() throws {
        let loop = try EventLoop()
        let (ours, program) = socketPair()
        var handedCount = 0
        var closedAfter: Int?
        let session = try LifecycleChannelSession(loop: loop, fd: ours, onBytes: { handedCount += $0.count },
                                                  closed: { closedAfter = handedCount })
        defer { session.close() }
        let input = [UInt8](repeating: UInt8(ascii: "\n"), count: 150_000)
        var offset = 0
        var shut = false
        let complete = runLoop(loop, timeout: .seconds(10)) {
            offset = writeSome(program, input, from: offset)
            if offset == input.count, !shut {
                close(program)
                shut = true
            }
            return closedAfter != nil
        }
        #expect(complete)
        #expect(closedAfter == input.count, "every byte was handed over before the end")
    }
}
