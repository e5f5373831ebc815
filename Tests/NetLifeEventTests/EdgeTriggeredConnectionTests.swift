// Connections' events are edge-triggered: epoll reports a socket once per arrival. These are the cases where
// a connection that waited for another report would wait forever: bytes it left unread or unwritten with no
// new arrival to come, and the peer's FIN arriving together with the last bytes.

import Glibc
import NetLifeEvent
import Testing
import NetLifeTestSupport

/// Echoes small reads straight back (as the echo service does), and buffered reads with `send`.
private final class Echo: ConnectionDelegate {
    let consumesSmallReads: Bool
    var ended = false
    init(consumesSmallReads: Bool) { self.consumesSmallReads = consumesSmallReads }
    func connection(_ connection: Connection, consumeSmallRead bytes: UnsafeRawBufferPointer) -> Bool {
        guard consumesSmallReads else { return false }
        connection.send(bytes)
        return true
    }
    func connectionDidRead(_ connection: Connection) { connection.send(connection.input) }
    func connectionDidReachEnd(_ connection: Connection) {
        ended = true
        connection.close(.afterFlush)
    }
}

/// Lets `fd` queue `bytes` in its send direction (root only: SO_SNDBUFFORCE passes the sysctl limit), so that a
/// test can put more in a socket at once than a connection takes in one turn.
private func allowSendQueue(_ fd: CInt, _ bytes: CInt) -> Bool {
    var size = bytes
    return setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, socklen_t(MemoryLayout<CInt>.size)) == 0
}


@Suite(.timeLimit(.minutes(2)))
struct EdgeTriggeredConnectionTests {
    /// The last bytes and the FIN arrive in one report. The short read that takes the bytes does not show the
    /// end; the FIN was reported (EV_CLOSED), so the connection reads again and finds it.
    @Test(arguments: [true, false], [true, false])
    func bytesAndTheEndArrivingTogetherAreBothSeen(consumesSmallReads: Bool, beforeTheConnectionExists: Bool) throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let echo = Echo(consumesSmallReads: consumesSmallReads)
        var connection: Connection?
        if !beforeTheConnectionExists {
            connection = try Connection(loop: loop, fd: mine)
            connection?.delegate = echo
            runLoop(loop, timeout: .milliseconds(20)) { false }
        }
        writeAll(theirs, "last words")
        shutdown(theirs, CInt(SHUT_WR))
        if beforeTheConnectionExists {
            connection = try Connection(loop: loop, fd: mine)
            connection?.delegate = echo
        }
        var received: [UInt8] = []
        #expect(runLoop(loop) { received += readAvailable(theirs); return connection?.state == .closed })
        received += readAvailable(theirs)
        #expect(String(decoding: received, as: UTF8.self) == "last words")
        #expect(echo.ended)
        var byte: UInt8 = 0
        #expect(read(theirs, &byte, 1) == 0, "the peer sees the end of stream")
    }

    /// 1 MiB is in the socket at once and nothing more comes: far more than one callback reads (960 bytes,
    /// then growing blocks up to 2 x 256 KiB per turn). The connection keeps reading at the next turns without a new report, and every
    /// byte comes back.
    @Test func aBurstLargerThanOneTurnsShareIsReadToTheEnd() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        try #require(allowSendQueue(theirs, 8 << 20), "SO_SNDBUFFORCE needs CAP_NET_ADMIN")
        let payload = pattern(1 << 20)
        let queued = payload.withUnsafeBytes { write(theirs, $0.baseAddress, $0.count) }
        try #require(queued == payload.count, "the whole burst is queued before the connection reads")
        let connection = try Connection(loop: loop, fd: mine)
        let echo = Echo(consumesSmallReads: true)
        connection.delegate = echo
        var received: [UInt8] = []
        #expect(runLoop(loop, timeout: .seconds(20)) { received += readAvailable(theirs); return received.count >= payload.count })
        // Compared outside #expect, whose report of a difference between two 1 MiB arrays takes minutes.
        let intact = received == payload
        #expect(intact, "\(received.count) of \(payload.count) bytes came back")
        connection.close(.now)
    }

    /// A flush stops after 256 KiB although the socket has room (here after one writev of 128 blocks): the
    /// socket never fills, so no write report comes while the peer reads nothing. The rest goes out at the
    /// next turns.
    @Test func aFlushThatStopsBeforeTheSocketIsFullFinishesAtTheNextTurn() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        try #require(allowSendQueue(mine, 16 << 20), "SO_SNDBUFFORCE needs CAP_NET_ADMIN")
        let connection = try Connection(loop: loop, fd: mine)
        // 300 blocks of 4 KiB, moved in whole (evbuffer_add_buffer keeps blocks apart).
        let payload = pattern(300 * 4096)
        for block in 0..<300 {
            let piece = EventBuffer.allocate()
            defer { piece.free() }
            piece.append(Array(payload[block * 4096..<(block + 1) * 4096]))
            connection.output.moveAll(from: piece)
        }
        connection.flush()
        #expect(connection.output.count > 0, "one flush does not send it all")
        // The peer reads nothing meanwhile: its reads would report the socket writable again.
        #expect(runLoop(loop, timeout: .seconds(5)) { connection.output.isEmpty }, "\(connection.output.count) bytes left")
        var received: [UInt8] = []
        #expect(runLoop(loop, timeout: .seconds(20)) { received += readAvailable(theirs); return received.count >= payload.count })
        let intact = received == payload
        #expect(intact, "\(received.count) of \(payload.count) bytes came out")
        #expect(connection.output.isEmpty)
        connection.close(.now)
    }
}
