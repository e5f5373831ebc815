// The data path's flush timeout measures progress, not time: a peer that reads slowly but steadily after a
// half-close receives every byte. Against the real netlifed.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct FlushTimeoutTests {
    @Test func aSlowSteadyReaderAfterAHalfCloseReceivesEveryByte() throws {
        let daemon = try TestDaemon(config: echoApp("a"))
        defer { daemon.stop() }
        let peer = try #require(connectSmallWindowPeer(port: daemon.port(of: "a"), receiveBuffer: 65536))
        defer { peer.close() }
        let total = 6 << 20
        let payload = (0..<total).map { UInt8(truncatingIfNeeded: $0 % 251) }
        // The peer sends everything and then half-closes while it reads at 512 KiB/s from the start: the
        // echo piles up (in the daemon's output, up to its 4 MiB high-water mark, and in the kernel's
        // buffers), and the daemon closes after the flush once it has seen the FIN. The flush lasts about
        // 12 s, more than twice the 5 s flush timeout: a timeout on time rather than progress would cut it.
        let fd = peer.fd
        let sent = SentCount()
        let start = Date()
        Thread {
            let count = sendAllBytes(fd: fd, payload, timeout: 35)
            shutdown(fd, Int32(SHUT_WR))
            sent.set(count, halfClosedAfter: Date().timeIntervalSince(start))
        }.start()
        var received: [UInt8] = []
        received.reserveCapacity(total)
        var ending = "none"
        let rate = 512.0 * 1024
        while Date().timeIntervalSince(start) < 40 {
            // Read no faster than 512 KiB/s.
            let allowed = Int(Date().timeIntervalSince(start) * rate) - received.count
            if allowed <= 0 { usleep(20_000); continue }
            switch peer.read(timeout: 1, max: min(allowed, 65536)) {
            case .bytes(let bytes): received += bytes
            case .endOfStream: ending = "FIN"
            case .error(let code): ending = String(cString: strerror(code))
            case .timedOut: continue
            }
            if ending != "none" { break }
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(waitUntil(timeout: 40) { sent.value >= 0 }, "the sending thread ended")
        let flushing = elapsed - sent.halfClosedAfter
        print("slow reader after half-close: \(received.count) of \(total) bytes in \(String(format: "%.1f", elapsed)) s, then \(ending); "
              + "the daemon flushed for \(String(format: "%.1f", flushing)) s after the half-close")
        #expect(sent.value == total)
        #expect(flushing > 7, "the flush after the half-close took \(flushing) s: not beyond the 5 s flush timeout, so the test proves nothing")
        #expect(received.count == total, "received \(received.count) of \(total) bytes, then \(ending) after \(elapsed) s")
        #expect(ending == "FIN")
        let intact = received.elementsEqual(payload.prefix(received.count))
        #expect(intact, "the bytes came back unchanged")
    }
}

/// How many bytes a sending thread got out, and when it half-closed.
private final class SentCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = -1
    private var halfClosed: TimeInterval = 0
    func set(_ value: Int, halfClosedAfter: TimeInterval) { lock.withLock { (count, halfClosed) = (value, halfClosedAfter) } }
    var value: Int { lock.withLock { count } }
    var halfClosedAfter: TimeInterval { lock.withLock { halfClosed } }
}
