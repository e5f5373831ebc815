// The Swift API for data sockets (App.openDataSocket with an app author's own protocol) on a real loop
// against a listening socket of the test: the quiet step that must await a reply holds a background task
// until the reply arrives, and the app suspends only then; entering and leaving quiet mode are events; and a
// reclaim reports only the sockets and connections it reset itself. A reply that never comes is given up when
// the background time runs out (on a manual clock: the instant is exact).

import Glibc
import NetLife
import NetLifeTestSupport
import Testing

/// A protocol whose quiet mode needs the peer's `OK`.
private final class AwaitingProtocol: DataSocketHandler {
    var connected = 0
    var received: [String] = []
    func dataSocketDidConnect(_ socket: DataSocket) {
        connected += 1
        socket.send("HELLO\n")
    }
    func dataSocketDidRead(_ socket: DataSocket) {
        guard let input = socket.input else { return }
        while case .line(let bytes) = input.readLine(maxLength: 100) {
            received.append(String(decoding: bytes, as: UTF8.self))
            if received.last == "OK" { socket.quietReplyArrived() }
        }
    }
    func dataSocketEnterQuiet(_ socket: DataSocket) -> QuietEntry {
        socket.send("QUIET\n")
        return .awaitingReply
    }
}

/// A protocol whose peer says nothing; its quiet mode needs no reply.
private final class SilentProtocol: DataSocketHandler {
    func dataSocketDidRead(_ socket: DataSocket) {}
}

/// A service that leaves its connections open and idle.
private final class IdleService: Service {
    func serve(_ connection: Connection) {}
}

@Suite(.timeLimit(.minutes(5)))
struct DataSocketAPITests {
    @Test func aQuietStepThatAwaitsItsReplyHoldsABackgroundTaskUntilIt() throws {
        let loop = try EventLoop()
        let (listenFD, address) = try SocketCalls.listen(on: .ipv4("127.0.0.1", port: 0), backlog: 4)
        defer { SocketCalls.close(listenFD) }
        var configuration = AppConfiguration(name: "chat")
        configuration.autoSuspend = nil
        let app = try App(configuration: configuration, services: ServiceRegistry(), loop: loop,
                          logger: Logger(label: "test", minimumLevel: .critical))
        defer { app.retire(reason: "test over") }
        app.perform(.launch(background: false)) { _ in }
        var socketConfiguration = DataSocketConfiguration(name: "chat", address: address, protocolName: "chat")
        socketConfiguration.policy = .quiet
        let handler = AwaitingProtocol()
        let socket = app.openDataSocket(socketConfiguration, handler: handler)
        var peer: CInt = -1
        #expect(runLoop(loop) {
            if peer < 0 { peer = accept(listenFD, nil, nil) }
            return peer >= 0 && socket.state == .connected
        })
        defer { if peer >= 0 { close(peer) } }
        #expect(handler.connected == 1)

        app.perform(.background) { _ in }
        #expect(socket.state == .quiet)
        #expect(app.status.tasks.map(\.name) == ["quiet chat"], "the quiet step holds a background task")
        var outcome: TransitionOutcome?
        app.perform(.suspend) { outcome = $0 }
        guard case .suspendPending? = outcome else {
            Issue.record("suspend must wait for the quiet reply: \(String(describing: outcome))")
            return
        }
        var sent: [UInt8] = []
        #expect(runLoop(loop) {
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = recv(peer, &buffer, buffer.count, CInt(MSG_DONTWAIT))
            if count > 0 { sent += buffer[0..<count] }
            return String(decoding: sent, as: UTF8.self) == "HELLO\nQUIET\n"
        })
        _ = "OK\n".withCString { send(peer, $0, 3, CInt(MSG_NOSIGNAL)) }
        #expect(runLoop(loop) { app.state == .suspended }, "suspended once the reply ended the task")
        #expect(handler.received == ["OK"])
        #expect(app.status.tasks.isEmpty)
    }

    /// On a manual clock: a peer that never answers the quiet command holds the app awake only until the
    /// background time runs out; then the wait is given up (the connection closed) and its task ends.
    @Test func aQuietReplyThatNeverComesIsGivenUpWhenTheBackgroundTimeRunsOut() throws {
        let loop = try EventLoop(manualClockAt: MonotonicTime(nanoseconds: 1_000_000_000_000))
        let (listenFD, address) = try SocketCalls.listen(on: .ipv4("127.0.0.1", port: 0), backlog: 4)
        defer { SocketCalls.close(listenFD) }
        var configuration = AppConfiguration(name: "chat")
        configuration.autoSuspend = nil
        configuration.budgets.taskTime = .seconds(30)
        configuration.budgets.expirationLead = .seconds(5)
        let app = try App(configuration: configuration, services: ServiceRegistry(), loop: loop,
                          logger: Logger(label: "test", minimumLevel: .critical))
        defer { app.retire(reason: "test over"); _ = loop.close() }
        app.perform(.launch(background: false)) { _ in }
        var socketConfiguration = DataSocketConfiguration(name: "chat", address: address, protocolName: "chat")
        socketConfiguration.policy = .quiet
        let socket = app.openDataSocket(socketConfiguration, handler: AwaitingProtocol())
        var peer: CInt = -1
        #expect(serve(loop) {
            if peer < 0 { peer = accept(listenFD, nil, nil) }
            return peer >= 0 && socket.state == .connected
        })
        defer { if peer >= 0 { close(peer) } }

        app.perform(.background) { _ in }
        #expect(socket.state == .quiet)
        #expect(app.status.tasks.map(\.name) == ["quiet chat"])
        loop.advance(by: .milliseconds(24_999))
        #expect(socket.state == .quiet && app.status.tasks.count == 1, "the wait holds the app awake for its background time")
        loop.advance(by: .milliseconds(1))
        #expect(app.status.tasks.isEmpty, "at expiration-lead before the end the wait is given up and its task ends")
        #expect(socket.state != .quiet)
        var byte: UInt8 = 0
        #expect(serve(loop) { recv(peer, &byte, 1, CInt(MSG_DONTWAIT)) == 0 }, "the peer sees the connection closed")
        #expect(app.state == .suspended, "suspended as its last task ended, not killed by the watchdog")
    }

    @Test func enteringAndLeavingQuietModeAreReportedAsEvents() throws {
        let loop = try EventLoop()
        let (listenFD, address) = try SocketCalls.listen(on: .ipv4("127.0.0.1", port: 0), backlog: 4)
        defer { SocketCalls.close(listenFD) }
        var configuration = AppConfiguration(name: "mail")
        configuration.autoSuspend = nil
        let app = try App(configuration: configuration, services: ServiceRegistry(), loop: loop,
                          logger: Logger(label: "test", minimumLevel: .critical))
        defer { app.retire(reason: "test over") }
        var events: [AppEvent] = []
        app.onEvent = { _, event in
            switch event {
            case .socketChanged, .socketQuietModeChanged: events.append(event)
            default: break
            }
        }
        app.perform(.launch(background: false)) { _ in }
        var socketConfiguration = DataSocketConfiguration(name: "imap", address: address, protocolName: "silent")
        socketConfiguration.policy = .quiet
        let socket = app.openDataSocket(socketConfiguration, handler: SilentProtocol())
        var peer: CInt = -1
        #expect(runLoop(loop) {
            if peer < 0 { peer = accept(listenFD, nil, nil) }
            return peer >= 0 && socket.state == .connected
        })
        defer { if peer >= 0 { close(peer) } }
        events.removeAll()
        app.perform(.background) { _ in }
        #expect(socket.state == .quiet)
        #expect(events == [.socketQuietModeChanged(name: "imap", quiet: true)])
        app.perform(.foreground) { _ in }
        #expect(socket.state == .connected)
        #expect(events == [.socketQuietModeChanged(name: "imap", quiet: true), .socketQuietModeChanged(name: "imap", quiet: false)])
    }

    @Test func aSecondReclaimReportsNothingTheFirstOneReset() throws {
        let loop = try EventLoop()
        let (peerListener, peerAddress) = try SocketCalls.listen(on: .ipv4("127.0.0.1", port: 0), backlog: 4)
        defer { SocketCalls.close(peerListener) }
        var configuration = AppConfiguration(name: "a")
        configuration.autoSuspend = nil
        configuration.listeners = [ListenerConfiguration(name: "main", address: .ipv4("127.0.0.1", port: 0), service: "idle")]
        let services = ServiceRegistry([ServiceDescriptor(name: "idle") { _ in IdleService() }])
        let app = try App(configuration: configuration, services: services, loop: loop,
                          logger: Logger(label: "test", minimumLevel: .critical))
        defer { app.retire(reason: "test over") }
        app.perform(.launch(background: false)) { _ in }
        let socket = app.openDataSocket(DataSocketConfiguration(name: "s", address: peerAddress, protocolName: "silent"),
                                        handler: SilentProtocol())
        let port = try #require(app.status.listeners.first?.address.split(separator: ":").last.flatMap { UInt16($0) })
        let client = try #require(Peer.connect(port: port))
        defer { client.close() }
        var peer: CInt = -1
        #expect(runLoop(loop) {
            if peer < 0 { peer = accept(peerListener, nil, nil) }
            return peer >= 0 && socket.state == .connected && app.status.listeners.first?.connections == 1
        })
        defer { if peer >= 0 { close(peer) } }
        app.perform(.background) { _ in }
        app.perform(.suspend) { _ in }
        #expect(app.state == .suspended)

        let first = try app.reclaim().get()
        #expect(first.sockets == ["s"] && first.connections == 1, "\(first)")
        let second = try app.reclaim().get()
        #expect(second.sockets.isEmpty && second.connections == 0, "everything was reset by the first: \(second)")
        #expect(socket.state == .defunct)
    }
}
