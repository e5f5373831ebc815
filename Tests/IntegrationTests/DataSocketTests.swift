// Data sockets against the real binary (docs/data-sockets.md): what the peer at the far end of a
// `[socket]` sees on the wire for each policy, while the app is suspended, after reclaim and lock, when
// VoIP data or a keep-alive wakes the app, and under memory pressure.

import Foundation
import Testing
import NetLifeTestSupport

/// An echo listener of `app` whose connections stay open in the background.
let keptEchoListener = """
    [listener app.main]
    address = 127.0.0.1:0
    service = echo
    connections = keep

    """

@Suite(.timeLimit(.minutes(5))) struct DataSocketTests {
    @Test func closePolicySendsFINOnBackgroundAndReconnectsOnForeground() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server, socketLines: "policy = close"))
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        #expect(daemon.waitForSocket("app", state: "connected"))
        var end: Peer.ReadResult = .timedOut
        let ms = daemon.timeAfterRequest("{\"cmd\":\"background\",\"app\":\"app\"}\n") {
            end = peer.read(timeout: 0.001)
            return end != .timedOut
        }
        print("policy = close: FIN \(ms.map { String(format: "%.2f", $0) } ?? "never") ms after the background request")
        #expect(end == .endOfStream)
        #expect((ms ?? .infinity) < 50 * slowdown, "FIN within 50 ms, took \(ms ?? -1) ms")
        #expect(daemon.waitForSocket("app", state: "closed"))
        #expect(daemon.ctl("foreground", "app").status == 0)
        let again = server.accept(timeout: 3)
        #expect(again != nil, "reconnected on will-enter-foreground")
        again?.close()
    }

    @Test func quietPolicySendsTheQuietLinesAndKeepsTheConnection() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server, socketLines: """
            policy = quiet
            quiet-enter = PAUSE now
            quiet-exit = RESUME
            """))
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        #expect(daemon.waitForSocket("app", state: "connected"))
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(peer.readUntil("\n") == "PAUSE now\n")
        #expect(daemon.socket("app")?["state"] as? String == "quiet")
        #expect(daemon.ctl("suspend", "app").status == 0)
        #expect(daemon.ctl("foreground", "app").status == 0)
        #expect(peer.readUntil("\n") == "RESUME\n")
        #expect(daemon.socket("app")?["state"] as? String == "connected")
        #expect(server.accept(timeout: 0.2) == nil, "the same connection throughout")
    }

    @Test func aSuspendedAppReadsNothingUntilItRunsAgain() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server) + keptEchoListener)
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        let client = try #require(Peer.connect(port: daemon.port(of: "app")))
        defer { client.close() }
        peer.send("one\n")
        #expect(waitUntil { daemon.socket("app")?["lines"] as? Int == 1 })
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)
        peer.send("two\n")
        client.send("ping")
        #expect(client.read(timeout: 0.3) == .timedOut, "no echo while suspended")
        #expect(daemon.socket("app")?["lines"] as? Int == 1, "no line handled while suspended")
        #expect(daemon.state("app") == "suspended")
        #expect(daemon.ctl("foreground", "app").status == 0)
        #expect(client.readText(count: 4) == "ping", "answered after foreground")
        #expect(waitUntil { daemon.socket("app")?["lines"] as? Int == 2 })
        #expect(daemon.socket("app")?["lastLine"] as? String == "two")
    }

    @Test func reclaimResetsPlainSocketsAndKeptConnectionsButNotVoIP() throws {
        let server = try #require(PeerServer())
        let voipServer = try #require(PeerServer())
        defer { server.close(); voipServer.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server) + """
            [socket app.v]
            connect = \(voipServer.address)
            protocol = line
            voip = yes

            """ + keptEchoListener)
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        let voipPeer = try #require(voipServer.accept())
        let client = try #require(Peer.connect(port: daemon.port(of: "app")))
        defer { peer.close(); voipPeer.close(); client.close() }
        #expect(client.roundTrip("hi") == "hi")
        #expect(daemon.waitForSocket("app", state: "connected"))

        // Refused while the app is not suspended; nothing changes.
        let refused = daemon.ctl("reclaim", "app")
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("not suspended"), "\(refused.stderr)")
        #expect(peer.read(timeout: 0.1) == .timedOut)

        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)
        var seen: (Peer.ReadResult, Peer.ReadResult) = (.timedOut, .timedOut)
        let ms = daemon.timeAfterRequest("{\"cmd\":\"reclaim\",\"app\":\"app\"}\n") {
            if seen.0 == .timedOut { seen.0 = peer.read(timeout: 0) }
            if seen.1 == .timedOut { seen.1 = client.read(timeout: 0) }
            return seen.0 != .timedOut && seen.1 != .timedOut
        }
        print("reclaim: both peers saw RST \(ms.map { String(format: "%.2f", $0) } ?? "never") ms after the request")
        #expect(seen.0 == .error(ECONNRESET), "the line peer: \(seen.0)")
        #expect(seen.1 == .error(ECONNRESET), "the kept accepted connection: \(seen.1)")
        #expect((ms ?? .infinity) < 10 * slowdown, "RST within 10 ms of the request, took \(ms ?? -1) ms")
        #expect(voipPeer.read(timeout: 0.3) == .timedOut, "the VoIP peer sees nothing")
        #expect(daemon.socket("app")?["state"] as? String == "defunct")
        #expect(daemon.socket("app", "v")?["state"] as? String == "connected")
        #expect(daemon.isRunning)

        // The app runs again: the defunct socket fails on first use and reconnects.
        #expect(daemon.ctl("foreground", "app").status == 0)
        let again = server.accept(timeout: 3)
        #expect(again != nil, "the reclaimed socket reconnects after foreground")
        again?.close()
        #expect(daemon.socket("app")?["state"] as? String != "defunct")
        #expect(daemon.socket("app", "v")?["state"] as? String == "connected")
        #expect(voipPeer.read(timeout: 0.1) == .timedOut, "the VoIP connection survived everything")
    }

    @Test func lockReclaimsEverySuspendedAppAndNoOther() throws {
        let asleep = try #require(PeerServer())
        let awake = try #require(PeerServer())
        let voip = try #require(PeerServer())
        defer { asleep.close(); awake.close(); voip.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("asleep", asleep) + lineSocketApp("awake", awake) + """
            [socket asleep.v]
            connect = \(voip.address)
            protocol = line
            voip = yes

            """)
        defer { daemon.stop() }
        let asleepPeer = try #require(asleep.accept())
        let awakePeer = try #require(awake.accept())
        let voipPeer = try #require(voip.accept())
        defer { asleepPeer.close(); awakePeer.close(); voipPeer.close() }
        #expect(daemon.ctl("background", "asleep").status == 0)
        #expect(daemon.ctl("suspend", "asleep").status == 0)
        let lock = daemon.ctl("lock")
        #expect(lock.status == 0)
        #expect(lock.stdout.contains("asleep: reclaimed s"), "\(lock.stdout)")
        #expect(!lock.stdout.contains("awake"), "\(lock.stdout)")
        #expect(daemon.state("awake") == "background", "locking the screen sends the foreground app to the background")
        #expect(asleepPeer.readEnd(timeout: 1) == .error(ECONNRESET))
        #expect(awakePeer.read(timeout: 0.2) == .timedOut)
        #expect(voipPeer.read(timeout: 0.1) == .timedOut, "a VoIP socket is never reclaimed")
        #expect(daemon.socket("asleep", "v")?["state"] as? String == "connected")
    }

    @Test func aRepeatedReclaimOrLockCountsOnlyWhatItResetItself() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server) + keptEchoListener)
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        let client = try #require(Peer.connect(port: daemon.port(of: "app")))
        defer { peer.close(); client.close() }
        #expect(client.roundTrip("hi") == "hi")
        #expect(daemon.waitForSocket("app", state: "connected"))
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)

        /// The app's entry of a `reclaim` or `lock` reply.
        func reclaimed(_ arguments: String...) throws -> [String: Any] {
            let result = daemon.ctl(["--json"] + arguments)
            #expect(result.status == 0, "\(result)")
            let reply = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            return try #require((reply?["reclaimed"] as? [[String: Any]])?.first { $0["app"] as? String == "app" })
        }
        let first = try reclaimed("reclaim", "app")
        #expect(first["sockets"] as? [String] == ["s"], "\(first)")
        #expect(first["connections"] as? Int == 1, "\(first)")
        #expect(peer.readEnd(timeout: 1) == .error(ECONNRESET))
        #expect(client.readEnd(timeout: 1) == .error(ECONNRESET))

        let again = try reclaimed("reclaim", "app")
        #expect(again["sockets"] as? [String] == [], "the socket is defunct already: \(again)")
        #expect(again["connections"] as? Int == 0, "the connection was reset already: \(again)")
        let lock = try reclaimed("lock")
        #expect(lock["sockets"] as? [String] == [] && lock["connections"] as? Int == 0, "\(lock)")
        let text = daemon.ctl("reclaim", "app")
        #expect(text.stdout == "app: reclaimed no data socket; 0 accepted connections reset\n", "\(text)")
        let lockText = daemon.ctl("lock")
        #expect(lockText.stdout == "app: reclaimed no data socket; 0 accepted connections reset\n", "\(lockText)")
    }

    @Test func reclaimOnSuspendResetsAsTheAppSuspends() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server, appLines: "reclaim-on-suspend = yes"))
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(peer.read(timeout: 0.2) == .timedOut, "nothing in the background")
        #expect(daemon.ctl("suspend", "app").status == 0)
        #expect(peer.readEnd(timeout: 1) == .error(ECONNRESET))
        #expect(daemon.socket("app")?["state"] as? String == "defunct")
    }

    @Test func voipDataWakesTheSuspendedAppWhichSuspendsAgain() throws {
        let server = try #require(PeerServer())
        let scratch = TemporaryDirectory()
        defer { server.close(); scratch.remove() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server, appLines: """
            on-voip-data = /bin/sh -c 'echo "$NETLIFE_EVENT" >> "$0"' \(scratch.file("hook.log"))
            """, socketLines: "voip = yes"))
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)
        guard let client = RawControlClient(path: daemon.controlPath) else { Issue.record("no control connection"); return }
        defer { client.close() }
        func state() -> String? {
            client.send("{\"cmd\":\"status\",\"app\":\"app\"}\n")
            return ((client.reply()?["apps"] as? [[String: Any]])?.first)?["state"] as? String
        }
        let start = Date()
        peer.send("ring\n")
        var woke: String?
        while Date().timeIntervalSince(start) < 2 {
            let now = state()
            if now != "suspended" { woke = now; break }
        }
        let ms = Date().timeIntervalSince(start) * 1000
        print("VoIP wake: state \(woke ?? "none") \(String(format: "%.2f", ms)) ms after the peer's bytes")
        #expect(woke == "background", "woken into the background, not the foreground")
        #expect(ms < 100 * slowdown, "woken within 100 ms, took \(ms) ms")
        #expect(waitUntil(timeout: 5) { state() == "suspended" }, "suspended again once the handler is done")
        #expect(daemon.socket("app")?["lines"] as? Int == 1, "the protocol handler ran during the wake-up")
        #expect(scratch.read("hook.log") == "voip-data\n", "on-voip-data ran once")
        #expect(daemon.log.contains("woken: data on VoIP socket s"))
        #expect(daemon.status("app")["lastTermination"] is NSNull)
    }

    @Test func aWakeRunsOnlyTheVoIPSocketThatWokeTheApp() throws {
        let voipServer = try #require(PeerServer())
        let plainServer = try #require(PeerServer())
        defer { voipServer.close(); plainServer.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", voipServer, socket: "v", socketLines: "voip = yes") + """
            [socket app.p]
            connect = \(plainServer.address)
            protocol = line

            """ + keptEchoListener)
        defer { daemon.stop() }
        let voip = try #require(voipServer.accept())
        let plain = try #require(plainServer.accept())
        defer { voip.close(); plain.close() }
        let client = try #require(Peer.connect(port: daemon.port(of: "app")))
        defer { client.close() }
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)
        plain.send("buffered\n")
        client.send("ping")
        voip.send("ring\n")
        #expect(waitUntil { daemon.socket("app", "v")?["lines"] as? Int == 1 }, "the VoIP socket's line woke the app and was handled")
        #expect(waitUntil { daemon.state("app") == "suspended" }, "suspended again once the wake is over")
        // The wake ran only what woke it: the plain socket's line and the kept connection stay unread.
        #expect(daemon.socket("app", "p")?["lines"] as? Int == 0, "\(String(describing: daemon.socket("app", "p")))")
        #expect(client.read(timeout: 0.3) == .timedOut, "no echo during the wake")
        #expect(daemon.ctl("foreground", "app").status == 0)
        #expect(waitUntil { daemon.socket("app", "p")?["lines"] as? Int == 1 }, "read once the app runs again")
        #expect(client.readText(count: 4) == "ping")
    }

    @Test func aWakeHandlerPastKeepaliveBudgetIsSuspendedNotKilled() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server, appLines: """
            keepalive-budget = 300ms
            on-voip-data = /bin/sleep 10
            """, socketLines: "voip = yes"))
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)
        peer.send("ring\n")
        #expect(waitUntil(timeout: 1) { daemon.currentState("app") == "background" })
        let start = Date()
        #expect(waitUntil(timeout: 3) { daemon.currentState("app") == "suspended" })
        let seconds = Date().timeIntervalSince(start)
        #expect(seconds < 1.5 * slowdown, "suspended at the end of the 300 ms budget, took \(seconds) s")
        #expect(daemon.status("app")["lastTermination"] is NSNull, "not killed")
        #expect(daemon.log.contains("longer than keepalive-budget"), "\(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("0x8badf00d"))
    }

    @Test func keepalivesWakeTheSuspendedAppAndLetItSleepAgain() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\nkeepalive-min = 1s\n" + lineSocketApp("app", server, socketLines: """
            voip = yes
            keepalive = 1s
            keepalive-message = PING
            """))
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)
        let start = Date()
        let received = peer.readUntil("PING\nPING\n", timeout: 4)
        let seconds = Date().timeIntervalSince(start)
        #expect(received == "PING\nPING\n", "two keep-alives: \(received)")
        #expect(seconds < 3 * slowdown, "two keep-alives at 1 s took \(seconds) s")
        #expect(waitUntil(timeout: 2) { daemon.currentState("app") == "suspended" })
        #expect(daemon.log.contains("woken: keep-alive of socket s"))
        #expect(daemon.status("app")["lastTermination"] is NSNull)
    }

    @Test func memoryPressureTerminatesSuspendedAppsLargestFirst() throws {
        // Named so that neither the config's order nor the names' order is the order by size.
        let big = try #require(PeerServer())
        let small = try #require(PeerServer())
        let awake = try #require(PeerServer())
        defer { big.close(); small.close(); awake.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("asmall", small) + lineSocketApp("zbig", big)
                                    + lineSocketApp("awake", awake))
        defer { daemon.stop() }
        let bigPeer = try #require(big.accept())
        let smallPeer = try #require(small.accept())
        let awakePeer = try #require(awake.accept())
        defer { bigPeer.close(); smallPeer.close(); awakePeer.close() }
        for app in ["asmall", "zbig"] {
            #expect(daemon.ctl("background", app).status == 0)
            #expect(daemon.ctl("suspend", app).status == 0)
        }
        #expect(daemon.ctl("background", "awake").status == 0)
        // What a suspended app does not read stays in the kernel, on its account.
        _ = bigPeer.send(bytes: [UInt8](repeating: 0x61, count: 100_000))
        _ = smallPeer.send(bytes: [UInt8](repeating: 0x61, count: 1_000))
        usleep(100_000)
        let result = daemon.ctl("--json", "memory-pressure")
        #expect(result.status == 0)
        let reply = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let terminated = reply?["terminated"] as? [[String: Any]] ?? []
        #expect(terminated.map { $0["app"] as? String } == ["zbig", "asmall"], "\(result.stdout)")
        #expect((terminated.first?["bytes"] as? Int ?? 0) >= 100_000, "\(result.stdout)")
        for app in ["zbig", "asmall"] {
            #expect(daemon.state(app) == "not-running")
            #expect((daemon.status(app)["lastTermination"] as? [String: Any])?["reason"] as? String == "memory-pressure")
        }
        #expect(daemon.state("awake") == "background", "only suspended apps are terminated")
        #expect(awakePeer.read(timeout: 0.1) == .timedOut)
        #expect(!daemon.log.contains("will-terminate"), "no callbacks")
    }

    @Test func watchShowsSocketChangesWakeUpsAndReclaims() throws {
        let server = try #require(PeerServer())
        let voipServer = try #require(PeerServer())
        defer { server.close(); voipServer.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server) + """
            [socket app.v]
            connect = \(voipServer.address)
            protocol = line
            voip = yes

            """)
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        let voipPeer = try #require(voipServer.accept())
        defer { peer.close(); voipPeer.close() }
        let watch = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "watch", "app"])
        usleep(300_000)
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)
        #expect(daemon.ctl("reclaim", "app").status == 0)
        voipPeer.send("ring\n")
        #expect(waitUntil(timeout: 3) { daemon.currentState("app") == "background" || daemon.log.contains("woken") })
        #expect(daemon.ctl("foreground", "app").status == 0)
        #expect(server.accept(timeout: 3) != nil)
        usleep(300_000)
        daemon.signal(SIGTERM)
        let (result, _) = watch.wait(timeout: 10)
        for line in ["app: reclaimed: socket s defunct, 0 accepted connections reset",
                     "app: woken into the background: voip-data on socket v",
                     "app: socket s closed: ", "app: socket s connected"] {
            #expect(result.stdout.contains(line), "watch shows '\(line)':\n\(result.stdout)")
        }
    }

    @Test func aPeerThatClosesAtOnceIsRetriedWithGrowingDelays() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server))
        defer { daemon.stop() }
        // Accept and close every connection for 3 s: 100, 200, 400, 800, 1600 ms between attempts.
        var accepted = 0
        let start = Date()
        while Date().timeIntervalSince(start) < 3 {
            if let peer = server.accept(timeout: 0.1) {
                accepted += 1
                peer.close()
            }
        }
        print("a peer that closes at once: \(accepted) connects in 3 s")
        #expect(accepted >= 3 && accepted <= 7, "back-off 100 ms doubling: \(accepted) connects in 3 s")
        #expect(daemon.socket("app")?["error"] as? String == "the peer closed the connection")
    }

    @Test func aVoIPSocketLostWhileSuspendedComesBackWithoutTheForeground() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("app", server, socketLines: "voip = yes"))
        defer { daemon.stop() }
        let first = try #require(server.accept())
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("suspend", "app").status == 0)
        first.close()
        let second = server.accept(timeout: 3)
        #expect(second != nil, "the VoIP socket reconnected while the app sleeps")
        defer { second?.close() }
        #expect(waitUntil(timeout: 3) { daemon.currentState("app") == "suspended" })
        #expect(daemon.waitForSocket("app", state: "connected"))
        #expect(daemon.log.contains("woken: VoIP socket s lost or reconnecting"))
        #expect(!daemon.log.contains("will-enter-foreground"), "no foreground was needed")
    }
}
