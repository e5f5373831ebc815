// Process apps seen from a peer, run by the real netlifed. An unmodified lighttpd is refused
// in the background, frozen in its cgroup (no CPU: the EPOLLHUP spin never runs), answers a kept
// connection's request only after foreground, from the same process, and leaves nothing behind. The Python
// reference client (Examples/netlife_events.py) speaks the lifecycle protocol: stages wait for its answers,
// a background task holds off suspension, an unanswered stage gets its whole cgroup killed by the watchdog
// (a forked child included), reclaim resets its kept connection, restart = on-failure relaunches it. Config
// errors of process apps are refused with FILE:LINE.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(2)))
struct ProcessAppTests {
    @Test func lighttpdIsRefusedFrozenAndServesAgainFromTheSameProcess() throws {
        // A missing lighttpd fails the test (scripts/install-deps installs it): a skip would count as a pass.
        try #require(lighttpdIsInstalled, "\(lighttpdPath) is missing: run scripts/install-deps")
        let site = LighttpdSite()
        defer { site.remove() }
        let daemon = try TestDaemon(config: site.app("web"))
        defer { daemon.stop() }
        let port = daemon.port(of: "web")
        let program = daemon.program("web")
        let pid = try #require((program["pid"] as? Int).map(Int32.init))
        let cgroup = CgroupProbe(directory: try #require(program["cgroup"] as? String))
        #expect(program["containment"] as? String == "cgroup-v2")
        #expect(program["protocol"] as? Bool == false, "lighttpd does not speak the lifecycle protocol")
        // The child writes itself into cgroup.procs before it execs lighttpd: on a loaded machine `status` can
        // show the pid a moment before the cgroup lists it.
        #expect(waitUntil(timeout: 5) { cgroup.members == [pid] }, "cgroup members: \(cgroup.members)")

        let fresh = try #require(Peer.connect(port: port))
        fresh.send(site.request)
        #expect(fresh.read(untilContaining: site.body).hasPrefix("HTTP/1.1 200 OK"))
        fresh.close()
        // Accepted and answered once before background, then kept open.
        let kept = try #require(Peer.connect(port: port))
        defer { kept.close() }
        kept.send(site.request)
        #expect(kept.read(untilContaining: site.body).contains(site.body))

        let background = daemon.ctl("background", "web")
        let returned = Date()
        #expect(background.status == 0, "\(background)")
        let refused = connectTCP(port: port)
        let refusedMs = milliseconds(since: returned)
        #expect(refused == .failed(ECONNREFUSED), "lighttpd still holds its copy of the listener")
        #expect(refusedMs < 50 * slowdown, "the first connect after `background` returned took \(refusedMs) ms")

        // It does not speak the protocol, so it is frozen as soon as it is in the background.
        #expect(waitUntil(timeout: 3) { daemon.currentState("web") == "suspended" })
        let suspendedMs = milliseconds(since: returned)
        #expect(cgroup.isFrozen, "cgroup.events says frozen 1")
        #expect(daemon.program("web")["frozen"] as? Bool == true)
        let ticksBefore = try #require(cpuTicks(of: pid))
        let switchesBefore = contextSwitches(of: pid)
        usleep(1_000_000)
        let ticksAfter = try #require(cpuTicks(of: pid))
        #expect(ticksAfter - ticksBefore <= 1, "a frozen lighttpd used \(ticksAfter - ticksBefore) ticks in 1 s")
        // /proc/PID/status: a frozen thread is never scheduled, so its context switches stop counting (a
        // lighttpd spinning on EPOLLHUP, or just waiting in epoll, would switch); /proc/PID/wchan shows where
        // the cgroup v2 freezer holds it (its trap in the signal path).
        #expect(switchesBefore != nil && contextSwitches(of: pid) == switchesBefore, "context switches while frozen")
        let wchan = (try? String(contentsOfFile: "/proc/\(pid)/wchan", encoding: .utf8)) ?? ""
        print("lighttpd frozen: wchan \(wchan), context switches \(switchesBefore ?? -1) before and after 1 s")

        // A request on the kept connection waits in the kernel; netlifed itself answers meanwhile.
        kept.send(site.request)
        #expect(kept.read(timeout: 0.5) == .timedOut, "no code of a suspended app runs")
        #expect(daemon.ctl("status", "web").status == 0)

        let foreground = daemon.ctl("foreground", "web")
        #expect(foreground.status == 0, "\(foreground)")
        #expect(waitUntil(timeout: 2) { !cgroup.isFrozen }, "thawed")
        #expect(kept.read(untilContaining: site.body).contains(site.body), "the request sent while suspended is answered")
        let again = try #require(Peer.connect(port: port))
        again.send(site.request)
        #expect(again.read(untilContaining: site.body).contains(site.body))
        again.close()
        #expect(daemon.programPid("web") == pid, "the same lighttpd serves again")
        print("lighttpd: connect refused \(format(ms: refusedMs)) after `background` returned; suspended (frozen) within \(format(ms: suspendedMs)); \(ticksAfter - ticksBefore) CPU ticks (of \(clockTicksPerSecond)/s) in 1 s frozen")

        #expect(daemon.ctl("terminate", "web").status == 0)
        #expect(waitUntil(timeout: 6) { processIsGone(pid) && !cgroup.exists }, "nothing of lighttpd is left")
        #expect(kept.read(timeout: 1) == .endOfStream)
    }

    @Test func aProgramThatSpeaksTheProtocolFollowsAutoSuspendInTheBackground() throws {
        // A silent program is frozen at once (it would poll its shut-down listener); one that said hello is
        // told to stop polling and runs on in the background until auto-suspend, serving what it holds.
        let daemon = try TestDaemon(config: demoApp("demo", appLines: "auto-suspend = 1s"))
        defer { daemon.stop() }
        let port = daemon.port(of: "demo")
        #expect(waitUntil { daemon.program("demo")["protocol"] as? Bool == true }, "the demo says hello")
        let kept = try #require(Peer.connect(port: port))
        defer { kept.close() }
        #expect(kept.roundTrip("before\n") == "before\n")
        let background = daemon.ctl("background", "demo")
        let returned = Date()
        #expect(background.status == 0, "\(background)")
        #expect(daemon.log.contains("listeners=stop-polling") || waitUntil { daemon.log.contains("listeners=stop-polling") })
        #expect(daemon.currentState("demo") == "background", "not frozen at once")
        #expect(kept.roundTrip("in the background\n") == "in the background\n", "it serves its kept connection in the background")
        #expect(waitUntil(timeout: 5) { daemon.currentState("demo") == "suspended" })
        let suspendedAfter = milliseconds(since: returned)
        #expect(suspendedAfter >= 900, "suspended \(suspendedAfter) ms after background returned: by auto-suspend")
        #expect(daemon.program("demo")["frozen"] as? Bool == true)
    }

    @Test func theDemoSpeaksTheProtocolAndStagesWaitForItsAnswers() throws {
        // Each stage answered 200 ms late; a 1.5 s task begun on did-enter-background.
        let daemon = try TestDaemon(config: demoApp("demo", environment: ["NETLIFE_DEMO_DELAY": "0.2", "NETLIFE_DEMO_TASK": "1.5"],
                                                    appLines: "auto-suspend = 100ms"))
        defer { daemon.stop() }
        let port = daemon.port(of: "demo")
        #expect(waitUntil { daemon.program("demo")["protocol"] as? Bool == true }, "the demo says hello")
        let pid = try #require(daemon.programPid("demo"))
        let peer = try #require(Peer.connect(port: port))
        #expect(peer.roundTrip("hello, demo\n") == "hello, demo\n")
        peer.close()

        let background = daemon.ctl("--json", "background", "demo")
        let returned = Date()
        #expect(background.status == 0, "\(background)")
        #expect(connectTCP(port: port) == .failed(ECONNREFUSED))
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(background.stdout.utf8)) as? [String: Any])
        let stages = try #require(reply["stages"] as? [[String: Any]])
        #expect(stages.map { $0["name"] as? String } == ["will-resign-active", "did-enter-background"])
        for stage in stages {
            let ms = stage["ms"] as? Double ?? 0
            #expect(ms >= 200 && ms < 1000, "\(stage["name"] ?? "?") took \(ms) ms: the answer came 200 ms late")
        }
        #expect(waitUntil {
            daemon.log.contains("netlife-demo: will-resign-active budget_ms=")
                && daemon.log.contains("netlife-demo: did-enter-background budget_ms=") && daemon.log.contains("listeners=stop-polling")
        }, "the demo got both stages, did-enter-background with stop-polling")

        // Its task keeps it in the background, where it polls nothing: its listener is shut down.
        #expect(daemon.state("demo") == "background")
        #expect((daemon.status("demo")["tasks"] as? [[String: Any]])?.count == 1)
        let ticksBefore = try #require(cpuTicks(of: pid))
        usleep(500_000)
        let ticksAfter = try #require(cpuTicks(of: pid))
        #expect(ticksAfter - ticksBefore <= 5, "the demo used \(ticksAfter - ticksBefore) ticks in 0.5 s with its listener shut down")
        #expect(daemon.state("demo") == "background", "the task still runs")
        #expect(waitUntil(timeout: 5) { daemon.currentState("demo") == "suspended" })
        let suspendedAfter = milliseconds(since: returned)
        #expect(suspendedAfter >= 1000, "suspended \(suspendedAfter) ms after background returned, before its task ended")
        #expect(daemon.program("demo")["frozen"] as? Bool == true)

        let foreground = daemon.ctl("--json", "foreground", "demo")
        #expect(foreground.status == 0, "\(foreground)")
        let foregroundStages = (try? JSONSerialization.jsonObject(with: Data(foreground.stdout.utf8)) as? [String: Any])?["stages"] as? [[String: Any]]
        #expect((foregroundStages?.first?["ms"] as? Double ?? 0) >= 200, "will-enter-foreground waited for the answer: \(foreground.stdout)")
        #expect(daemon.log.contains("listeners=resume-polling"))
        let again = try #require(Peer.connect(port: port))
        #expect(again.roundTrip("back again\n") == "back again\n")
        again.close()
        #expect(daemon.programPid("demo") == pid)
        print("demo: stages \(stages.map { "\($0["name"] ?? "?") \($0["ms"] ?? "?") ms" }); \(ticksAfter - ticksBefore) CPU ticks in 0.5 s of background; suspended \(format(ms: suspendedAfter)) after background returned (task 1.5 s, auto-suspend 100 ms)")
    }

    @Test func anUnansweredStageGetsTheWholeCgroupKilled() throws {
        let daemon = try TestDaemon(config: demoApp("mute", environment: ["NETLIFE_DEMO_IGNORE": "did-enter-background", "NETLIFE_DEMO_FORK": "1"],
                                                    appLines: "background-budget = 500ms"))
        defer { daemon.stop() }
        #expect(waitUntil { daemon.program("mute")["protocol"] as? Bool == true })
        let program = daemon.program("mute")
        let cgroup = CgroupProbe(directory: try #require(program["cgroup"] as? String))
        let pid = try #require((program["pid"] as? Int).map(Int32.init))
        #expect(waitUntil { cgroup.members.count == 2 }, "the demo and its sleep: \(cgroup.members)")
        let members = cgroup.members
        #expect(members.contains(pid))

        let background = daemon.ctl("background", "mute")
        let returned = Date()
        #expect(background.status == 1, "\(background)")
        #expect(background.stderr.contains("killed by the watchdog (0x8badf00d): did-enter-background took"), "\(background)")
        let termination = try #require(daemon.lastTermination("mute"))
        #expect(termination["reason"] as? String == "watchdog")
        #expect(termination["stage"] as? String == "did-enter-background")
        #expect(daemon.state("mute") == "not-running")
        #expect(waitUntil(timeout: 6) { members.allSatisfy(processIsGone) && !cgroup.exists },
                "left: \(members.filter { !processIsGone($0) }), cgroup \(cgroup.exists ? "still there" : "removed")")
        print("watchdog: \(members.count) processes killed and the cgroup removed \(format(ms: milliseconds(since: returned))) after `background` returned (budget 500 ms, took \(termination["elapsed"] ?? "?") s)")
        #expect(daemon.log.contains("0x8badf00d"))
        #expect(daemon.programPid("mute") == nil)

        // `launch` starts it again, in a cgroup of its own, on the same port.
        #expect(daemon.ctl("launch", "mute").status == 0)
        #expect(daemon.state("mute") == "active")
        let relaunched = daemon.program("mute")
        #expect((relaunched["pid"] as? Int).map(Int32.init) != pid)
        #expect((relaunched["cgroup"] as? String).map { CgroupProbe(directory: $0).exists } == true)
        let peer = try #require(Peer.connect(port: daemon.port(of: "mute")))
        #expect(peer.roundTrip("relaunched\n") == "relaunched\n")
        peer.close()
    }

    @Test func reclaimResetsTheSuspendedProgramsConnection() throws {
        let daemon = try TestDaemon(config: demoApp("held", appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        let port = daemon.port(of: "held")
        #expect(waitUntil { daemon.program("held")["protocol"] as? Bool == true })
        let pid = try #require(daemon.programPid("held"))
        let client = try #require(Peer.connect(port: port))
        defer { client.close() }
        #expect(client.roundTrip("kept\n") == "kept\n")

        #expect(daemon.ctl("background", "held").status == 0)
        #expect(daemon.ctl("suspend", "held").status == 0)
        #expect(daemon.program("held")["frozen"] as? Bool == true)
        #expect(client.read(timeout: 0.1) == .timedOut)
        var seen: Peer.ReadResult = .timedOut
        // Waiting in poll(), not spinning: a busy loop would take one of the two cores from the daemon.
        let ms = daemon.timeAfterRequest("{\"cmd\":\"reclaim\",\"app\":\"held\"}\n") {
            seen = client.read(timeout: 0.005)
            return seen != .timedOut
        }
        #expect(seen == .error(ECONNRESET), "the kept connection: \(seen)")
        #expect((ms ?? .infinity) < 10 * slowdown, "RST \(ms ?? -1) ms after the request")
        print("reclaim: the client saw ECONNRESET \(ms.map { format(ms: $0) } ?? "never") after the request")

        #expect(daemon.ctl("foreground", "held").status == 0)
        let again = try #require(Peer.connect(port: port))
        #expect(again.roundTrip("still alive\n") == "still alive\n")
        again.close()
        #expect(daemon.programPid("held") == pid, "the same program runs on")
    }

    @Test func restartOnFailureRelaunchesTheProgramAndRestartNoDoesNot() throws {
        let crash = ["NETLIFE_DEMO_CRASH_AFTER": "1"]
        let daemon = try TestDaemon(config: demoApp("again", environment: crash, appLines: "restart = on-failure")
                                        + demoApp("once", environment: crash, appLines: "restart = no"))
        defer { daemon.stop() }
        let againPort = daemon.port(of: "again")
        let oncePort = daemon.port(of: "once")
        var pid = try #require(daemon.programPid("again"))
        let oncePid = try #require(daemon.programPid("once"))

        // Each crash (after the first line of its first connection) relaunches it, 100 ms then 200 ms later.
        var delays: [Double] = []
        for _ in 0..<2 {
            let peer = try #require(Peer.connect(port: againPort))
            #expect(peer.roundTrip("one\n") == "one\n")
            #expect(peer.read(timeout: 2) == .endOfStream, "the demo exited")
            let crashed = Date()
            peer.close()
            let previous = pid
            #expect(waitUntil(timeout: 3) {
                guard let next = daemon.programPid("again"), next != previous else { return false }
                pid = next
                return true
            }, "a new program runs")
            delays.append(milliseconds(since: crashed))
            let termination = try #require(daemon.lastTermination("again"))
            #expect(termination["reason"] as? String == "program-exited")
            #expect((termination["detail"] as? String)?.hasPrefix("exit status 3") == true, "\(termination)")
            #expect(processIsGone(previous))
        }
        #expect(delays.allSatisfy { $0 < 2000 }, "relaunched after \(delays) ms")
        #expect(delays[1] > delays[0] - 20, "the delay doubles: \(delays) ms")
        #expect(daemon.state("again") == "active")
        let served = try #require(Peer.connect(port: againPort))
        served.send("third\n")
        #expect(served.readText(count: 6) == "third\n", "the relaunched program serves")
        served.close()
        print("restart = on-failure: relaunched \(delays.map(format(ms:))) after the crash was seen (policy: 100 ms, then 200 ms)")

        let peer = try #require(Peer.connect(port: oncePort))
        #expect(peer.roundTrip("one\n") == "one\n")
        #expect(peer.read(timeout: 2) == .endOfStream)
        peer.close()
        #expect(waitUntil(timeout: 3) { daemon.currentState("once") == "not-running" })
        let termination = try #require(daemon.lastTermination("once"))
        #expect(termination["reason"] as? String == "program-exited")
        #expect(termination["detail"] as? String == "exit status 3")
        usleep(1_000_000)
        #expect(daemon.state("once") == "not-running", "restart = no leaves it stopped")
        #expect(daemon.programPid("once") == nil)
        #expect(processIsGone(oncePid))
        #expect(connectTCP(port: oncePort) == .failed(ECONNREFUSED))
    }

    @Test func terminateCancelsAPendingRestart() throws {
        // A program that fails at once: restarted after 100, 200, 400 ms... Most of the time a restart is
        // pending; a terminate then must leave the app stopped for good.
        let daemon = try TestDaemon(config: """
            [daemon]
            [app flaky]
            exec = /bin/false
            restart = on-failure
            """)
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 3) { daemon.log.components(separatedBy: "started /bin/false").count > 2 }, "it was restarted")
        #expect(daemon.ctl("terminate", "flaky").status == 0)
        let starts = daemon.log.components(separatedBy: "started /bin/false").count
        usleep(1_500_000)
        #expect(daemon.log.components(separatedBy: "started /bin/false").count == starts, "no start after terminate")
        #expect(daemon.state("flaky") == "not-running")
    }

    @Test func aProgramWhoseListenerCannotBeBoundDoesNotStart() throws {
        // Something else holds the port: the program must not start without its listener (a socket-activated
        // server would fall back to a port of its own choosing).
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(holder, $0, length) == 0 && listen(holder, 1) == 0 && getsockname(holder, $0, &length) == 0
            }
        }
        try #require(bound)
        let port = UInt16(bigEndian: address.sin_port)
        let config = "[daemon]\n" + demoApp("web").replacingOccurrences(of: "127.0.0.1:0", with: "127.0.0.1:\(port)")
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        #expect(daemon.state("web") == "not-running")
        #expect(daemon.programPid("web") == nil)
        let termination = try #require(daemon.lastTermination("web"))
        #expect(termination["reason"] as? String == "program-exited")
        #expect((termination["detail"] as? String)?.contains("cannot start: listener main") == true, "\(termination)")
    }

    @Test func configErrorsOfProcessAppsNameTheirLine() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("bad.conf", """
            [app bad]
            exec = \(systemPython) \(demoScript)
            working-directory = relative
            restart = sometimes
            [listener bad.main]
            address = 127.0.0.1:0
            service = echo
            """)
        let path = directory.file("bad.conf")
        let result = run([product("netlifed"), "--check-config", path])
        #expect(result.status == 1, "\(result)")
        let expected = [
            "\(path):3: working-directory must be an absolute path, got 'relative'",
            "\(path):4: restart must be no, on-failure or always, got 'sometimes'",
            "\(path):7: listener bad.main belongs to a process app (exec)",
        ]
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == expected.count, "\(result.stderr)")
        for (line, prefix) in zip(lines, expected) {
            #expect(line.hasPrefix(prefix), "\(line) should start with \(prefix)")
        }

        directory.write("good.conf", demoApp("good", environment: ["NETLIFE_DEMO_TASK": "1"], appLines: "restart = on-failure\nworking-directory = /tmp"))
        let good = run([product("netlifed"), "--check-config", directory.file("good.conf")])
        #expect(good.status == 0, "\(good)")
    }
}
