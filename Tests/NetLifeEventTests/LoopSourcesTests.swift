// Timers, the waker, listeners, child processes and addresses.

import Foundation
import NetLifeEvent
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct LoopSourcesTests {
    @Test func timersFireInDeadlineOrderAndCancelledOnesNever() throws {
        let loop = try EventLoop(manualClockAt: MonotonicTime(nanoseconds: 1_000_000_000))
        let started = loop.now
        var fired: [(String, Duration)] = []
        loop.schedule(after: .milliseconds(30)) { fired.append(("late", loop.now - started)) }
        loop.schedule(after: .milliseconds(10)) { fired.append(("early", loop.now - started)) }
        let cancelled = loop.schedule(after: .milliseconds(20)) { fired.append(("cancelled", loop.now - started)) }
        cancelled.cancel()
        loop.advance(by: .milliseconds(100))
        #expect(fired.map(\.0) == ["early", "late"])
        #expect(fired.map(\.1) == [.milliseconds(10), .milliseconds(30)], "each at its deadline")
        #expect(loop.registeredObjectCount == 0, "one-shot timers close themselves")
    }

    /// The loop keeps time with the coarse clock (4 ms ticks), by which a timer can come due before its
    /// deadline; no handler may run before the deadline by the precise clock, nor more than a few ms late.
    @Test func timersNeverFireBeforeTheirDeadline() throws {
        let loop = try EventLoop()
        var early: [Duration] = []
        var late: [Duration] = []
        var fired = 0
        for index in 0..<60 {
            let delay = Duration.microseconds(500 + 250 * index)
            let armed = MonotonicTime.now()
            loop.schedule(after: delay) {
                let waited = MonotonicTime.now() - armed
                if waited < delay { early.append(delay - waited) }
                if waited > delay + .milliseconds(50) { late.append(waited - delay) }
                fired += 1
            }
        }
        #expect(runLoop(loop) { fired == 60 })
        #expect(early.isEmpty, "timers fired early by \(early)")
        #expect(late.isEmpty, "timers fired late by \(late)")
    }

    @Test func aReArmedTimerFiresOnceAtTheNewDeadline() throws {
        let loop = try EventLoop(manualClockAt: MonotonicTime(nanoseconds: 1_000_000_000))
        var count = 0
        let timer = EventTimer(loop: loop) { count += 1 }
        timer.arm(after: .milliseconds(5))
        timer.arm(after: .milliseconds(40))
        loop.advance(by: .milliseconds(39))
        #expect(count == 0, "the first deadline was replaced")
        loop.advance(by: .milliseconds(1))
        #expect(count == 1)
        loop.advance(by: .milliseconds(60))
        #expect(count == 1)
        timer.close()
    }

    /// The loop keeps its sources in a table whose freed places are reused: sources registered into the
    /// places of closed ones are kept, fire and are let go like the others, and closing the loop closes what
    /// is still registered.
    @Test func sourcesRegisteredWhereClosedOnesWereAreKeptAndLetGo() throws {
        let loop = try EventLoop()
        var fired = Set<Int>()
        var timers: [EventTimer] = []
        for index in 0..<100 { timers.append(loop.schedule(after: .milliseconds(5)) { fired.insert(index) }) }
        for index in stride(from: 0, to: 100, by: 2) { timers[index].cancel() }
        #expect(loop.registeredObjectCount == 50)
        for index in 100..<150 { loop.schedule(after: .milliseconds(5)) { fired.insert(index) } }
        #expect(loop.registeredObjectCount == 100)
        #expect(runLoop(loop) { fired.count == 100 })
        #expect(fired == Set(stride(from: 1, to: 100, by: 2)).union(100..<150))
        #expect(loop.registeredObjectCount == 0)
        timers.removeAll()

        var late = 0
        for _ in 0..<10 { loop.schedule(after: .seconds(60)) { late += 1 } }
        let listener = try Listener(loop: loop, address: .ipv4("127.0.0.1", port: 0), onAccept: { _ in }, onError: { _ in })
        #expect(loop.registeredObjectCount == 11)
        let closed = loop.close()
        #expect(closed.count == 11, "the loop closes the sources still registered: \(closed)")
        #expect(!listener.isOpen)
        #expect(loop.registeredObjectCount == 0)
        #expect(late == 0)
    }

    @Test func theWakerRunsWorkFromAnotherThreadOnTheLoop() throws {
        let loop = try EventLoop()
        let waker = try Waker(loop: loop)
        defer { waker.close() }
        nonisolated(unsafe) var ranOnLoop = false
        nonisolated(unsafe) let sharedLoop = loop
        let thread = Thread { waker.wake { ranOnLoop = sharedLoop.isInLoopThread } }
        thread.start()
        #expect(runLoop(loop) { ranOnLoop })
    }

    @Test func closingAListenerMakesTheKernelRefuseConnections() throws {
        let loop = try EventLoop()
        var accepted: [CInt] = []
        let listener = try Listener(loop: loop, address: .ipv4("127.0.0.1", port: 0),
                                    onAccept: { accepted.append($0.fd) }, onError: { _ in })
        let port = try #require(listener.address.port)
        #expect(port != 0, "the kernel's port is reported")
        #expect(tcpConnect(port: port) == 0)
        #expect(runLoop(loop) { accepted.count == 1 })
        accepted.forEach { close($0) }
        listener.close()
        #expect(tcpConnect(port: port) == ECONNREFUSED)
        // Reopen on the same port.
        let again = try Listener(loop: loop, address: .ipv4("127.0.0.1", port: port), onAccept: { close($0.fd) }, onError: { _ in })
        #expect(tcpConnect(port: port) == 0)
        again.close()
    }

    @Test func aListenerThatIsNotAcceptingYetLetsTheKernelQueueConnectionsUntilItStarts() throws {
        let loop = try EventLoop()
        var accepted: [CInt] = []
        let listener = try Listener(loop: loop, address: .ipv4("127.0.0.1", port: 0), prepared: nil, startAccepting: false,
                                    onAccept: { accepted.append($0.fd) }, onError: { _ in })
        let port = try #require(listener.address.port)
        #expect(listener.isOpen && !listener.isAccepting)
        #expect(tcpConnect(port: port) == 0, "the kernel completes a connection once the socket listens")
        runLoop(loop, timeout: .milliseconds(50)) { false }
        #expect(accepted.isEmpty, "nothing is accepted before startAccepting()")
        // Paused before it starts: it starts paused, and accepts on resume.
        listener.pause()
        try listener.startAccepting()
        #expect(listener.isAccepting)
        runLoop(loop, timeout: .milliseconds(50)) { false }
        #expect(accepted.isEmpty, "a paused listener starts paused")
        listener.resume()
        #expect(runLoop(loop) { accepted.count == 1 }, "the queued connection is accepted")
        try listener.startAccepting()   // a second start does nothing
        accepted.forEach { close($0) }
        listener.close()
        #expect(tcpConnect(port: port) == ECONNREFUSED)
        #expect(loop.registeredObjectCount == 0)

        // Closed before it ever accepted: refused, and let go by the loop.
        let idle = try Listener(loop: loop, address: .ipv4("127.0.0.1", port: 0), prepared: nil, startAccepting: false,
                                onAccept: { close($0.fd) }, onError: { _ in })
        let idlePort = try #require(idle.address.port)
        idle.close()
        #expect(!idle.isOpen)
        #expect(tcpConnect(port: idlePort) == ECONNREFUSED)
        #expect(loop.registeredObjectCount == 0)
        try idle.startAccepting()   // after close: nothing
        #expect(!idle.isAccepting)
    }

    @Test func aUnixListenerIsCreatedWithTheRequestedMode() throws {
        let loop = try EventLoop()
        let path = "/tmp/netlife-unit-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let listener = try Listener(loop: loop, address: .unix(path), unixMode: 0o600, onAccept: { close($0.fd) }, onError: { _ in })
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        listener.close()
        #expect(access(path, F_OK) != 0, "closing removes the socket file")
    }

    @Test func childProcessesReportOutputLinesAndExitStatus() throws {
        let loop = try EventLoop()
        var lines: [String] = []
        var status: ChildExitStatus?
        _ = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "echo one; echo two >&2; printf three; exit 3"],
                             environment: ["PATH": "/usr/bin:/bin"],
                             onOutput: { if case .line(let line) = $0 { lines.append(line) } }, onExit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(3))
        #expect(Set(lines) == ["one", "two", "three"])
        #expect(loop.registeredObjectCount == 0)
    }

    @Test func signallingTheGroupKillsGrandchildrenToo() throws {
        let loop = try EventLoop()
        var status: ChildExitStatus?
        let child = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "sleep 30 & sleep 30; wait"],
                                     environment: ["PATH": "/usr/bin:/bin"], onOutput: { _ in }, onExit: { status = $0 })
        runLoop(loop, timeout: .milliseconds(100)) { false }
        child.signalGroup(SIGKILL)
        #expect(runLoop(loop) { status != nil })
        #expect(status == .signaled(SIGKILL))
        #expect(waitUntilGroupIsGone(child.pid), "no live process of the group is left")
    }

    @Test func aMissingProgramIsASpawnError() throws {
        let loop = try EventLoop()
        #expect(throws: SystemError.self) {
            _ = try ChildProcess(loop: loop, arguments: ["/nonexistent/hook"], environment: [:], onOutput: { _ in }, onExit: { _ in })
        }
    }

    @Test func addressesParseAndPrint() throws {
        #expect(try SocketAddress(parsing: "127.0.0.1:7070") == .ipv4("127.0.0.1", port: 7070))
        #expect(try SocketAddress(parsing: "[::1]:80") == .ipv6("::1", port: 80))
        #expect(try SocketAddress(parsing: "*:8080") == .ipv4("0.0.0.0", port: 8080))
        #expect(try SocketAddress(parsing: "/run/x.sock") == .unix("/run/x.sock"))
        #expect(try SocketAddress(parsing: "unix:/run/x.sock") == .unix("/run/x.sock"))
        #expect(SocketAddress.ipv6("::1", port: 80).description == "[::1]:80")
        for bad in ["localhost:80", "127.0.0.1", "127.0.0.1:70000", "unix:relative", "[::1:80", "1.2.3.4.5:1"] {
            #expect(throws: SocketAddress.ParseError.self) { try SocketAddress(parsing: bad) }
        }
    }

    @Test func buffersSplitLinesAndRefuseOverlongOnes() {
        let buffer = EventBuffer.allocate()
        defer { buffer.free() }
        buffer.append("one\r\ntwo\nthr")
        #expect(buffer.readLine(maxLength: 10) == .line(Array("one".utf8)))
        #expect(buffer.readLine(maxLength: 10) == .line(Array("two".utf8)))
        #expect(buffer.readLine(maxLength: 10) == .incomplete)
        buffer.append("eeeeeeeeeee")
        #expect(buffer.readLine(maxLength: 10) == .tooLong)
        buffer.append("\n")
        #expect(buffer.readLine(maxLength: 10) == .tooLong)
        #expect(buffer.readLine(maxLength: 100) == .line(Array(("thr" + String(repeating: "e", count: 11)).utf8)))
    }
}

@Suite(.timeLimit(.minutes(5)))
struct TimerPrecisionTests {
    @Test func aTimerArmedLateInACallbackStillWaitsItsWholeDelay() throws {
        let loop = try EventLoop()
        var armedAt = MonotonicTime.now()
        var firedAt: MonotonicTime?
        loop.schedule(after: .zero) {
            // A callback that works for 30 ms before arming: the timer's delay counts from the arming.
            let busyUntil = MonotonicTime.now() + .milliseconds(30)
            while MonotonicTime.now() < busyUntil {}
            armedAt = MonotonicTime.now()
            loop.schedule(after: .milliseconds(50)) { firedAt = MonotonicTime.now() }
        }
        #expect(runLoop(loop) { firedAt != nil })
        let waited = try #require(firedAt) - armedAt
        #expect(waited >= .milliseconds(50), "fired \(waited) after being armed for 50 ms")
    }
}
