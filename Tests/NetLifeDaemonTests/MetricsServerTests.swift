// The metrics server on a real loop with short bounds: a scrape in chunks on a kept connection, HEAD, HTTP/1.0,
// the errors and their closes, a silent client timed out, a scrape of many apps spread over loop turns, a client
// that stops reading reset while a slow one gets everything, and the connection limit.

@testable import NetLifeDaemon
import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeTestSupport
import Testing

/// A response read by a test client: its head and its body (de-chunked when chunked).
private struct Response {
    var head: String
    var body: String
    var ended: Bool
}

/// A server on a loop, apps to show, and blocking TCP clients.
private final class EndpointHarness {
    let loop: EventLoop
    let server: MetricsServer
    var apps: [App] = []

    init(appCount: Int = 2, limits: MetricsServer.Limits = MetricsServer.Limits()) throws {
        loop = try EventLoop()
        server = MetricsServer(address: .ipv4("127.0.0.1", port: 0), loop: loop, logger: Logger(label: "test", minimumLevel: .critical))
        server.limits = limits
        try server.start()
        for index in 0..<appCount {
            apps.append(try App(configuration: AppConfiguration(name: "app\(index)"), services: ServiceRegistry(), loop: loop,
                                logger: Logger(label: "test", minimumLevel: .critical)))
        }
        let apps = self.apps
        server.apps = { apps }
    }

    func close() {
        for app in apps { app.retire(reason: "test over") }
        server.close()
        loop.close()
    }

    /// A connected client socket (the kernel completes the handshake: the loop need not run).
    func connect() -> CInt {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = (server.address.port ?? 0).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        precondition(connected == 0, "connect: errno \(errno)")
        return fd
    }

    /// A client on a socket pair with 4 KiB buffers each way, served by the server: one that stops reading
    /// fills them within a few kilobytes.
    func smallBufferedClient() -> CInt {
        let (client, served) = socketPair()
        var small: Int32 = 4096
        setsockopt(served, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        server.serve(fd: served)
        return client
    }

    func send(_ fd: CInt, _ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            sent += count
        }
    }

    /// Runs the loop for `duration`.
    func run(for duration: Duration) {
        runLoop(loop, timeout: duration) { false }
    }

    /// Runs the loop, reading `fd`, until `done` holds for what was read, the peer ends, or `timeout` passes.
    func read(_ fd: CInt, timeout: Duration = .seconds(5), until done: @escaping ([UInt8]) -> Bool) -> (bytes: [UInt8], ended: Bool) {
        var bytes: [UInt8] = []
        var ended = false
        let deadline = MonotonicTime.now() + timeout
        var poller: EventTimer?
        poller = EventTimer(loop: loop) { [loop] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = recv(fd, &buffer, buffer.count, CInt(MSG_DONTWAIT))
                if count > 0 { bytes += buffer[0..<count]; continue }
                if count == 0 || (count < 0 && errno != EAGAIN) { ended = true }
                break
            }
            if ended || done(bytes) || MonotonicTime.now() > deadline { loop.stop() } else { poller?.arm(after: .milliseconds(1)) }
        }
        poller?.arm(after: .zero)
        try? loop.run()
        poller?.close()
        // The handler holds the variable that holds the timer: clearing it ends the cycle (and the loop's).
        poller = nil
        return (bytes, ended)
    }

    /// Reads one response: a head, then a chunked body to its last chunk, a Content-Length body, or (neither)
    /// everything until the end.
    func response(_ fd: CInt, timeout: Duration = .seconds(5), headOnly: Bool = false) -> Response {
        let read = self.read(fd, timeout: timeout) { bytes in Self.parse(bytes, headOnly: headOnly) != nil }
        return Self.parse(read.bytes, headOnly: headOnly, ended: read.ended) ?? Response(head: String(decoding: read.bytes, as: UTF8.self), body: "", ended: read.ended)
    }

    /// The response in `bytes` once it is whole (nil before).
    static func parse(_ bytes: [UInt8], headOnly: Bool, ended: Bool = false) -> Response? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return nil }
        let head = String(text[..<end.lowerBound])
        var rest = Substring(text[end.upperBound...])
        if headOnly { return Response(head: head, body: String(rest), ended: ended) }
        if head.contains("Transfer-Encoding: chunked") {
            var body = ""
            while let line = rest.range(of: "\r\n") {
                guard let size = Int(rest[..<line.lowerBound], radix: 16) else { return nil }
                let start = line.upperBound
                if size == 0 { return rest[start...].hasPrefix("\r\n") ? Response(head: head, body: body, ended: ended) : nil }
                guard rest.utf8.count >= rest.distance(from: rest.startIndex, to: start) + size + 2 else { return nil }
                let chunkEnd = rest.utf8.index(start, offsetBy: size)
                body += rest[start..<chunkEnd]
                rest = rest[rest.utf8.index(chunkEnd, offsetBy: 2)...]
            }
            return nil
        }
        if let lengthLine = head.split(separator: "\r\n").first(where: { $0.hasPrefix("Content-Length: ") }),
           let length = Int(lengthLine.dropFirst("Content-Length: ".count)) {
            return rest.utf8.count >= length ? Response(head: head, body: String(rest), ended: ended) : nil
        }
        return ended ? Response(head: head, body: String(rest), ended: true) : nil
    }
}

@Suite(.timeLimit(.minutes(2)))
struct MetricsServerTests {
    @Test func aScrapeComesInChunksAndTheKeptConnectionServesTheNextRequest() throws {
        let harness = try EndpointHarness()
        defer { harness.close() }
        harness.server.record(.idle(unusedFor: .seconds(3)), app: "app1")
        harness.server.recordControlRequest(nil, reply: ControlError(.badRequest, "m").json)
        let fd = harness.connect()
        defer { close(fd) }
        harness.send(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        let first = harness.response(fd)
        #expect(first.head.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(first.head)")
        #expect(first.head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"))
        #expect(first.body.contains("netlife_app_state{app=\"app0\",state=\"not-running\"} 1\n"), "\(first.body.prefix(400))")
        #expect(first.body.contains("netlife_app_idle_backgrounds_total{app=\"app1\"} 1\n"))
        #expect(first.body.contains("netlife_control_requests_total{command=\"unknown\",result=\"bad-request\"} 1\n"))
        #expect(first.body.contains("process_resident_memory_bytes "))
        #expect(first.body.hasSuffix("\n") && !first.ended)

        harness.send(fd, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        let second = harness.response(fd, headOnly: true)
        #expect(second.head.hasPrefix("HTTP/1.1 200 OK\r\n") && second.body.isEmpty, "HEAD: the head alone: \(second)")
        harness.send(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let third = harness.response(fd)
        #expect(third.body.contains("netlife_build_info"))
        let closed = harness.read(fd, timeout: .seconds(2)) { _ in false }.ended
        #expect(closed, "Connection: close is honoured")
    }

    @Test func aClientThatHalfClosesAfterItsRequestGetsTheTextThenTheEnd() throws {
        let harness = try EndpointHarness()
        defer { harness.close() }
        let fd = harness.connect()
        defer { close(fd) }
        harness.send(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        shutdown(fd, Int32(SHUT_WR))
        let response = harness.response(fd)
        #expect(response.head.hasPrefix("HTTP/1.1 200 OK\r\n") && response.body.contains("process_open_fds "))
        let ended = harness.read(fd, timeout: .seconds(2)) { _ in false }.ended
        #expect(ended, "closed once the text is written: the client will ask for nothing more")
    }

    @Test func http10GetsTheTextUntilTheConnectionCloses() throws {
        let harness = try EndpointHarness()
        defer { harness.close() }
        let fd = harness.connect()
        defer { close(fd) }
        harness.send(fd, "GET /metrics HTTP/1.0\r\n\r\n")
        let response = harness.response(fd)
        #expect(response.ended && !response.head.contains("chunked"), "\(response.head)")
        #expect(response.body.hasPrefix("# HELP netlife_app_state ") && response.body.contains("process_open_fds "))
    }

    @Test func garbageTooMuchAWrongPathOrMethodGetTheirStatusAndAClose() throws {
        let harness = try EndpointHarness()
        defer { harness.close() }
        for (request, status) in [("hello\r\n\r\n", "400 Bad Request"), ("GET /other HTTP/1.1\r\nHost: x\r\n\r\n", "404 Not Found"),
                                  ("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", "405 Method Not Allowed"),
                                  ("GET /metrics HTTP/1.1\r\nHost: x\r\n" + String(repeating: "X-Long: \(String(repeating: "y", count: 100))\r\n", count: 100),
                                   "431 Request Header Fields Too Large")] {
            let fd = harness.connect()
            defer { close(fd) }
            harness.send(fd, request)
            let response = harness.response(fd)
            #expect(response.head.hasPrefix("HTTP/1.1 \(status)\r\n"), "\(request.prefix(40)): \(response.head)")
            if status.hasPrefix("405") { #expect(response.head.contains("\r\nAllow: GET, HEAD")) }
            // A 404 keeps the connection (the request was well formed and had no body); the others close it.
            let kept = status.hasPrefix("404")
            let ended = harness.read(fd, timeout: kept ? .milliseconds(300) : .seconds(2)) { _ in false }.ended
            #expect(ended != kept, "\(status): closed \(ended)")
        }
    }

    @Test func aClientThatSendsNothingGets408AndAnIdleKeptOneIsClosedSilently() throws {
        var limits = MetricsServer.Limits()
        limits.requestTimeout = .milliseconds(150)
        limits.idleTimeout = .milliseconds(300)
        let harness = try EndpointHarness(limits: limits)
        defer { harness.close() }
        let silent = harness.connect()
        defer { close(silent) }
        let started = MonotonicTime.now()
        let timedOut = harness.read(silent) { _ in false }
        let text = String(decoding: timedOut.bytes, as: UTF8.self), ended = timedOut.ended
        #expect(text.hasPrefix("HTTP/1.1 408 Request Timeout\r\n") && ended, "\(text)")
        let waited = MonotonicTime.now() - started
        #expect(waited >= .milliseconds(140) && waited < .seconds(2), "\(waited)")

        let kept = harness.connect()
        defer { close(kept) }
        harness.send(kept, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(harness.response(kept).head.hasPrefix("HTTP/1.1 200"))
        let idle = harness.read(kept) { _ in false }
        let idleEnded = idle.ended, idleBytes = idle.bytes.count
        #expect(idleEnded && idleBytes == 0, "closed without a word after the idle time")
        // Half a request, then nothing: 408.
        let half = harness.connect()
        defer { close(half) }
        harness.send(half, "GET /metr")
        let halfText = String(decoding: harness.read(half) { _ in false }.bytes, as: UTF8.self)
        #expect(halfText.hasPrefix("HTTP/1.1 408 "), "\(halfText)")
    }

    @Test func aScrapeOfManyAppsIsWrittenOverManyLoopTurnsAndIsWhole() throws {
        var limits = MetricsServer.Limits()
        limits.workPerTurn = .zero   // one step a turn
        let harness = try EndpointHarness(appCount: 300, limits: limits)
        defer { harness.close() }
        let fd = harness.connect()
        defer { close(fd) }
        let turnsBefore = harness.loop.turnTimes.count
        harness.send(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = harness.response(fd, timeout: .seconds(30))
        let turns = harness.loop.turnTimes.count - turnsBefore
        let states = response.body.split(separator: "\n").filter { $0.hasPrefix("netlife_app_state{") }
        #expect(states.count == 300 * 5, "every app's five states: \(states.count)")
        #expect(response.body.contains("process_start_time_seconds "), "the text ran to its end")
        // 300 apps read 8 a step, then the text written about 16 KiB a step: at least a turn for each.
        let expected = 300 / MetricsServer.appsPerStep + response.body.utf8.count / MetricsServer.chunkBytes
        #expect(turns >= expected, "\(turns) turns, \(expected) steps at least")
        #expect(response.head.contains("Transfer-Encoding: chunked"))
    }

    @Test func aClientThatStopsReadingHoldsItsScrapeAndIsResetAfterTheWriteTimeout() throws {
        var limits = MetricsServer.Limits()
        limits.highWaterMark = 4096
        limits.writeTimeout = .milliseconds(300)
        let harness = try EndpointHarness(appCount: 200, limits: limits)
        defer { harness.close() }
        // A client that stops reading fills the small buffers within a few kilobytes.
        let client = harness.smallBufferedClient()
        defer { close(client) }
        harness.send(client, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        let started = MonotonicTime.now()
        harness.run(for: .milliseconds(100))
        #expect(harness.read(client, timeout: .milliseconds(1)) { _ in true }.bytes.count > 0, "the answer began")
        // Nothing read now: the scrape waits for the client, which is cut off after the write timeout.
        harness.run(for: .milliseconds(800))
        let rest = harness.read(client, timeout: .seconds(2)) { _ in false }
        let ended = rest.ended, elapsed = MonotonicTime.now() - started
        let finished = String(decoding: rest.bytes, as: UTF8.self).contains("process_start_time_seconds")
        #expect(ended && elapsed < .seconds(3), "cut off once the client took nothing for the write timeout")
        #expect(!finished, "the scrape never finished")
    }

    @Test func aSlowClientThatKeepsReadingGetsTheWholeText() throws {
        var limits = MetricsServer.Limits()
        limits.highWaterMark = 4096
        limits.writeTimeout = .milliseconds(300)
        let harness = try EndpointHarness(appCount: 200, limits: limits)
        defer { harness.close() }
        let client = harness.smallBufferedClient()
        defer { close(client) }
        harness.send(client, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        // A read every 100 ms, each well within the write timeout.
        var bytes: [UInt8] = []
        for _ in 0..<400 {
            harness.run(for: .milliseconds(100))
            bytes += harness.read(client, timeout: .milliseconds(1)) { _ in true }.bytes
            if EndpointHarness.parse(bytes, headOnly: false) != nil { break }
        }
        let response = EndpointHarness.parse(bytes, headOnly: false)
        let states = response?.body.split(separator: "\n").filter { $0.hasPrefix("netlife_app_state{") }.count ?? 0
        #expect(states == 200 * 5 && response?.body.contains("process_start_time_seconds") == true, "\(bytes.count) bytes")
    }

    @Test func aClientBeyondTheConnectionLimitGets503() throws {
        var limits = MetricsServer.Limits()
        limits.maxConnections = 2
        let harness = try EndpointHarness(limits: limits)
        defer { harness.close() }
        let first = harness.connect(), second = harness.connect()
        defer { close(first); close(second) }
        harness.run(for: .milliseconds(50))
        let third = harness.connect()
        defer { close(third) }
        let refused = harness.read(third) { _ in false }
        let text = String(decoding: refused.bytes, as: UTF8.self), ended = refused.ended
        #expect(text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n") && ended, "\(text)")
        harness.send(first, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(harness.response(first).head.hasPrefix("HTTP/1.1 200"), "the two within the limit are served")
    }
}
