// Listeners seen from a peer: echo bytes, ECONNREFUSED once `background` returns, the same port again
// after `foreground`, FIN for `connections = close`, an open but unserviced socket for `keep`, RST for
// connections left in the accept queue, max-connections, and accept paused on EMFILE without spinning.
// Also PortReservation, for the tests whose config must name a port before netlifed listens on it.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct ListenerPolicyTests {
    @Test func echoesBytes() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.roundTrip("hello, netlife\n") == "hello, netlife\n")
        let big = String(repeating: "0123456789abcdef", count: 64 * 1024)   // 1 MiB
        #expect(peer.roundTrip(big, timeout: 10) == big)
    }

    @Test func backgroundRefusesConnectionsAndForegroundReopensTheSamePort() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        #expect(connectTCP(port: port) != .failed(ECONNREFUSED))

        let background = daemon.ctl("background", "echo")
        let returned = Date()
        #expect(background.status == 0, "\(background)")
        let refused = connectTCP(port: port)
        let refusedAfter = Date().timeIntervalSince(returned)
        #expect(refused == .failed(ECONNREFUSED))
        print("first connect after `netlifectl background` returned: ECONNREFUSED after \(String(format: "%.3f", refusedAfter * 1000)) ms")
        #expect(background.stdout.contains("echo: background"))
        let listener = (daemon.status("echo")["listeners"] as? [[String: Any]])?.first
        #expect(listener?["open"] as? Bool == false)

        let foreground = daemon.ctl("foreground", "echo")
        #expect(foreground.status == 0, "\(foreground)")
        #expect(foreground.stdout.contains("echo: active"))
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.roundTrip("again\n") == "again\n")
        let reopened = (daemon.status("echo")["listeners"] as? [[String: Any]])?.first
        #expect(reopened?["open"] as? Bool == true)
        #expect(reopened?["address"] as? String == "127.0.0.1:\(port)")
    }

    @Test func aHookThatCallsTheAppsOwnListenerIsServedWhileTheTransitionWaitsForIt() throws {
        // `foreground` replies once the listeners listen and registers them with the loop after the reply;
        // a hook that runs before the reply and connects to its own app's port must be served all the same.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netlife-hook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let portFile = directory.appendingPathComponent("port").path
        let answerFile = directory.appendingPathComponent("answer").path
        let hook = "/bin/bash -c '[ -s \(portFile) ] || exit 0; exec 3<>/dev/tcp/127.0.0.1/$(cat \(portFile)); echo ping >&3; read -t 3 line <&3; echo \"got=$line\" > \(answerFile)'"
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "on-did-become-active = \(hook)"))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        try "\(port)".write(toFile: portFile, atomically: true, encoding: .utf8)
        #expect(daemon.ctl("background", "echo").status == 0)
        let started = Date()
        let foreground = daemon.ctl("foreground", "echo")
        #expect(foreground.status == 0, "\(foreground)")
        #expect(Date().timeIntervalSince(started) < 2.5, "the hook was answered at once, not after its 3 s read timed out")
        #expect((try? String(contentsOfFile: answerFile, encoding: .utf8)) == "got=ping\n")
        // And a peer that connects right after the reply is served.
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.roundTrip("after the reply\n") == "after the reply\n")
    }

    @Test func aPortTakenMeanwhileIsReportedAndRetriedWhileTheAppBecomesActive() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        #expect(daemon.ctl("background", "echo").status == 0)
        // Someone else takes the port while the app is in the background.
        let squatter = TCPSquatter(port: port, listening: true)
        #expect(squatter.bound)

        let foreground = daemon.ctl("foreground", "echo")
        #expect(foreground.status == 0, "the app still becomes active: \(foreground)")
        let listener = (daemon.status("echo")["listeners"] as? [[String: Any]])?.first
        #expect(listener?["open"] as? Bool == false)
        #expect((listener?["error"] as? String)?.contains("Address already in use") == true, "\(String(describing: listener))")
        #expect(daemon.state("echo") == "active")

        squatter.close()
        #expect(waitUntil(timeout: 3) { (daemon.status("echo")["listeners"] as? [[String: Any]])?.first?["open"] as? Bool == true },
                "the open is retried with back-off")
        let peer = try #require(Peer.connect(port: port))
        #expect(peer.roundTrip("mine again\n") == "mine again\n")
        peer.close()
    }

    @Test func theReopenBindsTheSocketPreparedInTheBackgroundWhichHeldNoPort() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let before = socketInodes(pid: daemon.pid)
        #expect(listeningInode(port: port).map(before.contains) == true)
        #expect(daemon.ctl("background", "echo").status == 0)
        // After the reply netlifed makes the socket that the reopen will bind.
        var prepared: Set<UInt64> = []
        #expect(waitUntil(timeout: 3) {
            prepared = socketInodes(pid: daemon.pid).subtracting(before)
            return !prepared.isEmpty
        }, "no socket was prepared for the reopen")
        #expect(prepared.count == 1, "one per closed listener: \(prepared)")
        // It is not bound: connections are refused and anyone may bind the port meanwhile.
        #expect(connectTCP(port: port) == .failed(ECONNREFUSED))
        let squatter = TCPSquatter(port: port)
        #expect(squatter.bound, "the port is free while the app is in the background: \(String(cString: strerror(errno)))")
        squatter.close()

        #expect(daemon.ctl("foreground", "echo").status == 0)
        let reopened = listeningInode(port: port)
        #expect(reopened.map(prepared.contains) == true, "the listener is the prepared socket: \(String(describing: reopened)) in \(prepared)")
        let peer = try #require(Peer.connect(port: port))
        #expect(peer.roundTrip("prepared\n") == "prepared\n")
        peer.close()

        // A prepared socket whose bind fails (the port was taken and listened on) is closed; the open is
        // retried with a fresh socket.
        let active = socketInodes(pid: daemon.pid)
        #expect(daemon.ctl("background", "echo").status == 0)
        var second: Set<UInt64> = []
        #expect(waitUntil(timeout: 3) {
            second = socketInodes(pid: daemon.pid).subtracting(active)
            return !second.isEmpty
        })
        let taker = TCPSquatter(port: port, listening: true)
        #expect(taker.bound)
        #expect(daemon.ctl("foreground", "echo").status == 0)
        let listener = (daemon.status("echo")["listeners"] as? [[String: Any]])?.first
        #expect((listener?["error"] as? String)?.contains("Address already in use") == true, "\(String(describing: listener))")
        #expect(socketInodes(pid: daemon.pid).isDisjoint(with: second), "the prepared socket that failed to bind was closed")
        taker.close()
        #expect(waitUntil(timeout: 3) { (daemon.status("echo")["listeners"] as? [[String: Any]])?.first?["open"] as? Bool == true })
        #expect(connectTCP(port: port) != .failed(ECONNREFUSED))
    }

    @Test func closePolicySendsFINOnBackground() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, listenerLines: "connections = close"))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.roundTrip("before\n") == "before\n")
        #expect(daemon.ctl("background", "echo").status == 0)
        let started = Date()
        let result = peer.read(timeout: 2)
        let elapsed = Date().timeIntervalSince(started)
        #expect(result == .endOfStream, "expected FIN, got \(result)")
        #expect(elapsed < 0.05, "FIN arrived \(elapsed * 1000) ms after background returned")
    }

    @Test func keepPolicyLeavesConnectionsOpenAndUnservicedWhileSuspended() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "auto-suspend = 200ms"))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.roundTrip("one\n") == "one\n")
        #expect(daemon.ctl("background", "echo").status == 0)
        // Background, not yet suspended: the app still runs and serves its kept connection.
        #expect(peer.roundTrip("two\n") == "two\n")
        #expect(waitUntil { daemon.state("echo") == "suspended" })
        peer.send("three\n")
        #expect(peer.read(timeout: 0.5) == .timedOut, "a suspended app must not serve (nor close) its connections")
        #expect(daemon.ctl("foreground", "echo").status == 0)
        #expect(peer.readText(count: 6) == "three\n", "the kernel kept what the peer sent while the app was suspended")
    }

    @Test func connectionsStillInTheAcceptQueueAreResetWhenTheListenerCloses() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, listenerLines: "max-connections = 1"))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let served = try #require(Peer.connect(port: port))
        defer { served.close() }
        #expect(served.roundTrip("a\n") == "a\n")
        // Accepting is paused at max-connections: this one completes its handshake in the kernel's queue.
        let queued = try #require(Peer.connect(port: port))
        defer { queued.close() }
        queued.send("b\n")
        #expect(queued.read(timeout: 0.3) == .timedOut)
        #expect(daemon.ctl("background", "echo").status == 0)
        #expect(queued.read(timeout: 1) == .error(ECONNRESET))
    }

    @Test func maxConnectionsResumesAcceptingWhenAConnectionCloses() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, listenerLines: "max-connections = 2"))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let first = try #require(Peer.connect(port: port))
        let second = try #require(Peer.connect(port: port))
        defer { second.close() }
        #expect(first.roundTrip("1\n") == "1\n")
        #expect(second.roundTrip("2\n") == "2\n")
        let third = try #require(Peer.connect(port: port))
        defer { third.close() }
        third.send("3\n")
        #expect(third.read(timeout: 0.3) == .timedOut, "a third connection must wait at max-connections = 2")
        first.close()
        #expect(third.readText(count: 2) == "3\n")
        let connections = (daemon.status("echo")["listeners"] as? [[String: Any]])?.first?["connections"] as? Int
        #expect(connections == 2)
    }

    @Test func descriptorExhaustionPausesAcceptWithoutSpinning() throws {
        // A tiny descriptor limit: the daemon itself needs about a dozen descriptors.
        let daemon = try TestDaemon(config: echoConfig(port: 0), launcher: ["/usr/bin/prlimit", "--nofile=24:24", "--"])
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        var peers: [Peer] = []
        defer { peers.forEach { $0.close() } }
        for _ in 0..<30 {
            guard case .connected(let fd) = connectTCP(port: port) else { break }
            peers.append(Peer(fd: fd))
        }
        #expect(peers.count == 30, "connections beyond the limit wait in the kernel's queue")
        #expect(waitUntil { daemon.log.contains("Too many open files") })
        let cpuBefore = cpuSeconds(pid: daemon.pid)
        usleep(1_000_000)
        let cpu = cpuSeconds(pid: daemon.pid) - cpuBefore
        #expect(cpu < 0.05, "netlifed used \(cpu * 100)% CPU while descriptors were exhausted")
        // Free descriptors: the last peer, still queued, is accepted and served.
        let last = peers.removeLast()
        defer { last.close() }
        for peer in peers { peer.close() }
        peers.removeAll()
        #expect(last.roundTrip("served\n", timeout: 3) == "served\n")
        #expect(daemon.ctl("status").status == 0)
    }
}

/// User plus system CPU time of a process, from /proc/PID/stat.
func cpuSeconds(pid: Int32) -> Double {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // Fields after the command: state is 0, utime is 11, stime is 12.
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The inodes of a process's sockets (the targets `socket:[N]` of /proc/PID/fd).
func socketInodes(pid: Int32) -> Set<UInt64> {
    let directory = "/proc/\(pid)/fd"
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return Set(names.compactMap { name in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + name),
              target.hasPrefix("socket:[") else { return nil }
        return UInt64(target.dropFirst("socket:[".count).dropLast())
    })
}

/// The inode of the socket listening on 127.0.0.1:`port`, from /proc/net/tcp.
func listeningInode(port: UInt16) -> UInt64? {
    guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return nil }
    let local = "0100007F:" + String(format: "%04X", port)
    for line in table.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ")
        // sl, local address, remote address, state (0A: LISTEN), queues, timer, retransmits, uid, timeout, inode
        if fields.count > 9, fields[1] == local, fields[3] == "0A" { return UInt64(fields[9]) }
    }
    return nil
}
