// Fidelity to the iOS lifecycle where a user would notice (SPEC sections 2 and 5): expiration belongs to the
// background, an expiration handler that runs keeps the app from suspending, no background time while
// suspended, distinct termination reasons, nothing of a suspended or terminated app runs, and messages that
// say what is true.

import Foundation
import Testing
import NetLifeTestSupport

private func taskID(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
    return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

/// The lines of the daemon's log that contain `text`.
private func logLines(_ daemon: TestDaemon, containing text: String) -> [Substring] {
    daemon.log.split(separator: "\n").filter { $0.contains(text) }
}

/// Whether process `pid` still exists (and is not a zombie).

@Suite(.timeLimit(.minutes(5)))
struct FidelityTests {
    @Test func expirationHandlersNotYetRunAreDroppedWhenTheAppComesToTheForeground() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            task-time = 2s
            expiration-lead = 1s
            expiration-budget = 1s
            auto-suspend = never
            on-expiration = /bin/sh -c 'echo "expiring $NETLIFE_TASK"; sleep 0.5'
            """))
        defer { daemon.stop() }
        let ids = (1...3).map { _ in taskID(daemon.ctl("task", "begin", "app")) }
        #expect(daemon.ctl("background", "app").status == 0)
        // The first handler starts 1 s into the background and runs for 0.5 s; come back in the middle of it.
        #expect(waitUntil(timeout: 3) { !logLines(daemon, containing: "hook on-expiration: expiring").isEmpty })
        usleep(200_000)
        #expect(daemon.ctl("foreground", "app").status == 0)
        usleep(2_500_000)   // longer than the two other handlers and their budgets would have taken
        let ran = logLines(daemon, containing: "hook on-expiration: expiring")
        #expect(ran.count == 1, "only the handler already running ran: \(ran)")
        #expect(daemon.state("app") == "active")
        #expect(!daemon.log.contains("0x8badf00d"), "no expiration watchdog for an active app")
        let open = (daemon.status("app")["tasks"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? Int }
        #expect(open == ids, "the tasks stay open")
    }

    @Test func anAppWhoseExpirationHandlerRunsIsNotSuspendedEvenAfterItsTaskEnded() throws {
        let ctl = product("netlifectl")
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            task-time = 2s
            expiration-lead = 1s
            expiration-budget = 3s
            auto-suspend = 0
            on-expiration = /bin/sh -c '\(ctl) task end app $NETLIFE_TASK; sleep 0.7; echo handler-done'
            """))
        defer { daemon.stop() }
        _ = taskID(daemon.ctl("task", "begin", "app"))
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(waitUntil(timeout: 4) { daemon.log.contains("handler-done") })
        #expect(waitUntil(timeout: 2) { daemon.state("app") == "suspended" })
        let log = daemon.log
        let done = try #require(log.range(of: "hook on-expiration: handler-done"))
        let suspended = try #require(log.range(of: "background -> suspended"))
        #expect(done.lowerBound < suspended.lowerBound, "the app suspended only after its handler returned")
        #expect(!log.contains("0x8badf00d"))
    }

    @Test func aSuspendedAppIsOfferedNoBackgroundTimeAndEachBackgroundPeriodStartsAfresh() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: "task-time = 4s\nexpiration-lead = 1s\nauto-suspend = never"))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        usleep(1_200_000)
        let spent = daemon.status("app")["backgroundTimeRemaining"] as? Double ?? -1
        #expect(spent > 2.0 && spent < 3.0, "counting down: \(spent)")
        #expect(daemon.ctl("foreground", "app").status == 0)
        #expect(daemon.ctl("background", "app").status == 0)
        let fresh = daemon.status("app")["backgroundTimeRemaining"] as? Double ?? -1
        #expect(fresh > 3.5, "a fresh task-time on the new entry into background: \(fresh)")
        #expect(daemon.ctl("suspend", "app").status == 0)
        #expect(daemon.status("app")["backgroundTimeRemaining"] as? Double == 0, "no time while suspended")
        let text = daemon.ctl("status", "app").stdout
        #expect(text.contains("app: suspended"))
        #expect(!text.contains("remaining: 3") && !text.contains("remaining: 2"), "no countdown is shown: \(text)")
    }

    @Test func everyWayOfEndingIsRecordedDistinctlyWithItsTime() throws {
        let daemon = try TestDaemon(config: "[daemon]\n"
            + echoApp("plain", appLines: "auto-suspend = never")
            + echoApp("sleeper", appLines: "auto-suspend = never")
            + echoApp("exiter", appLines: "exits-on-suspend = yes")
            + echoApp("slow", appLines: "background-budget = 200ms\non-did-enter-background = /bin/sleep 5"))
        defer { daemon.stop() }
        func last(_ app: String) -> [String: Any] { daemon.status(app)["lastTermination"] as? [String: Any] ?? [:] }
        let before = Date().timeIntervalSince1970

        #expect(daemon.ctl("terminate", "plain").status == 0)
        #expect(last("plain")["reason"] as? String == "terminated")
        #expect(last("plain")["by"] as? String == "command")
        let at = last("plain")["at"] as? Double ?? 0
        #expect(at >= before - 1 && at <= Date().timeIntervalSince1970 + 1, "when it happened: \(at)")

        #expect(daemon.ctl("background", "sleeper").status == 0)
        #expect(daemon.ctl("suspend", "sleeper").status == 0)
        #expect(daemon.ctl("terminate", "sleeper").status == 0)
        #expect(last("sleeper")["reason"] as? String == "terminated-while-suspended")

        #expect(daemon.ctl("background", "exiter").status == 0)
        #expect(last("exiter")["reason"] as? String == "exited-on-suspend")
        #expect(daemon.ctl("launch", "exiter").status == 0)
        #expect(daemon.ctl("terminate", "exiter").status == 0)
        #expect(last("exiter")["reason"] as? String == "terminated", "a plain terminate is not an exit on suspend")

        #expect(daemon.ctl("background", "slow").status == 1)
        #expect(last("slow")["reason"] as? String == "watchdog")
        #expect(last("slow")["stage"] as? String == "did-enter-background")
        #expect(last("slow")["budget"] as? Double == 0.2)
        #expect((last("slow")["elapsed"] as? Double ?? 0) >= 0.2)
    }

    @Test func aRestartByReloadIsRecordedAsReload() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app"))
        defer { daemon.stop() }
        daemon.directory.write("netlifed.conf", "[daemon]\n" + echoApp("app", listenerLines: "max-connections = 5"))
        #expect(daemon.ctl("reload").status == 0)
        let record = daemon.status("app")["lastTermination"] as? [String: Any]
        #expect(record?["reason"] as? String == "reload")
        #expect(daemon.state("app") == "active", "relaunched as it was")
    }

    @Test func whatAHookLeavesBehindIsKilledWhenItExits() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let pidFile = directory.file("pid")
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            auto-suspend = never
            on-did-enter-background = /bin/sh -c 'sleep 7.5 & echo $! > \(pidFile)'
            """))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        let pid = try #require(Int32(directory.read("pid").trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(waitUntil(timeout: 2) { !processIsLive(pid) }, "the hook's `sleep 7.5 &` was killed with its group")
    }

    @Test func nothingOfASuspendedAppRuns() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let pidFile = directory.file("pid")
        // The expiration hook starts a long job and ends the app's task from its own process group; the app
        // then suspends once the hook's main process returns, and the job must not outlive that.
        let ctl = product("netlifectl")
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            task-time = 2s
            expiration-lead = 1s
            expiration-budget = 3s
            auto-suspend = 0
            on-expiration = /bin/sh -c 'sleep 30 & echo $! > \(pidFile); \(ctl) task end app $NETLIFE_TASK; sleep 0.3'
            """))
        defer { daemon.stop() }
        _ = taskID(daemon.ctl("task", "begin", "app"))
        #expect(daemon.ctl("background", "app").status == 0)
        #expect(waitUntil(timeout: 4) { daemon.state("app") == "suspended" })
        let pid = try #require(Int32(directory.read("pid").trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(waitUntil(timeout: 2) { !processIsLive(pid) }, "no process of the suspended app's hooks is left")
    }

    @Test func messagesSayWhatIsTrue() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: "background-mode = continuous"))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        let suspend = daemon.ctl("suspend", "app")
        #expect(suspend.status == 0)
        #expect(suspend.stdout.contains("background mode is continuous"), "\(suspend.stdout)")
        #expect(!suspend.stdout.contains("task"), "no word of tasks: there are none")

        let client = try #require(ControlConnection(path: daemon.controlPath))
        defer { client.close() }
        client.send("{\"cmd\": \"status\", \"app\": 5}\n")
        let wrongType = (client.reply()?["error"] as? [String: Any])?["message"] as? String
        #expect(wrongType == "\"app\" must be a string", "\(wrongType ?? "no reply")")
        client.send("{\"cmd\": \"launch\", \"app\": \"app\", \"background\": \"yes\"}\n")
        let wrongBool = (client.reply()?["error"] as? [String: Any])?["message"] as? String
        #expect(wrongBool == "\"background\" must be true or false", "\(wrongBool ?? "no reply")")
    }

    @Test func netlifectlExplainsItselfAndPrintsTextForEveryCommand() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app"))
        defer { daemon.stop() }
        let ctl = product("netlifectl")
        for arguments in [["help", "task"], ["task", "--help"]] {
            let help = run([ctl] + arguments)
            #expect(help.status == 0)
            #expect(help.stdout.contains("task begin APP") && help.stdout.contains("task end APP ID")
                    && help.stdout.contains("task list APP"), "\(arguments): \(help.stdout)")
            #expect(!help.stdout.contains("SUBCOMMANDS"), "that command's usage, not the whole help")
        }
        let launchHelp = run([ctl, "help", "launch"])
        #expect(launchHelp.stdout.hasPrefix("USAGE: netlifectl launch APP [--background]"))
        let bogus = run([ctl, "--bogus"])
        #expect(bogus.status == 2)
        #expect(bogus.stderr.contains("unknown option '--bogus'"), "\(bogus.stderr)")
        let version = daemon.ctl("--version")
        #expect(version.status == 0)
        let lines = version.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines[0].hasPrefix("netlifectl ") && lines[1].hasPrefix("netlifed "), "\(version.stdout)")
        let noDaemon = run([ctl, "--control", daemon.directory.file("none.sock"), "--version"])
        #expect(noDaemon.status == 3)
        #expect(noDaemon.stdout.hasPrefix("netlifectl "), "its own version even without a daemon")
        for arguments in [["status"], ["task", "list", "app"], ["version"], ["reload"], ["mode", "app", "idle"],
                          ["task", "begin", "app"], ["background", "app"], ["foreground", "app"]] {
            let result = daemon.ctl(arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            #expect(!result.stdout.contains("{") && !result.stdout.isEmpty, "\(arguments) printed text: \(result.stdout)")
        }
    }

    @Test func netlifectlLinksNeitherLibeventNorTheFramework() {
        let ldd = run(["/usr/bin/ldd", product("netlifectl")])
        #expect(ldd.status == 0)
        #expect(!ldd.stdout.contains("libevent"), "\(ldd.stdout)")
        let symbols = run(["/bin/sh", "-c", "nm -C \(product("netlifectl")) | grep -c 'NetLifeEvent\\|NetLifeDaemon\\|event_base' || true"])
        #expect(symbols.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "no framework code inside: \(symbols.stdout)")
    }
}
