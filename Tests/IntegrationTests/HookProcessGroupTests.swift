// What a hook leaves behind: a hook's process group is killed when the hook exits, so that
// nothing of a suspended app's hooks runs on.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct HookProcessGroupTests {
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
}
