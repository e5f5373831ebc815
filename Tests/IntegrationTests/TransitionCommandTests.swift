// The lifecycle's transitions through netlifectl: replies of transitions, `already <state>`, impossible commands,
// unknown apps, launch modes, SIGTERM running will-terminate before a clean exit, and how `status` shows a
// port-0 listener that has never opened.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct TransitionCommandTests {
    @Test func repeatedCommandsSayAlready() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        let foreground = daemon.ctl("foreground", "echo")
        #expect(foreground.status == 0)
        #expect(foreground.stdout == "echo: already active\n")
        #expect(daemon.ctl("background", "echo").status == 0)
        let again = daemon.ctl("background", "echo")
        #expect(again.status == 0)
        #expect(again.stdout == "echo: already background\n")
        let json = daemon.ctl("--json", "background", "echo")
        let reply = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(reply?["ok"] as? Bool == true)
        #expect(reply?["already"] as? Bool == true)
        #expect(reply?["state"] as? String == "background")
        #expect((reply?["stages"] as? [Any])?.isEmpty == true)
    }

    @Test func transitionRepliesCarryTheStagesAndTheirDurations() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let json = daemon.ctl("--json", "background", "echo")
        #expect(json.status == 0)
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(reply["app"] as? String == "echo")
        #expect(reply["state"] as? String == "background")
        #expect(reply["already"] as? Bool == false)
        let stages = try #require(reply["stages"] as? [[String: Any]])
        #expect(stages.map { $0["name"] as? String } == ["will-resign-active", "did-enter-background"])
        #expect(stages.allSatisfy { ($0["ms"] as? Double).map { $0 >= 0 } == true })
    }

    @Test func impossibleTransitionsAndUnknownAppsAreErrors() throws {
        let config = echoConfig(port: 0) + """

            [app idle]
            launch = no
            """
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        let foreground = daemon.ctl("foreground", "idle")
        #expect(foreground.status == 1)
        #expect(foreground.stderr.contains("app idle is not running"), "\(foreground)")
        let suspend = daemon.ctl("suspend", "echo")
        #expect(suspend.status == 1)
        #expect(suspend.stderr.contains("not in background"), "\(suspend)")
        #expect(daemon.state("echo") == "active", "a refused command changes nothing")
        let unknown = daemon.ctl("background", "nosuchapp")
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("no app named 'nosuchapp'"), "\(unknown)")
        let json = daemon.ctl("--json", "foreground", "idle")
        let reply = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((reply?["error"] as? [String: Any])?["code"] as? String == "invalid-transition")
    }

    @Test func launchModesAndLaunchTerminateFromNetlifectl() throws {
        // Both ports are checked before their listeners ever open, so the config names them: the test holds
        // them until the end, and netlifed binds them beside the holders.
        let laterPort = PortReservation(), quietPort = PortReservation()
        defer { laterPort.close(); quietPort.close() }
        let (port, otherPort) = (laterPort.port, quietPort.port)
        let config = """
            [app later]
            launch = no
            [listener later.main]
            address = 127.0.0.1:\(port)
            service = echo

            [app quiet]
            launch = background
            auto-suspend = never
            [listener quiet.main]
            address = 127.0.0.1:\(otherPort)
            service = echo
            """
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        #expect(daemon.state("later") == "not-running")
        #expect(connectTCP(port: port) == .failed(ECONNREFUSED))
        #expect(daemon.state("quiet") == "background")
        #expect(connectTCP(port: otherPort) == .failed(ECONNREFUSED), "a background launch never opens listeners")

        let launch = daemon.ctl("launch", "later")
        #expect(launch.status == 0)
        #expect(launch.stdout.hasPrefix("later: active (did-finish-launching"))
        let peer = try #require(Peer.connect(port: port))
        #expect(peer.roundTrip("x\n") == "x\n")
        #expect(daemon.ctl("launch", "later").stdout == "later: already active\n")

        let terminate = daemon.ctl("terminate", "later")
        #expect(terminate.status == 0)
        #expect(terminate.stdout.hasPrefix("later: not-running (will-terminate"))
        #expect(peer.read(timeout: 1) == .endOfStream, "terminate closes accepted connections with FIN")
        peer.close()
        #expect(connectTCP(port: port) == .failed(ECONNREFUSED))
        let status = daemon.status("later")
        #expect((status["lastTermination"] as? [String: Any])?["reason"] as? String == "terminated")
    }

    @Test func sigtermRunsWillTerminateForEveryAppAndExitsZero() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, listenerLines: "connections = close"))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.roundTrip("bye\n") == "bye\n")
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit(timeout: 10))
        #expect(daemon.exitStatus == 0)
        #expect(daemon.notify.wait(for: "STOPPING=1", timeout: 1))
        #expect(daemon.log.contains("app echo: active -> not-running"))
        #expect(peer.read(timeout: 1) == .endOfStream)
        #expect(!FileManager.default.fileExists(atPath: daemon.controlPath), "the control socket is removed")
    }

    @Test func statusJSONHasTheFieldsOfTheSpec() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let app = daemon.status("echo")
        for key in ["name", "state", "suspendPending", "backgroundTimeRemaining", "listeners", "sockets", "tasks", "lastTermination"] {
            #expect(app.keys.contains(key), "status lacks \(key)")
        }
        #expect(app["backgroundTimeRemaining"] is NSNull, "unlimited in the foreground")
        let listener = try #require((app["listeners"] as? [[String: Any]])?.first)
        for key in ["name", "address", "service", "open", "error", "connections"] {
            #expect(listener.keys.contains(key), "listener status lacks \(key)")
        }
        #expect(daemon.ctl("status").stdout.contains("listener main 127.0.0.1:\(port) (echo): open, 0 connections"))
    }

    @Test func anInterruptionResignsActiveKeepsTheListenerOpenAndItsEndBecomesActive() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let events = directory.file("events")
        let hook = "/bin/sh -c 'echo $NETLIFE_EVENT >> \(events)'"
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: """
            on-will-resign-active = \(hook)
            on-did-enter-background = \(hook)
            on-did-become-active = \(hook)
            """))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        _ = try? FileManager.default.removeItem(atPath: events)
        let begin = daemon.ctl("interrupt", "begin", "echo")
        #expect(begin.status == 0 && begin.stdout.hasPrefix("echo: inactive (will-resign-active"), "\(begin)")
        #expect(directory.read("events") == "will-resign-active\n")
        // Resting inactive: still the foreground app, its listener open and serving (an alert over an app).
        #expect(daemon.state("echo") == "inactive")
        let peer = try #require(Peer.connect(port: port))
        #expect(peer.roundTrip("during the call\n") == "during the call\n")
        #expect(daemon.ctl("interrupt", "begin", "echo").stdout == "echo: already inactive\n")
        let foreground = daemon.ctl("foreground", "echo")
        #expect(foreground.status == 1 && foreground.stderr.contains("interrupt end"), "\(foreground)")
        let end = daemon.ctl("interrupt", "end", "echo")
        #expect(end.status == 0 && end.stdout.hasPrefix("echo: active (did-become-active"), "\(end)")
        #expect(directory.read("events") == "will-resign-active\ndid-become-active\n")
        #expect(daemon.ctl("interrupt", "end", "echo").status == 1)
        // Sent to the background from an interruption: did-enter-background only, and the listener closes.
        #expect(daemon.ctl("interrupt", "begin", "echo").status == 0)
        let background = daemon.ctl("background", "echo")
        #expect(background.status == 0 && background.stdout.hasPrefix("echo: background (did-enter-background"), "\(background)")
        #expect(directory.read("events") == "will-resign-active\ndid-become-active\nwill-resign-active\ndid-enter-background\n")
        #expect(connectTCP(port: port) == .failed(ECONNREFUSED))
        #expect(daemon.ctl("interrupt", "begin", "echo").status == 1, "only an active app can be interrupted")
    }

    @Test func willEnterForegroundRunsWhileTheAppIsStillInTheBackground() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let seen = directory.file("seen")
        // The hook asks the daemon for its app's state, as an iOS app reads applicationState.
        let hook = "/bin/sh -c '\(product("netlifectl")) status echo | head -n 1 >> \(seen)'"
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "auto-suspend = never\non-will-enter-foreground = \(hook)"))
        defer { daemon.stop() }
        let watcher = try #require(RawControlClient(path: daemon.controlPath))
        defer { watcher.close() }
        #expect(daemon.ctl("background", "echo").status == 0)
        #expect(watcher.send("{\"cmd\":\"watch\",\"app\":\"echo\"}\n") > 0)
        _ = watcher.line(timeout: 5)
        #expect(daemon.ctl("foreground", "echo").status == 0)
        #expect(directory.read("seen") == "echo: background\n", "\(directory.read("seen"))")
        var states: [String] = []
        while let line = watcher.line(timeout: 5),
              let event = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] {
            if event["event"] as? String == "state" { states.append("\(event["from"] as? String ?? "?")->\(event["to"] as? String ?? "?")") }
            if event["event"] as? String == "transition" { break }
        }
        #expect(states == ["background->inactive", "inactive->active"], "\(states)")
        // From suspended: resumed into the background first.
        #expect(daemon.ctl("background", "echo").status == 0)
        #expect(daemon.ctl("suspend", "echo").status == 0)
        #expect(daemon.ctl("foreground", "echo").status == 0)
        #expect(directory.read("seen") == "echo: background\necho: background\n", "\(directory.read("seen"))")
    }

    @Test func lockSendsTheForegroundAppToTheBackgroundThroughItsCallbacks() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let events = directory.file("events")
        let hook = "/bin/sh -c 'echo $NETLIFE_APP $NETLIFE_EVENT >> \(events)'"
        let daemon = try TestDaemon(config: "[daemon]\n"
            + echoApp("front", appLines: "auto-suspend = never\non-will-resign-active = \(hook)\non-did-enter-background = \(hook)")
            + echoApp("calling", appLines: "auto-suspend = never\non-did-enter-background = \(hook)"))
        defer { daemon.stop() }
        let port = daemon.port(of: "front")
        #expect(daemon.ctl("interrupt", "begin", "calling").status == 0)
        let lock = daemon.ctl("lock")
        #expect(lock.status == 0, "\(lock)")
        // As pressing the lock button: the apps in the foreground (an interrupted one too) go to the
        // background, and their listeners close.
        #expect(daemon.state("front") == "background")
        #expect(daemon.state("calling") == "background")
        #expect(connectTCP(port: port) == .failed(ECONNREFUSED))
        let lines = Set(directory.read("events").split(separator: "\n").map(String.init))
        #expect(lines == ["front will-resign-active", "front did-enter-background", "calling did-enter-background"], "\(lines)")
    }

    @Test func aListenerThatHasNeverOpenedOnPortZeroIsNotShownAsBound() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "launch = no"))
        defer { daemon.stop() }
        let before = daemon.ctl("status", "echo").stdout
        #expect(before.contains("  listener main 127.0.0.1:0 (not bound yet: the port is chosen at the first open) (echo): closed, 0 connections\n"),
                "\(before)")
        #expect(daemon.ctl("launch", "echo").status == 0)
        let port = daemon.port(of: "echo")
        #expect(daemon.ctl("status", "echo").stdout.contains("  listener main 127.0.0.1:\(port) (echo): open, 0 connections\n"))
        #expect(daemon.ctl("terminate", "echo").status == 0)
        let after = daemon.ctl("status", "echo").stdout
        #expect(after.contains("  listener main 127.0.0.1:\(port) (echo): closed, 0 connections\n"), "the port it was given stays: \(after)")
        #expect(!after.contains("not bound"))
    }
}
