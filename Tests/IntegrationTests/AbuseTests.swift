// The abuse suite: the real netlifed under clients, hooks, reloads and peers that misbehave on purpose.
// After each scenario the daemon is alive, `status` answers within a few milliseconds, its descriptor and
// thread counts are back where they started, and (last test) its resident memory has grown by less than
// 1 MiB over 10,000 hook runs and 100,000 requests.

import Foundation
import Testing
import NetLifeTestSupport

/// A small deterministic generator (SplitMix64), so that a failing run can be repeated from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Request lines for the fuzzing client: valid seeds, random bytes, and seeds mutated byte by byte. None
/// holds a newline or is blank, so each must get exactly one reply. No seed starts a transition or a reload,
/// so the replies come at once.
func abusiveLines(count: Int, seed: UInt64) -> [[UInt8]] {
    var random = SplitMix64(state: seed)
    let seeds = [
        "{\"cmd\":\"status\"}", "{\"cmd\":\"version\"}", "{\"cmd\":\"status\",\"app\":\"a\"}",
        "{\"cmd\":\"task-list\",\"app\":\"a\"}", "{\"cmd\":\"task-end\",\"app\":\"a\",\"id\":0}",
        "{\"cmd\":\"mode\",\"app\":\"a\",\"mode\":\"idle\"}", "{\"cmd\":\"status\",\"protocol\":1}",
        "{\"cmd\":\"status\",\"x\":[1,2,{\"y\":null}],\"z\":\"\\u00e9\\n\"}", "[1,2,3]", "\"cmd\"", "{}",
        "{\"cmd\":\"nope\"}", "{\"cmd\":\"status\",\"app\":\"zzz\"}", "{\"cmd\":12}", "{\"a\":1e999}",
    ].map { Array($0.utf8) }
    let blank: Set<UInt8> = [0x20, 0x09, 0x0d, 0x0b, 0x0c]
    var lines: [[UInt8]] = []
    lines.reserveCapacity(count)
    for _ in 0..<count {
        var line: [UInt8]
        switch random.next() % 10 {
        case 0, 1:
            line = (0..<Int(random.next() % 200 + 1)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        case 2, 3:
            line = seeds[Int(random.next() % UInt64(seeds.count))]
        default:
            line = seeds[Int(random.next() % UInt64(seeds.count))]
            for _ in 0..<Int(random.next() % 4 + 1) {
                let position = Int(random.next() % UInt64(line.count + 1))
                let byte = UInt8(truncatingIfNeeded: random.next())
                switch random.next() % 3 {
                case 0 where position < line.count: line[position] = byte
                case 1 where position < line.count: line.remove(at: position)
                default: line.insert(byte, at: position)
                }
            }
        }
        line = line.filter { $0 != 10 }
        if line.allSatisfy({ blank.contains($0) }) { line.insert(0x78, at: 0) }
        lines.append(line)
    }
    return lines
}

/// Counts reply lines on a reader thread while another thread sends.
private final class ReplyCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    private var malformed = 0
    private var done = false

    func read(from client: RawControlClient, expected: Int, timeout: TimeInterval) {
        let deadline = Date().addingTimeInterval(timeout)
        let prefix = Array("{\"ok\":".utf8)
        var seen = 0
        while seen < expected, let line = client.line(timeout: deadline.timeIntervalSinceNow) {
            seen += 1
            let bad = !line.starts(with: prefix)
            lock.withLock { count = seen; if bad { malformed += 1 } }
        }
        lock.withLock { done = true }
    }

    var received: Int { lock.withLock { count } }
    var notReplies: Int { lock.withLock { malformed } }
    func waitDone(timeout: TimeInterval) -> Bool { waitUntil(timeout: timeout) { lock.withLock { done } } }
}

@Suite(.timeLimit(.minutes(5)))
struct AbuseTests {
    @Test func misbehavingControlClientsLeaveTheDaemonHealthy() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        let path = daemon.controlPath
        #expect(daemon.ctl("status").status == 0)
        usleep(200_000)
        let baseline = ResourceBaseline(daemon.probe)

        // Clients that vanish before their reply, with a FIN or a reset, or half-way through a line.
        for round in 0..<30 {
            let client = try #require(RawControlClient(path: path))
            client.send(["{\"cmd\":\"status\"}\n", "{\"cmd\":\"version\"}\n{\"cmd\":\"sta", "{\"cmd\":\"background\",\"app\":\"a\"}\n",
                         "{\"cmd\":\"foreground\",\"app\":\"a\"}\n", "garbage\n"][round % 5])
            if round % 2 == 0 { client.close() } else { client.reset() }
        }
        // Half-closes: one reply each, then EOF.
        for _ in 0..<20 {
            let client = try #require(RawControlClient(path: path))
            client.send("{\"cmd\":\"version\"}")
            client.shutdownWrite()
            #expect(isOK(client.line(timeout: 3)))
            #expect(client.waitForEnd(timeout: 3))
            #expect(client.remainingLines().isEmpty)
            client.close()
        }

        // Tricklers: one byte per 100 ms of a request that would take 10 s; closed after the 5 s deadline.
        let trickle = Array("{\"cmd\":\"status\",\"pad\":\"\(String(repeating: "x", count: 80))\"}\n".utf8)
        let tricklers = try (0..<3).map { _ in try #require(RawControlClient(path: path)) }
        let trickleStart = Date()
        let trickleResult = TrickleResult()
        let trickleThread = Thread {
            var closedAt: [TimeInterval?] = Array(repeating: nil, count: tricklers.count)
            for index in trickle.indices {
                for (number, client) in tricklers.enumerated() where closedAt[number] == nil {
                    if client.send([trickle[index]], timeout: 0.05) != 1 || client.waitForEnd(timeout: 0) {
                        closedAt[number] = Date().timeIntervalSince(trickleStart)
                    }
                }
                if closedAt.allSatisfy({ $0 != nil }) { break }
                usleep(100_000)
            }
            for (number, client) in tricklers.enumerated() {
                // Read what the daemon said before it closed (a send can fail before the reply is read).
                if client.waitForEnd(timeout: 1) && closedAt[number] == nil {
                    closedAt[number] = Date().timeIntervalSince(trickleStart)
                }
            }
            trickleResult.set(closedAt, codes: tricklers.map { $0.lastLine().flatMap { errorCode(of: $0) } })
        }
        trickleThread.start()

        // 100,000 random and mutated lines: each gets exactly one reply.
        let seed = UInt64(Date().timeIntervalSince1970 * 1000)
        let lines = abusiveLines(count: 100_000, seed: seed)
        let fuzzer = try #require(RawControlClient(path: path))
        let counter = ReplyCounter()
        let fuzzStart = Date()
        Thread { counter.read(from: fuzzer, expected: lines.count, timeout: 90) }.start()
        // Sent within 60 s in all (a daemon that stops reading must not hold the test for longer).
        let sendDeadline = Date().addingTimeInterval(60)
        var batch: [UInt8] = []
        for line in lines where Date() < sendDeadline {
            batch += line
            batch.append(10)
            if batch.count > 32 * 1024 {
                if fuzzer.send(batch, timeout: sendDeadline.timeIntervalSinceNow) < batch.count { break }
                batch = []
            }
        }
        fuzzer.send(batch, timeout: max(0, sendDeadline.timeIntervalSinceNow))
        #expect(counter.waitDone(timeout: 90))
        print("100,000 random and mutated lines (seed \(seed)): \(counter.received) replies in \(String(format: "%.1f", Date().timeIntervalSince(fuzzStart))) s")
        #expect(counter.received == lines.count, "seed \(seed): \(counter.received) replies to \(lines.count) lines")
        #expect(counter.notReplies == 0, "seed \(seed)")
        fuzzer.close()
        #expect(daemon.isRunning, "seed \(seed); log:\n\(daemon.log.suffix(2000))")

        // 10,000 pipelined requests, read only after all were sent: every reply, in order.
        let pipeliner = try #require(RawControlClient(path: path))
        let pair = "{\"cmd\":\"version\"}\n{\"cmd\":\"status\",\"app\":\"nope\"}\n"
        let pipelined = String(repeating: pair, count: 5000)
        #expect(pipeliner.send(pipelined, timeout: 20) == pipelined.utf8.count)
        var inOrder = 0
        for index in 0..<10_000 {
            guard let line = pipeliner.line(timeout: 10) else { break }
            if index % 2 == 0 ? isOK(line) : errorCode(of: line) == "unknown-app" { inOrder += 1 }
        }
        #expect(inOrder == 10_000, "\(inOrder) of 10,000 pipelined replies in order")
        pipeliner.close()

        #expect(trickleResult.wait(timeout: 15))
        let (closedAt, codes) = trickleResult.value
        print("tricklers closed after \(closedAt.map { $0.map { String(format: "%.2f s", $0) } ?? "never" }), replies \(codes)")
        #expect(closedAt.allSatisfy { ($0 ?? .infinity) < 7 }, "a trickler is closed after the 5 s request deadline")
        #expect(codes.allSatisfy { $0 == "timeout" }, "\(codes)")
        tricklers.forEach { $0.close() }

        // More connections than the limit: each newcomer is served or told why not; none crashes anything.
        var crowd: [RawControlClient] = []
        var answers: [String: Int] = [:]
        for _ in 0..<48 {
            guard let client = RawControlClient(path: path) else { answers["connect failed", default: 0] += 1; continue }
            client.send("{\"cmd\":\"version\"}\n")
            let line = client.line(timeout: 3)
            answers[isOK(line) ? "ok" : errorCode(of: line) ?? "nothing", default: 0] += 1
            crowd.append(client)
        }
        print("48 connections at once: \(answers)")
        #expect(Set(answers.keys).isSubset(of: ["ok", "too-many-connections"]), "\(answers)")
        crowd.forEach { $0.close() }

        daemon.expectHealthy(comparedTo: baseline, settle: 5, label: "misbehaving control clients")
    }

    @Test func hooksThatFloodDaemonizeOrCallNetlifectlLeaveTheDaemonHealthy() throws {
        let netlifectl = product("netlifectl")
        let config = echoApp("flood", appLines: """
                auto-suspend = never
                background-budget = 1s
                on-did-enter-background = /usr/bin/yes
                """)
            + echoApp("daemonize", appLines: """
                auto-suspend = never
                background-budget = 5s
                on-did-enter-background = /bin/sh -c 'sleep 30 & exit 0'
                """)
            + echoApp("selfcall", appLines: """
                auto-suspend = never
                on-did-enter-background = /bin/sh -c '\(netlifectl) --control "$NETLIFE_CONTROL" status "$NETLIFE_APP" && \(netlifectl) --control "$NETLIFE_CONTROL" task begin "$NETLIFE_APP" --name from-hook'
                """)
            + echoApp("deadlock", appLines: """
                auto-suspend = never
                background-budget = 1s
                on-did-enter-background = /bin/sh -c 'exec \(netlifectl) --control "$NETLIFE_CONTROL" foreground "$NETLIFE_APP"'
                """)
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        #expect(daemon.ctl("status").status == 0)
        usleep(200_000)
        let baseline = ResourceBaseline(daemon.probe)
        for round in 0..<2 {
            let flood = daemon.ctl("background", "flood")
            #expect(flood.status == 1 && flood.stderr.contains("0x8badf00d"), "\(flood)")
            #expect(daemon.ctl("launch", "flood").status == 0)

            let start = Date()
            let daemonize = daemon.ctl("background", "daemonize")
            let took = Date().timeIntervalSince(start)
            #expect(daemonize.status == 0, "\(daemonize)")
            #expect(took < 2, "a hook that leaves a child behind ends when its main process exits (took \(took) s)")
            #expect(waitUntil(timeout: 2) { hookProcesses(app: "daemonize", control: daemon.controlPath).isEmpty },
                    "what the hook left behind is killed")
            #expect(daemon.ctl("foreground", "daemonize").status == 0)

            let selfcall = daemon.ctl("background", "selfcall")
            #expect(selfcall.status == 0, "\(selfcall)")
            let tasks = daemon.status("selfcall")["tasks"] as? [[String: Any]] ?? []
            #expect(tasks.count == round + 1, "the hook began a task through netlifectl: \(tasks)")
            #expect(daemon.ctl("foreground", "selfcall").status == 0)

            // The hook asks for a transition of its own app, which would wait behind the one running the hook:
            // it is answered at once (queued), the background finishes, and the foreground runs after it.
            let deadlock = daemon.ctl("background", "deadlock")
            #expect(deadlock.status == 0, "\(deadlock)")
            #expect(waitUntil(timeout: 3) { hookProcesses(app: "deadlock", control: daemon.controlPath).isEmpty })
            #expect(waitUntil(timeout: 3) { daemon.state("deadlock") == "active" }, "the queued foreground ran")
            #expect(daemon.status("deadlock")["lastTermination"] is NSNull, "no watchdog")
        }
        for app in ["flood", "daemonize", "selfcall", "deadlock"] {
            #expect(hookProcesses(app: app, control: daemon.controlPath).isEmpty, "hooks of \(app) left running")
        }
        for task in daemon.status("selfcall")["tasks"] as? [[String: Any]] ?? [] {
            #expect(daemon.ctl("task", "end", "selfcall", String(task["id"] as? Int ?? 0)).status == 0)
        }
        daemon.expectHealthy(comparedTo: baseline, label: "flooding, daemonizing and self-calling hooks")
    }

    @Test func reloadsWhileTransitionsHooksAndFlushesAreInFlightAndASighupStorm() throws {
        // Variant k of the config: `keep` always (its settings change); x0..x5 come and go; x6 changes
        // its listeners (a restart); loop-stall alternates.
        func config(_ k: Int) -> String {
            var text = "[daemon]\nloop-stall = \(k % 2 == 0 ? "2s" : "3s")\n\n"
            text += echoApp("keep", appLines: """
                auto-suspend = 200ms
                background-budget = \(k % 2 == 0 ? "5s" : "4s")
                on-will-resign-active = /bin/sleep 0.05
                on-did-enter-background = /bin/sleep 0.1
                """, listenerLines: "connections = close")
            for index in 0..<6 where (index + k) % 3 != 0 {
                text += echoApp("x\(index)", appLines: "auto-suspend = \(k % 2 == 0 ? "300ms" : "never")\non-did-enter-background = /bin/sleep 0.2")
            }
            text += echoApp("x6", appLines: "auto-suspend = never")
            if k % 2 == 1 { text += "[listener x6.second]\naddress = 127.0.0.1:0\nservice = echo\n\n" }
            return text
        }
        func install(_ text: String, in daemon: TestDaemon) {
            daemon.directory.write("netlifed.conf.new", text)
            rename(daemon.directory.file("netlifed.conf.new"), daemon.configPath)
        }
        // Not waiting for READY=1: with seven apps launching, the daemon's STATUS datagrams can fill the test's
        // notify socket (max_dgram_qlen is 10) and READY=1 is dropped.
        let daemon = try TestDaemon(config: config(0), waitForReady: false)
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 10) { daemon.currentState("x6") == "active" })
        usleep(300_000)
        let baseline = ResourceBaseline(daemon.probe)
        let keepPort = daemon.port(of: "keep")

        // Transitions in flight all along, from a raw client that ignores what the replies say.
        let stop = StopFlag()
        let path = daemon.controlPath
        let driver = Thread {
            guard let client = RawControlClient(path: path) else { return }
            defer { client.close() }
            var index = 0
            while !stop.isSet {
                let app = ["keep", "x1", "x2", "x4", "x6"][index % 5]
                let command = ["background", "foreground", "launch", "suspend"][index / 5 % 4]
                client.send("{\"cmd\":\"\(command)\",\"app\":\"\(app)\"}\n")
                _ = client.line(timeout: 10)
                index += 1
            }
        }
        driver.start()
        // Flushes in flight: peers of `keep` that send and never read (closed on background, after a flush).
        var peers: [Peer] = []
        defer { peers.forEach { $0.close() } }
        let payload = [UInt8](repeating: 0x62, count: 256 * 1024)

        for k in 1...30 {
            if let peer = connectSmallWindowPeer(port: keepPort) {
                _ = peer.sendAll(payload, timeout: 0.2)
                peers.append(peer)
            }
            install(config(k), in: daemon)
            let reload = daemon.ctl("reload", timeout: 20)
            #expect([0, 1].contains(reload.status), "\(reload)")
            #expect(daemon.isRunning, "after reload \(k); log:\n\(daemon.log.suffix(2000))")
            if !daemon.isRunning { break }
        }
        // 100 SIGHUPs a second for 3 s, with the file changing under them.
        let storm = Date()
        var signals = 0
        while Date().timeIntervalSince(storm) < 3 && daemon.isRunning {
            if signals % 10 == 0 { install(config(signals / 10), in: daemon) }
            daemon.signal(SIGHUP)
            signals += 1
            usleep(10_000)
        }
        print("SIGHUP storm: \(signals) signals in \(String(format: "%.1f", Date().timeIntervalSince(storm))) s")
        stop.set()
        #expect(waitUntil(timeout: 15) { driver.isFinished })
        peers.forEach { $0.close() }
        peers = []
        #expect(daemon.isRunning, "log:\n\(daemon.log.suffix(3000))")
        guard daemon.isRunning else { return }

        // Back to the first config, settled: the same apps, listeners and threads as at the start.
        install(config(0), in: daemon)
        #expect(waitUntil(timeout: 15) { daemon.ctl("reload").status == 0 })
        for app in ["keep", "x1", "x2", "x4", "x5", "x6"] {
            let state = daemon.state(app)
            if state != "active" && state != "not-running" {
                _ = daemon.ctl("foreground", app)
            }
            if daemon.state(app) == "not-running" { _ = daemon.ctl("launch", app) }
        }
        #expect(waitUntil(timeout: 5) { ["keep", "x1", "x2", "x4", "x5", "x6"].allSatisfy { daemon.state($0) == "active" } })
        daemon.expectHealthy(comparedTo: baseline, settle: 8, label: "reloads and a SIGHUP storm")
    }

    @Test func peersThatResetMidTransferOrNeverReadLeaveNoTrace() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        let port = daemon.port(of: "a")
        #expect(daemon.ctl("status").status == 0)
        usleep(200_000)
        let baseline = ResourceBaseline(daemon.probe)
        let payload = [UInt8](repeating: 0x63, count: 512 * 1024)
        // Resets with echo output still pending.
        for _ in 0..<40 {
            guard let peer = connectSmallWindowPeer(port: port) else { continue }
            _ = peer.sendAll(payload, timeout: 1)
            peer.reset()
        }
        // Peers that never read: some stay, some half-close (a flush that never ends), some go away.
        var deaf: [Peer] = []
        for index in 0..<30 {
            guard let peer = connectSmallWindowPeer(port: port) else { continue }
            _ = peer.sendAll(payload, timeout: 1)
            if index % 3 == 1 { shutdown(peer.fd, Int32(SHUT_WR)) }
            if index % 3 == 2 { peer.close() } else { deaf.append(peer) }
        }
        let busy = daemon.statusLatency()
        print("status with 20 deaf peers holding echo output: median \(String(format: "%.2f", busy.median)) ms, worst \(String(format: "%.2f", busy.worst)) ms")
        #expect(busy.median < 15 * slowdown)
        let fresh = try #require(Peer.connect(port: port))
        #expect(fresh.roundTrip("still serving\n") == "still serving\n")
        fresh.close()
        deaf.forEach { $0.reset() }
        daemon.expectHealthy(comparedTo: baseline, settle: 8, label: "resetting and deaf peers")
    }

    @Test func memoryGrowsLessThan1MiBOver10000HookRunsAnd100000Requests() throws {
        let daemon = try TestDaemon(config: echoApp("a", appLines: trueHooksOnEveryEvent))
        defer { daemon.stop() }
        let client = try #require(RawControlClient(path: daemon.controlPath))
        defer { client.close() }
        let requests = ["{\"cmd\":\"status\"}\n", "{\"cmd\":\"version\"}\n", "{\"cmd\":\"task-list\",\"app\":\"a\"}\n",
                        "{\"cmd\":\"status\",\"app\":\"nope\"}\n", "not json\n"]
        func sendRequests(_ count: Int) -> Int {
            var answered = 0
            var sent = 0
            while sent < count {
                let batch = min(1000, count - sent)
                client.send((0..<batch).map { requests[($0 + sent) % requests.count] }.joined())
                for _ in 0..<batch {
                    guard client.line(timeout: 10) != nil else { return answered }
                    answered += 1
                }
                sent += batch
            }
            return answered
        }
        // Warm-up: the allocator and the runtime reach their working set.
        #expect(driveHookRuns(client, app: "a", cycles: sanitizerScaled(250)) == 0)
        #expect(sendRequests(sanitizerScaled(10_000)) == sanitizerScaled(10_000))
        let before = daemon.probe.residentBytes
        let start = Date()
        // 10,000 hook runs and 100,000 requests; a tenth of each under a sanitizer, where the resident size
        // is not judged (all of them took 39 s under AddressSanitizer).
        let cycles = sanitizerScaled(2500), requestCount = sanitizerScaled(100_000)
        #expect(driveHookRuns(client, app: "a", cycles: cycles) == 0)
        let hooksDone = Date()
        #expect(sendRequests(requestCount) == requestCount)
        let after = daemon.probe.residentBytes
        print("\(cycles * 4) hook runs in \(String(format: "%.1f", hooksDone.timeIntervalSince(start))) s and \(requestCount) requests in \(String(format: "%.1f", Date().timeIntervalSince(hooksDone))) s: RSS \(before / 1024) KiB -> \(after / 1024) KiB (\((after - before) / 1024) KiB)")
        if rssIsMeaningful { #expect(after - before < 1 << 20, "RSS grew by \((after - before) / 1024) KiB") }
        daemon.expectHealthy(comparedTo: nil, label: "10,000 hook runs and 100,000 requests")
    }
}

/// When each trickling client was closed, and the error code of its last reply line.
private final class TrickleResult: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: ([TimeInterval?], [String?])?

    func set(_ closedAt: [TimeInterval?], codes: [String?]) { lock.withLock { stored = (closedAt, codes) } }
    func wait(timeout: TimeInterval) -> Bool { waitUntil(timeout: timeout) { lock.withLock { stored != nil } } }
    var value: ([TimeInterval?], [String?]) { lock.withLock { stored ?? ([], []) } }
}
