// Lifetimes and bounds of the loop's sources: a closed timer ignores arming, a closed
// connection's buffers stay usable, the flush timeout measures progress, child output is bounded per turn
// and rate-limited, a child's own ends of its pipes block, and clock arithmetic saturates.

import Glibc
import NetLifeEvent
import Testing
import NetLifeTestSupport

/// Holds on to a connection's buffers past its close, as a service might.
private final class BufferHolder: ConnectionDelegate {
    var sawClose = false
    func connectionDidRead(_ connection: Connection) {}
    func connectionDidClose(_ connection: Connection, error: SystemError?) {
        sawClose = true
        // A service that looks at its buffers after the close (the Examples app does, after an RST).
        _ = connection.output.isEmpty
        _ = connection.input.count
    }
}

@Suite(.timeLimit(.minutes(5)))
struct LoopSourceBoundsTests {
    @Test func aClosedTimerIgnoresArmingCancellingAndClosing() throws {
        let loop = try EventLoop()
        var fired = false
        let timer = EventTimer(loop: loop) { fired = true }
        timer.close()
        timer.arm(after: .milliseconds(1))
        timer.cancel()
        timer.close()
        #expect(timer.isClosed)
        #expect(!timer.isArmed)
        runLoop(loop, timeout: .milliseconds(20)) { false }
        #expect(!fired)
        #expect(loop.registeredObjectCount == 0)
    }

    @Test func aClosedConnectionKeepsEmptyUsableBuffers() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        let connection = try Connection(loop: loop, fd: mine)
        let holder = BufferHolder()
        connection.delegate = holder
        writeAll(theirs, "unread")
        #expect(runLoop(loop) { !connection.input.isEmpty })
        connection.output.append("pending")
        // The peer resets: the connection fails on its next write.
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(theirs, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        close(theirs)
        connection.close(.now)
        #expect(holder.sawClose)
        #expect(connection.state == .closed)
        #expect(connection.input.isEmpty && connection.output.isEmpty)
        connection.output.append("after close")   // harmless: the buffer is still there
        connection.flush()
        #expect(connection.output.count == "after close".utf8.count)
    }

    /// A connection with a 4 KiB send buffer closing after a flush of `bytes` bytes, and its peer's end.
    private func closingAfterFlush(_ loop: EventLoop, bytes: Int, flushTimeout: Duration) throws -> (Connection, CInt) {
        let (mine, theirs) = socketPair()
        var small: CInt = 4096
        setsockopt(mine, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<CInt>.size))
        let connection = try Connection(loop: loop, fd: mine)
        connection.flushTimeout = flushTimeout
        connection.output.append([UInt8](repeating: 0x61, count: bytes))
        connection.close(.afterFlush)
        return (connection, theirs)
    }

    // The flush timeout on a manual clock: the instants are exact, and no test waits for them.

    /// Serves what the sockets have ready: a few non-blocking turns (a write that used up its share of a turn
    /// goes on at the next one).
    private func serveReady(_ loop: EventLoop) {
        for _ in 0..<4 { loop.runOnce() }
    }

    @Test func theFlushTimeoutMeasuresLackOfProgressNotTotalTime() throws {
        let loop = try EventLoop(manualClockAt: MonotonicTime(nanoseconds: 1_000_000_000))
        let started = loop.now
        let total = 400_000
        let (_, theirs) = try closingAfterFlush(loop, bytes: total, flushTimeout: .milliseconds(150))
        defer { close(theirs) }
        // Read a little every 20 ms: the whole flush takes far longer than the timeout, but never stalls.
        var received = 0
        var ended = false
        for _ in 0..<2_000 where !ended {
            loop.advance(by: .milliseconds(20))
            var chunk = [UInt8](repeating: 0, count: 16384)
            let count = recv(theirs, &chunk, chunk.count, CInt(MSG_DONTWAIT))
            if count > 0 { received += count }
            if count == 0 { ended = true }
            serveReady(loop)
        }
        #expect(ended, "the peer saw the end of the stream")
        #expect(received == total, "a slow but steady reader got every byte")
        #expect(loop.now - started > .milliseconds(150), "the flush outlasted the timeout")
    }

    @Test func theFlushTimeoutStillResetsAPeerThatStopsReading() throws {
        let loop = try EventLoop(manualClockAt: MonotonicTime(nanoseconds: 1_000_000_000))
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        connection.flushTimeout = .milliseconds(50)
        connection.output.append([UInt8](repeating: 0x61, count: 4 << 20))
        connection.close(.afterFlush)
        serveReady(loop)
        loop.advance(by: .milliseconds(49))
        #expect(connection.state == .closing)
        loop.advance(by: .milliseconds(1))
        #expect(connection.state == .closed, "reset when the peer has taken nothing for the whole timeout")
    }

    @Test func aPeerThatStopsReadingIsResetOneTimeoutAfterItsLastProgressNotTwo() throws {
        let loop = try EventLoop(manualClockAt: MonotonicTime(nanoseconds: 1_000_000_000))
        let (connection, theirs) = try closingAfterFlush(loop, bytes: 1 << 20, flushTimeout: .milliseconds(300))
        defer { close(theirs) }
        serveReady(loop)
        // The peer takes one piece 30 ms into the flush, then nothing: the last progress the connection sees,
        // at its next look (every tenth of the timeout), 60 ms in.
        loop.advance(by: .milliseconds(30))
        var chunk = [UInt8](repeating: 0, count: 16384)
        #expect(recv(theirs, &chunk, chunk.count, CInt(MSG_DONTWAIT)) > 0)
        serveReady(loop)
        loop.advance(by: .milliseconds(329))
        #expect(connection.state == .closing, "not yet a timeout after the progress was seen")
        loop.advance(by: .milliseconds(1))
        // A look every whole timeout found this stall at about 570 ms (1.9 timeouts).
        #expect(connection.state == .closed, "reset 330 ms after the last progress: 1.1 timeouts, not 2")
    }

    @Test func aChildsOwnEndsOfItsPipesBlock() throws {
        let loop = try EventLoop()
        var status: ChildExitStatus?
        var lines = 0
        _ = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "seq 1 200000; seq 1 200000 >&2"],
                             environment: ["PATH": "/usr/bin:/bin"], outputLimit: LineRateLimiter(burst: 1_000_000, perSecond: 1),
                             onOutput: { if case .line = $0 { lines += 1 } }, onExit: { status = $0 })
        #expect(runLoop(loop, timeout: .seconds(30)) { status != nil })
        #expect(status == .exited(0), "a full pipe made the child wait, not fail with EAGAIN")
        #expect(lines == 400_000)
    }

    @Test func aFloodingChildNeitherHoldsTheLoopNorFloodsTheLog() throws {
        let loop = try EventLoop()
        let output = OutputTally()
        var status: ChildExitStatus?
        let child = try ChildProcess(loop: loop, arguments: ["yes"], environment: ["PATH": "/usr/bin:/bin"],
                                     outputLimit: LineRateLimiter(burst: 100, perSecond: 10),
                                     onOutput: output.count, onExit: { status = $0 })
        // A timer keeps firing on time while the child writes without pause.
        var ticks = 0
        var lateness: [Duration] = []
        var expected = MonotonicTime.now() + .milliseconds(10)
        var ticker: EventTimer?
        ticker = EventTimer(loop: loop) {
            lateness.append(MonotonicTime.now() - expected)
            ticks += 1
            expected = MonotonicTime.now() + .milliseconds(10)
            ticker?.arm(after: .milliseconds(10))
        }
        ticker?.arm(after: .milliseconds(10))
        runLoop(loop, timeout: .milliseconds(500)) { false }
        ticker?.close()
        ticker = nil   // its closure holds the variable: let go of the cycle
        child.signalGroup(SIGKILL)
        #expect(runLoop(loop) { status != nil })
        // A reader that drained the pipe in one callback never let the loop turn at all; sanitized builds
        // turn slower, hence the modest bounds.
        #expect(ticks >= 10, "the loop kept turning: \(ticks) ticks in 500 ms")
        #expect((lateness.max() ?? .zero) < .milliseconds(200), "worst timer lateness \(lateness.max() ?? .zero)")
        #expect(output.delivered <= 100 + 10, "delivered \(output.delivered) lines: the burst and the rate")
        #expect(output.dropped > 0, "the rest were counted as dropped")
    }

    /// Once the limit refuses a line, the rest of what was read at that instant is counted at once instead
    /// of offered line by line; every line is still either delivered or counted, exactly.
    @Test func everyLineOfAFloodIsDeliveredOrCountedExactly() throws {
        let loop = try EventLoop()
        let output = OutputTally()
        var status: ChildExitStatus?
        _ = try ChildProcess(loop: loop, arguments: ["seq", "1", "300000"], environment: ["PATH": "/usr/bin:/bin"],
                             outputLimit: LineRateLimiter(burst: 100, perSecond: 10),
                             onOutput: output.count, onExit: { status = $0 })
        #expect(runLoop(loop, timeout: .seconds(30)) { status != nil })
        #expect(status == .exited(0))
        #expect(output.delivered >= 100 && output.delivered <= 100 + 10 * 30, "the burst and the rate: \(output.delivered)")
        #expect(output.delivered + output.dropped == 300_000, "\(output.delivered) delivered + \(output.dropped) dropped")
    }

    @Test func lineRateLimiterLetsABurstThroughThenARate() {
        var limiter = LineRateLimiter(burst: 3, perSecond: 2)
        let start = MonotonicTime(nanoseconds: 1_000_000_000)
        #expect((0..<5).map { _ in limiter.admit(now: start) } == [true, true, true, false, false])
        #expect(limiter.admit(now: start + .milliseconds(400)) == false)
        #expect(limiter.admit(now: start + .milliseconds(600)) == true, "one token after 500 ms at 2/s")
        #expect(limiter.takeDropped() == 3)
        #expect(limiter.takeDropped() == 0)
        limiter.refuse(5)
        limiter.refuse(-1)
        #expect(limiter.takeDropped() == 5, "lines refused in bulk are counted, a negative count is not")
        #expect(limiter.admit(now: start + .seconds(100)) == true)
        #expect(limiter.admit(now: start + .seconds(100)) == true)
        #expect(limiter.admit(now: start + .seconds(100)) == true)
        #expect(limiter.admit(now: start + .seconds(100)) == false, "the bucket never holds more than the burst")
    }

    @Test func clockArithmeticSaturates() {
        let late = MonotonicTime(nanoseconds: .max - 10)
        #expect(late + .seconds(9_223_372_036) == MonotonicTime(nanoseconds: .max))
        #expect(MonotonicTime(nanoseconds: 5) + .seconds(-100) == MonotonicTime(nanoseconds: 0))
        #expect(MonotonicTime(nanoseconds: .max) - MonotonicTime(nanoseconds: 0) == .nanoseconds(Int64.max))
        #expect(MonotonicTime(nanoseconds: 0) - MonotonicTime(nanoseconds: .max) == .nanoseconds(-Int64.max))
    }

    @Test func aUnixPathThatDoesNotFitIsAnErrorNotShortened() throws {
        let loop = try EventLoop()
        let long = "/tmp/" + String(repeating: "x", count: 120)
        #expect(throws: SystemError.self) {
            _ = try Listener(loop: loop, address: .unix(long), onAccept: { _ in }, onError: { _ in })
        }
        #expect(access(String(long.utf8.prefix(107))!, F_OK) != 0, "nothing was bound at a shortened path")
    }
}

/// A child's output as counts: the lines delivered and the lines reported dropped.
private final class OutputTally {
    var delivered = 0
    var dropped = 0

    func count(_ output: ChildOutput) {
        switch output {
        case .line: delivered += 1
        case .dropped(let lines): dropped += lines
        }
    }
}
