// Beyond iOS: `on-background = wake` on a process app's listener. Unmodified nginx (a master
// and two workers) and redis-server, whose listeners netlifed adopts, run by the real netlifed: the wake
// listener goes on listening while the app is suspended and its cgroup frozen; a connection arriving wakes
// the app (thawed into the background), the program serves it, and once the connection is closed the app is
// suspended and frozen again after `auto-suspend`; a connection held open keeps it awake. A `close` listener
// of the same app is refused all the while. The first byte's latency on the frozen server is measured against
// the unfrozen one and printed (goal: under 5 ms added).

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(2)))
struct WakeListenerTests {
    @Test func aConnectionWakesAFrozenNginxAndItsCloseListenerStillRefuses() throws {
        // nginx does not speak the lifecycle protocol and has a `close` listener too: it is frozen as soon as
        // it is in the background.
        let server = AdoptedServer(.nginx, twoPorts: true)
        try checkWake(server, extraListener: """
            [listener web.side]
            address = \(server.host):\(server.secondPort)
            adopt = yes

            """)
    }

    @Test func aConnectionWakesAFrozenRedis() throws {
        // Every listener of redis wakes it: in the background it is suspended by auto-suspend, not at once.
        try checkWake(AdoptedServer(.redis), extraListener: "")
    }

    @Test func onBackgroundIsAListenerKeyOfEveryAppWithTwoValues() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("builtin.conf", """
            [app echo]

            [listener echo.main]
            address = 127.0.0.1:0
            service = echo
            on-background = wake
            """)
        directory.write("value.conf", """
            [app web]
            exec = /usr/bin/python3 -m http.server 8080

            [listener web.main]
            address = 127.0.0.1:8080
            adopt = yes
            on-background = sleep
            """)
        let builtin = run([product("netlifed"), "--check-config", directory.file("builtin.conf")])
        #expect(builtin.status == 0, "a built-in service's listener wakes its app too: \(builtin)")
        let value = run([product("netlifed"), "--check-config", directory.file("value.conf")])
        #expect(value.status == 1, "\(value)")
        #expect(value.stderr.hasPrefix("\(directory.file("value.conf")):7: on-background must be close or wake, got 'sleep'"), "\(value.stderr)")
    }

    /// Runs `server` as app `web` with its listener `main` set to `on-background = wake` (and `extraListener`,
    /// a `close` one on nginx's second port), and takes it through wake-ups. Prints the latencies.
    private func checkWake(_ server: AdoptedServer, extraListener: String) throws {
        defer { server.remove() }
        let autoSuspend = 0.4
        let config = "[daemon]\n" + server.app("web", appLines: "auto-suspend = 400ms", listenerLines: "on-background = wake")
            + "\n" + extraListener
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 10) { daemon.currentState("web") == "active" }, "launched: \(daemon.log)")
        let pid = try #require(daemon.programPid("web"))
        let cgroup = CgroupProbe(directory: try #require(daemon.program("web")["cgroup"] as? String))
        let members = Set(cgroup.members)
        let hasSide = !extraListener.isEmpty

        // The unfrozen server's first byte, in the foreground.
        var awake: [Double] = []
        for _ in 0..<20 { awake.append(try firstByteMilliseconds(server)) }

        #expect(daemon.ctl("background", "web").status == 0)
        if hasSide {
            #expect(connectTCP(host: server.host, port: server.secondPort) == .failed(ECONNREFUSED), "the close listener is shut down")
        }
        #expect(waitUntil(timeout: 3) { daemon.currentState("web") == "suspended" && cgroup.isFrozen }, "suspended and frozen")
        let usageBefore = try #require(cpuUsageMicroseconds(cgroup))
        usleep(500_000)
        #expect(try #require(cpuUsageMicroseconds(cgroup)) == usageBefore, "the frozen cgroup used CPU")
        if hasSide {
            #expect(connectTCP(host: server.host, port: server.secondPort) == .failed(ECONNREFUSED), "suspended, the close listener still refuses")
        }
        let listeners = daemon.status("web")["listeners"] as? [[String: Any]] ?? []
        #expect(listeners.first { $0["name"] as? String == "main" }?["open"] as? Bool == true, "the wake listener listens: \(listeners)")

        // Each connection to the frozen server wakes it; it is frozen again once idle for auto-suspend.
        // The auto-suspend countdown can start no earlier than the last connection's arrival (it wakes the app),
        // so the time is taken before that connection is made: the checks between it and the wait for the
        // suspension take their own time (tens of milliseconds under AddressSanitizer) and must not count.
        var frozen: [Double] = []
        var lastConnection = Date()
        for round in 0..<8 {
            #expect(waitUntil(timeout: 3) { daemon.currentState("web") == "suspended" && cgroup.isFrozen }, "suspended again (round \(round))")
            lastConnection = Date()
            frozen.append(try firstByteMilliseconds(server))
        }
        #expect(daemon.currentState("web") == "background", "woken into the background")
        #expect(daemon.log.contains("woken: a connection on listener main"), "\(daemon.log)")
        #expect(waitUntil(timeout: 3) { daemon.currentState("web") == "suspended" && cgroup.isFrozen })
        let resuspendedAfter = Date().timeIntervalSince(lastConnection)
        #expect(resuspendedAfter >= autoSuspend, "suspended \(resuspendedAfter) s after the connection, before auto-suspend")

        // A connection held open keeps the app awake past auto-suspend; its close lets it suspend.
        let held = try #require(Peer.connect(host: server.host, port: server.port))
        defer { held.close() }
        held.send(server.request)
        #expect(held.read(untilContaining: server.answer).contains(server.answer))
        usleep(useconds_t(autoSuspend * 3 * 1_000_000))
        #expect(daemon.currentState("web") == "background", "a held connection keeps it awake")
        #expect(!cgroup.isFrozen)
        held.send(server.request)
        #expect(held.read(untilContaining: server.answer).contains(server.answer), "the held connection is served")
        held.close()
        #expect(waitUntil(timeout: 3) { daemon.currentState("web") == "suspended" && cgroup.isFrozen }, "suspended once it closed")

        // Foreground: the same processes serve, on both listeners.
        #expect(daemon.ctl("foreground", "web").status == 0)
        _ = try firstByteMilliseconds(server)
        if hasSide { #expect(connectTCP(host: server.host, port: server.secondPort) != .failed(ECONNREFUSED)) }
        #expect(daemon.programPid("web") == pid)
        #expect(Set(cgroup.members) == members, "the same processes serve")
        print("\(server.kind.rawValue) with on-background = wake: first byte \(format(ms: median(awake))) median, "
              + "\(format(ms: awake.max() ?? 0)) max unfrozen; \(format(ms: median(frozen))) median, \(format(ms: frozen.max() ?? 0)) max "
              + "from frozen (added \(format(ms: median(frozen) - median(awake))) median); suspended again \(String(format: "%.2f", resuspendedAfter)) s "
              + "after the last connection (auto-suspend 0.4 s)")
        // Thawing adds 1 to 4 ms on an idle machine, up to 8 ms beside the suite's floods on 2 cores; a wake
        // that waited for a poll (the census's 50 ms, say) would add 25 ms or more in the median.
        #expect(median(frozen) - median(awake) < 20 * slowdown, "waking the frozen server added \(median(frozen) - median(awake)) ms")
    }

    /// Connects, sends the server's request and waits for its answer; the milliseconds from the connect to
    /// the answer's first bytes.
    private func firstByteMilliseconds(_ server: AdoptedServer) throws -> Double {
        let started = Date()
        let peer = try #require(Peer.connect(host: server.host, port: server.port))
        defer { peer.close() }
        peer.send(server.request)
        guard case .bytes = peer.read(timeout: 3) else {
            Issue.record("no answer from \(server.kind.rawValue)")
            return .infinity
        }
        return milliseconds(since: started)
    }

    private func cpuUsageMicroseconds(_ cgroup: CgroupProbe) -> Int? {
        let text = (try? String(contentsOfFile: cgroup.directory + "/cpu.stat", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").first { $0.hasPrefix("usage_usec ") }.flatMap { Int($0.dropFirst("usage_usec ".count)) }
    }
}
