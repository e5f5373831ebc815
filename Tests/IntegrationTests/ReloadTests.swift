// Reloading the config with `netlifectl reload` and SIGHUP: removed apps terminate, added ones launch,
// apps with changed listeners restart, others are updated in place (their connections untouched), and a
// config with errors changes nothing.

import Foundation
import Testing
import NetLifeTestSupport

/// A hook that sleeps `seconds`.
private func daemonHookSleeping(_ seconds: Int) -> String { "/bin/sleep \(seconds)" }

@Suite(.timeLimit(.minutes(5)))
struct ReloadTests {
    private func config(_ apps: [(name: String, port: UInt16, extra: String)]) -> String {
        apps.map { app in
            """
            [app \(app.name)]
            \(app.extra)
            [listener \(app.name).main]
            address = 127.0.0.1:\(app.port)
            service = echo

            """
        }.joined()
    }

    @Test func reloadAppliesAddedRemovedRestartedAndUpdatedApps() throws {
        let daemon = try TestDaemon(config: config([("a", 0, ""), ("b", 0, ""), ("c", 0, "")]))
        defer { daemon.stop() }
        let (a, b, c) = (daemon.port(of: "a"), daemon.port(of: "b"), daemon.port(of: "c"))
        let keptOnA = try #require(Peer.connect(port: a))
        defer { keptOnA.close() }
        #expect(keptOnA.roundTrip("1\n") == "1\n")

        // c's listener moves to a port the config names, held by the test until netlifed listens on it; d gets
        // one from the kernel.
        let movedC = PortReservation()
        defer { movedC.close() }
        let c2 = movedC.port
        daemon.directory.write("netlifed.conf", config([("a", 0, "background-budget = 2s"), ("c", c2, ""), ("d", 0, "")]))
        let reload = daemon.ctl("reload")
        #expect(reload.status == 0, "\(reload)")
        #expect(reload.stdout == "added: d\nremoved: b\nrestarted: c\nupdated: a\n")

        #expect(keptOnA.roundTrip("2\n") == "2\n", "an app updated in place keeps its connections")
        #expect(daemon.ctl("status", "b").status == 1, "b is gone")
        #expect(connectTCP(port: b) == .failed(ECONNREFUSED))
        #expect(connectTCP(port: c) == .failed(ECONNREFUSED))
        #expect(daemon.state("c") == "active")
        #expect(daemon.state("d") == "active")
        let d = daemon.port(of: "d")
        for port in [c2, d] {
            let peer = try #require(Peer.connect(port: port))
            #expect(peer.roundTrip("x\n") == "x\n")
            peer.close()
        }
    }

    @Test func anAppRestartedByAReloadComesBackTheWayItRanWhenItsTerminateBegan() throws {
        // background (a 1 s hook) runs, foreground waits behind it, and the reload that restarts the app is
        // asked meanwhile: it queues the terminate behind both, and the app, active by then, comes back active.
        let hook = daemonHookSleeping(1)
        let daemon = try TestDaemon(config: config([("lag", 0, "on-did-enter-background = \(hook)")]))
        defer { daemon.stop() }
        let background = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "background", "lag"])
        #expect(waitUntil { daemon.log.contains("lag: active -> inactive") })
        let foreground = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "foreground", "lag"])
        usleep(100_000)
        let moved = PortReservation()
        defer { moved.close() }
        daemon.directory.write("netlifed.conf", config([("lag", moved.port, "on-did-enter-background = \(hook)")]))
        let reload = daemon.ctl("reload")
        #expect(reload.status == 0 && reload.stdout.contains("restarted: lag\n"), "\(reload)")
        #expect(background.wait(timeout: 10).result.status == 0)
        #expect(foreground.wait(timeout: 10).result.status == 0)
        #expect(waitUntil(timeout: 10) { daemon.state("lag") == "active" }, "\(daemon.log.suffix(2000))")
        let peer = try #require(Peer.connect(port: moved.port))
        defer { peer.close() }
        #expect(peer.roundTrip("back\n") == "back\n", "its listener is open")
    }

    @Test func aConfigWithErrorsChangesNothing() throws {
        let daemon = try TestDaemon(config: config([("a", 0, "")]))
        defer { daemon.stop() }
        let port = daemon.port(of: "a")
        daemon.directory.write("netlifed.conf", "[app a]\nlaunch = whenever\n")
        let reload = daemon.ctl("reload")
        #expect(reload.status == 1)
        #expect(reload.stderr.contains("nothing was changed"))
        #expect(reload.stderr.contains("\(daemon.configPath):2: launch must be foreground, background or no"))
        #expect(daemon.state("a") == "active")
        let peer = try #require(Peer.connect(port: port))
        #expect(peer.roundTrip("ok\n") == "ok\n")
        peer.close()
    }

    @Test func sighupReloadsAndTellsSystemd() throws {
        let daemon = try TestDaemon(config: config([("a", 0, "")]))
        defer { daemon.stop() }
        daemon.directory.write("netlifed.conf", config([("a", 0, ""), ("b", 0, "launch = no")]))
        daemon.signal(SIGHUP)
        #expect(daemon.notify.wait(for: "RELOADING=1", timeout: 3))
        #expect(daemon.notify.wait(for: "READY=1\nSTATUS=", timeout: 3))
        #expect(daemon.state("b") == "not-running")
        #expect(daemon.log.contains("reloaded"))
    }
}

@Suite(.timeLimit(.minutes(5)))
struct NotifySocketTests {
    @Test func aNotifyReceiverThatNeverReadsDoesNotBlockTheDaemon() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        // A datagram socket that is bound and never read: its queue fills after a few messages.
        let deaf = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(deaf) }
        let path = directory.file("deaf.sock")
        #expect(withUnixAddress(path, { bind(deaf, $0, $1) }) == 0)
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "auto-suspend = never"),
                                    environment: ["NOTIFY_SOCKET": path], waitForReady: false)
        defer { daemon.stop() }
        #expect(waitUntil { daemon.ctl("status").status == 0 })
        let port = daemon.port(of: "echo")
        for _ in 0..<15 {
            #expect(daemon.ctl("background", "echo").status == 0)
            #expect(daemon.ctl("foreground", "echo").status == 0)
        }
        let peer = try #require(Peer.connect(port: port))
        #expect(peer.roundTrip("alive\n") == "alive\n")
        peer.close()
    }
}
