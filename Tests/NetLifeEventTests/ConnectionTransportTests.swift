// A connection that reads and writes through a transport (as TLS does), over socketpairs, with a toy
// transport that flips every byte: a bulk stream echoed in order across turns (writes in slices, a bounded
// share per turn), a read that first waits for writability (a handshake's message), a write that waits for
// readability, a transport failure that closes the connection, and the transport closed with it.

import Glibc
import NetLifeEvent
import Testing
import NetLifeTestSupport

/// XOR 0xFF over the socket. `readWantsWriteOnce`: the first receive says it must write first (as a
/// handshake does); `writeWantsReadOnce`: the first send says it must read first.
private final class FlippingTransport: ConnectionTransport {
    let fd: CInt
    var readWantsWriteOnce: Bool
    var writeWantsReadOnce: Bool
    var failReads = false
    var closedCleanly: Bool?
    var largestSend = 0
    let bytesPerTurn = 64 << 10
    let bytesPerSend = 16 << 10

    init(fd: CInt, readWantsWriteOnce: Bool = false, writeWantsReadOnce: Bool = false) {
        self.fd = fd
        self.readWantsWriteOnce = readWantsWriteOnce
        self.writeWantsReadOnce = writeWantsReadOnce
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) -> TransportResult {
        if failReads { return .failed(SystemError("toy_read", Errno(rawValue: EPROTO))) }
        if readWantsWriteOnce {
            readWantsWriteOnce = false
            return .wantsWrite
        }
        let got = read(fd, buffer.baseAddress, buffer.count)
        if got > 0 {
            for index in 0..<got { buffer[index] ^= 0xFF }
            return .transferred(got)
        }
        if got == 0 { return .ended }
        return errno == EAGAIN ? .wantsRead : .failed(SystemError("read", Errno.current))
    }

    func send(_ bytes: UnsafeRawBufferPointer) -> TransportResult {
        if writeWantsReadOnce {
            writeWantsReadOnce = false
            return .wantsRead
        }
        largestSend = max(largestSend, bytes.count)
        let flipped = bytes.map { $0 ^ 0xFF }
        let sent = flipped.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if sent > 0 { return .transferred(sent) }
        return errno == EAGAIN ? .wantsWrite : .failed(SystemError("write", Errno.current))
    }

    var hasBufferedInput: Bool { false }

    func close(cleanly: Bool) { closedCleanly = cleanly }
}

private final class Echo: ConnectionDelegate {
    var closedWith: SystemError?? = .none
    func connectionDidRead(_ connection: Connection) {
        connection.output.moveAll(from: connection.input)
        connection.flush()
    }
    func connectionDidClose(_ connection: Connection, error: SystemError?) { closedWith = .some(error) }
}

@Suite(.timeLimit(.minutes(2)))
struct ConnectionTransportTests {
    /// 2 MiB through the transport both ways: in order, in slices of at most `bytesPerSend`.
    @Test(arguments: [false, true]) func aBulkStreamIsEchoedInOrderThroughTheTransport(readWaitsForWriteFirst: Bool) throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let transport = FlippingTransport(fd: mine, readWantsWriteOnce: readWaitsForWriteFirst)
        connection.use(transport)
        let echo = Echo()
        connection.delegate = echo
        let payload = pattern(2 << 20)
        let onWire = payload.map { $0 ^ 0xFF }
        var sent = 0
        var received: [UInt8] = []
        #expect(runLoop(loop, timeout: .seconds(20)) {
            if sent < onWire.count {
                let wrote = onWire.withUnsafeBytes { write(theirs, $0.baseAddress! + sent, min(128 << 10, onWire.count - sent)) }
                if wrote > 0 { sent += wrote }
            }
            received += readAvailable(theirs)
            return received.count >= payload.count
        })
        #expect(received.map { $0 ^ 0xFF } == payload)
        #expect(transport.largestSend <= transport.bytesPerSend)
        connection.close(.now)
        #expect(transport.closedCleanly == true)
    }

    @Test func aWriteThatWaitsForReadabilityGoesOutWhenTheSocketIsReadable() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let transport = FlippingTransport(fd: mine, writeWantsReadOnce: true)
        connection.use(transport)
        connection.delegate = Echo()
        connection.output.append("hello")
        connection.flush()
        #expect(connection.output.count == 5, "the write waits")
        // One byte from the peer makes the socket readable: the write goes out, the byte is echoed.
        let one: [UInt8] = [UInt8(ascii: "!") ^ 0xFF]
        _ = one.withUnsafeBytes { write(theirs, $0.baseAddress, 1) }
        var received: [UInt8] = []
        #expect(runLoop(loop) {
            received += readAvailable(theirs)
            return received.count >= 6
        })
        #expect(String(decoding: received.map { $0 ^ 0xFF }, as: UTF8.self) == "hello!")
        connection.close(.now)
    }

    @Test func aTransportFailureClosesTheConnectionWithItsErrorAndNotCleanly() throws {
        let loop = try EventLoop()
        let (mine, theirs) = socketPair()
        defer { close(theirs) }
        let connection = try Connection(loop: loop, fd: mine)
        let transport = FlippingTransport(fd: mine)
        transport.failReads = true
        connection.use(transport)
        let echo = Echo()
        connection.delegate = echo
        writeAll(theirs, "x")
        #expect(runLoop(loop) { connection.state == .closed })
        #expect(echo.closedWith == .some(SystemError("toy_read", Errno(rawValue: EPROTO))))
        #expect(transport.closedCleanly == false)
    }
}
