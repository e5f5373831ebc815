// The echo service over a socketpair, through a real Connection.

import Glibc
import NetLifeEvent
import NetLifeServices
import NetLifeTestSupport
import Testing

@Suite(.timeLimit(.minutes(5)))
struct EchoServiceTests {
    @Test func echoesEveryByteInOrder() throws {
        let loop = try EventLoop()
        let (ours, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: ours)
        let echo = EchoService()
        echo.serve(connection)
        var sent: [UInt8] = []
        var received: [UInt8] = []
        let total = 3 << 20
        var timedOut = false
        let deadline = MonotonicTime.now() + .seconds(10)
        var poller: EventTimer?
        poller = EventTimer(loop: loop) {
            if sent.count < total {
                let chunk = (0..<min(65536, total - sent.count)).map { UInt8(truncatingIfNeeded: sent.count + $0) }
                let written = chunk.withUnsafeBytes { write(theirs, $0.baseAddress, $0.count) }
                if written > 0 { sent += chunk[0..<written] }
            }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = read(theirs, &buffer, buffer.count)
            if count > 0 { received += buffer[0..<count] }
            if received.count == total || MonotonicTime.now() > deadline {
                timedOut = received.count != total
                loop.stop()
            } else {
                poller?.arm(after: .zero)
            }
        }
        poller?.arm(after: .zero)
        try loop.run()
        poller?.close()
        poller = nil
        #expect(!timedOut)
        #expect(received == sent)
        connection.close(.now)
    }
}
