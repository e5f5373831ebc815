// Objects used after their close or free: a client that vanishes before its reply, a transition whose client is
// gone, a connection closing after a flush its peer never reads, an app retired while its hooks and timers run.
// Each drives the real netlifed as a user (netlifectl) or an abuser (a raw socket client) would and checks what a
// peer sees; a daemon that crashed fails the test when TestDaemon stops it.

import Foundation
import Testing
import NetLifeTestSupport

/// A hook command that records its pid in `file` and then sleeps `seconds`.
private func recordingSleep(_ file: String, _ seconds: String) -> String {
    "/bin/sh -c 'echo $$ > \(file); exec sleep \(seconds)'"
}

private func hasContent(_ path: String) -> Bool {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").contains { $0.isNumber }
}

@Suite(.timeLimit(.minutes(5)))
struct LifetimeTests {
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
