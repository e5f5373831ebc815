// `adopt = yes` (docs/process-apps.md): unmodified servers that bind their own listeners (nginx as a master and two
// workers, with and without `reuseport`; Python's http.server; memcached; redis-server, whose launch waits
// for its READY=1 before its listener is looked for), run by the real netlifed on a
// random 127.a.b.c with an explicit port. netlifed finds each listener in the program's cgroup and from then
// on holds it: `status` shows the holding pids; after `background` a connect is refused at once; suspended,
// the cgroup is frozen and uses no CPU; `reclaim` resets a kept connection and the program lives on;
// `foreground` makes the same processes serve again; `terminate` leaves no process and no cgroup. A listener
// the program never binds fails the launch at the budget, saying which; port 0 with adopt is a config error.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(2)))
struct AdoptedListenerTests {
    @Test func nginxWithAMasterAndTwoWorkersIsAdopted() throws {
        try checkLifecycle(AdoptedServer(.nginx), processes: 3, sockets: 1, keepsConnections: true)
    }

    @Test func nginxWithReusePortHasEverySocketOfThePortAdopted() throws {
        // One socket per worker, all in the master: each is taken.
        try checkLifecycle(AdoptedServer(.nginxReusePort), processes: 3, sockets: 2, keepsConnections: true)
    }

    @Test func pythonHTTPServerIsAdopted() throws {
        // http.server answers HTTP/1.0 and closes: no connection is kept for reclaim.
        try checkLifecycle(AdoptedServer(.pythonHTTP), processes: 1, sockets: 1, keepsConnections: false)
    }

    @Test func memcachedIsAdopted() throws {
        try checkLifecycle(AdoptedServer(.memcached), processes: 1, sockets: 1, keepsConnections: true)
    }

    @Test func redisIsAdoptedAfterItsReady() throws {
        try checkLifecycle(AdoptedServer(.redis), processes: 1, sockets: 1, keepsConnections: true)
    }

    /// An echo server in Python on `host`:`port` with SO_REUSEPORT: it binds `count` sockets (in batches of
    /// 100, 10 ms apart), serves every one, and once the file `rebind` appears closes its first socket and
    /// binds a new one, as a server reloading its listeners does.
    private func reusePortEchoProgram(_ scratch: TemporaryDirectory, host: String, port: UInt16, count: Int) -> String {
        scratch.write("echo.py", """
            import os, select, socket, time
            here = os.path.dirname(os.path.abspath(__file__))
            def bound():
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                s.bind(("\(host)", \(port)))
                s.listen(64)
                s.setblocking(False)
                return s
            listeners = []
            for i in range(\(count)):
                listeners.append(bound())
                if i % 100 == 99:
                    time.sleep(0.01)
            poller = select.epoll()
            for s in listeners:
                poller.register(s.fileno(), select.EPOLLIN)
            by_fd = {s.fileno(): s for s in listeners}
            clients = {}
            rebound = False
            while True:
                if not rebound and os.path.exists(os.path.join(here, "rebind")):
                    old = listeners.pop(0)
                    poller.unregister(old.fileno())
                    del by_fd[old.fileno()]
                    old.close()
                    new = bound()
                    listeners.append(new)
                    by_fd[new.fileno()] = new
                    poller.register(new.fileno(), select.EPOLLIN)
                    open(os.path.join(here, "rebound"), "w").close()
                    rebound = True
                for fd, _ in poller.poll(0.05):
                    if fd in by_fd:
                        try:
                            conn, _ = by_fd[fd].accept()
                        except (BlockingIOError, OSError):
                            continue
                        conn.setblocking(False)
                        clients[conn.fileno()] = conn
                        poller.register(conn.fileno(), select.EPOLLIN)
                    elif fd in clients:
                        try:
                            data = clients[fd].recv(4096)
                        except BlockingIOError:
                            continue
                        except OSError:
                            data = b""
                        if data:
                            clients[fd].sendall(data)
                        else:
                            poller.unregister(fd)
                            clients.pop(fd).close()

            """)
        return "/usr/bin/python3 \(scratch.file("echo.py"))"
    }

    /// An app `echo` running `program`, whose listener at the server's address is adopted.
    private func adoptedEchoApp(_ program: String, _ server: AdoptedServer) -> String {
        "[daemon]\n[app echo]\nauto-suspend = never\nexec = \(program)\n\n[listener echo.main]\naddress = \(server.host):\(server.port)\nadopt = yes\n"
    }

    /// How many of `count` connects to the port get their echo back within `timeout`, and how many are refused.
    private func echoes(host: String, port: UInt16, count: Int, timeout: TimeInterval = 1) -> (echoed: Int, refused: Int) {
        var echoed = 0, refused = 0
        for index in 0..<count {
            switch connectTCP(host: host, port: port) {
            case .failed(ECONNREFUSED): refused += 1
            case .failed: break
            case .connected(let fd):
                let peer = Peer(fd: fd)
                if peer.roundTrip("echo \(index)\n", timeout: timeout) == "echo \(index)\n" { echoed += 1 }
                peer.close()
            }
        }
        return (echoed, refused)
    }

    @Test func aSocketTheProgramReplacesIsFollowedAndTheOldCopyLetGo() throws {
        let server = AdoptedServer(.pythonHTTP)
        let scratch = TemporaryDirectory()
        defer { server.remove(); scratch.remove() }
        let program = reusePortEchoProgram(scratch, host: server.host, port: server.port, count: 2)
        let daemon = try TestDaemon(config: adoptedEchoApp(program, server))
        defer { daemon.stop() }
        #expect(daemon.log.contains("adopted 2 socket(s)"), "\(daemon.log.suffix(1500))")
        #expect(echoes(host: server.host, port: server.port, count: 20) == (20, 0))
        // The program closes one socket and binds another: netlifed's copy of the old one would take half the
        // connects with nobody to accept them. It is let go, and the new one taken, within the watch interval.
        scratch.write("rebind", "")
        #expect(waitUntil(timeout: 5) { FileManager.default.fileExists(atPath: scratch.file("rebound")) })
        #expect(waitUntil(timeout: 5) { daemon.log.contains("1 taken, 1 it closed let go; 2 held") }, "\(daemon.log.suffix(1500))")
        #expect(echoes(host: server.host, port: server.port, count: 40) == (40, 0), "no connect lands on a socket nobody accepts on")
        // In the background every socket of the port refuses; in the foreground every one serves again.
        #expect(daemon.ctl("background", "echo").status == 0)
        #expect(echoes(host: server.host, port: server.port, count: 20).refused == 20)
        #expect(daemon.ctl("foreground", "echo").status == 0)
        #expect(echoes(host: server.host, port: server.port, count: 40) == (40, 0))
    }

    @Test func aThousandSocketsBoundOverSomeMillisecondsAreAllAdopted() throws {
        let server = AdoptedServer(.pythonHTTP)
        let scratch = TemporaryDirectory()
        defer { server.remove(); scratch.remove() }
        let program = reusePortEchoProgram(scratch, host: server.host, port: server.port, count: 1000)
        let daemon = try TestDaemon(config: adoptedEchoApp(program, server))
        defer { daemon.stop() }
        #expect(daemon.log.contains("adopted 1000 socket(s)"), "\(daemon.log.components(separatedBy: "\n").filter { $0.contains("adopted") })")
        #expect(daemon.ctl("background", "echo").status == 0)
        // A connect that lands on a socket netlifed did not take would be accepted by the kernel into a
        // program that no longer polls: every one must be refused.
        #expect(echoes(host: server.host, port: server.port, count: 200).refused == 200)
        #expect(daemon.ctl("foreground", "echo").status == 0)
        #expect(echoes(host: server.host, port: server.port, count: 40) == (40, 0))
    }

    @Test func aProgramLaunchedIntoTheBackgroundHasItsListenerShutDownOnceAdopted() throws {
        let server = AdoptedServer(.pythonHTTP)
        defer { server.remove() }
        let daemon = try TestDaemon(config: "[daemon]\n" + server.app("web", appLines: "launch = background"))
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 10) { daemon.currentState("web") == "suspended" }, "\(daemon.log)")
        let pid = try #require(daemon.programPid("web"))
        let listener = (daemon.status("web")["listeners"] as? [[String: Any]])?.first
        #expect(listener?["open"] as? Bool == false)
        #expect((listener?["pids"] as? [Int]) == [Int(pid)], "adopted, then shut down")
        #expect(connectTCP(host: server.host, port: server.port) == .failed(ECONNREFUSED))
        #expect(daemon.ctl("foreground", "web").status == 0)
        let peer = try #require(Peer.connect(host: server.host, port: server.port))
        peer.send(server.request)
        #expect(peer.read(untilContaining: server.answer).contains(server.answer))
        peer.close()
        #expect(daemon.programPid("web") == pid)
    }

    @Test func aProcessForkedAfterTheAdoptionIsListedAsAHolderOnceItListensAgain() throws {
        // A master that binds, is adopted, and only then forks a worker that inherits the socket (nginx's
        // master does so within milliseconds; here it waits half a second so that the order is certain).
        let server = AdoptedServer(.pythonHTTP)
        let scratch = TemporaryDirectory()
        defer { server.remove(); scratch.remove() }
        scratch.write("master.py", """
            import os, socket, time
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("\(server.host)", \(server.port)))
            s.listen(16)
            time.sleep(0.5)
            os.fork()
            time.sleep(3600)

            """)
        let daemon = try TestDaemon(config: """
            [daemon]
            [app web]
            exec = /usr/bin/python3 \(scratch.file("master.py"))

            [listener web.main]
            address = \(server.host):\(server.port)
            adopt = yes

            """)
        defer { daemon.stop() }
        func holders() -> Set<Int32> {
            Set(((daemon.status("web")["listeners"] as? [[String: Any]])?.first?["pids"] as? [Int] ?? []).map(Int32.init))
        }
        #expect(waitUntil(timeout: 10) { daemon.currentState("web") == "active" }, "\(daemon.log)")
        let pid = try #require(daemon.programPid("web"))
        let cgroup = CgroupProbe(directory: try #require(daemon.program("web")["cgroup"] as? String))
        #expect(holders() == [pid], "adopted from the master alone")
        #expect(waitUntil(timeout: 5) { cgroup.members.count == 2 }, "forked: \(cgroup.members)")
        #expect(holders() == [pid], "not looked at again yet")
        #expect(daemon.ctl("background", "web").status == 0)
        #expect(daemon.ctl("foreground", "web").status == 0)
        #expect(holders() == Set(cgroup.members), "the worker holds it too: \(holders()), members \(cgroup.members)")
    }

    @Test func aListenerTheProgramNeverBindsFailsTheLaunchAtTheBudget() throws {
        let server = AdoptedServer(.pythonHTTP)
        defer { server.remove() }
        // The program binds one port; the config names another, which nothing binds.
        let config = "[daemon]\n" + server.app("web", appLines: "launch-budget = 700ms", address: "\(server.host):8081")
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 10) { daemon.currentState("web") == "not-running" && daemon.lastTermination("web") != nil },
                "the launch failed")
        let termination = try #require(daemon.lastTermination("web"))
        #expect(termination["reason"] as? String == "watchdog", "\(termination)")
        #expect(termination["stage"] as? String == "adopt-listeners", "\(termination)")
        let elapsed = termination["elapsed"] as? Double ?? 0
        #expect(elapsed >= 0.7 && elapsed < 0.7 + 2 * slowdown, "failed after \(elapsed) s (budget 0.7 s)")
        #expect(daemon.log.contains("the program did not bind listener main (\(server.host):8081) within the launch budget"), "\(daemon.log)")
        #expect(daemon.programPid("web") == nil)
        #expect(connectTCP(host: server.host, port: server.port) == .failed(ECONNREFUSED), "the program is gone")
    }

    @Test func anAdoptedListenerOnPortZeroIsAConfigError() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("adopt.conf", """
            [app web]
            exec = /usr/sbin/nginx -g 'daemon off;'

            [listener web.main]
            address = 127.0.0.1:0
            adopt = yes
            """)
        let path = directory.file("adopt.conf")
        let result = run([product("netlifed"), "--check-config", path])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.hasPrefix("\(path):5: listener web.main: adopt = yes needs an explicit port"), "\(result.stderr)")
    }

    /// Runs `server` as app `web` and takes it through the whole lifecycle: adopted, refused in the
    /// background, frozen without CPU, reclaimed (`keepsConnections`), serving again from the same
    /// `processes` pids, terminated without leftovers; `sockets`: how many sockets the port has. Prints the figures.
    private func checkLifecycle(_ server: AdoptedServer, processes: Int, sockets: Int, keepsConnections: Bool) throws {
        defer { server.remove() }
        let daemon = try TestDaemon(config: "[daemon]\n" + server.app("web"))
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 10) { daemon.currentState("web") == "active" }, "launched: \(daemon.log)")
        let program = daemon.program("web")
        let pid = try #require((program["pid"] as? Int).map(Int32.init))
        let cgroup = CgroupProbe(directory: try #require(program["cgroup"] as? String))
        #expect(waitUntil { cgroup.members.count == processes }, "cgroup members: \(cgroup.members)")
        let members = Set(cgroup.members)
        let listener = try #require((daemon.status("web")["listeners"] as? [[String: Any]])?.first)
        #expect(listener["open"] as? Bool == true)
        #expect(listener["address"] as? String == "\(server.host):\(server.port)")
        let owners = (listener["pids"] as? [Int] ?? []).map(Int32.init)
        #expect(owners.first == pid, "the main process holds it: \(owners)")
        #expect(Set(owners).isSubset(of: members), "holders \(owners), members \(members)")
        #expect(daemon.log.contains("adopted \(sockets) socket(s) at \(server.host):\(server.port)"), "\(daemon.log)")

        let fresh = try #require(Peer.connect(host: server.host, port: server.port))
        fresh.send(server.request)
        #expect(fresh.read(untilContaining: server.answer).contains(server.answer))
        fresh.close()
        let kept = keepsConnections ? Peer.connect(host: server.host, port: server.port) : nil
        defer { kept?.close() }
        if let kept {
            kept.send(server.request)
            #expect(kept.read(untilContaining: server.answer).contains(server.answer))
        }

        let background = daemon.ctl("background", "web")
        let returned = Date()
        let refused = connectTCP(host: server.host, port: server.port)
        let refusedMs = milliseconds(since: returned)
        #expect(background.status == 0, "\(background)")
        #expect(refused == .failed(ECONNREFUSED), "the program still holds its listener")
        // A refused connect is one system call (0.1 ms); the bound leaves room for the test's thread losing
        // its core for a time slice on a loaded 2-core machine, and still fails a refusal that waited for
        // anything (a retry, a timeout, a poll).
        #expect(refusedMs < 10 * slowdown, "the first connect after `background` returned took \(refusedMs) ms to be refused")
        // With reuseport each socket of the port was shut down: no connect reaches one that still listens.
        for _ in 0..<20 { #expect(connectTCP(host: server.host, port: server.port) == .failed(ECONNREFUSED)) }

        #expect(waitUntil(timeout: 3) { daemon.currentState("web") == "suspended" })
        #expect(cgroup.isFrozen, "cgroup.events says frozen 1")
        let usageBefore = try #require(cpuUsageMicroseconds(cgroup))
        usleep(1_000_000)
        let usageAfter = try #require(cpuUsageMicroseconds(cgroup))
        #expect(usageAfter == usageBefore, "the frozen cgroup used \(usageAfter - usageBefore) µs of CPU in 1 s")

        if let kept {
            #expect(daemon.ctl("reclaim", "web").status == 0)
            #expect(kept.read(timeout: 2) == .error(ECONNRESET), "the kept connection is reset")
            #expect(!processIsGone(pid), "the program lives on")
        }

        #expect(daemon.ctl("foreground", "web").status == 0)
        #expect(waitUntil(timeout: 2) { !cgroup.isFrozen }, "thawed")
        let again = try #require(Peer.connect(host: server.host, port: server.port))
        again.send(server.request)
        #expect(again.read(untilContaining: server.answer).contains(server.answer), "it serves again")
        again.close()
        #expect(daemon.programPid("web") == pid)
        #expect(Set(cgroup.members) == members, "the same processes serve again")
        // Adopted as soon as nginx's master bound it, perhaps before its workers were forked; listening again
        // looks at the holders anew.
        if server.kind == .nginx || server.kind == .nginxReusePort {
            let holders = ((daemon.status("web")["listeners"] as? [[String: Any]])?.first?["pids"] as? [Int] ?? []).map(Int32.init)
            #expect(Set(holders) == members, "the master and both workers hold it: \(holders)")
        }
        print("\(server.kind.rawValue) adopted (\(processes) process(es), held by \(owners)): connect refused \(format(ms: refusedMs)) after `background` returned; "
              + "\(usageAfter - usageBefore) µs CPU in 1 s suspended; same pids after foreground: \(Set(cgroup.members) == members)")

        #expect(daemon.ctl("terminate", "web").status == 0)
        #expect(waitUntil(timeout: 6) { members.allSatisfy(processIsGone) && !cgroup.exists }, "nothing of \(server.kind.rawValue) is left")
        #expect(connectTCP(host: server.host, port: server.port) == .failed(ECONNREFUSED))

        // Launched again, the new run's sockets are adopted afresh.
        #expect(daemon.ctl("launch", "web").status == 0)
        let relaunched = try #require(daemon.programPid("web"))
        #expect(relaunched != pid)
        let relaunchedListener = (daemon.status("web")["listeners"] as? [[String: Any]])?.first
        #expect(relaunchedListener?["open"] as? Bool == true)
        #expect((relaunchedListener?["pids"] as? [Int])?.first == Int(relaunched))
        let served = try #require(Peer.connect(host: server.host, port: server.port))
        served.send(server.request)
        #expect(served.read(untilContaining: server.answer).contains(server.answer), "the relaunched program serves")
        served.close()
        daemon.stop()
        #expect(processIsGone(relaunched), "the daemon's exit ends the program")
    }

    /// The CPU time the cgroup's processes have used (`usage_usec` of cgroup v2's cpu.stat).
    private func cpuUsageMicroseconds(_ cgroup: CgroupProbe) -> Int? {
        let text = (try? String(contentsOfFile: cgroup.directory + "/cpu.stat", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").first { $0.hasPrefix("usage_usec ") }.flatMap { Int($0.dropFirst("usage_usec ".count)) }
    }
}
