// The http service's timeouts on a loop whose clock the test moves (EventLoop's manual clock): a request head
// that never comes, a body that stops arriving, a client that stops taking its response, and an app whose
// timers stand still while it is suspended. Over a real loop each of these waited a second or more of wall time
// and allowed a tolerance window; here each instant is exact and the test takes milliseconds. What a peer sees
// on the wire is still proven end to end by the integration tests.

import Glibc
import NetLife
import NetLifeEvent
import NetLifeServices
import NetLifeTestSupport
import Testing

private let start = MonotonicTime(nanoseconds: 1_000_000_000_000)

/// An http service of an app on a manual-clock loop, serving one connection over a socket pair whose other end
/// is the test's peer.
private final class ClockedHTTP {
    let loop: EventLoop
    let app: App
    let files = TemporaryDirectory()
    let uploads = TemporaryDirectory()
    let service: HTTPService
    let connection: Connection
    let peer: CInt

    init(requestTimeout: Duration) throws {
        loop = try EventLoop(manualClockAt: start)
        app = try App(configuration: AppConfiguration(name: "files"), services: ServiceRegistry(), loop: loop,
                      logger: Logger(label: "test", minimumLevel: .critical))
        app.perform(.launch(background: false)) { _ in }
        files.write("a.txt", "aaaa")
        // 16 MiB, sparse: far more than a socket pair's buffers hold.
        let big = open(files.file("big.bin"), O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        _ = ftruncate(big, off_t(16 << 20))
        close(big)
        service = HTTPService(root: files.path, requestTimeout: requestTimeout, uploads: (uploads.path, UploadLimits()))
        service.didAttach(to: app)
        let (ours, theirs) = socketPair()
        peer = theirs
        connection = try Connection(loop: loop, fd: ours)
        service.serve(connection)
    }

    func finish() {
        connection.close(.now)
        close(peer)
        app.retire(reason: "test over")
        _ = loop.close()
        files.remove()
        uploads.remove()
    }

    /// Lets the loop do the I/O that is ready; no time passes.
    func turn() { for _ in 0..<16 { loop.runOnce() } }

    func send(_ text: String) {
        writeAll(peer, text)
        turn()
    }

    /// Everything the service has sent so far.
    func receivedText() -> String {
        turn()
        var text = ""
        while case let bytes = readAvailable(peer), !bytes.isEmpty { text += String(decoding: bytes, as: UTF8.self) }
        return text
    }

    /// Whether the service has closed the connection: the peer's end hangs up (whatever it has left to read).
    var isClosed: Bool {
        turn()
        var poller = pollfd(fd: peer, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, 0) == 1 && poller.revents & Int16(POLLHUP) != 0
    }
}

@Suite(.timeLimit(.minutes(1)))
struct HTTPClockTests {
    @Test func aRequestHeadThatNeverComesIsCutAtExactlyTheRequestTimeout() throws {
        let http = try ClockedHTTP(requestTimeout: .seconds(2))
        defer { http.finish() }
        http.send("GET /a.txt HTTP/1.1\r\nHost: x\r\n")   // the head, unfinished
        http.loop.advance(by: .milliseconds(1999))
        #expect(!http.isClosed)
        http.loop.advance(by: .milliseconds(1))
        #expect(http.isClosed, "closed request-timeout after the connection came")
    }

    @Test func theTimeForTheNextHeadStartsWhenTheLastResponseIsSent() throws {
        let http = try ClockedHTTP(requestTimeout: .seconds(2))
        defer { http.finish() }
        http.loop.advance(by: .milliseconds(1500))
        http.send("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = http.receivedText()
        #expect(response.hasPrefix("HTTP/1.1 200") && response.hasSuffix("aaaa"), "\(response)")
        http.loop.advance(by: .milliseconds(1999))
        #expect(!http.isClosed, "a kept connection gets its whole request-timeout for the next head")
        http.loop.advance(by: .milliseconds(1))
        #expect(http.isClosed)
    }

    @Test func aSuspendedAppsRequestTimerStandsStillAndRunsOutItsTimeAfterTheForeground() throws {
        let http = try ClockedHTTP(requestTimeout: .seconds(2))
        defer { http.finish() }
        http.loop.advance(by: .milliseconds(500))
        http.app.perform(.background) { _ in }
        http.app.perform(.suspend) { _ in }
        #expect(http.app.state == .suspended)
        http.loop.advance(by: .seconds(3600))
        #expect(!http.isClosed, "no code of a suspended app runs: its timer waits with 1.5 s left")
        http.app.perform(.foreground) { _ in }
        http.loop.advance(by: .milliseconds(1499))
        #expect(!http.isClosed)
        http.loop.advance(by: .milliseconds(1))
        #expect(http.isClosed)
    }

    @Test func aBodyThatStopsArrivingIsCutTheRequestTimeoutAfterItsLastByte() throws {
        let http = try ClockedHTTP(requestTimeout: .seconds(1))
        defer { http.finish() }
        // An upload: its head and 1,000 of its 3,000 bytes.
        http.send("POST /up.bin HTTP/1.1\r\nHost: x\r\nUpload-Complete: ?1\r\nContent-Length: 3000\r\n\r\n" + String(repeating: "u", count: 1000))
        http.loop.advance(by: .milliseconds(600))
        http.send(String(repeating: "u", count: 500))
        http.loop.advance(by: .milliseconds(999))
        #expect(!http.isClosed, "the deadline runs from the last byte (at 600 ms), not from the head")
        http.loop.advance(by: .milliseconds(1))
        #expect(http.isClosed, "cut one request-timeout after the last byte, not up to twice that")
    }

    @Test func aClientThatStopsTakingItsResponseIsResetOneRequestTimeoutAfterTheLastByteItTook() throws {
        let http = try ClockedHTTP(requestTimeout: .seconds(1))
        defer { http.finish() }
        http.send("GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")   // 16 MiB; the peer reads none of it
        // The socket's buffers filled as the response was queued; the peer has taken nothing since. The
        // service looks every tenth of the timeout and resets the peer at the look that finds a whole timeout
        // without progress.
        http.loop.advance(by: .milliseconds(999))
        #expect(!http.isClosed)
        http.loop.advance(by: .milliseconds(1))
        #expect(http.isClosed, "reset once the peer has taken nothing for the request-timeout")
    }

    @Test func aClientThatReadsSlowlyIsNotReset() throws {
        let http = try ClockedHTTP(requestTimeout: .seconds(1))
        defer { http.finish() }
        http.send("GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in 0..<20 {
            http.loop.advance(by: .milliseconds(900))
            // Empties its socket's buffer (a few hundred KiB of the 16 MiB): the service can send again.
            while !readAvailable(http.peer).isEmpty {}
            http.turn()
        }
        #expect(!http.isClosed, "18 s in, a peer that takes some bytes each 0.9 s keeps its response")
    }
}
