// Expiration where a user would notice, as on iOS: expiration belongs to the
// background (handlers not yet run are dropped on foreground), an expiration handler that runs keeps the app
// from suspending, and a suspended app is offered no background time.

import Foundation
import Testing
import NetLifeTestSupport

/// The lines of the daemon's log that contain `text`.
private func logLines(_ daemon: TestDaemon, containing text: String) -> [Substring] {
    daemon.log.split(separator: "\n").filter { $0.contains(text) }
}

@Suite(.timeLimit(.minutes(5)))
struct ExpirationTests {
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
}
