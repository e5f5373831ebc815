// Wake-on-connect for the built-in services, end to end with the real netlifed: an echo app and an http app
// with `idle-background` and `on-background = wake` go to sleep by themselves (idle -> background ->
// suspended), a real client (a socket for echo, curl for http) is answered by the suspended app, which is
// suspended again `auto-suspend` after the connection closed. What a peer sees is checked every time: its
// bytes, never a refusal, a reset or silence; also for connections arriving together and connections arriving
// while the app is going to sleep.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(2)))
struct BuiltinWakeTests {
    private static let autoSuspend = 0.3

    /// What one exchange with the echo app saw.
    private enum Exchange: Equatable {
        case answered(milliseconds: Double)
        case refused
        case reset
        case unanswered(String)

        var isAnswered: Bool { if case .answered = self { true } else { false } }
    }

    /// Connects to the echo app, sends `text`, reads its echo and closes; what the peer saw.
    private static func echo(port: UInt16, _ text: String) -> Exchange {
        let started = Date()
        switch connectTCP(port: port) {
        case .failed(let error):
            return error == ECONNREFUSED ? .refused : .unanswered("connect: \(String(cString: strerror(error)))")
        case .connected(let fd):
            let peer = Peer(fd: fd)
            defer { peer.close() }
            peer.send(text)
            var received: [UInt8] = []
            while received.count < text.utf8.count {
                switch peer.read(timeout: 3) {
                case .bytes(let bytes): received += bytes
                case .error(let error) where error == ECONNRESET: return .reset
                case .error(let error): return .unanswered("read: \(String(cString: strerror(error)))")
                case .endOfStream: return .unanswered("FIN after \(received.count) bytes")
                case .timedOut: return .unanswered("nothing within 3 s after \(received.count) bytes")
                }
            }
            let answer = String(decoding: received, as: UTF8.self)
            return answer == text ? .answered(milliseconds: milliseconds(since: started)) : .unanswered("got '\(answer)'")
        }
    }

    private static func waitSuspended(_ daemon: TestDaemon, timeout: TimeInterval = 5) -> Bool {
        waitUntil(timeout: timeout, every: 0.01) { daemon.currentState("echo") == "suspended" }
    }

    @Test func anIdleEchoAppSleepsByItselfAndAConnectionIsAnsweredByTheSuspendedApp() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "idle-background = 1s\nauto-suspend = 300ms",
                                                       listenerLines: "on-background = wake"))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let watcher = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "--json", "watch", "echo"])
        defer { watcher.signal(SIGTERM); _ = watcher.wait(timeout: 5) }
        #expect(Self.echo(port: port, "in use\n").isAnswered, "active, it echoes")

        // Nothing uses it: idle -> background -> suspended, by itself; its listener stays open.
        #expect(waitUntil(timeout: 5) { daemon.currentState("echo") == "background" || daemon.currentState("echo") == "suspended" },
                "idle after 1 s: \(daemon.log)")
        #expect(Self.waitSuspended(daemon), "suspended auto-suspend later")
        let listener = (daemon.status("echo")["listeners"] as? [[String: Any]])?.first
        #expect(listener?["open"] as? Bool == true, "the wake listener listens while the app is suspended: \(String(describing: listener))")

        // Each connection to the suspended app is answered, and the app is suspended again afterwards.
        var latencies: [Double] = []
        for round in 0..<5 {
            #expect(Self.waitSuspended(daemon), "suspended before round \(round)")
            let exchange = Self.echo(port: port, "round \(round)\n")
            guard case .answered(let ms) = exchange else {
                Issue.record("round \(round): \(exchange)")
                continue
            }
            latencies.append(ms)
            let closed = Date()
            #expect(Self.waitSuspended(daemon), "suspended again after round \(round)")
            let after = Date().timeIntervalSince(closed)
            #expect(after >= Self.autoSuspend * 0.9, "suspended \(after) s after the last connection closed, before auto-suspend")
        }
        #expect(daemon.log.contains("woken: a connection on listener main"), "\(daemon.log)")
        #expect(waitUntil(timeout: 3) { watcher.output.contains("\"reason\":\"connection\"") }, "\(watcher.output)")
        let events = watcher.output.split(separator: "\n")
        let idle = events.firstIndex { $0.contains("\"event\":\"idle\"") }
        let woken = events.firstIndex { $0.contains("\"event\":\"woken\"") && $0.contains("\"listener\":\"main\"") }
        #expect(idle != nil && woken != nil && idle! < woken!, "idle first, then woken by the connection: \(events)")

        // Connections arriving together: one wake-up, every one answered.
        #expect(Self.waitSuspended(daemon))
        let together = 16
        let lock = NSLock()
        nonisolated(unsafe) var gathered: [Exchange] = []
        DispatchQueue.concurrentPerform(iterations: together) { index in
            let exchange = Self.echo(port: port, "together \(index)\n")
            lock.withLock { gathered.append(exchange) }
        }
        #expect(gathered.count == together)
        #expect(gathered.allSatisfy { $0.isAnswered }, "\(gathered)")

        // Connections arriving while the app is going to sleep: around the auto-suspend instant.
        var failures: [String] = []
        for round in 0..<12 {
            let wake = Self.echo(port: port, "wake \(round)\n")
            if !wake.isAnswered { failures.append("wake \(round): \(wake)") }
            // From 250 to 360 ms after the close: before, at and after auto-suspend (300 ms) runs out.
            usleep(useconds_t(250_000 + round * 10_000))
            let exchange = Self.echo(port: port, "edge \(round)\n")
            if !exchange.isAnswered { failures.append("edge \(round): \(exchange)") }
        }
        #expect(failures.isEmpty, "\(failures)")
        #expect(Self.waitSuspended(daemon), "it sleeps again in the end")
        print("echo woken by a connection: first byte \(format(ms: median(latencies))) median, \(format(ms: latencies.max() ?? 0)) max (debug build)")
    }

    @Test func anIdleHTTPAppSleepsByItselfAndCurlIsAnsweredByTheSuspendedApp() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        let body = String(repeating: "netlife wakes on a connection\n", count: 2000)
        root.write("page.txt", body)
        let config = """
            [daemon]
            [app files]
            idle-background = 1s
            auto-suspend = 300ms

            [listener files.main]
            address = 127.0.0.1:0
            service = http
            root = \(root.path)
            on-background = wake
            """
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        let port = daemon.port(of: "files")
        let url = "http://127.0.0.1:\(port)/page.txt"
        let state = { daemon.currentState("files") }
        #expect(waitUntil(timeout: 6, every: 0.01) { state() == "suspended" }, "idle, then suspended: \(daemon.log)")
        for round in 0..<3 {
            #expect(waitUntil(timeout: 5, every: 0.01) { state() == "suspended" }, "suspended before round \(round)")
            let fetched = run(["/usr/bin/curl", "-sS", "--max-time", "5", "-o", "-", "-w", "\n%{http_code} %{time_starttransfer}", url])
            #expect(fetched.status == 0, "curl: \(fetched)")
            let lines = fetched.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            let trailer = lines.last.map(String.init) ?? ""
            #expect(trailer.hasPrefix("200 "), "\(trailer)")
            #expect(fetched.stdout.hasPrefix(body), "the whole file, byte for byte")
            #expect(fetched.stdout.utf8.count == body.utf8.count + 1 + trailer.utf8.count)
            print("http woken by curl, round \(round): status and time to the first byte \(trailer)")
        }
        #expect(daemon.log.contains("woken: a connection on listener main"))
        #expect(waitUntil(timeout: 5, every: 0.01) { state() == "suspended" }, "suspended again once curl closed")
    }
}
