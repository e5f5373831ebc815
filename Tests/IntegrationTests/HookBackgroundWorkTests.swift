// What a hook leaves in its process group: TN2277's recipe "begin a task, start the work
// asynchronously, return" works from a hook. The work a hook started under a background task it began lives
// after the hook's exit until that task ends (its output still logged), and is killed when the task ends,
// when it expires (the watchdog), or when the app terminates. A task begun by anyone else keeps nothing alive.

import Foundation
import Testing
import NetLifeTestSupport

/// Writes an executable /bin/sh script `name` into `directory` and returns its path.
private func script(_ directory: TemporaryDirectory, _ name: String, _ body: String) -> String {
    directory.write(name, "#!/bin/sh\n" + body + "\n")
    chmod(directory.file(name), 0o755)
    return directory.file(name)
}

/// A did-enter-background hook that begins a task for its app, starts `job` in the background and returns
/// at once; the task's id goes to the file `task`, the job can use it as `$id`.
private func beginTaskAndReturn(_ directory: TemporaryDirectory, job: String) -> String {
    script(directory, "enter-background", """
        id=$(\(product("netlifectl")) task begin "$NETLIFE_APP" --name hook-work) || exit 1
        echo "$id" > \(directory.file("task"))
        \(job)
        exit 0
        """)
}

/// The pid the hook's job wrote to the file `pid`.
private func jobPid(_ directory: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int32 {
    try #require(Int32(directory.read("pid").trimmingCharacters(in: .whitespacesAndNewlines)), sourceLocation: sourceLocation)
}

@Suite(.timeLimit(.minutes(2)))
struct HookBackgroundWorkTests {
    @Test func aHookThatAsksForItsOwnAppsTransitionIsAnsweredAtOnceAndQueued() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        // Waiting for the reply would deadlock: the command runs after the transition, which waits for the
        // hook. The daemon answers at once (queued) and runs the command once the transition is done.
        let hook = script(directory, "become-active", """
            [ -e \(directory.file("once")) ] && exit 0
            touch \(directory.file("once"))
            \(product("netlifectl")) background "$NETLIFE_APP" > \(directory.file("stdout")) 2>&1
            echo $? > \(directory.file("status"))
            """)
        let started = Date()
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            auto-suspend = never
            on-did-become-active = \(hook)
            """))
        defer { daemon.stop() }
        #expect(Date().timeIntervalSince(started) < 5, "the launch did not wait out its budget")
        #expect(directory.read("status") == "0\n")
        #expect(directory.read("stdout").hasPrefix("app: queued: asked by its own hook on-did-become-active during its transition, 'background' runs once that transition is done"),
                "\(directory.read("stdout"))")
        #expect(waitUntil(timeout: 5) { daemon.state("app") == "background" }, "the queued background ran: \(daemon.log.suffix(2000))")
        #expect(!daemon.log.contains("watchdog"), "no budget ran out")
        // Asked from outside any hook, the same command waits for its transition, as always.
        let foreground = daemon.ctl("foreground", "app")
        #expect(foreground.status == 0 && foreground.stdout.hasPrefix("app: active ("), "\(foreground)")
    }

    @Test func workAHookStartsUnderItsOwnTaskFinishesThenTheTaskEndsAndTheAppSuspends() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let hook = beginTaskAndReturn(directory, job: """
            ( sleep 1; echo done > \(directory.file("done")); echo "job done"; \(product("netlifectl")) task end "$NETLIFE_APP" "$id" ) &
            """)
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            auto-suspend = 100ms
            on-did-enter-background = \(hook)
            """))
        defer { daemon.stop() }
        let background = daemon.ctl("background", "app")
        #expect(background.status == 0, "\(background)")
        #expect(daemon.state("app") == "background", "the hook's task keeps the app in background")
        let id = directory.read("task").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(Int(id) ?? 0 > 0, "the hook began a task: '\(id)'")
        #expect(waitUntil(timeout: 5) { directory.read("done") == "done\n" },
                "the job the hook left running finished its work; log:\n\(daemon.log)")
        #expect(waitUntil(timeout: 3) { daemon.state("app") == "suspended" }, "the task ended, then the app suspended")
        #expect((daemon.status("app")["tasks"] as? [Any])?.isEmpty == true)
        #expect(daemon.log.contains("hook on-did-enter-background: job done"), "the job's output still reaches the log")
        #expect(!daemon.log.contains("0x8badf00d"))
    }

    @Test func theLeftoversEndWithTheTaskWhenItsExpirationHandlerEndsIt() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let hook = beginTaskAndReturn(directory, job: "sleep 30 & echo $! > \(directory.file("pid"))")
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            task-time = 2s
            expiration-lead = 1s
            background-mode = continuous
            on-did-enter-background = \(hook)
            on-expiration = /bin/sh -c '\(product("netlifectl")) task end "$NETLIFE_APP" "$NETLIFE_TASK"'
            """))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        let pid = try jobPid(directory)
        usleep(300_000)
        #expect(processIsLive(pid), "the hook has exited, its task is open: its job lives")
        // The expiration handler (1 s after background) ends the task: the job goes with it.
        #expect(waitUntil(timeout: 3) { !processIsLive(pid) }, "the job was ended when its task ended; log:\n\(daemon.log)")
        #expect(waitUntil(timeout: 2) { hookProcesses(app: "app", control: daemon.controlPath).isEmpty }, "no hook process of the app is left")
        #expect(daemon.state("app") == "background", "continuous mode: never suspended, so the task's end alone ended the job")
        #expect(!daemon.log.contains("0x8badf00d"))
    }

    @Test func theLeftoversDieWhenTheWatchdogKillsTheAppAtTheTasksExpiry() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let hook = beginTaskAndReturn(directory, job: "sleep 30 & echo $! > \(directory.file("pid"))")
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            task-time = 2s
            expiration-lead = 1s
            expiration-grace = 500ms
            on-did-enter-background = \(hook)
            """))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        let pid = try jobPid(directory)
        usleep(300_000)
        #expect(processIsLive(pid), "the hook has exited, its task is open: its job lives")
        #expect(waitUntil(timeout: 5) { daemon.state("app") == "not-running" })
        #expect((daemon.status("app")["lastTermination"] as? [String: Any])?["reason"] as? String == "watchdog")
        #expect(waitUntil(timeout: 2) { !processIsLive(pid) }, "the job died with its app")
        #expect(waitUntil(timeout: 2) { hookProcesses(app: "app", control: daemon.controlPath).isEmpty }, "no hook process of the app is left")
    }

    @Test func theLeftoversDieWhenTheAppTerminates() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let hook = beginTaskAndReturn(directory, job: "sleep 30 & echo $! > \(directory.file("pid"))")
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            auto-suspend = never
            on-did-enter-background = \(hook)
            """))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        let pid = try jobPid(directory)
        usleep(300_000)
        #expect(processIsLive(pid), "the hook has exited, its task is open: its job lives")
        #expect(daemon.ctl("terminate", "app").status == 0)
        #expect(waitUntil(timeout: 2) { !processIsLive(pid) }, "the job died with its app")
        #expect(waitUntil(timeout: 2) { hookProcesses(app: "app", control: daemon.controlPath).isEmpty }, "no hook process of the app is left")
    }

    @Test func aTaskTheHookDidNotBeginKeepsNothingAlive() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let hook = script(directory, "enter-background", "sleep 30 & echo $! > \(directory.file("pid"))\nexit 0")
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: """
            auto-suspend = never
            on-did-enter-background = \(hook)
            """))
        defer { daemon.stop() }
        // A task begun from outside the hook (this test's own netlifectl) holds the app, not the hook's job.
        let begin = daemon.ctl("task", "begin", "app")
        #expect(begin.status == 0 && begin.stdout != "0\n", "\(begin)")
        #expect(daemon.ctl("background", "app").status == 0)
        let pid = try jobPid(directory)
        #expect(waitUntil(timeout: 2) { !processIsLive(pid) }, "the hook's job was killed when the hook exited")
        #expect(daemon.state("app") == "background")
    }
}
