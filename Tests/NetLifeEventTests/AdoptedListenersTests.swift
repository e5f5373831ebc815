// Which of a program's sockets are the listeners it was to bind (`adopt = yes`): the matching rules as a pure
// function over the /proc values (descriptors per process, TCP table lines).

@testable import NetLifeEvent
import Testing

@Suite(.timeLimit(.minutes(1)))
struct AdoptedListenersMatchTests {
    static let web = SocketAddress.ipv4("127.0.0.5", port: 8080)
    static let other = SocketAddress.ipv4("127.0.0.5", port: 8081)

    static func listening(_ inode: UInt64, _ local: SocketAddress) -> TCPTableEntry {
        TCPTableEntry(inode: inode, local: local, remote: .ipv4("0.0.0.0", port: 0), state: .listen)
    }

    @Test func aSocketSharedByAMasterAndItsWorkersIsOneListenerTakenFromTheFirstProcess() {
        let held: [(pid: Int32, descriptors: [SocketDescriptor])] = [
            (100, [SocketDescriptor(fd: 9, inode: 7), SocketDescriptor(fd: 6, inode: 7)]),
            (101, [SocketDescriptor(fd: 6, inode: 7)]),
            (102, [SocketDescriptor(fd: 6, inode: 7)]),
        ]
        let found = AdoptedListeners.match(addresses: [Self.web], held: held, table: [Self.listening(7, Self.web)])
        #expect(found == [Self.web: [HeldListener(inode: 7, local: Self.web, pid: 100, fd: 6, pids: [100, 101, 102])]])
    }

    @Test func reusePortGivesSeveralSocketsForOneAddressEachTaken() {
        let held: [(pid: Int32, descriptors: [SocketDescriptor])] = [
            (100, [SocketDescriptor(fd: 6, inode: 7), SocketDescriptor(fd: 7, inode: 8)]),
            (101, [SocketDescriptor(fd: 7, inode: 8)]),
            (102, [SocketDescriptor(fd: 6, inode: 7)]),
        ]
        let found = AdoptedListeners.match(addresses: [Self.web], held: held,
                                           table: [Self.listening(8, Self.web), Self.listening(7, Self.web)])
        #expect(found[Self.web] == [HeldListener(inode: 7, local: Self.web, pid: 100, fd: 6, pids: [100, 102]),
                                    HeldListener(inode: 8, local: Self.web, pid: 100, fd: 7, pids: [100, 101])])
    }

    @Test func onlyListeningSocketsAtExactlyTheAddressMatch() {
        let held: [(pid: Int32, descriptors: [SocketDescriptor])] = [
            (100, [1, 2, 3, 4, 5].map { SocketDescriptor(fd: CInt($0) + 10, inode: UInt64($0)) }),
        ]
        let table = [
            TCPTableEntry(inode: 1, local: Self.web, remote: .ipv4("127.0.0.1", port: 40000), state: .established),
            Self.listening(2, .ipv4("0.0.0.0", port: 8080)),
            Self.listening(3, .ipv4("127.0.0.5", port: 8082)),
            Self.listening(4, Self.other),
            Self.listening(99, Self.web),   // someone else's socket: no descriptor of the program
        ]
        let found = AdoptedListeners.match(addresses: [Self.web, Self.other], held: held, table: table)
        #expect(found[Self.web] == nil)
        #expect(found[Self.other] == [HeldListener(inode: 4, local: Self.other, pid: 100, fd: 14, pids: [100])])
        #expect(AdoptedListeners.match(addresses: [], held: held, table: table).isEmpty)
    }
}
