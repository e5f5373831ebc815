// The background rules through the control socket: background tasks, the shared background time (none for
// a suspended or not-running app, in the text as in the JSON), a refused task's reason, the expiration hooks
// in begin order, the grace period, suspend-pending, auto-suspend, exits-on-suspend, multitasking = no, and
// continuous background mode.

import Foundation
import Testing
import NetLifeTestSupport

/// An app `app` with compressed budgets and an echo listener on a port the kernel picks.
private func taskConfig(extra: String = "") -> String {
    echoConfig(app: "app", port: 0, appLines: """
        task-time = 3s
        expiration-lead = 1s
        expiration-grace = 500ms
        \(extra)
        """)
}

/// Checks that a `task begin` was refused as netlifectl reports it (the reason on stderr, exit status 1, no id
/// printed) and returns the reason.
private func refusal(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) -> String {
    #expect(result.status == 1, "\(result)", sourceLocation: sourceLocation)
    #expect(result.stdout.isEmpty, "no bare 0: \(result)", sourceLocation: sourceLocation)
    #expect(result.stderr.hasPrefix("netlifectl: task refused: "), "\(result)", sourceLocation: sourceLocation)
    return String(result.stderr.dropFirst("netlifectl: task refused: ".count)).trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite(.timeLimit(.minutes(5)))
struct BackgroundTaskTests {
    @Test func threeTasksExpireInBeginOrderAtTaskTimeMinusLeadAndEndingThemSuspends() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let record = directory.file("expirations")
        let daemon = try TestDaemon(config: taskConfig(extra: """
            auto-suspend = 100ms
            on-did-enter-background = /bin/sh -c 'date +%s.%N > \(record).background'
            on-expiration = /bin/sh -c 'echo "$NETLIFE_TASK $(date +%s.%N) $NETLIFE_EVENT" >> \(record)'
            """))
        defer { daemon.stop() }
        let ids = (1...3).map { taskID(daemon.ctl("task", "begin", "app", "--name", "t\($0)")) }
        #expect(ids == ids.sorted() && Set(ids).count == 3 && !ids.contains(0))
        #expect(daemon.ctl("background", "app").status == 0)
        // When the app entered the background, as its did-enter-background hook saw it (both times are
        // taken by hooks, so the cost of starting a process cancels out).
        let backgroundAt = try #require(Double(directory.read("expirations.background").trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(waitUntil(timeout: 4) { directory.read("expirations").split(separator: "\n").count == 3 })
        let lines = directory.read("expirations").split(separator: "\n").map { $0.split(separator: " ") }
        #expect(lines.map { Int($0[0]) } == ids, "expiration handlers run in begin order")
        #expect(lines.allSatisfy { $0[2] == "expiration" })
        for line in lines {
            let offset = Double(line[1])! - backgroundAt
            #expect(abs(offset - 2.0) < 0.15, "expired \(offset) s after background; expected task-time - lead = 2 s")
        }
        usleep(300_000)
        #expect(directory.read("expirations").split(separator: "\n").count == 3, "each handler runs once")
        for id in ids { #expect(daemon.ctl("task", "end", "app", String(id)).status == 0) }
        #expect(waitUntil(timeout: 1) { daemon.state("app") == "suspended" })
        #expect(!daemon.log.contains("0x8badf00d"))
    }

    @Test func aTaskLeftOpenPastTheGraceGetsTheAppKilled() throws {
        let daemon = try TestDaemon(config: taskConfig())
        defer { daemon.stop() }
        let first = taskID(daemon.ctl("task", "begin", "app"))
        let second = taskID(daemon.ctl("task", "begin", "app", "--name", "forgotten"))
        #expect(daemon.ctl("background", "app").status == 0)
        let backgroundAt = Date()
        #expect(daemon.ctl("task", "end", "app", String(first)).status == 0)
        #expect(waitUntil(timeout: 6) { daemon.state("app") == "not-running" })
        #expect(Date().timeIntervalSince(backgroundAt) > 3.4)
        let termination = daemon.status("app")["lastTermination"] as? [String: Any]
        #expect(termination?["reason"] as? String == "watchdog")
        #expect(termination?["stage"] as? String == "background-task")
        // The daemon's own measure, from the moment the app entered the background.
        let killedAfter = try #require(termination?["elapsed"] as? Double)
        #expect(killedAfter >= 3.5 && killedAfter < 3.7, "killed \(killedAfter) s after background; expected task-time + grace = 3.5 s")
        #expect(termination?["budget"] as? Double == 3.5)
        #expect(daemon.log.contains("background task(s) \(second) still open"))
        #expect(daemon.log.contains("0x8badf00d"))
    }

    @Test func idsAreUniqueAndIncreasingZeroWhenSuspendedAndTheTimeCountsDown() throws {
        let daemon = try TestDaemon(config: taskConfig(extra: "auto-suspend = 100ms"))
        defer { daemon.stop() }
        let a = taskID(daemon.ctl("task", "begin", "app"))
        let b = taskID(daemon.ctl("task", "begin", "app"))
        #expect(daemon.ctl("task", "end", "app", String(a)).status == 0)
        let c = taskID(daemon.ctl("task", "begin", "app"))
        #expect(a > 0 && b > a && c > b)
        #expect(daemon.status("app")["backgroundTimeRemaining"] is NSNull, "unlimited while active")
        #expect(daemon.ctl("task", "list", "app").stdout.contains("background time remaining: unlimited"))

        #expect(daemon.ctl("background", "app").status == 0)
        let first = try #require(daemon.status("app")["backgroundTimeRemaining"] as? Double)
        usleep(300_000)
        let second = try #require(daemon.status("app")["backgroundTimeRemaining"] as? Double)
        #expect(first <= 3.0 && first > 2.5)
        #expect(second < first - 0.2, "decreasing: \(first) then \(second)")
        let tasks = daemon.status("app")["tasks"] as? [[String: Any]]
        #expect(tasks?.compactMap { $0["id"] as? Int } == [b, c])

        for id in [b, c] { #expect(daemon.ctl("task", "end", "app", String(id)).status == 0) }
        #expect(waitUntil(timeout: 1) { daemon.state("app") == "suspended" })
        #expect(refusal(daemon.ctl("task", "begin", "app")).hasPrefix("app app is suspended"), "a suspended app cannot begin a task")

        // Ending 0, an unknown or an ended id is a warning, not an error.
        for (id, warning) in [("0", "invalid id"), ("999", "has no task 999"), (String(b), "has already ended")] {
            let end = daemon.ctl("task", "end", "app", id)
            #expect(end.status == 0)
            #expect(end.stderr.contains("warning") && end.stderr.contains(warning), "\(end)")
        }
    }

    @Test func suspendWithOpenTasksIsPendingUntilTheLastEnds() throws {
        let daemon = try TestDaemon(config: taskConfig(extra: "auto-suspend = never"))
        defer { daemon.stop() }
        let id = taskID(daemon.ctl("task", "begin", "app"))
        #expect(daemon.ctl("background", "app").status == 0)
        let pending = daemon.ctl("--json", "suspend", "app")
        #expect(pending.status == 0)
        let reply = try JSONSerialization.jsonObject(with: Data(pending.stdout.utf8)) as? [String: Any]
        #expect(reply?["suspendPending"] as? Bool == true)
        #expect(reply?["state"] as? String == "background")
        #expect(daemon.status("app")["suspendPending"] as? Bool == true)
        #expect(daemon.ctl("task", "end", "app", String(id)).status == 0)
        #expect(daemon.state("app") == "suspended", "suspended as soon as the last task ended")
        #expect(daemon.status("app")["suspendPending"] as? Bool == false)
        #expect(daemon.ctl("suspend", "app").stdout == "app: already suspended\n")
    }

    @Test func autoSuspendAndAnImmediateSuspend() throws {
        let daemon = try TestDaemon(config: taskConfig(extra: "auto-suspend = 300ms") + """

            [app manual]
            auto-suspend = never
            """)
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        usleep(150_000)
        #expect(daemon.state("app") == "background")
        #expect(waitUntil(timeout: 1) { daemon.state("app") == "suspended" })
        #expect(daemon.ctl("background", "manual").status == 0)
        usleep(400_000)
        #expect(daemon.state("manual") == "background", "auto-suspend = never")
        #expect(daemon.ctl("suspend", "manual").stdout == "manual: suspended\n")
    }

    @Test func exitsOnSuspendEndsAfterDidEnterBackgroundWithNoMoreCallbacks() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let events = directory.file("events")
        let hook = "/bin/sh -c 'echo $NETLIFE_EVENT >> \(events)'"
        let daemon = try TestDaemon(config: echoConfig(app: "app", port: 0, appLines: """
            exits-on-suspend = yes
            on-will-resign-active = \(hook)
            on-did-enter-background = \(hook)
            on-will-terminate = \(hook)
            """))
        defer { daemon.stop() }
        let port = daemon.port(of: "app")
        let background = daemon.ctl("background", "app")
        #expect(background.status == 0)
        #expect(background.stdout.hasPrefix("app: not-running (will-resign-active"))
        // Exits on suspend: no callback while suspended, then the app ends (no will-terminate).
        #expect(directory.read("events") == "will-resign-active\ndid-enter-background\n")
        #expect((daemon.status("app")["lastTermination"] as? [String: Any])?["reason"] as? String == "exited-on-suspend")
        #expect(connectTCP(port: port) == .failed(ECONNREFUSED))
    }

    @Test func anAppThatExitsOnSuspendPassesThroughSuspendedAndIsNeverLaunchedIntoTheBackground() throws {
        let daemon = try TestDaemon(config: echoConfig(app: "app", port: 0, appLines: "exits-on-suspend = yes"))
        defer { daemon.stop() }
        let watcher = try #require(RawControlClient(path: daemon.controlPath))
        defer { watcher.close() }
        #expect(watcher.send("{\"cmd\":\"watch\",\"app\":\"app\"}\n") > 0)
        _ = watcher.line(timeout: 5)
        #expect(daemon.ctl("background", "app").status == 0)
        var states: [String] = []
        while let line = watcher.line(timeout: 5),
              let event = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] {
            if event["event"] as? String == "state" { states.append("\(event["from"] as? String ?? "?")->\(event["to"] as? String ?? "?")") }
            if event["event"] as? String == "transition" { break }
        }
        // iOS's path for an app that exits on suspend: Active -> Inactive -> Background -> Suspended -> Not Running.
        #expect(states == ["active->inactive", "inactive->background", "background->suspended", "suspended->not-running"], "\(states)")
        let launch = daemon.ctl("launch", "app", "--background")
        #expect(launch.status == 1 && launch.stderr.contains("never runs in the background"), "\(launch)")
        #expect(daemon.state("app") == "not-running")
        // A background task could not keep it in the background: beginning one returns the invalid id 0.
        #expect(daemon.ctl("launch", "app").status == 0)
        let task = daemon.ctl("--json", "task", "begin", "app")
        let reply = try JSONSerialization.jsonObject(with: Data(task.stdout.utf8)) as? [String: Any]
        #expect(reply?["id"] as? Int == 0, "\(task)")
        // launch = background with exits-on-suspend is a config error naming its line.
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("bad.conf", "[app x]\nexits-on-suspend = yes\nlaunch = background\n")
        let check = run([product("netlifed"), "--check-config", directory.file("bad.conf")])
        #expect(check.status == 1 && check.stderr.contains("bad.conf:3: launch = background cannot be used with exits-on-suspend = yes"), "\(check)")
    }

    @Test func theLastTaskEndingSuspendsTheAppAtOnceNotAfterAutoSuspend() throws {
        let daemon = try TestDaemon(config: taskConfig(extra: "auto-suspend = 5s"))
        defer { daemon.stop() }
        let first = taskID(daemon.ctl("task", "begin", "app"))
        let second = taskID(daemon.ctl("task", "begin", "app"))
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("task", "end", "app", String(first)).status == 0)
        usleep(200_000)
        #expect(daemon.state("app") == "background", "a task is still open")
        let ended = Date()
        #expect(daemon.ctl("task", "end", "app", String(second)).status == 0)
        // iOS suspends an app when its last background task ends; auto-suspend (5 s here) is only the grace
        // after did-enter-background.
        #expect(waitUntil(timeout: 1) { daemon.state("app") == "suspended" }, "\(daemon.state("app") ?? "?")")
        #expect(Date().timeIntervalSince(ended) < 1)
    }

    @Test func withoutMultitaskingTasksAreRefusedAndBackgroundTerminates() throws {
        let daemon = try TestDaemon(config: taskConfig(extra: "multitasking = no"))
        defer { daemon.stop() }
        #expect(refusal(daemon.ctl("task", "begin", "app")).contains("multitasking = no"))
        #expect(daemon.ctl("background", "app").stdout.hasPrefix("app: not-running"))
    }

    @Test func aRefusedTaskBeginSaysWhyOnStderrAndExits1() throws {
        let daemon = try TestDaemon(config: taskConfig() + "\n[app idle]\nlaunch = no\n")
        defer { daemon.stop() }
        let text = daemon.ctl("task", "begin", "idle", "--name", "sync")
        #expect(refusal(text) == "app idle is not running", "\(text)")
        #expect(text.stderr == "netlifectl: task refused: app idle is not running\n")
        #expect(daemon.log.contains("refused: app idle is not running"), "the daemon's log says the same")

        // The reply stays a reply (UIBackgroundTaskInvalid is a value): the id 0, and now the reason.
        let json = daemon.ctl("--json", "task", "begin", "idle")
        #expect(json.status == 1, "\(json)")
        #expect(json.stderr == "netlifectl: task refused: app idle is not running\n", "\(json)")
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(reply["ok"] as? Bool == true)
        #expect(reply["id"] as? Int == 0)
        #expect(reply["reason"] as? String == "app idle is not running")

        // A task that begins prints its id alone, and its reply has no reason.
        let begun = daemon.ctl("--json", "task", "begin", "app")
        #expect(begun.status == 0, "\(begun)")
        let ok = try #require(try JSONSerialization.jsonObject(with: Data(begun.stdout.utf8)) as? [String: Any])
        #expect((ok["id"] as? Int ?? 0) > 0 && ok["reason"] == nil, "\(ok)")
    }

    @Test func taskListOfANotRunningAppSaysItHasNoBackgroundTime() throws {
        let daemon = try TestDaemon(config: taskConfig() + "\n[app idle]\nlaunch = no\n")
        defer { daemon.stop() }
        let list = daemon.ctl("task", "list", "idle")
        #expect(list.status == 0, "\(list)")
        #expect(list.stdout == "background time remaining: 0s (not running)\nno open background tasks\n", "\(list)")
        #expect(!list.stdout.contains("unlimited"))
        let json = daemon.ctl("--json", "task", "list", "idle")
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(reply["backgroundTimeRemaining"] as? Double == 0, "\(json.stdout)")
        #expect(reply["state"] as? String == "not-running")
        #expect(daemon.status("idle")["backgroundTimeRemaining"] as? Double == 0)
        #expect(daemon.ctl("status", "idle").stdout.contains("  background time remaining: 0s (not running)\n"))

        // Once it runs in the foreground, its time is unlimited again.
        #expect(daemon.ctl("launch", "idle").status == 0)
        #expect(daemon.ctl("task", "list", "idle").stdout.hasPrefix("background time remaining: unlimited\n"))
    }

    @Test func statusOfASuspendedAppShowsItsBackgroundTimeAsTheJSONDoes() throws {
        let daemon = try TestDaemon(config: taskConfig(extra: "auto-suspend = never"))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(daemon.ctl("status", "app").stdout.contains("  background time remaining: "))
        #expect(daemon.ctl("suspend", "app").status == 0)
        #expect(daemon.status("app")["backgroundTimeRemaining"] as? Double == 0)
        let text = daemon.ctl("status", "app")
        #expect(text.stdout.hasPrefix("app: suspended\n  background time remaining: 0s (suspended)\n"), "\(text)")
        #expect(daemon.ctl("task", "list", "app").stdout.hasPrefix("background time remaining: 0s (suspended)\n"))
    }

    @Test func continuousBackgroundModeKeepsTheAppFromSuspending() throws {
        let daemon = try TestDaemon(config: taskConfig(extra: "auto-suspend = 100ms\nbackground-mode = continuous"))
        defer { daemon.stop() }
        #expect(daemon.status("app")["backgroundMode"] as? String == "continuous")
        #expect(daemon.ctl("status", "app").stdout.contains("[continuous background mode]"))
        #expect(daemon.ctl("background", "app").status == 0)
        usleep(400_000)
        #expect(daemon.state("app") == "background", "continuous mode: not suspend-eligible")
        let idle = daemon.ctl("mode", "app", "idle")
        #expect(idle.status == 0)
        #expect(idle.stdout == "app: mode idle\n")
        #expect(waitUntil(timeout: 1) { daemon.state("app") == "suspended" })
        #expect(daemon.status("app")["backgroundMode"] as? String == "idle")
        #expect(daemon.ctl("mode", "app", "sometimes").status == 2)
    }
}
