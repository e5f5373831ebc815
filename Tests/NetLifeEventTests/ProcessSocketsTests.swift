// Reclaim of another process's TCP sockets: the /proc parsers and the join as pure values, the line reader
// across chunk boundaries, and for real a python3 child holding two connections to a listener of the test:
// found through /proc, one taken with pidfd_getfd and reset (the test's end sees ECONNRESET, the child's next
// recv and send fail), the one declared VoIP left alone; and the same while the child is frozen in a cgroup.

import Foundation
@testable import NetLifeEvent
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(2)))
struct ProcessSocketsParserTests {
    @Test func linkTargetsNameSocketInodes() {
        #expect(ProcessSockets.socketInode(linkTarget: "socket:[123456]") == 123456)
        for other in ["pipe:[12]", "socket:[]", "socket:[12", "socket:[1x]", "/dev/null", "socket:[99999999999999999999999]",
                      "anon_inode:[eventpoll]", "socket:[-1]"] {
            #expect(ProcessSockets.socketInode(linkTarget: other) == nil, "\(other)")
        }
    }

    @Test func tableLinesGiveAddressesStateAndInode() {
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
        #expect(ProcessSockets.tableEntry(line: Array(header.utf8), ipv6: false) == nil)
        let listening = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0"
        #expect(ProcessSockets.tableEntry(line: Array(listening.utf8), ipv6: false)
                == TCPTableEntry(inode: 31337, local: .ipv4("127.0.0.1", port: 8080), remote: .ipv4("0.0.0.0", port: 0), state: .listen))
        let established = "  12: 0A00A8C0:D431 08080808:0050 01 00000000:00000000 02:000AF7B6 00000000  1000        0 4242 2 ffff 20 4 30 10 -1"
        #expect(ProcessSockets.tableEntry(line: Array(established.utf8), ipv6: false)
                == TCPTableEntry(inode: 4242, local: .ipv4("192.168.0.10", port: 54321), remote: .ipv4("8.8.8.8", port: 80), state: .established))
        let six = "   0: 00000000000000000000000001000000:0016 0000000000000000FFFF00000100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0"
        #expect(ProcessSockets.tableEntry(line: Array(six.utf8), ipv6: true)
                == TCPTableEntry(inode: 777, local: .ipv6("::1", port: 22), remote: .ipv6("::ffff:127.0.0.1", port: 40000), state: .established))
        #expect(ProcessSockets.tableEntry(line: Array(six.utf8), ipv6: false) == nil, "a tcp6 line is not a tcp line")
        for bad in ["", "0: 0100007F:1F90", "   0: 0100007G:1F90 00000000:0000 0A a b c d e 1",
                    "   0: 0100007F:1F90 00000000:0000 0D 00000000:00000000 00:00000000 00000000 0 0 1",
                    "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 12x",
                    "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 " + String(repeating: "9", count: 30),
                    "   0: " + String(repeating: "F", count: 100_000)] {
            #expect(ProcessSockets.tableEntry(line: Array(bad.utf8), ipv6: false) == nil, "\(bad.prefix(80))")
        }
    }

    @Test func theJoinKeepsTCPDescriptorsAndReclaimTakesEachSocketOnceSparingVoIP() {
        let a = SocketAddress.ipv4("127.0.0.1", port: 1)
        let table = [TCPTableEntry(inode: 10, local: a, remote: a, state: .established),
                     TCPTableEntry(inode: 11, local: a, remote: a, state: .listen),
                     TCPTableEntry(inode: 12, local: a, remote: a, state: .closeWait),
                     TCPTableEntry(inode: 14, local: a, remote: a, state: .established),
                     TCPTableEntry(inode: 99, local: a, remote: a, state: .established)]
        // fd 9 is a Unix socket (no table line); fd 7 duplicates fd 5; fd 8 is the VoIP socket, also held as 6.
        let descriptors = [SocketDescriptor(fd: 7, inode: 10), SocketDescriptor(fd: 5, inode: 10), SocketDescriptor(fd: 4, inode: 11),
                           SocketDescriptor(fd: 3, inode: 12), SocketDescriptor(fd: 9, inode: 50), SocketDescriptor(fd: 8, inode: 14),
                           SocketDescriptor(fd: 6, inode: 14)]
        let sockets = ProcessSockets.join(descriptors: descriptors, table: table)
        #expect(sockets.map(\.fd) == [3, 4, 5, 6, 7, 8])
        #expect(sockets.first { $0.fd == 4 }?.state == .listen)
        #expect(ProcessSockets.reclaimTargets(descriptors, sparing: [8]).map(\.fd) == [3, 4, 5, 9], "each socket once, no VoIP")
        #expect(ProcessSockets.reclaimTargets(descriptors, sparing: []).map(\.fd) == [3, 4, 5, 6, 9])
        #expect(!TCPState.listen.holdsAConnection && !TCPState.closed.holdsAConnection)
        #expect(TCPState.established.holdsAConnection && TCPState.closeWait.holdsAConnection && TCPState.synSent.holdsAConnection)
    }

    @Test func linesAreReadAcrossChunksAndOverlongOnesSkipped() throws {
        let path = "/tmp/netlife-lines-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        var expected: [String] = []
        var text = ""
        for index in 0..<5000 {
            let line = "line \(index) " + String(repeating: "x", count: index % 97)
            expected.append(line)
            text += line + "\n"
            if index == 2500 { text += String(repeating: "y", count: 70_000) + "\n" }
        }
        text += "last without newline"
        expected.append("last without newline")
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        var lines: [String] = []
        try KernelFile.forEachLine(path, limit: 1 << 30, maxLineBytes: 512) { lines.append(String(decoding: $0, as: UTF8.self)) }
        #expect(lines == expected)
        var few = 0
        try KernelFile.forEachLine(path, limit: 100, maxLineBytes: 512) { _ in few += 1 }
        #expect(few <= 10, "the byte limit stops the reading")
        #expect(throws: SystemError.self) { try KernelFile.forEachLine(path + ".missing", limit: 10, maxLineBytes: 10) { _ in } }
    }
}

@Suite(.serialized, .timeLimit(.minutes(2)))
struct ProcessSocketsReclaimTests {
    /// The child: two connections to the test's port, then, told through descriptor 3, one recv and one
    /// send on each, printing what happened.
    static let childScript = """
        import os, socket, sys
        port = int(sys.argv[1])
        a = socket.create_connection(("127.0.0.1", port))
        b = socket.create_connection(("127.0.0.1", port))
        listener = socket.create_server(("127.0.0.1", 0))
        left, right = socket.socketpair()
        print("connected", a.fileno(), b.fileno(), listener.fileno(), left.fileno(), right.fileno(), listener.getsockname()[1], flush=True)
        os.read(3, 1)
        for name, s in (("a", a), ("b", b)):
            s.settimeout(0.3)
            try:
                print(name, "recv", len(s.recv(10)), flush=True)
            except socket.timeout:
                print(name, "recv timeout", flush=True)
            except OSError as e:
                print(name, "recv-error", e.errno, flush=True)
            try:
                s.send(b"x")
                print(name, "send ok", flush=True)
            except OSError as e:
                print(name, "send-error", e.errno, flush=True)
        """

    @Test func aChildsSocketIsTakenAndResetAndItsVoIPSocketSpared() throws {
        try exercise(cgroupParent: nil)
    }

    @Test(.enabled(if: CgroupMachine.v2Parent != nil, "no writable cgroup2 hierarchy here"))
    func aFrozenChildsSocketIsResetWhileItSleeps() throws {
        try exercise(cgroupParent: CgroupMachine.v2Parent)
    }

    func exercise(cgroupParent: String?) throws {
        let loop = try EventLoop()
        let (listener, bound) = try SocketCalls.listen(on: .ipv4("127.0.0.1", port: 0), backlog: 8)
        defer { close(listener) }
        let port = try #require(bound.port)
        var go: [CInt] = [-1, -1]
        #expect(pipe(&go) == 0)
        _ = fcntl(go[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(go[1], F_SETFD, FD_CLOEXEC)
        defer { close(go[1]) }
        let cgroup = try cgroupParent.flatMap { parent throws(SystemError) in
            try ProcessCgroup.create(named: ProcessCgroup.name(forApp: "reclaim"), in: .v2(parent: parent))
        }
        defer {
            _ = try? cgroup?.kill()
            for _ in 0..<100 where (try? cgroup?.members().isEmpty) == false { usleep(10_000) }
            try? cgroup?.remove()
        }
        var lines: [String] = []
        var status: ChildExitStatus?
        let child = try ChildProcess(loop: loop, arguments: ["/usr/bin/python3", "-c", Self.childScript, String(port)],
                                     environment: ["PATH": "/usr/bin:/bin"],
                                     options: ChildLaunchOptions(descriptors: [go[0]], joinCgroups: cgroup.map { [$0.directory] } ?? []),
                                     onOutput: { if case .line(let line) = $0 { lines.append(line) } }, onExit: { status = $0 })
        defer { child.close() }
        close(go[0])
        #expect(runLoop(loop) { lines.contains { $0.hasPrefix("connected") } })
        let numbers = try #require(lines.first?.split(separator: " ").dropFirst().compactMap { CInt($0) })
        try #require(numbers.count == 6)
        let childFDs = Array(numbers[0..<2])
        let childListenerPort = UInt16(numbers[5])
        var accepted: [CInt] = []
        #expect(runLoop(loop) {
            let fd = accept(listener, nil, nil)
            if fd >= 0 { accepted.append(fd) }
            return accepted.count == 2
        })
        defer { accepted.forEach { close($0) } }

        if let cgroup {
            try cgroup.freeze()
            var frozen: Bool?
            cgroup.whenFrozen(loop: loop, timeout: .seconds(2)) { frozen = $0 }
            #expect(runLoop(loop) { frozen != nil })
            try #require(frozen == true)
        }
        let sockets = try ProcessSockets.tcpSockets(pid: child.pid).filter { $0.state != .listen }
        #expect(sockets.map(\.fd) == childFDs)
        #expect(sockets.allSatisfy { $0.state == .established && $0.remote == .ipv4("127.0.0.1", port: port) })
        #expect(try ProcessSockets.tcpSockets(pid: child.pid).contains { $0.fd == numbers[2] && $0.state == .listen && $0.local.port == childListenerPort })
        // The test's ends: the one whose peer is the child's first socket is to see the reset (a reset socket
        // has no peer any more: asked before).
        let resetLocalPort = try #require(sockets.first?.local.port)
        let (mine, spared) = peerPort(accepted[0]) == resetLocalPort ? (accepted[0], accepted[1]) : (accepted[1], accepted[0])
        let voip = childFDs[1]
        let started = MonotonicTime.now()
        let report = try ProcessSockets.reclaim(pid: child.pid, pidfd: try #require(child.processDescriptor), sparing: [voip])
        let reclaimTook = MonotonicTime.now() - started
        #expect(report.failures.isEmpty)
        #expect(report.reset.map(\.fd) == [childFDs[0]])
        #expect(report.skipped.map(\.fd) == Array(numbers[2..<5]), "the listener and the Unix sockets are left alone")

        var readable = pollfd(fd: mine, events: Int16(POLLIN), revents: 0)
        #expect(poll(&readable, 1, 1000) == 1)
        let sawReset = MonotonicTime.now() - started
        var byte: UInt8 = 0
        #expect(recv(mine, &byte, 1, CInt(MSG_DONTWAIT)) == -1 && errno == ECONNRESET)
        print("reclaim\(cgroup == nil ? "" : " of a frozen child"): \(reclaimTook.milliseconds) ms; the peer saw the reset \(sawReset.milliseconds) ms after the reclaim began")
        #expect(tcpConnect(port: childListenerPort) == 0, "the child's listener still listens")
        var quiet = pollfd(fd: spared, events: Int16(POLLIN), revents: 0)
        #expect(poll(&quiet, 1, 50) == 0, "the VoIP socket's peer sees nothing")

        try cgroup?.thaw()
        #expect(write(go[1], "g", 1) == 1)
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(0))
        let a = lines.filter { $0.hasPrefix("a ") }
        #expect(a.count == 2 && (a[0] == "a recv-error \(ECONNRESET)" || a[0] == "a recv-error \(ENOTCONN)"), "\(a)")
        #expect(a.last == "a send-error \(EPIPE)", "\(a)")
        #expect(lines.contains("b recv timeout") && lines.contains("b send ok"), "\(lines)")
        #expect(recv(spared, &byte, 1, CInt(MSG_DONTWAIT)) == 1 && byte == UInt8(ascii: "x"), "the VoIP connection still carries data")
    }

    @Test func takingADescriptorTheProcessDoesNotHaveIsAnErrorNotATrap() throws {
        let loop = try EventLoop()
        var status: ChildExitStatus?
        let child = try ChildProcess(loop: loop, arguments: ["/bin/sleep", "5"], environment: [:], onOutput: { _ in }, onExit: { status = $0 })
        defer { child.close() }
        let pidfd = try #require(child.processDescriptor)
        #expect(throws: SystemError("pidfd_getfd(500)", Errno(rawValue: EBADF))) { try SocketCalls.takeDescriptor(pidfd: pidfd, fd: 500) }
        let stdin = try SocketCalls.takeDescriptor(pidfd: pidfd, fd: 0)
        #expect(fcntl(stdin, F_GETFD) & FD_CLOEXEC != 0, "the taken copy is close-on-exec")
        close(stdin)
        let nothing = ProcessSockets.reset([SocketDescriptor(fd: 0, inode: 1), SocketDescriptor(fd: 600, inode: 2)], pidfd: pidfd)
        #expect(nothing.reset.isEmpty && nothing.skipped.map(\.fd) == [0], "/dev/null is no TCP socket")
        #expect(nothing.failures.map(\.socket.fd) == [600] && nothing.failures.first?.error.errno.rawValue == EBADF)
        #expect(try ProcessSockets.tcpSockets(pid: child.pid).isEmpty)
        child.signalGroup(SIGKILL)
        #expect(runLoop(loop) { status != nil })
        #expect(child.processDescriptor == nil)
        #expect(throws: SystemError.self) { try ProcessSockets.socketDescriptors(pid: child.pid) }
    }
}

/// The port of the peer of a connected TCP socket.
private func peerPort(_ fd: CInt) -> UInt16 {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) } }
    return UInt16(bigEndian: address.sin_port)
}
