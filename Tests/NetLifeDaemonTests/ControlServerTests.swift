// The control server on a real loop, with short timeouts: requests are answered in order, an idle connection
// is closed, and a client that leaves its replies unread is held back, not timed out, until its own limit.

@testable import NetLifeDaemon
import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent
import Testing

@Suite(.timeLimit(.minutes(5)))
struct ControlServerTests {
    /// Runs `body` with a server whose commands are answered by `handle` (by default, an echo of `cmd`).
    /// `padding` bytes are added to each reply (a `status` of a few apps is a few hundred bytes), so that
    /// pipelined requests can pass the unread-reply mark.
    private func withServer(idleTimeout: Duration, unreadReplies: Duration = ControlProtocol.unreadRepliesTimeout,
                            padding: Int = 0, handle: @escaping (JSON) -> Void = { _ in },
                            _ body: (EventLoop, String) throws -> Void) throws {
        let loop = try EventLoop()
        let directory = "/tmp/netlife-unit-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let path = directory + "/control.sock"
        let server = ControlServer(path: path, group: nil, loop: loop, logger: Logger(label: "test", minimumLevel: .critical)) { request, _, reply in
            handle(request)
            var fields: JSONObject = ["ok": true, "echo": request["cmd"] ?? .null]
            if padding > 0 { fields["pad"] = .string(String(repeating: "p", count: padding)) }
            reply(.object(fields))
        }
        server.timeouts = ControlSession.Timeouts(request: idleTimeout, idle: idleTimeout, unreadReplies: unreadReplies)
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
            var result = read(fd, on: loop)
            #expect(result.text.contains("\"timeout\""), "the client is told why")
            if !result.ended { result = read(fd, on: loop) }
            #expect(result.ended, "the idle connection was closed")
            let elapsed = MonotonicTime.now() - started
            #expect(elapsed >= .milliseconds(90) && elapsed < .seconds(1), "closed after \(elapsed)")
        }
    }

    /// Reads until end of stream (or `timeout`), running the loop.
    private func readToEnd(_ fd: CInt, on loop: EventLoop, timeout: Duration = .seconds(5)) -> (text: String, ended: Bool) {
        var text = ""
        var ended = false
        let deadline = MonotonicTime.now() + timeout
        while !ended && MonotonicTime.now() < deadline {
            let part = read(fd, on: loop, timeout: deadline - MonotonicTime.now())
            text += part.text
            ended = part.ended
        }
        return (text, ended)
    }

    @Test func aRequestWithoutNewlineBeforeAHalfCloseIsAnsweredOnceThenTheConnectionEnds() throws {
        try withServer(idleTimeout: .seconds(60)) { loop, path in
            let fd = try SocketCalls.connectUnixBlocking(path: path)
            defer { close(fd) }
            _ = "{\"cmd\":\"last\"}".withCString { send(fd, $0, strlen($0), 0) }
            shutdown(fd, CInt(SHUT_WR))
            let result = readToEnd(fd, on: loop)
            #expect(result.ended)
            #expect(result.text == "{\"ok\":true,\"echo\":\"last\"}\n", "exactly one reply")
        }
    }

    @Test func pipelinedRequestsAreAllAnsweredInOrderAcrossYields() throws {
        try withServer(idleTimeout: .seconds(60)) { loop, path in
            let fd = try SocketCalls.connectUnixBlocking(path: path)
            defer { close(fd) }
            let count = ControlSession.linesPerTurn * 5 + 3
            let requests = (0..<count).map { "{\"cmd\":\"r\($0)\"}\n" }.joined()
            _ = requests.withCString { send(fd, $0, strlen($0), 0) }
            shutdown(fd, CInt(SHUT_WR))
            let result = readToEnd(fd, on: loop)
            let expected = (0..<count).map { "{\"ok\":true,\"echo\":\"r\($0)\"}\n" }.joined()
            #expect(result.text == expected)
        }
    }

    /// A client that pipelines expensive requests yields after `timePerTurn` of them, not after
    /// `linesPerTurn`: another client's request waits for one slice.
    @Test func aSessionOfExpensiveRequestsYieldsAfterItsTimeSlice() throws {
        var order: [String] = []
        let cost = Duration.milliseconds(1)
        try withServer(idleTimeout: .seconds(60), handle: { request in
            guard case .string(let command)? = request["cmd"] else { return }
            order.append(command)
            guard command == "slow" else { return }
            let end = MonotonicTime.now() + cost
            while MonotonicTime.now() < end {}
        }) { loop, path in
            let flooder = try SocketCalls.connectUnixBlocking(path: path)
            defer { close(flooder) }
            let other = try SocketCalls.connectUnixBlocking(path: path)
            defer { close(other) }
            let count = ControlSession.linesPerTurn
            let requests = String(repeating: "{\"cmd\":\"slow\"}\n", count: count)
            _ = requests.withCString { send(flooder, $0, strlen($0), 0) }
            shutdown(flooder, CInt(SHUT_WR))
            // The flooder's first slice has run once its first reply is here; then the other client asks.
            var flooded = read(flooder, on: loop).text
            _ = "{\"cmd\":\"fast\"}\n".withCString { send(other, $0, strlen($0), 0) }
            #expect(read(other, on: loop).text == "{\"ok\":true,\"echo\":\"fast\"}\n")
            let before = order.firstIndex(of: "fast") ?? order.count
            // Each slow request costs 1 ms and a slice is 2 ms: the other request waits behind one or two
            // slices of 2 or 3 (more only if the machine stalls the test mid-slice); were the turn bounded by
            // lines alone, all 32 would have been handled in the first.
            #expect(before < count / 2, "the other request waited for \(before) slow ones: \(order)")
            flooded += readToEnd(flooder, on: loop).text
            #expect(flooded.split(separator: "\n").filter { $0.contains("slow") }.count == count, "every slow request is answered")
        }
    }

    @Test func aFullServerEvictsTheSessionWaitingLongestForARequest() throws {
        try withServer(idleTimeout: .seconds(60)) { loop, path in
            var clients: [CInt] = []
            defer { clients.forEach { close($0) } }
            for _ in 0..<ControlProtocol.maxConnections {
                clients.append(try SocketCalls.connectUnixBlocking(path: path))
                _ = read(clients[clients.count - 1], on: loop, timeout: .milliseconds(3))
            }
            let newcomer = try SocketCalls.connectUnixBlocking(path: path)
            defer { close(newcomer) }
            _ = "{\"cmd\":\"hello\"}\n".withCString { send(newcomer, $0, strlen($0), 0) }
            #expect(read(newcomer, on: loop).text == "{\"ok\":true,\"echo\":\"hello\"}\n", "the newcomer is served")
            let oldest = readToEnd(clients[0], on: loop)
            #expect(oldest.ended && oldest.text.contains("too-many-connections"), "the oldest idle session was told and closed")
        }
    }

    /// A client that pipelines `count` requests on a non-blocking socket while the loop runs, reads nothing
    /// until `pause` after its last request went out, then reads until end of stream, `expectedLines` lines
    /// or `timeout`. Returns the lines read, whether every request went out before the pause ended, and
    /// whether the stream ended.
    private func pipelineThenReadLate(_ count: Int, to path: String, on loop: EventLoop, pause: Duration,
                                      expectedLines: Int, timeout: Duration = .seconds(30)) throws -> (lines: [Substring], allSent: Bool, ended: Bool) {
        let fd = try SocketCalls.connectUnixBlocking(path: path)
        defer { close(fd) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let requests = Array(String(repeating: "{\"cmd\":\"status\"}\n", count: count).utf8)
        var sent = 0
        var sentAll: MonotonicTime?
        var allSentBeforeReading = false
        var received: [UInt8] = []
        var newlines = 0
        var ended = false
        let deadline = MonotonicTime.now() + timeout
        var poller: EventTimer?
        poller = EventTimer(loop: loop) {
            if sent < requests.count {
                let result = requests[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT | MSG_NOSIGNAL)) }
                if result > 0 { sent += result }
                if sent == requests.count { sentAll = .now() }
            }
            if let sentAll, MonotonicTime.now() - sentAll >= pause {
                allSentBeforeReading = allSentBeforeReading || sent == requests.count
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let result = recv(fd, &buffer, buffer.count, CInt(MSG_DONTWAIT))
                    if result == 0 { ended = true }
                    guard result > 0 else { break }
                    received += buffer[0..<result]
                    newlines += buffer[0..<result].count(where: { $0 == 0x0A })
                }
            }
            if ended || newlines >= expectedLines || MonotonicTime.now() > deadline { loop.stop() } else { poller?.arm(after: .milliseconds(1)) }
        }
        poller?.arm(after: .zero)
        try loop.run()
        poller?.close()
        poller = nil
        return (received.split(separator: 0x0A).map { Substring(decoding: $0, as: UTF8.self) }, allSentBeforeReading, ended)
    }

    /// Pipelined requests whose replies the client reads only long after the request timeout are all
    /// answered: while the session waits for its replies to be taken it is not waiting for a request.
    @Test(.timeLimit(.minutes(1)))
    func aClientThatReadsItsRepliesLateGetsEveryOne() throws {
        try withServer(idleTimeout: .milliseconds(200), padding: 400) { loop, path in
            let count = 10_000
            let result = try pipelineThenReadLate(count, to: path, on: loop, pause: .seconds(1), expectedLines: count)
            let allSent = result.allSent
            #expect(allSent, "the requests all went out before the client began reading")
            let ok = result.lines.filter { $0.hasPrefix("{\"ok\":true,\"echo\":\"status\"") }.count
            #expect(ok == count, "\(ok) replies of \(count); the last line: \(result.lines.last?.prefix(200) ?? "none")")
            let lines = result.lines.count
            #expect(lines == count)
        }
    }

    /// A client that takes none of its replies is held back (not read) until its own limit, then told why
    /// after every reply already queued, and closed.
    @Test(.timeLimit(.minutes(1)))
    func aClientThatNeverReadsIsToldAfterItsQueuedReplies() throws {
        try withServer(idleTimeout: .seconds(60), unreadReplies: .milliseconds(300), padding: 400) { loop, path in
            let count = 10_000
            // The client begins reading ten times the limit after its last request went out, so that a
            // slow machine (a sanitizer build beside other work) still sees the limit pass first.
            let result = try pipelineThenReadLate(count, to: path, on: loop, pause: .seconds(3), expectedLines: count + 1)
            let ended = result.ended
            #expect(ended, "the connection closed after the error")
            let last = try #require(result.lines.last)
            #expect(last.contains("\"code\":\"slow-reader\""), "\(last.prefix(200))")
            let replies = result.lines.dropLast()
            #expect(replies.count > 0 && replies.count < count, "\(replies.count) replies before the error")
            #expect(replies.allSatisfy { $0.hasPrefix("{\"ok\":true,\"echo\":\"status\"") }, "every reply queued before the error arrives whole, in order")
        }
    }
}
