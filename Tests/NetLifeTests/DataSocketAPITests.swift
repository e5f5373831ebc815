// The Swift API for data sockets (App.openDataSocket with an app author's own protocol) on a real loop
// against a listening socket of the test: the quiet step that must await a reply holds a background task
// until the reply arrives, and the app suspends only then.

import Glibc
import NetLife
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

/// Runs the loop until `condition` holds (checked every millisecond) or 5 s pass.
private func drive(_ loop: EventLoop, until condition: @escaping () -> Bool) -> Bool {
    let deadline = MonotonicTime.now() + .seconds(5)
    var ticker: EventTimer?
    ticker = EventTimer(loop: loop) {
        if condition() || MonotonicTime.now() >= deadline { loop.stop() } else { ticker?.arm(after: .milliseconds(1)) }
    }
    ticker?.arm(after: .zero)
    try? loop.run()
    ticker?.close()
    ticker = nil
    return condition()
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
        #expect(drive(loop) {
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
        #expect(drive(loop) {
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = recv(peer, &buffer, buffer.count, CInt(MSG_DONTWAIT))
            if count > 0 { sent += buffer[0..<count] }
            return String(decoding: sent, as: UTF8.self) == "HELLO\nQUIET\n"
        })
        _ = "OK\n".withCString { send(peer, $0, 3, CInt(MSG_NOSIGNAL)) }
        #expect(drive(loop) { app.state == .suspended }, "suspended once the reply ended the task")
        #expect(handler.received == ["OK"])
        #expect(app.status.tasks.isEmpty)
    }
}
