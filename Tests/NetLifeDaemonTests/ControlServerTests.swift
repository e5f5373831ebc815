// The control server on a real loop, with a short idle timeout: requests are answered in order, and an
// idle connection is closed.

@testable import NetLifeDaemon
import Glibc
import NetLife
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ControlServerTests {
    private func withServer(idleTimeout: Duration, _ body: (EventLoop, String) throws -> Void) throws {
        let loop = try EventLoop()
        let directory = "/tmp/netlife-unit-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let path = directory + "/control.sock"
        let server = ControlServer(path: path, group: nil, loop: loop, logger: Logger(label: "test", minimumLevel: .critical)) { request, _, reply in
            reply(Reply.ok(["echo": request["cmd"] ?? .null]))
        }
        server.idleTimeout = idleTimeout
        try server.start()
        defer {
            server.close()
            rmdir(directory)
        }
        try body(loop, path)
    }

    /// Runs the loop until `fd` has a complete line or reaches end of stream; returns the text read.
    private func read(_ fd: CInt, on loop: EventLoop, timeout: Duration = .seconds(2)) -> (text: String, ended: Bool) {
        var text = ""
        var ended = false
        let deadline = MonotonicTime.now() + timeout
        var poller: EventTimer?
        poller = EventTimer(loop: loop) {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, CInt(MSG_DONTWAIT))
            if count > 0 { text += String(decoding: buffer[0..<count], as: UTF8.self) }
            if count == 0 { ended = true }
            if ended || text.hasSuffix("\n") || MonotonicTime.now() > deadline { loop.stop() } else { poller?.arm(after: .milliseconds(1)) }
        }
        poller?.arm(after: .zero)
        try? loop.run()
        poller?.close()
        poller = nil
        return (text, ended)
    }

    @Test func answersRequestsInOrderOnOneConnection() throws {
        try withServer(idleTimeout: .seconds(60)) { loop, path in
            let fd = try SocketCalls.connectUnixBlocking(path: path)
            defer { close(fd) }
            let requests = "{\"cmd\":\"one\"}\n{\"cmd\":\"two\"}\n"
            _ = requests.withCString { send(fd, $0, strlen($0), 0) }
            var text = read(fd, on: loop).text
            if !text.contains("two") { text += read(fd, on: loop).text }
            #expect(text == "{\"ok\":true,\"echo\":\"one\"}\n{\"ok\":true,\"echo\":\"two\"}\n")
        }
    }

    @Test func closesIdleConnections() throws {
        try withServer(idleTimeout: .milliseconds(100)) { loop, path in
            let fd = try SocketCalls.connectUnixBlocking(path: path)
            defer { close(fd) }
            let started = MonotonicTime.now()
            let result = read(fd, on: loop)
            #expect(result.ended, "the idle connection was closed")
            let elapsed = MonotonicTime.now() - started
            #expect(elapsed >= .milliseconds(90) && elapsed < .seconds(1), "closed after \(elapsed)")
        }
    }
}
