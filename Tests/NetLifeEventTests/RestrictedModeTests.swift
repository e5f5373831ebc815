// The restricted run-loop mode (TN2277 "Run Loops"): only the named connections are served; timers and
// other connections of the main loop wait until the loop runs normally again.

import Glibc
import NetLifeEvent
import Testing
import NetLifeTestSupport

private final class Recorder: ConnectionDelegate {
    var received: [UInt8] = []
    func connectionDidRead(_ connection: Connection) {
        received += connection.input.peekBytes()
        connection.input.removeAll()
    }
}

@Suite(.timeLimit(.minutes(5)))
struct RestrictedModeTests {
    @Test func servesOnlyTheNamedConnections() throws {
        let loop = try EventLoop()
        let (namedFD, namedPeer) = socketPair()
        let (otherFD, otherPeer) = socketPair()
        defer { close(namedPeer); close(otherPeer) }
        let named = try Connection(loop: loop, fd: namedFD)
        let other = try Connection(loop: loop, fd: otherFD)
        let namedRecorder = Recorder()
        let otherRecorder = Recorder()
        named.delegate = namedRecorder
        other.delegate = otherRecorder
        var timerFired = false
        loop.schedule(after: .zero) { timerFired = true }

        writeAll(namedPeer, "named")
        writeAll(otherPeer, "other")
        // The named connection also has output to flush, as an expiring upload would.
        named.output.append("flush me")
        named.flush()
        let done = loop.runRestricted(serving: [named], timeout: .seconds(2)) { namedRecorder.received.count == 5 }
        #expect(done)
        #expect(String(decoding: namedRecorder.received, as: UTF8.self) == "named")
        #expect(otherRecorder.received.isEmpty, "another connection is not served in restricted mode")
        #expect(!timerFired, "main-loop timers do not fire in restricted mode")
        #expect(String(decoding: readAvailable(namedPeer), as: UTF8.self) == "flush me")

        // Back in the default mode everything runs again.
        #expect(runLoop(loop) { timerFired && otherRecorder.received.count == 5 })
        named.close(.now)
        other.close(.now)
    }

    @Test func givesUpAtTheTimeout() throws {
        let loop = try EventLoop()
        let (fd, peer) = socketPair()
        defer { close(peer) }
        let connection = try Connection(loop: loop, fd: fd)
        let started = MonotonicTime.now()
        #expect(!loop.runRestricted(serving: [connection], timeout: .milliseconds(120)) { false })
        let elapsed = MonotonicTime.now() - started
        #expect(elapsed >= .milliseconds(120) && elapsed < .milliseconds(400))
        #expect(!loop.isRunningRestricted)
        connection.close(.now)
    }
}
