// The libcurl engine on the event loop, against a server the test holds in its hands (a plain socket): the
// connection libcurl makes is netlifed's (opened and closed through its callbacks), so that a reset reaches
// the server as an RST, and a pause closes it: a paused download holds no connection.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent
@testable import NetLifeServices
import NetLifeTestSupport
import Testing

/// A listening socket on 127.0.0.1 with a port the kernel chose, non-blocking.
private final class HandServer {
    let fd: CInt
    let port: UInt16
    var connection: CInt = -1

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        try #require(fd >= 0 && bound)
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    /// Whether a connection was accepted (it is kept in `connection`).
    func accepted() -> Bool {
        if connection < 0 { connection = accept(fd, nil, nil) }
        return connection >= 0
    }

    /// Reads the request head and answers 200 with a long body of which `count` bytes are sent now.
    func answer(sending count: Int) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        _ = read(connection, &buffer, buffer.count)
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\nETag: \"v1\"\r\nAccept-Ranges: bytes\r\n\r\n"
        writeAll(connection, head + String(repeating: "x", count: count))
    }

    /// What the connection reads now: its bytes, 0 at the end (FIN), or -errno.
    func readResult() -> Int {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var total = 0
        while true {
            let count = recv(connection, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                total += count
                continue
            }
            if count == 0 { return 0 }
            return errno == EAGAIN ? total : -Int(errno)
        }
    }

    func close() {
        if connection >= 0 { Glibc.close(connection) }
        Glibc.close(fd)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct CurlEngineTests {
    let logger = Logger(label: "test", minimumLevel: .critical)

    /// Runs a download from `server` until it has appended some bytes.
    private func started(_ server: HandServer, _ loop: EventLoop, _ curl: CurlMulti, into output: String) throws -> Download {
        let download = Download(url: try URLParts(parsing: "http://127.0.0.1:\(server.port)/f.bin"), output: output, curl: curl, loop: loop, logger: logger)
        download.start()
        #expect(runLoop(loop) { server.accepted() })
        server.answer(sending: 5000)
        #expect(runLoop(loop) { download.bytesDone >= 5000 })
        #expect(download.state == .running && curl.count == 1)
        return download
    }

    @Test func aResetReachesTheServerAsRSTAndPausesTheDownload() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let server = try HandServer()
        defer { server.close() }
        let loop = try EventLoop()
        defer { _ = loop.close() }
        let curl = try #require(CurlMulti(loop: loop, logger: logger))
        defer { curl.close() }
        let download = try started(server, loop, curl, into: scratch.file("f.bin"))

        download.resetConnections()
        #expect(runLoop(loop) { download.state != .running })
        guard case .paused = download.state else {
            Issue.record("not paused: \(download.state)")
            return
        }
        #expect(server.readResult() == -Int(ECONNRESET), "the server sees the reset")
        #expect(curl.count == 0)
    }

    @Test func aPausedDownloadHoldsNoConnection() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let server = try HandServer()
        defer { server.close() }
        let loop = try EventLoop()
        defer { _ = loop.close() }
        let curl = try #require(CurlMulti(loop: loop, logger: logger))
        defer { curl.close() }
        let download = try started(server, loop, curl, into: scratch.file("f.bin"))

        download.pause("the app was suspended")
        #expect(download.state == .paused("the app was suspended"))
        #expect(runLoop(loop, timeout: .seconds(2)) { curl.count == 0 })
        // Closed at once: an end of stream, or a reset when bytes were still unread on the client's side.
        let seen = server.readResult()
        #expect(seen == 0 || seen == -Int(ECONNRESET), "the connection is closed: \(seen)")
        // Nothing more arrives while paused: the part stays as the pause left it.
        let size = download.bytesDone
        _ = runLoop(loop, timeout: .milliseconds(300)) { false }
        #expect(download.bytesDone == size && download.state == .paused("the app was suspended"))
    }
}
