// The App's own timers, budgets and background time on a loop whose clock the test moves (EventLoop's manual
// clock): what an app does when time passes, without waiting for it. Each test would take seconds of wall time
// on a real loop; here they take microseconds, and the instant each thing happens is exact.

import Glibc
import NetLife
import NetLifeTestSupport
import Testing

private let start = MonotonicTime(nanoseconds: 1_000_000_000_000)

private func makeApp(_ loop: EventLoop, _ configure: (inout AppConfiguration) -> Void = { _ in }) throws -> App {
    var configuration = AppConfiguration(name: "a")
    configure(&configuration)
    return try App(configuration: configuration, services: ServiceRegistry(), loop: loop,
                   logger: Logger(label: "test", minimumLevel: .critical))
}

@Suite struct AppClockTests {
    @Test func anAppTimerStandsStillWhileTheAppIsSuspendedAndRunsOutItsTimeAfter() throws {
        let loop = try EventLoop(manualClockAt: start)
        let app = try makeApp(loop)
        defer { app.retire(reason: "test over"); _ = loop.close() }
        app.perform(.launch(background: false)) { _ in }
        var firedAt: Duration?
        app.schedule(after: .seconds(2)) { firedAt = loop.now - start }
        loop.advance(by: .milliseconds(1500))
        app.perform(.background) { _ in }
        app.perform(.suspend) { _ in }
        #expect(app.state == .suspended)
        loop.advance(by: .seconds(3600))
        #expect(firedAt == nil, "no code of a suspended app runs: its timer is frozen with 0.5 s left")
        app.perform(.foreground) { _ in }
        loop.advance(by: .milliseconds(499))
        #expect(firedAt == nil)
        loop.advance(by: .milliseconds(1))
        #expect(firedAt == .milliseconds(1500) + .seconds(3600) + .milliseconds(500))
    }

    @Test func autoSuspendWaitsItsDelayAndAnOpenTaskHoldsItBackUntilItEnds() throws {
        let loop = try EventLoop(manualClockAt: start)
        let app = try makeApp(loop) { $0.autoSuspend = .seconds(10) }
        defer { app.retire(reason: "test over"); _ = loop.close() }
        app.perform(.launch(background: false)) { _ in }
        app.perform(.background) { _ in }
        loop.advance(by: .milliseconds(9999))
        #expect(app.state == .background, "auto-suspend waits its delay")
        loop.advance(by: .milliseconds(1))
        #expect(app.state == .suspended)

        app.perform(.foreground) { _ in }
        let task = app.beginBackgroundTask(name: "sync")
        app.perform(.background) { _ in }
        loop.advance(by: .seconds(20))
        #expect(app.state == .background, "an open task keeps the app running past auto-suspend")
        _ = app.endBackgroundTask(task)
        #expect(app.state == .suspended, "as on iOS, the app is suspended as soon as its last task ends")
    }

    @Test func theExpirationHandlerRunsAtItsLeadAndATaskLeftOpenPastItsGraceGetsTheAppKilled() throws {
        let loop = try EventLoop(manualClockAt: start)
        let app = try makeApp(loop) {
            $0.budgets.taskTime = .seconds(30)
            $0.budgets.expirationLead = .seconds(5)
            $0.budgets.expirationGrace = .seconds(1)
        }
        defer { app.retire(reason: "test over"); _ = loop.close() }
        app.perform(.launch(background: false)) { _ in }
        var expiredAt: Duration?
        _ = app.beginBackgroundTask(name: "upload") { expiredAt = loop.now - start }
        app.perform(.background) { _ in }
        #expect(app.backgroundTimeRemaining == .seconds(30))
        loop.advance(by: .seconds(24))
        #expect(expiredAt == nil && app.backgroundTimeRemaining == .seconds(6))
        loop.advance(by: .seconds(1))
        #expect(expiredAt == .seconds(25), "the handler runs expiration-lead before the background time ends")
        loop.advance(by: .seconds(5))
        #expect(app.state == .background, "the background time is spent; the grace is not")
        loop.advance(by: .seconds(1))
        #expect(app.state == .notRunning, "a task still open a grace after its time is up: the watchdog ends the app")
        #expect(app.lastTermination?.reason.kind == .watchdog)
    }

    @Test func aTaskEndedByItsExpirationHandlerLetsTheAppSuspendWithNoWatchdog() throws {
        let loop = try EventLoop(manualClockAt: start)
        let app = try makeApp(loop) {
            $0.budgets.taskTime = .seconds(30)
            $0.budgets.expirationLead = .seconds(5)
        }
        defer { app.retire(reason: "test over"); _ = loop.close() }
        app.perform(.launch(background: false)) { _ in }
        var task: BackgroundTaskIdentifier = 0
        task = app.beginBackgroundTask(name: "upload") { _ = app.endBackgroundTask(task) }
        app.perform(.background) { _ in }
        loop.advance(by: .seconds(25))
        #expect(app.state == .suspended, "its last task ended: the app is suspended, as iOS suspends it")
        #expect(app.lastTermination == nil)
    }
}

/// A protocol that says nothing.
private final class QuietPeerProtocol: DataSocketHandler {
    func dataSocketDidRead(_ socket: DataSocket) {}
}

@Suite struct DataSocketClockTests {
    @Test func aRefusedSocketRetriesAfterADoublingDelayAndConnectsOnceThePeerListens() throws {
        let loop = try EventLoop(manualClockAt: start)
        // A TCP socket bound and not listening: the kernel refuses connections to it until it listens.
        let (peer, address) = try #require(boundTCPSocket())
        defer { close(peer) }
        let app = try makeApp(loop) { $0.autoSuspend = nil }
        defer { app.retire(reason: "test over"); _ = loop.close() }
        app.perform(.launch(background: false)) { _ in }
        let dataSocket = app.openDataSocket(DataSocketConfiguration(name: "feed", address: address, protocolName: "quiet"),
                                            handler: QuietPeerProtocol())
        #expect(serve(loop) { dataSocket.state == .closed }, "refused")
        for delay in [100, 200, 400, 800, 1600, 3200, 5000, 5000] {
            loop.advance(by: .milliseconds(delay - 1))
            #expect(dataSocket.state == .closed, "no retry before \(delay) ms")
            loop.advance(by: .milliseconds(1))
            #expect(dataSocket.state == .connecting, "the retry \(delay) ms after the refusal, to the millisecond")
            #expect(serve(loop) { dataSocket.state == .closed }, "refused again")
        }
        #expect(listen(peer, 4) == 0)
        loop.advance(by: .seconds(5))
        #expect(serve(loop) { dataSocket.state == .connected }, "the retry at the ceiling connects once the peer listens")
    }
}

@Suite struct WakeLatencyPointTests {
    /// Whether `event` is a wake-up served.
    private static func isServed(_ event: AppEvent) -> Bool {
        if case .wakeServed = event { true } else { false }
    }

    @Test func dataOnAVoIPSocketWakesTheSuspendedAppWhichServesItAtOnceAndSaysSo() throws {
        let loop = try EventLoop(manualClockAt: start)
        let (peer, address) = try #require(boundTCPSocket())
        defer { close(peer) }
        #expect(listen(peer, 4) == 0)
        let app = try makeApp(loop) { $0.autoSuspend = nil }
        defer { app.retire(reason: "test over"); _ = loop.close() }
        var events: [AppEvent] = []
        app.onEvent = { _, event in events.append(event) }
        app.perform(.launch(background: false)) { _ in }
        var configuration = DataSocketConfiguration(name: "v", address: address, protocolName: "quiet")
        configuration.voip = true
        let dataSocket = app.openDataSocket(configuration, handler: QuietPeerProtocol())
        #expect(serve(loop) { dataSocket.state == .connected })
        let far = accept(peer, nil, nil)
        defer { close(far) }
        #expect(far >= 0)

        // Data while the app runs wakes nothing.
        #expect(send(far, "a\n", 2, 0) == 2)
        #expect(serve(loop) { dataSocket.input?.count == 2 })
        app.perform(.background) { _ in }
        app.perform(.suspend) { _ in }
        #expect(app.state == .suspended)
        #expect(!events.contains(where: Self.isServed))

        #expect(send(far, "b\n", 2, 0) == 2)
        #expect(serve(loop) { events.contains(where: Self.isServed) })
        let wake = events.compactMap { event -> String? in
            switch event {
            case .woken(let reason): "woken \(reason.name)"
            case .wakeServed(let reason, let latency): "served \(reason.name) after \(latency.nanoseconds) ns"
            default: nil
            }
        }
        // On the manual clock no time passes between the data's arrival and the app serving it.
        #expect(wake == ["woken voip-data", "served voip-data after 0 ns"], "\(wake)")
        #expect(app.state == .background)
    }
}

/// A service that echoes what it reads.
private final class EchoingService: Service {
    func serve(_ connection: Connection) { connection.delegate = Echoing.shared }
    private final class Echoing: ConnectionDelegate {
        nonisolated(unsafe) static let shared = Echoing()
        func connectionDidRead(_ connection: Connection) { connection.send(connection.input) }
    }
}

@Suite struct IdleBackgroundTests {
    /// An active app with `idle-background = 10s`, an echo listener and the events it emits.
    private static func idleApp(_ loop: EventLoop, keepsConnections: Bool = false) throws -> (App, events: () -> [AppEvent]) {
        var configuration = AppConfiguration(name: "a")
        configuration.autoSuspend = nil
        configuration.idleBackground = .seconds(10)
        configuration.idleKeepsConnections = keepsConnections
        configuration.listeners = [ListenerConfiguration(name: "main", address: .ipv4("127.0.0.1", port: 0), service: "echo")]
        let app = try App(configuration: configuration, services: ServiceRegistry([ServiceDescriptor(name: "echo") { _ in EchoingService() }]),
                          loop: loop, logger: Logger(label: "test", minimumLevel: .critical))
        var events: [AppEvent] = []
        app.onEvent = { _, event in events.append(event) }
        app.perform(.launch(background: false)) { _ in }
        return (app, { events })
    }

    private static func port(_ app: App) throws -> UInt16 {
        try #require(app.status.listeners.first?.address.split(separator: ":").last.flatMap { UInt16($0) })
    }

    @Test func anActiveAppNothingUsesGoesToTheBackgroundAfterItsIdleTime() throws {
        let loop = try EventLoop(manualClockAt: start)
        let (app, events) = try Self.idleApp(loop)
        defer { app.retire(reason: "test over"); _ = loop.close() }
        #expect(app.status.idleBackground == 10 && app.status.unusedFor == 0)
        loop.advance(by: .milliseconds(9_999))
        #expect(app.state == .active && app.status.unusedFor == 9.999)
        loop.advance(by: .milliseconds(1))
        #expect(app.state == .background, "the ordinary pipeline: listeners closed, then auto-suspend as configured")
        #expect(events().contains(.idle(unusedFor: .seconds(10))))
        #expect(app.status.unusedFor == nil, "no idle detection outside the foreground")
        app.perform(.foreground) { _ in }
        loop.advance(by: .seconds(9))
        #expect(app.state == .active, "back in the foreground, the idle time counts afresh")
    }

    @Test func bytesMovedOnAConnectionKeepTheAppActiveAndASilentOneDoesNot() throws {
        let loop = try EventLoop(manualClockAt: start)
        let (app, _) = try Self.idleApp(loop)
        defer { app.retire(reason: "test over"); _ = loop.close() }
        let client = try #require(Peer.connect(port: Self.port(app)))
        defer { client.close() }
        loop.advance(by: .milliseconds(1))
        #expect(serve(loop) { app.status.listeners.first?.connections == 1 })
        for second in 1...30 {
            loop.advance(by: .seconds(1))
            if second % 5 == 0 {
                client.send("ping\n")
                for _ in 0..<20 { loop.runOnce() }
            }
        }
        #expect(app.state == .active, "a ping every 5 s for 30 s: in use")
        // The connection stays open and says nothing: the app goes within a tenth past its idle time.
        loop.advance(by: .seconds(10))
        #expect(app.state == .active)
        loop.advance(by: .seconds(1))
        #expect(app.state == .background, "an open connection that moves nothing is no use")
    }

    @Test func anOpenConnectionKeepsItWhenTheAppSaysSoAndATaskKeepsItAlways() throws {
        let loop = try EventLoop(manualClockAt: start)
        let (app, _) = try Self.idleApp(loop, keepsConnections: true)
        defer { app.retire(reason: "test over"); _ = loop.close() }
        let client = try #require(Peer.connect(port: Self.port(app)))
        // The listener accepts a millisecond after the launch's reply; the connection is then accepted.
        loop.advance(by: .milliseconds(1))
        #expect(serve(loop) { app.status.listeners.first?.connections == 1 })
        loop.advance(by: .seconds(60))
        #expect(app.state == .active, "idle-keeps-connections: a silent stream is use")
        client.close()
        #expect(serve(loop) { app.status.listeners.first?.connections == 0 })
        let task = app.beginBackgroundTask(name: "report")
        loop.advance(by: .seconds(60))
        #expect(app.state == .active, "an open task is use")
        _ = app.endBackgroundTask(task)
        loop.advance(by: .seconds(11))
        #expect(app.state == .background || app.state == .suspended)
    }
}
