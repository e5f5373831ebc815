// `on-background = wake` on a built-in service's listener, as the App performs it, on a loop whose clock the
// test moves and real sockets on 127.0.0.1: the listener stays open in the background and while the app is
// suspended; a connection to the suspended app is accepted, held, wakes the app and is served; the app is
// suspended again `auto-suspend` after its last connection closed. What a peer sees is checked each time: the
// echo of its bytes, never a refusal or a reset.

import Glibc
import NetLife
import NetLifeTestSupport
import Testing

private let start = MonotonicTime(nanoseconds: 1_000_000_000_000)

/// A service that echoes what it reads.
private final class EchoingService: Service {
    func serve(_ connection: Connection) { connection.delegate = Echoing.shared }
    private final class Echoing: ConnectionDelegate {
        nonisolated(unsafe) static let shared = Echoing()
        func connectionDidRead(_ connection: Connection) { connection.send(connection.input) }
    }
}

/// What has arrived on the peer's socket, without waiting.
private func received(_ peer: Peer) -> String {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = recv(peer.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
    return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : ""
}

@Suite struct ConnectionWakeAppTests {
    /// An app with a wake listener `main` (and, with `closeListener`, a `close` listener `side`), its events,
    /// among them the wake-ups it served with their latencies.
    private final class Harness {
        let loop: EventLoop
        let app: App
        var events: [AppEvent] = []

        init(autoSuspend: Duration? = .milliseconds(500), closeListener: Bool = false, launch: LifecycleCommand = .launch(background: false)) throws {
            loop = try EventLoop(manualClockAt: start)
            var configuration = AppConfiguration(name: "a")
            configuration.autoSuspend = autoSuspend
            var main = ListenerConfiguration(name: "main", address: .ipv4("127.0.0.1", port: 0), service: "echo")
            main.onBackground = .wake
            configuration.listeners = [main]
            if closeListener {
                configuration.listeners.append(ListenerConfiguration(name: "side", address: .ipv4("127.0.0.1", port: 0), service: "echo"))
            }
            app = try App(configuration: configuration, services: ServiceRegistry([ServiceDescriptor(name: "echo") { _ in EchoingService() }]),
                          loop: loop, logger: Logger(label: "test", minimumLevel: .critical))
            app.onEvent = { [unowned self] _, event in events.append(event) }
            app.perform(launch) { _ in }
            // The listeners accept a millisecond after the reply.
            loop.advance(by: .milliseconds(1))
        }

        func port(_ listener: String) -> UInt16? {
            app.status.listeners.first { $0.name == listener }?.address.split(separator: ":").last.flatMap { UInt16($0) }
        }

        func listener(_ name: String) -> ListenerStatus? { app.status.listeners.first { $0.name == name } }

        var wakeUps: Int { events.filter { if case .woken = $0 { true } else { false } }.count }

        /// The wake-ups served, as the app reported them (`.wakeServed`): what woke it and the latency.
        var served: [(reason: WakeReason, latency: Duration)] {
            events.compactMap { if case .wakeServed(let reason, let latency) = $0 { (reason, latency) } else { nil } }
        }

        /// Background, then suspended by auto-suspend.
        func putToSleep() {
            app.perform(.background) { _ in }
            loop.advance(by: app.configuration.autoSuspend ?? .zero)
        }

        func close() {
            app.retire(reason: "test over")
            _ = loop.close()
        }
    }

    @Test func theListenerStaysOpenAndAConnectionWakesTheSuspendedAppWhichServesItAndSleepsAgain() throws {
        let h = try Harness(closeListener: true)
        defer { h.close() }
        let port = try #require(h.port("main"))
        let side = try #require(h.port("side"))
        h.putToSleep()
        #expect(h.app.state == .suspended)
        #expect(h.listener("main")?.open == true, "the wake listener listens while the app is suspended")
        #expect(h.listener("side")?.open == false)
        #expect(tcpConnect(port: side) == ECONNREFUSED, "a close listener of the same app refuses")

        let client = try #require(Peer.connect(port: port))
        defer { client.close() }
        client.send("ping\n")
        #expect(serve(h.loop) { h.app.state == .background && h.listener("main")?.connections == 1 }, "woken by the connection")
        #expect(h.events.contains(.woken(.connection(listener: "main"))))
        #expect(h.served.map(\.reason) == [.connection(listener: "main")], "the wake latency is recorded once")
        var echoed = ""
        #expect(serve(h.loop) { echoed += received(client); return echoed == "ping\n" })
        #expect(tcpConnect(port: side) == ECONNREFUSED, "woken by a connection, the close listener still refuses")

        // An open connection holds the app awake past auto-suspend; auto-suspend counts from its close.
        h.loop.advance(by: .seconds(5))
        #expect(h.app.state == .background)
        client.close()
        #expect(serve(h.loop) { h.listener("main")?.connections == 0 })
        h.loop.advance(by: .milliseconds(499))
        #expect(h.app.state == .background)
        h.loop.advance(by: .milliseconds(1))
        #expect(h.app.state == .suspended, "suspended again auto-suspend after the last connection closed")

        // And the next connection wakes it again.
        let again = try #require(Peer.connect(port: port))
        defer { again.close() }
        again.send("pong\n")
        var second = ""
        #expect(serve(h.loop) { second += received(again); return second == "pong\n" })
        #expect(h.wakeUps == 2)
        #expect(h.served.count == 2)
    }

    @Test func severalConnectionsArrivingAtOnceAreAllServedByOneWakeUp() throws {
        let h = try Harness()
        defer { h.close() }
        let port = try #require(h.port("main"))
        h.putToSleep()
        #expect(h.app.state == .suspended)
        let clients = (0..<20).compactMap { _ in Peer.connect(port: port) }
        defer { for client in clients { client.close() } }
        #expect(clients.count == 20)
        for (index, client) in clients.enumerated() { client.send("client \(index)\n") }
        var answers = [String](repeating: "", count: clients.count)
        #expect(serve(h.loop) {
            for (index, client) in clients.enumerated() { answers[index] += received(client) }
            return answers.enumerated().allSatisfy { $0.element == "client \($0.offset)\n" }
        }, "every connection answered: \(answers)")
        #expect(h.wakeUps == 1, "one wake-up serves them all")
        #expect(h.listener("main")?.connections == 20)
        for client in clients { client.close() }
        #expect(serve(h.loop) { h.listener("main")?.connections == 0 })
        h.loop.advance(by: .milliseconds(500))
        #expect(h.app.state == .suspended)
    }

    @Test func aConnectionArrivingAsTheAppGoesToSleepIsHeldAndServed() throws {
        let h = try Harness()
        defer { h.close() }
        let port = try #require(h.port("main"))
        h.app.perform(.background) { _ in }
        h.loop.advance(by: .milliseconds(499))
        #expect(h.app.state == .background)
        // The connection completes in the kernel, and before the loop accepts it auto-suspend runs out: the
        // app is suspended with the connection in the listener's queue.
        let client = try #require(Peer.connect(port: port))
        defer { client.close() }
        client.send("late\n")
        h.loop.advance(by: .milliseconds(1))
        var echoed = ""
        #expect(serve(h.loop) { echoed += received(client); return echoed == "late\n" },
                "served: \(echoed)")
        #expect(h.events.contains(.stateChanged(from: .background, to: .suspended)), "it did go to sleep first")
        #expect(h.wakeUps == 1)
        #expect(h.app.state == .background)
    }

    @Test func withAutoSuspendZeroTheWakingConnectionIsServedBeforeTheAppSleepsAgain() throws {
        let h = try Harness(autoSuspend: .zero)
        defer { h.close() }
        let port = try #require(h.port("main"))
        h.putToSleep()
        h.loop.advance(by: .milliseconds(1))
        #expect(h.app.state == .suspended)
        for round in 0..<5 {
            let client = try #require(Peer.connect(port: port))
            client.send("round \(round)\n")
            var echoed = ""
            #expect(serve(h.loop) { echoed += received(client); return echoed == "round \(round)\n" })
            client.close()
            #expect(serve(h.loop) { h.listener("main")?.connections == 0 })
            h.loop.advance(by: .milliseconds(1))
            #expect(h.app.state == .suspended, "round \(round)")
        }
        #expect(h.wakeUps == 5)
    }

    @Test func aLaunchIntoTheBackgroundOpensTheWakeListenerAlone() throws {
        let h = try Harness(closeListener: true, launch: .launch(background: true))
        defer { h.close() }
        #expect(h.app.state == .background)
        #expect(h.listener("main")?.open == true)
        #expect(h.listener("side")?.open == false, "the close listener waits for the foreground")
        h.loop.advance(by: .milliseconds(500))
        #expect(h.app.state == .suspended)
        let port = try #require(h.port("main"))
        let client = try #require(Peer.connect(port: port))
        defer { client.close() }
        client.send("hello\n")
        var echoed = ""
        #expect(serve(h.loop) { echoed += received(client); return echoed == "hello\n" })
        // The foreground opens the other listener; the wake listener serves on.
        h.app.perform(.foreground) { _ in }
        h.loop.advance(by: .milliseconds(1))
        #expect(h.listener("side")?.open == true)
        client.send("again\n")
        echoed = ""
        #expect(serve(h.loop) { echoed += received(client); return echoed == "again\n" })
    }
}
