// The socket behind a process app's NOTIFY_SOCKET: bound to an abstract name, it receives each datagram with
// the sender's pid as the kernel wrote it, never blocks, and drops a datagram longer than its buffer whole.

@preconcurrency import Glibc
import NetLifeEvent
import Testing

@Suite struct CredentialDatagramSocketTests {
    private static func name() -> String { "netlife-test-notify/\(getpid())/\(UInt32.random(in: 0...UInt32.max))" }

    @Test func aDatagramComesWithItsSendersPid() throws {
        let socket = try CredentialDatagramSocket(abstractName: Self.name())
        defer { socket.close() }
        #expect(socket.address.hasPrefix("@netlife-test-notify/"))
        #expect(try socket.receive(limit: 64) == nil)
        try SocketCalls.sendUnixDatagram(to: socket.address, "READY=1\nSTATUS=up")
        let datagram = try #require(try socket.receive(limit: 64))
        #expect(datagram.bytes == Array("READY=1\nSTATUS=up".utf8))
        #expect(datagram.senderPID == getpid())
        #expect(datagram.senderUID == getuid())
        #expect(!datagram.truncated)
        #expect(try socket.receive(limit: 64) == nil)
    }

    @Test func aDatagramLongerThanTheBufferIsDroppedWhole() throws {
        let socket = try CredentialDatagramSocket(abstractName: Self.name())
        defer { socket.close() }
        try SocketCalls.sendUnixDatagram(to: socket.address, String(repeating: "x", count: 100))
        try SocketCalls.sendUnixDatagram(to: socket.address, "READY=1")
        let long = try #require(try socket.receive(limit: 64))
        #expect(long.truncated && long.bytes.isEmpty)
        #expect(try socket.receive(limit: 64)?.bytes == Array("READY=1".utf8))
    }

    @Test func theNameIsFreeAgainOnceClosedAndTakenWhileOpen() throws {
        let name = Self.name()
        let socket = try CredentialDatagramSocket(abstractName: name)
        #expect(throws: SystemError.self) { try CredentialDatagramSocket(abstractName: name) }
        socket.close()
        socket.close()
        #expect(try socket.receive(limit: 64) == nil)
        let again = try CredentialDatagramSocket(abstractName: name)
        again.close()
        #expect(throws: SystemError.self) { try CredentialDatagramSocket(abstractName: String(repeating: "n", count: 200)) }
    }
}
