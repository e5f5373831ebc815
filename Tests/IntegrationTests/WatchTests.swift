// `netlifectl watch` and systemd's watchdog pings, against the real binaries: a watcher sees a
// background/foreground cycle in order and a data socket entering and leaving quiet mode, a watcher that
// never reads is dropped without slowing `status`, a watch ends with a clear message and exit status 3 when
// the daemon stops, and WATCHDOG=1 arrives every half WATCHDOG_USEC whatever the apps are doing.

import Foundation
import Testing
import NetLifeTestSupport

/// The JSON objects of a file of lines (netlifectl --json watch output).
private func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
}

@Suite(.timeLimit(.minutes(5)))
struct WatchTests {
    @Test func aWatcherSeesABackgroundForegroundCycleInOrder() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: "auto-suspend = never") + echoApp("other"))
        defer { daemon.stop() }
        let watcher = try #require(RawControlClient(path: daemon.controlPath))
        defer { watcher.close() }
        #expect(watcher.send("{\"cmd\":\"watch\",\"app\":\"app\"}\n") > 0)
        let first = watcher.line(timeout: 5).flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
        #expect(first?["watching"] as? String == "app")
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("background", "other").status == 0, "another app's events are not shown")
        #expect(daemon.ctl("foreground", "app").status == 0)
        #expect(daemon.ctl("task", "begin", "app", "--name", "sync").status == 0)
        var events: [[String: Any]] = []
        while let line = watcher.line(timeout: 5),
              let event = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] {
            events.append(event)
            if event["event"] as? String == "task-began" { break }
        }
        let summary = events.map { event -> String in
            switch event["event"] as? String {
            case "state": return "\(event["from"] as? String ?? "?")->\(event["to"] as? String ?? "?")"
            case "transition": return "done \(event["command"] as? String ?? "?")"
            case let other?: return other
            case nil: return "?"
            }
        }
        #expect(summary == ["request", "active->inactive", "inactive->background", "listener-closed", "done background",
                            "request", "listener-opened", "background->inactive", "inactive->active", "done foreground",
                            "request", "task-began"], "\(summary)")
        #expect(events.filter { $0["event"] as? String == "request" }.compactMap { $0["command"] as? String }
                == ["background", "foreground", "task-begin"], "each request is attributed before what it causes")
        #expect(events.allSatisfy { $0["app"] as? String == "app" })
        let done = events.first { $0["event"] as? String == "transition" }
        let stages = (done?["stages"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
        #expect(stages == ["will-resign-active", "did-enter-background"], "the stages and their durations")
        #expect(events.allSatisfy { ($0["at"] as? Double ?? 0) > 1_000_000_000 })

        // netlifectl prints the same as text, a line per event, until it is interrupted.
        let text = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "watch"])
        usleep(500_000)
        #expect(daemon.ctl("background", "app").status == 0)
        usleep(500_000)
        let output = text.wait(timeout: 0.5).result.stdout
        #expect(output.contains("app: active -> inactive"), "\(output)")
        #expect(output.contains("app: background done: background"), "\(output)")
        #expect(!output.contains("{"), "text, not JSON")
    }

    @Test func aWatcherSeesADataSocketEnterAndLeaveQuietMode() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("mail", server, socket: "feed", socketLines: """
            policy = quiet
            quiet-enter = PAUSE
            quiet-exit = RESUME
            """))
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        #expect(daemon.waitForSocket("mail", "feed", state: "connected"))
        let watcher = try #require(RawControlClient(path: daemon.controlPath))
        defer { watcher.close() }
        #expect(watcher.send("{\"cmd\":\"watch\",\"app\":\"mail\"}\n") > 0)
        let first = watcher.line(timeout: 5).flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
        #expect(first?["watching"] as? String == "mail")
        let text = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "watch", "mail"])
        usleep(500_000)   // netlifectl's watch is registered

        #expect(daemon.ctl("background", "mail").status == 0)
        #expect(peer.readUntil("\n") == "PAUSE\n")
        #expect(daemon.socket("mail", "feed")?["state"] as? String == "quiet")
        #expect(daemon.ctl("foreground", "mail").status == 0)
        #expect(peer.readUntil("\n") == "RESUME\n")
        var sockets: [String] = []
        while sockets.count < 2, let line = watcher.line(timeout: 5),
              let event = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] {
            guard event["event"] as? String == "socket" else { continue }
            sockets.append("\(event["socket"] as? String ?? "?") \(event["from"] as? String ?? "?")->\(event["to"] as? String ?? "?")")
        }
        #expect(sockets == ["feed connected->quiet", "feed quiet->connected"], "\(sockets)")

        #expect(waitUntil(timeout: 5) { text.output.contains("left quiet mode") })
        let output = text.wait(timeout: 0.2).result.stdout
        #expect(output.contains("mail: socket feed entered quiet mode\n"), "\(output)")
        #expect(output.contains("mail: socket feed left quiet mode\n"), "\(output)")
    }

    @Test func aWatcherThatNeverReadsIsDroppedAndStatusStaysFast() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        let watcher = try #require(RawControlClient(path: daemon.controlPath))
        defer { watcher.close() }
        var small: Int32 = 4096
        setsockopt(watcher.fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        #expect(watcher.send("{\"cmd\":\"watch\"}\n") > 0)
        // Drive many events without the watcher reading any of them.
        let driver = try #require(RawControlClient(path: daemon.controlPath))
        defer { driver.close() }
        var latencies: [Double] = []
        for round in 0..<600 {
            for command in ["background", "foreground"] {
                let (reply, _) = driver.roundTrip("{\"cmd\":\"\(command)\",\"app\":\"app\"}\n")
                #expect(isOK(reply))
            }
            if round % 50 == 0 { latencies.append(driver.roundTrip().ms) }
            if daemon.log.contains("dropping a watcher") { break }
        }
        #expect(waitUntil(timeout: 5) { daemon.log.contains("dropping a watcher") }, "the watcher was dropped")
        let latency = daemon.statusLatency(count: 11)
        print("a watcher that never reads: status median \(String(format: "%.2f", latency.median)) ms afterwards; during: \(latencies.map { String(format: "%.1f", $0) })")
        #expect(latency.median < 15 * slowdown)
        #expect((latencies.max() ?? 0) < 200 * slowdown, "status stayed fast while the watcher's lines piled up")
        // What the watcher finds when it finally reads: events, then the reason it was dropped, then the end.
        var last: [UInt8]?
        while let line = watcher.line(timeout: 5) { last = line }
        let reason = last.flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
        #expect(reason?["event"] as? String == "end", "the last line says why")
        let why = (reason?["error"] as? String) ?? ""
        #expect(why.contains("did not read"), "\(why)")
    }

    @Test func aWatchEndsWithAClearMessageAndStatus3WhenTheDaemonStops() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app"))
        defer { daemon.stop() }
        let watch = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "watch"])
        usleep(500_000)
        daemon.signal(SIGTERM)
        let (result, _) = watch.wait(timeout: 10)
        #expect(result.status == 3, "\(result)")
        #expect(result.stderr.contains("netlifed is stopping"), "\(result.stderr)")
        #expect(result.stdout.contains("app: stopped: terminated (by shutdown)"), "\(result.stdout)")
    }

    @Test func watchdogPingsComeEveryHalfWatchdogUsecInEveryState() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            auto-suspend = never
            on-did-enter-background = /bin/sleep 1.5
            """), environment: ["WATCHDOG_USEC": "200000"])
        defer { daemon.stop() }
        let start = Date()
        func pings() -> Int { daemon.notify.messages.filter { $0.contains("WATCHDOG=1") }.count }
        let before = pings()
        // 5 s: a hook that sleeps (background), then suspended, then active again.
        let background = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "background", "app"])
        _ = background.wait(timeout: 5)
        #expect(daemon.ctl("suspend", "app").status == 0)
        #expect(daemon.state("app") == "suspended")
        while Date().timeIntervalSince(start) < 4 { usleep(50_000) }
        #expect(daemon.ctl("foreground", "app").status == 0)
        while Date().timeIntervalSince(start) < 5 { usleep(50_000) }
        let count = pings() - before
        print("WATCHDOG=1 with WATCHDOG_USEC=200000: \(count) pings in 5 s (expected 50)")
        #expect(count >= 40 && count <= 60, "\(count) pings in 5 s at one per 100 ms")
    }

    @Test func noPingsWhenTheWatchdogBelongsToAnotherProcess() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app"),
                                    environment: ["WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"])
        defer { daemon.stop() }
        usleep(600_000)
        #expect(!daemon.notify.messages.contains { $0.contains("WATCHDOG=1") })
    }
}
