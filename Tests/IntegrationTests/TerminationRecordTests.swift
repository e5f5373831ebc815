// How an app's end is recorded: every way of ending has its own reason and time in
// `lastTermination`, and a restart by reload is recorded as a reload.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct TerminationRecordTests {
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
}
