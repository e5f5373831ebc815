// Regression tests for the findings of the hardening review, one or more per finding, grouped by class:
// A lifetimes (objects used after close or free), B unbounded work in one loop callback, C values that cannot
// work, D hooks, F the data path's flush timeout, G fair use of the control socket. Each drives the real
// netlifed the way a user (netlifectl) or an abuser (a raw socket client) would, and checks what a peer sees.
// A daemon that crashed fails the test when TestDaemon stops it.

import Foundation
import Testing

/// A hook command that records its pid in `file` and then sleeps `seconds`.
private func recordingSleep(_ file: String, _ seconds: String) -> String {
    "/bin/sh -c 'echo $$ > \(file); exec sleep \(seconds)'"
}

private func hasContent(_ path: String) -> Bool {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").contains { $0.isNumber }
}

// MARK: - A. Lifetimes

@Suite(.timeLimit(.minutes(5)))
struct LifetimeHardeningTests {
    @Test(arguments: [SIGINT, SIGKILL])
    func netlifectlKilledWhileABackgroundHookRunsLeavesTheDaemonAliveAndTheAppInBackground(signal: Int32) throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let pidFile = directory.file("hook.pid")
        let daemon = try TestDaemon(config: echoApp("a", appLines: """
            auto-suspend = never
            on-did-enter-background = \(recordingSleep(pidFile, "1"))
            """))
        defer { daemon.stop() }
        let ctl = try RunningCtl(daemon, ["background", "a"])
        #expect(waitUntil(timeout: 3) { hasContent(pidFile) })
        usleep(100_000)
        ctl.signal(signal)
        _ = ctl.wait(timeout: 5)
        // The command still completes once the hook ends; its reply then finds the client gone.
        let hook = Int32(directory.read("hook.pid").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(waitUntil(timeout: 3) { processIsGone(hook) })
        usleep(300_000)
        #expect(daemon.currentState("a") == "background")
        #expect(daemon.isRunning, "netlifed died after its client hung up during a transition:\n\(daemon.log.suffix(2000))")
        #expect(daemon.ctl("status").status == 0)
    }

    @Test func rawClientsThatHangUpBeforeTheirReplyOrMidLineDoNotCrashTheDaemon() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: """
            auto-suspend = never
            on-did-enter-background = /bin/sleep 0.3
            """))
        defer { daemon.stop() }
        let path = daemon.controlPath
        let hangUps: [String] = [
            "{\"cmd\":\"version\"}\n",          // a reply that finds its client gone
            "{not json\n",                       // garbage, then gone
            "\u{01}\u{02}\u{ff}garbage\n",       // more garbage
            "{\"cmd\":\"stat",                   // gives up half-way through a line
            "{\"cmd\":\"status\"}\n{\"cmd\":\"ver", // a whole request and half of the next
        ]
        for _ in 0..<20 {
            for text in hangUps {
                let client = try #require(RawControlClient(path: path))
                client.send(text)
                client.close()
            }
            // The same, with a reset instead of a FIN.
            let client = try #require(RawControlClient(path: path))
            client.send("{\"cmd\":\"version\"}\n")
            client.reset()
        }
        // A transition whose client vanished at once: it still completes.
        let vanishing = try #require(RawControlClient(path: path))
        vanishing.send("{\"cmd\":\"background\",\"app\":\"a\"}\n")
        vanishing.close()
        #expect(waitUntil(timeout: 3) { daemon.currentState("a") == "background" })
        usleep(500_000)
        #expect(daemon.isRunning, "log:\n\(daemon.log.suffix(2000))")
        #expect(daemon.ctl("status").status == 0)
    }

    @Test func reloadRemovingAnAppWhoseConnectionsAreStillFlushingDoesNotCrash() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        // `a` keeps its connections and one of them is closing after a flush its peer never reads;
        // `c` closes its connections on background, and its peer never reads either.
        let daemon = try TestDaemon(config: echoApp("a", appLines: "auto-suspend = never")
                                    + echoApp("c", appLines: "auto-suspend = never", listenerLines: "connections = close")
                                    + echoApp("b"))
        defer { daemon.stop() }
        let payload = [UInt8](repeating: 0x61, count: 1 << 20)
        let deaf = try #require(connectSmallWindowPeer(port: daemon.port(of: "a")))
        defer { deaf.close() }
        #expect(deaf.sendAll(payload) == payload.count)
        shutdown(deaf.fd, Int32(SHUT_WR))  // echo: close after the (never-ending) flush
        let deafToo = try #require(connectSmallWindowPeer(port: daemon.port(of: "c")))
        defer { deafToo.close() }
        #expect(deafToo.sendAll(payload) == payload.count)
        usleep(200_000)
        #expect(daemon.ctl("background", "c").status == 0)

        daemon.directory.write("netlifed.conf", echoApp("b"))
        let reload = daemon.ctl("reload")
        #expect(reload.status == 0, "\(reload)")
        #expect(reload.stdout.contains("removed: a, c") || reload.stdout.contains("removed: c, a"), "\(reload)")
        // The peers read now, and the flush timeout (5 s) passes: whatever was waiting on the removed apps
        // must not touch them.
        let drainStart = Date()
        var drained = [0, 0]
        var endings = ["none", "none"]
        while Date().timeIntervalSince(drainStart) < 6 {
            for (index, peer) in [deaf, deafToo].enumerated() where endings[index] == "none" {
                switch peer.read(timeout: 0.01) {
                case .bytes(let bytes): drained[index] += bytes.count
                case .endOfStream: endings[index] = "FIN"
                case .error(let code): endings[index] = String(cString: strerror(code))
                case .timedOut: break
                }
            }
        }
        print("peers of removed apps: read \(drained) bytes, then \(endings)")
        #expect(endings.allSatisfy { $0 != "none" }, "the removed apps' connections are closed")
        #expect(daemon.isRunning, "log:\n\(daemon.log.suffix(2000))")
        #expect(daemon.ctl("status", "a").status == 1)
        #expect(daemon.ctl("status", "b").status == 0)
    }

    @Test func reloadRemovingAnAppWhileItsAutoSuspendTimerIsArmedDoesNotCrash() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: "auto-suspend = 500ms") + echoApp("b"))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "a").status == 0)
        daemon.directory.write("netlifed.conf", echoApp("b"))
        #expect(daemon.ctl("reload").status == 0)
        usleep(900_000)
        #expect(daemon.isRunning, "log:\n\(daemon.log.suffix(2000))")
        #expect(daemon.ctl("status").status == 0)
    }

    @Test func reloadRemovingAnAppWhileItsExpirationHookRunsDoesNotCrash() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let pidFile = directory.file("expiration.pid")
        let daemon = try TestDaemon(config: echoApp("a", appLines: """
            auto-suspend = never
            task-time = 1s
            expiration-lead = 900ms
            expiration-budget = 3s
            expiration-grace = 3s
            on-expiration = \(recordingSleep(pidFile, "1"))
            """) + echoApp("b"))
        defer { daemon.stop() }
        #expect(daemon.ctl("task", "begin", "a").status == 0)
        #expect(daemon.ctl("background", "a").status == 0)
        #expect(waitUntil(timeout: 3) { hasContent(pidFile) }, "the expiration hook started")
        daemon.directory.write("netlifed.conf", echoApp("b"))
        let reload = daemon.ctl("reload")
        #expect(reload.status == 0, "\(reload)")
        usleep(1_300_000)
        #expect(daemon.isRunning, "log:\n\(daemon.log.suffix(2000))")
        #expect(daemon.ctl("status").status == 0)
        let hook = Int32(directory.read("expiration.pid").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(waitUntil(timeout: 1) { processIsGone(hook) }, "the removed app's hook was killed")
    }

    @Test func aLaunchQueuedForAnAppThatAReloadRemovesIsAnsweredReloaded() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let pidFile = directory.file("hook.pid")
        let daemon = try TestDaemon(config: echoApp("a", appLines: """
            auto-suspend = never
            on-did-enter-background = \(recordingSleep(pidFile, "1"))
            """) + echoApp("b"))
        defer { daemon.stop() }
        let background = try RunningCtl(daemon, ["background", "a"])
        #expect(waitUntil(timeout: 3) { hasContent(pidFile) })
        // The reload removes `a`; its terminate waits behind the slow transition, and a launch comes after it.
        daemon.directory.write("netlifed.conf", echoApp("b"))
        let reload = try RunningCtl(daemon, ["reload"])
        usleep(200_000)
        let queued = try #require(RawControlClient(path: daemon.controlPath))
        defer { queued.close() }
        queued.send("{\"cmd\":\"launch\",\"app\":\"a\"}\n")
        let reply = queued.reply(timeout: 5)
        let code = errorCode(of: reply)
        print("a launch queued behind a reload that removes its app: \(code ?? "ok, state \(reply?["state"] ?? "?")")")
        // `reloaded` while the app waits to be drained; `unknown-app` if it is already gone. Never a launch
        // of an app that status no longer lists.
        #expect(code == "reloaded" || code == "unknown-app", "the launch got \(String(describing: reply))")
        if code == "reloaded" {
            #expect(((reply?["error"] as? [String: Any])?["message"] as? String)?.contains("removed by a reload") == true)
        }
        let reloaded = reload.wait(timeout: 10)
        #expect(reloaded.status == 0, "\(reloaded)")
        #expect(reloaded.stdout.contains("removed: a"), "\(reloaded)")
        _ = background.wait(timeout: 5)
        #expect(daemon.ctl("status", "a").status == 1, "status no longer lists a")
        let names = (try? JSONSerialization.jsonObject(with: Data(daemon.ctl("--json", "status").stdout.utf8)) as? [String: Any])?["apps"]
            .flatMap { $0 as? [[String: Any]] }?.compactMap { $0["name"] as? String }
        #expect(names == ["b"])
        #expect(daemon.isRunning)
    }
}

// MARK: - B. Bounded work per loop callback

@Suite(.timeLimit(.minutes(5)))
struct BoundedWorkHardeningTests {
    @Test func aRequestWithoutNewlineThenHalfCloseIsAnsweredExactlyOnceThenEOF() throws {
        let daemon = try TestDaemon(config: echoApp("a"))
        defer { daemon.stop() }
        let client = try #require(RawControlClient(path: daemon.controlPath))
        defer { client.close() }
        client.send("{\"cmd\":\"version\"}")
        client.shutdownWrite()
        #expect(isOK(client.line(timeout: 3)))
        #expect(client.waitForEnd(timeout: 3), "the daemon closes the connection after the one reply")
        let extra = client.remainingLines()
        #expect(extra.isEmpty, "\(extra.count == 100 ? "100 or more" : String(extra.count)) further replies to one request")
        usleep(100_000)
        #expect(daemon.isRunning, "log:\n\(daemon.log.suffix(2000))")
        #expect(daemon.ctl("status").status == 0)
    }

    @Test func thirtyOneObjectsWithThousandsOfKeysDoNotStallTheLoop() throws {
        let daemon = try TestDaemon(config: echoApp("a"))
        defer { daemon.stop() }
        var object = "{\"cmd\":\"version\""
        var key = 0
        while object.utf8.count < 64 * 1024 - 32 {
            object += ",\"k\(key)\":1"
            key += 1
        }
        object += "}\n"
        let bytes = Array(object.utf8)
        #expect(bytes.count <= 64 * 1024)
        let probe = try #require(RawControlClient(path: daemon.controlPath))
        defer { probe.close() }
        #expect(isOK(probe.roundTrip().reply))
        // One object alone: its round trip is mostly the parse.
        var alone: [Double] = []
        for _ in 0..<5 {
            let (reply, ms) = probe.roundTrip(object, timeout: 10)
            // A request has a handful of members: past 256 the parse stops, with an error that says why.
            #expect(errorCode(of: reply) == "bad-request")
            alone.append(ms)
        }
        print("one object of \(key) keys alone: round trip median \(String(format: "%.2f", median(alone))) ms")
        // Linear: well under 10 ms in a release build; the margin covers a debug build on a loaded machine.
        // Today's quadratic check of duplicate keys took about 200 ms (release) for this object.
        #expect(median(alone) < 100 * slowdown, "a 64 KiB object of \(key) keys took \(median(alone)) ms")
        var clients: [RawControlClient] = []
        defer { clients.forEach { $0.close() } }
        for _ in 0..<31 { clients.append(try #require(RawControlClient(path: daemon.controlPath))) }
        for client in clients { #expect(client.send(bytes, timeout: 5) == bytes.count) }
        var times: [Double] = []
        for _ in 0..<20 {
            let (reply, ms) = probe.roundTrip()
            #expect(isOK(reply))
            times.append(ms)
        }
        let answered = clients.filter { errorCode(of: $0.line(timeout: 10)) == "bad-request" }.count
        print("31 objects of \(key) keys (\(bytes.count) bytes) at once: status during the burst median \(String(format: "%.2f", median(times))) ms, worst \(String(format: "%.2f", times.max() ?? 0)) ms")
        #expect(answered == 31)
        // Each parse is one callback; the probe's request waits for at most the 31 of them, far from the 2 s
        // loop-stall that aborted the daemon.
        #expect((times.max() ?? .infinity) < 1500 * slowdown, "status took up to \(times.max() ?? 0) ms while the objects were parsed")
        clients.forEach { $0.close() }
        clients = []
        daemon.expectHealthy(comparedTo: nil, label: "31 wide objects")
    }

    @Test func pipelinedStatusOf200AppsIsAnsweredInOrderWhileAnotherClientStaysFast() throws {
        let config = (0..<200).map { "[app a\($0)]\nlaunch = no\n" }.joined()
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        // 64 KiB of pipelined requests: status, with a version every 50th line to check the order.
        var lines: [String] = []
        var size = 0
        while true {
            let line = lines.count % 50 == 49 ? "{\"cmd\":\"version\"}\n" : "{\"cmd\":\"status\"}\n"
            if size + line.utf8.count > 64 * 1024 { break }
            lines.append(line)
            size += line.utf8.count
        }
        let flooder = try #require(RawControlClient(path: daemon.controlPath))
        defer { flooder.close() }
        let other = try #require(RawControlClient(path: daemon.controlPath))
        defer { other.close() }
        #expect(flooder.send(lines.joined(), timeout: 10) == size)
        // The flooder reads its replies on another thread while `other` asks for status.
        let outcome = ReplyOrderCheck(expected: lines.map { $0.contains("version") })
        // 3,850 replies of 200 apps each: 13 s in a debug build on a loaded machine, and about 80 s under
        // AddressSanitizer while the machine also builds.
        let allowed: TimeInterval = activeSanitizer == nil ? 60 : 150
        let reader = Thread { outcome.read(from: flooder, timeout: allowed) }
        reader.start()
        var times: [Double] = []
        while !outcome.isDone && times.count < 400 {
            let (reply, ms) = other.roundTrip("{\"cmd\":\"status\",\"app\":\"a0\"}\n", timeout: 10)
            #expect(isOK(reply))
            times.append(ms)
            usleep(5000)
        }
        #expect(outcome.waitDone(timeout: allowed))
        print("\(lines.count) pipelined status requests (200 apps): \(outcome.received) replies in \(String(format: "%.1f", outcome.elapsed)) s; concurrent status median \(String(format: "%.2f", median(times))) ms, worst \(String(format: "%.2f", times.max() ?? 0)) ms over \(times.count)")
        #expect(outcome.received == lines.count)
        #expect(outcome.outOfOrder == 0, "\(outcome.outOfOrder) replies out of order")
        // A status of 200 apps costs milliseconds: the other client waits for one of the flooder's 2 ms slices
        // (about 2 ms here), not for 32 of its requests (about 115 ms before the slices were timed).
        #expect(median(times) < 25 * slowdown, "the other client's status median was \(median(times)) ms")
        #expect((times.max() ?? .infinity) < 1000)
        #expect(daemon.isRunning, "log:\n\(daemon.log.suffix(2000))")
    }

    /// Control sessions are served before the apps' connections in each loop turn; a client that keeps the
    /// control socket full of pipelined requests must still not starve them: a session that has handled its
    /// 32 lines stops reading until the apps' ready connections have had their turn.
    @Test func aClientFloodingTheControlSocketDoesNotStarveTheApps() throws {
        let daemon = try TestDaemon(config: "[app e]\n[listener e.main]\naddress = 127.0.0.1:0\nservice = echo\n")
        defer { daemon.stop() }
        let echo = try #require(Peer.connect(port: daemon.port(of: "e")))
        defer { echo.close() }
        let flooder = try #require(RawControlClient(path: daemon.controlPath))
        defer { flooder.close() }
        let stop = StopFlag()
        let finished = DispatchSemaphore(value: 0)
        let requests = Array(String(repeating: "{\"cmd\":\"version\"}\n", count: 8).utf8)
        let writer = Thread {
            while !stop.isSet, flooder.send(requests, timeout: 1) > 0 {}
            finished.signal()
        }
        let received = ByteCounter()
        let fd = flooder.fd
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while !stop.isSet {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) >= 0 else { break }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if count > 0 { received.add(count) } else if count == 0 { break }
            }
            finished.signal()
        }
        writer.start()
        reader.start()
        #expect(waitUntil(timeout: 5) { received.value > 100_000 }, "the flood is under way")
        var times: [Double] = []
        let started = Date()
        while Date().timeIntervalSince(started) < 2 {
            let sent = Date()
            #expect(echo.roundTrip("ping\n", timeout: 10) == "ping\n")
            times.append(Date().timeIntervalSince(sent) * 1000)
        }
        let repliesBytes = received.value
        stop.set()
        #expect(finished.wait(timeout: .now() + 10) == .success)
        #expect(finished.wait(timeout: .now() + 10) == .success)
        print("control flood: \(repliesBytes) bytes of replies; \(times.count) echo round trips meanwhile, median \(String(format: "%.2f", median(times))) ms, worst \(String(format: "%.2f", times.max() ?? 0)) ms")
        #expect(times.count >= 20, "only \(times.count) echo round trips in 2 s")
        #expect((times.max() ?? .infinity) < 500 * slowdown)
        #expect(daemon.isRunning)
    }

    @Test func the1025thTaskIsRefusedWithLimit() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        let client = try #require(RawControlClient(path: daemon.controlPath))
        defer { client.close() }
        client.send(String(repeating: "{\"cmd\":\"task-begin\",\"app\":\"a\",\"name\":\"t\"}\n", count: 1025))
        var ids: [Int] = []
        var last: [String: Any]?
        for index in 0..<1025 {
            guard let reply = client.reply(timeout: 10) else { Issue.record("no reply to task begin \(index + 1)"); break }
            if index < 1024 { ids.append(reply["id"] as? Int ?? 0) } else { last = reply }
        }
        #expect(ids.count == 1024 && !ids.contains(0), "the first 1,024 tasks begin")
        #expect(errorCode(of: last) == "limit", "the 1,025th: \(String(describing: last))")
        #expect(daemon.ctl("task", "begin", "a").status == 1)
        #expect(daemon.ctl("task", "end", "a", String(ids.first ?? 1)).status == 0)
        #expect(daemon.ctl("task", "begin", "a").status == 0, "room again after one ended")
    }

    @Test func aTaskNameLongerThan256BytesIsABadRequest() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        #expect(daemon.ctl("task", "begin", "a", "--name", String(repeating: "n", count: 256)).status == 0)
        let long = daemon.ctl("task", "begin", "a", "--name", String(repeating: "n", count: 257))
        #expect(long.status == 1, "\(long)")
        let client = try #require(RawControlClient(path: daemon.controlPath))
        defer { client.close() }
        // Bytes of UTF-8, not characters: 128 two-byte letters fit, 129 do not.
        client.send("{\"cmd\":\"task-begin\",\"app\":\"a\",\"name\":\"\(String(repeating: "é", count: 128))\"}\n")
        #expect(isOK(client.line()))
        client.send("{\"cmd\":\"task-begin\",\"app\":\"a\",\"name\":\"\(String(repeating: "é", count: 129))\"}\n")
        #expect(errorCode(of: client.line()) == "bad-request")
        client.send("{\"cmd\":\"task-begin\",\"app\":\"a\",\"name\":\"\(String(repeating: "x", count: 60_000))\"}\n")
        #expect(errorCode(of: client.line()) == "bad-request")
        #expect(daemon.status("a")["tasks"].flatMap { $0 as? [Any] }?.count == 2)
    }

    @Test func aFloodingHookDoesNotSlowStatusAndTheLogSaysWhatWasDropped() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: """
            auto-suspend = never
            background-budget = 2s
            on-did-enter-background = /usr/bin/yes
            """))
        defer { daemon.stop() }
        let background = try RunningCtl(daemon, ["background", "a"])
        usleep(300_000)
        let latency = daemon.statusLatency(count: 21)
        print("status while a hook floods its output: median \(String(format: "%.2f", latency.median)) ms, worst \(String(format: "%.2f", latency.worst)) ms")
        #expect(latency.failures == 0)
        #expect(latency.median < 15 * slowdown, "status median \(latency.median) ms while a hook floods")
        let result = background.wait(timeout: 10)
        #expect(result.status == 1 && result.stderr.contains("0x8badf00d"), "the flooding hook is killed at its budget: \(result)")
        let log = daemon.log
        #expect(log.contains("hook on-did-enter-background: dropped "), "the log says how many lines were dropped")
        let logged = log.split(separator: "\n").filter { $0.hasSuffix("hook on-did-enter-background: y") }.count
        print("flooding hook: \(logged) lines logged over a 2 s budget")
        #expect(logged <= 200 + 50 * 3, "\(logged) lines of a flooding hook were logged")
        #expect(daemon.isRunning)
    }
}

/// Reads `expected.count` reply lines on a reader thread and checks that version and status replies come in
/// the order they were asked for.
private final class ReplyOrderCheck: @unchecked Sendable {
    private let lock = NSLock()
    private let expected: [Bool]
    private var count = 0
    private var misplaced = 0
    private var done = false
    private var started = Date()
    private var finished = Date()

    init(expected: [Bool]) { self.expected = expected }

    func read(from client: RawControlClient, timeout: TimeInterval) {
        lock.withLock { started = Date() }
        let deadline = Date().addingTimeInterval(timeout)
        let versionPrefix = Array("{\"ok\":true,\"version\"".utf8)
        var index = 0
        while index < expected.count, let line = client.line(timeout: deadline.timeIntervalSinceNow) {
            let isVersion = line.starts(with: versionPrefix)
            let isStatus = line.starts(with: Array("{\"ok\":true,\"apps\"".utf8))
            let inOrder = expected[index] ? isVersion : isStatus
            index += 1
            lock.withLock {
                count = index
                if !inOrder { misplaced += 1 }
            }
        }
        lock.withLock { done = true; finished = Date() }
    }

    var isDone: Bool { lock.withLock { done } }
    var received: Int { lock.withLock { count } }
    var outOfOrder: Int { lock.withLock { misplaced } }
    var elapsed: TimeInterval { lock.withLock { finished.timeIntervalSince(started) } }

    func waitDone(timeout: TimeInterval) -> Bool { waitUntil(timeout: timeout) { isDone } }
}

// MARK: - C. Values that cannot work

@Suite(.timeLimit(.minutes(5)))
struct ConfigRangeHardeningTests {
    @Test func checkConfigRejectsDurationsOutsideTheirRangeNamingFileLineAndRange() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("bad.conf", """
            [daemon]
            loop-stall = 5ms
            [app a]
            task-time = 9223372036s
            launch-budget = 0
            background-budget = 0
            """)
        let path = directory.file("bad.conf")
        let result = run([product("netlifed"), "--check-config", path])
        #expect(result.status == 1, "\(result)")
        let expected = [
            "\(path):2: loop-stall must be between 100ms and 10m, got '5ms'",
            "\(path):4: task-time must be between 1s and 24h, got '9223372036s'",
            "\(path):5: launch-budget must be between 10ms and 1h, got '0'",
            "\(path):6: background-budget must be between 10ms and 1h, got '0'",
        ]
        let lines = result.stderr.split(separator: "\n").map(String.init)
        for line in expected { #expect(lines.contains(line), "missing '\(line)' in:\n\(result.stderr)") }
    }

    @Test func theCompressedTimingsOfTestsStayValid() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("good.conf", """
            [daemon]
            loop-stall = 100ms
            keepalive-min = 1s
            [app a]
            launch-budget = 10ms
            background-budget = 10ms
            foreground-budget = 10ms
            terminate-budget = 10ms
            expiration-budget = 10ms
            keepalive-budget = 10ms
            task-time = 1s
            expiration-lead = 0
            expiration-grace = 0
            auto-suspend = 0
            """)
        let result = run([product("netlifed"), "--check-config", directory.file("good.conf")])
        #expect(result.status == 0, "\(result)")
    }

    @Test func aTaskTimeOfOneDayRunsWithoutOverflow() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: "auto-suspend = never\ntask-time = 24h\nexpiration-lead = 23h"))
        defer { daemon.stop() }
        #expect(daemon.ctl("task", "begin", "a").status == 0)
        #expect(daemon.ctl("background", "a").status == 0)
        let remaining = daemon.status("a")["backgroundTimeRemaining"] as? Double ?? 0
        #expect(remaining > 86_000 && remaining <= 86_400, "\(remaining)")
        #expect(daemon.isRunning)
    }

    @Test func aControlPathOver107BytesIsRefusedAndNothingIsBound() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("netlifed.conf", "[app a]\nlaunch = no\n")
        let socketDirectory = directory.file("control")
        let name = String(repeating: "s", count: 108 - socketDirectory.utf8.count - 1)
        let long = socketDirectory + "/" + name
        #expect(long.utf8.count == 108)
        let result = run([product("netlifed"), "--config", directory.file("netlifed.conf"), "--control", long], timeout: 5)
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("107"), "the message names the limit: \(result.stderr)")
        let bound = (FileManager.default.enumerator(atPath: directory.path)?.allObjects as? [String] ?? []).filter {
            var info = stat()
            return lstat(directory.file($0), &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
        }
        #expect(bound.isEmpty, "sockets bound: \(bound)")

        directory.write("long.conf", "[daemon]\ncontrol = \(long)\n[app a]\nlaunch = no\n")
        let check = run([product("netlifed"), "--check-config", directory.file("long.conf")])
        #expect(check.status == 1, "\(check)")
        #expect(check.stderr.contains("\(directory.file("long.conf")):2:"), "\(check)")
    }
}

// MARK: - D. Hooks

@Suite(.timeLimit(.minutes(5)))
struct HookHardeningTests {
    @Test func aHookThatWritesALotRunsToTheEndWithBlockingOutput() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: """
            auto-suspend = never
            background-budget = 20s
            on-did-enter-background = /usr/bin/seq 1 200000
            """))
        defer { daemon.stop() }
        let result = daemon.ctl("background", "a", timeout: 30)
        #expect(result.status == 0, "\(result)")
        let log = daemon.log
        #expect(!log.contains("Resource temporarily unavailable"), "the hook saw EAGAIN on its output")
        #expect(!log.contains("hook on-did-enter-background failed"), "\(log.split(separator: "\n").filter { $0.contains("failed") })")
        #expect(log.contains("hook on-did-enter-background: dropped "))
        #expect(daemon.state("a") == "background")
    }

    @Test func hookRunsLeakNoMemory() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: trueHooksOnEveryEvent))
        defer { daemon.stop() }
        let client = try #require(RawControlClient(path: daemon.controlPath))
        defer { client.close() }
        #expect(driveHookRuns(client, app: "a", cycles: 250) == 0)  // warm-up: 1,000 hook runs
        let before = daemon.probe.residentBytes
        #expect(driveHookRuns(client, app: "a", cycles: 750) == 0)  // 3,000 hook runs
        let after = daemon.probe.residentBytes
        print("3,000 hook runs: RSS \(before / 1024) KiB -> \(after / 1024) KiB (\((after - before) / 3000) bytes per run)")
        if rssIsMeaningful { #expect(after - before < 300 * 1024, "RSS grew by \((after - before) / 1024) KiB over 3,000 hook runs") }
    }
}

/// `true` as the hook of every transition event, and no auto-suspend: each background/foreground cycle runs
/// four hooks.
let trueHooksOnEveryEvent = """
    auto-suspend = never
    on-will-resign-active = /bin/true
    on-did-enter-background = /bin/true
    on-will-enter-foreground = /bin/true
    on-did-become-active = /bin/true
    """

/// Sends background/foreground pairs for `app`, in batches of pipelined requests, and returns how many
/// replies were not ok (or missing).
func driveHookRuns(_ client: RawControlClient, app: String, cycles: Int) -> Int {
    var failures = 0
    var done = 0
    while done < cycles {
        let batch = min(25, cycles - done)
        let pair = "{\"cmd\":\"background\",\"app\":\"\(app)\"}\n{\"cmd\":\"foreground\",\"app\":\"\(app)\"}\n"
        client.send(String(repeating: pair, count: batch))
        for index in 0..<(2 * batch) {
            guard let line = client.line(timeout: 10) else { return failures + 2 * (cycles - done) - index }
            if !isOK(line) { failures += 1 }
        }
        done += batch
    }
    return failures
}

// MARK: - F. The data path

@Suite(.timeLimit(.minutes(5)))
struct FlushHardeningTests {
    @Test func aSlowSteadyReaderAfterAHalfCloseReceivesEveryByte() throws {
        let daemon = try TestDaemon(config: echoApp("a"))
        defer { daemon.stop() }
        let peer = try #require(connectSmallWindowPeer(port: daemon.port(of: "a"), receiveBuffer: 65536))
        defer { peer.close() }
        let total = 6 << 20
        let payload = (0..<total).map { UInt8(truncatingIfNeeded: $0 % 251) }
        // The peer sends everything and then half-closes while it reads at 256 KiB/s from the start: the
        // echo piles up (in the daemon's output, up to its 4 MiB high-water mark, and in the kernel's
        // buffers), and the daemon closes after the flush once it has seen the FIN.
        let fd = peer.fd
        let sent = SentCount()
        Thread {
            sent.set(sendAllBytes(fd: fd, payload, timeout: 35))
            shutdown(fd, Int32(SHUT_WR))
        }.start()
        let start = Date()
        var received: [UInt8] = []
        received.reserveCapacity(total)
        var ending = "none"
        let rate = 256.0 * 1024
        while Date().timeIntervalSince(start) < 40 {
            // Read no faster than 256 KiB/s.
            let allowed = Int(Date().timeIntervalSince(start) * rate) - received.count
            if allowed <= 0 { usleep(20_000); continue }
            switch peer.read(timeout: 1, max: min(allowed, 65536)) {
            case .bytes(let bytes): received += bytes
            case .endOfStream: ending = "FIN"
            case .error(let code): ending = String(cString: strerror(code))
            case .timedOut: continue
            }
            if ending != "none" { break }
        }
        let elapsed = Date().timeIntervalSince(start)
        print("slow reader after half-close: \(received.count) of \(total) bytes in \(String(format: "%.1f", elapsed)) s, then \(ending)")
        #expect(waitUntil(timeout: 40) { sent.value >= 0 }, "the sending thread ended")
        #expect(sent.value == total)
        #expect(received.count == total, "received \(received.count) of \(total) bytes, then \(ending) after \(elapsed) s")
        #expect(ending == "FIN")
        let intact = received.elementsEqual(payload.prefix(received.count))
        #expect(intact, "the bytes came back unchanged")
    }
}

/// How many bytes a sending thread got out.
private final class SentCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = -1
    func set(_ value: Int) { lock.withLock { count = value } }
    var value: Int { lock.withLock { count } }
}

// MARK: - G. Fair use of the control socket

@Suite(.timeLimit(.minutes(5)))
struct FairUseHardeningTests {
    @Test func partialRequestsCannotLockOutOtherClients() throws {
        let daemon = try TestDaemon(config: echoApp("a"))
        defer { daemon.stop() }
        let connected = Date()
        var holders: [RawControlClient] = []
        defer { holders.forEach { $0.close() } }
        for _ in 0..<32 {
            let holder = try #require(RawControlClient(path: daemon.controlPath))
            holder.send("{\"cmd\":\"status\"")
            holders.append(holder)
        }
        usleep(100_000)
        let start = Date()
        let status = daemon.ctl("status", timeout: 10)
        let took = Date().timeIntervalSince(start)
        print("netlifectl status with 32 partial requests holding the socket: exit \(status.status) after \(String(format: "%.0f", took * 1000)) ms")
        #expect(status.status == 0, "\(status)")
        #expect(took < 1, "status took \(took) s")
        var closedAfter: [TimeInterval] = []
        var codes: [String: Int] = [:]
        for holder in holders {
            let ended = holder.waitForEnd(timeout: max(0.1, 8 - Date().timeIntervalSince(connected)))
            closedAfter.append(ended ? Date().timeIntervalSince(connected) : .infinity)
            let code = holder.lastLine().flatMap { errorCode(of: $0) } ?? "none"
            codes[code, default: 0] += 1
        }
        print("partial holders closed after at most \(String(format: "%.2f", closedAfter.max() ?? 0)) s; replies \(codes)")
        #expect(closedAfter.allSatisfy { $0 < 7 }, "every partial holder is closed within about 5 s: \(closedAfter)")
        #expect(Set(codes.keys).isSubset(of: ["timeout", "too-many-connections"]), "\(codes)")
        #expect(codes["too-many-connections", default: 0] >= 1, "the newcomer evicted a holder")
        #expect(daemon.isRunning)
    }
}

/// A byte count shared between threads.
private final class ByteCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func add(_ bytes: Int) { lock.withLock { count += bytes } }
}
