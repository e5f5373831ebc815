// The connection state machine over socketpairs: reads, writes, back-pressure, pausing, closing with FIN.

import Glibc
import NetLifeEvent
import Testing
import NetLifeTestSupport

/// Echoes, and records what happened.
private final class RecordingEcho: ConnectionDelegate {
    var reads = 0
    var closedWith: SystemError?? = .none
    var endSeen = false

    func connectionDidRead(_ connection: Connection) {
        reads += 1
        connection.output.moveAll(from: connection.input)
        connection.flush()
    }

    func connectionDidReachEnd(_ connection: Connection) {
        endSeen = true
        connection.close(.afterFlush)
    }

    func connectionDidClose(_ connection: Connection, error: SystemError?) {
        closedWith = .some(error)
    }
}

/// Echoes with `send`, and records the end of input.
private final class SendingEcho: ConnectionDelegate {
    var endSeen = false
    func connectionDidRead(_ connection: Connection) { connection.send(connection.input) }
    func connectionDidReachEnd(_ connection: Connection) {
        endSeen = true
        connection.close(.afterFlush)
    }
}


@Suite(.timeLimit(.minutes(5)))
struct ConnectionTests {
    /// A peer writes 3 MiB while reading the echo: `send` writes straight from the input while the output is
    /// empty and queues the rest; every byte comes back in order, across reads of every size.
    @Test func sendEchoesABulkStreamInOrder() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let echo = SendingEcho()
        connection.delegate = echo
        let payload = pattern(3 << 20)
        var sent = 0
        var received: [UInt8] = []
        #expect(runLoop(loop, timeout: .seconds(20)) {
            if sent < payload.count {
                let wrote = payload.withUnsafeBytes { write(theirs, $0.baseAddress! + sent, min(256 << 10, payload.count - sent)) }
                if wrote > 0 { sent += wrote }
            }
            received += readAvailable(theirs)
            return received.count == payload.count
        })
        #expect(received.count == payload.count && received == payload, "\(received.count) of \(payload.count) bytes")
        connection.close(.now)
    }

    /// The bytes and the end of input arrive together, and a read into the input buffer fills its space
    /// exactly, so the readable event that delivers the bytes also reads the end: the bytes are echoed first,
    /// and the end is still seen (on the next read) and closes the connection. (The first read, at the
    /// smallest size, goes to the scratch area; its being full makes the second a buffer read.)
    @Test func anEndOfInputRightAfterAFullReadIsNotLost() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        var sizer = ReadSizer()
        let first = sizer.size
        sizer.record(first)
        let payload = pattern(first + sizer.size)
        payload.withUnsafeBytes { _ = write(theirs, $0.baseAddress, $0.count) }
        shutdown(theirs, CInt(SHUT_WR))
        let connection = try Connection(loop: loop, fd: mine)
        let echo = SendingEcho()
        connection.delegate = echo
        var received: [UInt8] = []
        #expect(runLoop(loop) { received += readAvailable(theirs); return connection.state == .closed })
        received += readAvailable(theirs)
        #expect(received.count == payload.count && received == payload, "\(received.count) of \(payload.count) bytes")
        #expect(echo.endSeen)
        #expect(read(theirs, &received, 1) == 0, "the peer sees end of stream")
    }

    /// A chatty peer's small reads are offered to the delegate before any buffering: an echo that consumes
    /// them sends them straight back; one that declines some gets those through `input` instead, in order.
    @Test func smallReadsAreOfferedToTheDelegateBeforeBuffering() throws {
        final class Offered: ConnectionDelegate {
            var offered = 0
            var buffered = 0
            func connection(_ connection: Connection, consumeSmallRead bytes: UnsafeRawBufferPointer) -> Bool {
                offered += 1
                guard offered % 3 != 0 else { return false }   // every third goes through `input`
                connection.send(bytes)
                return true
            }
            func connectionDidRead(_ connection: Connection) {
                buffered += 1
                connection.send(connection.input)
            }
        }
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let delegate = Offered()
        connection.delegate = delegate
        for index in 0..<200 {
            let message = "message \(index)\n"
            writeAll(theirs, message)
            var received: [UInt8] = []
            #expect(runLoop(loop) { received += readAvailable(theirs); return received.count >= message.utf8.count })
            #expect(String(decoding: received, as: UTF8.self) == message)
        }
        #expect(delegate.offered > 150, "small reads went through the scratch area: \(delegate.offered)")
        #expect(delegate.buffered > 40, "declined ones came through input: \(delegate.buffered)")
        connection.close(.now)
    }

    /// `send(bytes)` to a peer that does not read: what the socket refuses is kept, in order, and written
    /// once the peer reads.
    @Test func sendingBytesToAFullSocketKeepsTheRestInOrder() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let payload = pattern(3 << 20)
        for start in stride(from: 0, to: payload.count, by: 100_000) {
            payload[start..<min(start + 100_000, payload.count)].withUnsafeBytes { connection.send($0) }
        }
        #expect(connection.output.count > 0, "the socket refused part of 3 MiB")
        var received: [UInt8] = []
        #expect(runLoop(loop, timeout: .seconds(20)) { received += readAvailable(theirs); return received.count == payload.count })
        #expect(received.count == payload.count && received == payload, "\(received.count) of \(payload.count) bytes")
        connection.close(.now)
    }

    @Test func sendOnAClosedConnectionDropsTheBytes() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        connection.close(.now)
        let buffer = EventBuffer.allocate()
        defer { buffer.free() }
        buffer.append("late")
        connection.send(buffer)
        #expect(buffer.isEmpty)
        #expect(connection.output.isEmpty)
    }

    /// A delegate may close its connection and drop the last other reference to it inside a callback. The
    /// read callback holds no reference of its own and goes on after the delegate returns; the loop keeps the
    /// connection until then (without that, AddressSanitizer reports a use after free here), and lets it go
    /// after.
    @Test func aConnectionClosedAndDroppedInsideItsCallbackLivesUntilTheCallbackReturns() throws {
        final class Closer: ConnectionDelegate {
            var connection: Connection?
            var closed = false
            func connection(_ connection: Connection, consumeSmallRead bytes: UnsafeRawBufferPointer) -> Bool {
                connection.close(.now)
                self.connection = nil
                return true
            }
            func connectionDidRead(_ connection: Connection) {}
            func connectionDidClose(_ connection: Connection, error: SystemError?) { closed = true }
        }
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let closer = Closer()
        weak var released: Connection?
        do {
            let connection = try Connection(loop: loop, fd: mine)
            connection.delegate = closer
            closer.connection = connection
            released = connection
        }
        _ = write(theirs, "x", 1)
        #expect(runLoop(loop) { closer.closed })
        #expect(runLoop(loop) { released == nil }, "released after the callback")
        #expect(loop.registeredObjectCount == 0)
    }

    @Test func echoesAndClosesOnEndOfInput() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let echo = RecordingEcho()
        connection.delegate = echo
        writeAll(theirs, "ping")
        var received: [UInt8] = []
        #expect(runLoop(loop) { received += readAvailable(theirs); return received.count == 4 })
        #expect(String(decoding: received, as: UTF8.self) == "ping")
        shutdown(theirs, CInt(SHUT_WR))
        #expect(runLoop(loop) { connection.state == .closed })
        #expect(echo.endSeen)
        #expect(echo.closedWith == .some(nil))
        #expect(read(theirs, &received, 1) == 0, "the peer sees end of stream")
        #expect(loop.registeredObjectCount == 0, "a closed connection leaves nothing registered")
    }

    @Test func pausedConnectionsDoNotReadUntilResumed() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let echo = RecordingEcho()
        connection.delegate = echo
        connection.pauseReading()
        #expect(!connection.isReading)
        writeAll(theirs, "held")
        runLoop(loop, timeout: .milliseconds(100)) { false }
        #expect(echo.reads == 0)
        connection.resumeReading()
        var received: [UInt8] = []
        #expect(runLoop(loop) { received += readAvailable(theirs); return received.count == 4 })
        connection.close(.now)
    }

    @Test func closeAfterFlushWritesEverythingThenEnds() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let payload = [UInt8](repeating: 0x61, count: 4 << 20)   // more than the socket buffer holds
        payload.withUnsafeBytes { connection.output.append($0) }
        connection.flush()
        connection.close(.afterFlush)
        #expect(connection.state == .closing)
        var received = 0
        var sawEnd = false
        #expect(runLoop(loop, timeout: .seconds(10)) {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(theirs, &buffer, buffer.count)
                if count > 0 { received += count; continue }
                if count == 0 { sawEnd = true }
                break
            }
            return sawEnd
        })
        #expect(received == payload.count)
        #expect(connection.state == .closed)
    }

    @Test func backPressureStopsReadingWhileOutputIsFull() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        connection.outputHighWaterMark = 64 * 1024
        let echo = RecordingEcho()
        connection.delegate = echo
        // The peer writes and never reads: the echo's output fills, and reading must stop.
        let chunk = String(repeating: "x", count: 65536)
        #expect(runLoop(loop) { writeAll(theirs, chunk); return !connection.isReading })
        #expect(connection.output.count < 8 << 20, "output stays bounded: \(connection.output.count) bytes")
        // Draining the peer's side lets the connection read again.
        #expect(runLoop(loop) { _ = readAvailable(theirs); return connection.isReading })
        connection.close(.now)
    }

    @Test func readErrorsCloseWithTheError() throws {
        let loop = try EventLoop()
        let listener = try Listener(loop: loop, address: .ipv4("127.0.0.1", port: 0), onAccept: { _ in }, onError: { _ in })
        defer { listener.close() }
        let client = socket(AF_INET, CInt(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = listener.address.port!.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        #expect(withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0)
        var accepted: Connection?
        let server = try Listener(loop: loop, address: .ipv4("127.0.0.1", port: 0), onAccept: { socket in
            accepted = try? Connection(loop: loop, fd: socket.fd)
        }, onError: { _ in })
        defer { server.close() }
        let peer = socket(AF_INET, CInt(SOCK_STREAM.rawValue), 0)
        defer { close(peer) }
        address.sin_port = server.address.port!.bigEndian
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(peer, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        #expect(runLoop(loop) { accepted != nil })
        let connection = try #require(accepted)
        let echo = RecordingEcho()
        connection.delegate = echo
        // An abortive close from the peer: the next read fails with ECONNRESET.
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(peer, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        writeAll(peer, "x")
        close(peer)
        #expect(runLoop(loop) { connection.state == .closed })
        if case .some(.some(let error)) = echo.closedWith {
            #expect(error.errno == .connectionReset)
        } else {
            // The byte may have been read before the reset arrived; then end of input or the reset follows.
            #expect(echo.reads + (echo.endSeen ? 1 : 0) >= 1)
        }
    }
}

/// Records the order in which connections' reads are delivered.
private final class ReadOrder: ConnectionDelegate {
    var order: [String] = []
    var names: [ObjectIdentifier: String] = [:]
    var onRead: (String) -> Void = { _ in }
    func connectionDidRead(_ connection: Connection) {
        let name = names[ObjectIdentifier(connection)] ?? "?"
        order.append(name)
        connection.input.removeAll()
        onRead(name)
    }
}

/// One connection of `.control` priority and `count` ordinary ones, over socketpairs, after warm-up rounds in
/// which every ordinary one read once: libevent asks epoll for 32 events at first and doubles that each time
/// the answer fills it, so a busy daemon's loop sees every ready descriptor in one poll, and so does this one
/// after the warm-up.
private struct BusyLoop {
    let loop: EventLoop
    let recorder = ReadOrder()
    var peers: [CInt] = []
    var connections: [Connection] = []
    var controlPeer: CInt = -1

    init(ordinary count: Int) throws {
        loop = try EventLoop()
        let (mine, theirs) = socketPair()
        controlPeer = theirs
        peers.append(theirs)
        let control = try Connection(loop: loop, fd: mine, priority: .control)
        recorder.names[ObjectIdentifier(control)] = "control"
        control.delegate = recorder
        connections.append(control)
        for index in 0..<count {
            let (mine, theirs) = socketPair()
            peers.append(theirs)
            let connection = try Connection(loop: loop, fd: mine)
            recorder.names[ObjectIdentifier(connection)] = "n\(index)"
            connection.delegate = recorder
            connections.append(connection)
        }
        let recorder = self.recorder
        for _ in 0..<4 {
            writeToAllOrdinary()
            runLoop(loop) { recorder.order.count == count }
            recorder.order.removeAll()
        }
    }

    func writeToAllOrdinary() { for peer in peers.dropFirst() { writeAll(peer, "x") } }

    func close() {
        for connection in connections { connection.close(.now) }
        for peer in peers { Glibc.close(peer) }
    }
}

@Suite(.timeLimit(.minutes(5)))
struct ConnectionPriorityTests {
    /// 200 ordinary connections and one of `.control` priority all have bytes waiting: the control one is read
    /// first in the turn.
    @Test func aControlPriorityConnectionIsReadBeforeOrdinaryOnes() throws {
        let busy = try BusyLoop(ordinary: 200)
        defer { busy.close() }
        busy.writeToAllOrdinary()
        writeAll(busy.controlPeer, "status")
        let recorder = busy.recorder
        #expect(runLoop(busy.loop) { recorder.order.count == 201 })
        #expect(recorder.order.first == "control")
    }

    /// A control request that arrives while a turn is serving 400 ready connections is read after at most
    /// `ReadContext.interval` (64) more of them, not after all.
    @Test func aControlRequestArrivingMidTurnWaitsForAFewCallbacksNotAll() throws {
        let busy = try BusyLoop(ordinary: 400)
        defer { busy.close() }
        busy.writeToAllOrdinary()
        let recorder = busy.recorder
        let controlPeer = busy.controlPeer
        // The first ordinary read sends the control request.
        var sent = false
        recorder.onRead = { name in
            if !sent, name != "control" { sent = true; writeAll(controlPeer, "status") }
        }
        #expect(runLoop(busy.loop) { recorder.order.count == 401 })
        let position = recorder.order.firstIndex(of: "control") ?? .max
        #expect(position <= 70, "the control read came after \(position) ordinary ones")
    }
}
