// netlifed's end of the lifecycle channel on a real loop and socketpair, as a program that misbehaves drives
// it: a blocking descriptor is made non-blocking (a program that never reads cannot block the loop), bytes
// already read are handed over without waiting for more, and what the session holds stays bounded however
// much a program writes.

@testable import NetLife
import Glibc
import NetLifeEvent
import NetLifeTestSupport
import Testing

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
        let (ours, program) = blockingSocketPair()
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
            errors += state.receive(bytes, tasks: .none).count
        }, closed: {})
        defer { session.close() }
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        var written = 0
        var offset = 0
        // 32 MiB (3 MiB under a sanitizer: the bound holds at any volume).
        let total = sanitizerScaled(32) << 20
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

/// The harness fuzz-channel runs, on streams of protocol lines, garbage, blank floods and endless lines,
/// written whole, in tiny and in large pieces, by programs that read their answers and ones that never do.
@Suite(.timeLimit(.minutes(2)))
struct LifecycleChannelSessionHarnessTests {
    @Test func theHarnessHoldsOnFloodsEndlessLinesAndGarbage() throws {
        let loop = try EventLoop()
        let streams: [(String, [UInt8])] = [
            ("hello and tasks", Array(("{\"hello\":1}\n" + String(repeating: "{\"begin-task\":\"t\"}\n{\"end-task\":1}\n", count: 300)).utf8)),
            ("blank lines then a hello", [UInt8](repeating: 10, count: 60_000) + Array("{\"hello\":1}\n".utf8)),
            ("one endless line", [UInt8](repeating: UInt8(ascii: "x"), count: 65_536)),
            ("garbage", (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 3) }),
            ("voip declarations", Array(String(repeating: "{\"voip\":3}\n", count: 5_000).utf8)),
        ]
        // A fixed linear congruential sequence: a failure repeats.
        var seed: UInt64 = 0x5eed
        for (name, stream) in streams {
            for plan in [ChannelSessionPlan(repetitions: 1, largestPiece: 1, programReads: true),
                         ChannelSessionPlan(repetitions: 8, largestPiece: 4096, programReads: false),
                         ChannelSessionPlan(repetitions: 8, largestPiece: 256 << 10, programReads: true)] {
                let failure = checkLifecycleChannelSession(stream, plan: plan, loop: loop) {
                    seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    return seed >> 11
                }
                #expect(failure == nil, "\(name), \(plan): \(failure ?? "")")
            }
        }
    }
}
