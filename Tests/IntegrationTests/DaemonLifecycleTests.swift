// The daemon's own lifecycle against the real binary: a SIGHUP that arrives once shutdown has begun is
// ignored (a reload then would launch apps that never get will-terminate), a reload already under way when
// shutdown begins launches nothing more, and reloads that change `loop-stall` keep one watchdog thread
// instead of adding one each. Listeners bind port 0: these tests never
// connect to them.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct DaemonLifecycleTests {
    private func app(_ name: String, _ extra: String = "") -> String {
        """
        [app \(name)]
        \(extra)
        [listener \(name).main]
        address = 127.0.0.1:0
        service = echo

        """
    }

    @Test func aSighupDuringShutdownIsIgnoredAndLaunchesNothing() throws {
        let marker = TemporaryDirectory()
        defer { marker.remove() }
        let launched = marker.file("late.launched")
        // Will-terminate takes a second: the window in which the SIGHUP arrives.
        let daemon = try TestDaemon(config: app("a", "on-will-terminate = /bin/sleep 1"))
        defer { daemon.stop() }
        #expect(daemon.state("a") == "active")
        // Meanwhile the config gained an app whose launch would leave a file behind.
        daemon.directory.write("netlifed.conf", app("a", "on-will-terminate = /bin/sleep 1")
            + app("late", "on-did-finish-launching = /bin/sh -c 'echo $$ > \(launched)'"))

        daemon.signal(SIGTERM)
        #expect(daemon.notify.wait(for: "STOPPING=1", timeout: 5), "shutdown began")
        daemon.signal(SIGHUP)
        #expect(daemon.waitForExit(timeout: 10))
        #expect(daemon.exitStatus == 0, "\(daemon.endDescription); log:\n\(daemon.log)")
        // Give a hook that did start the time to write its file.
        usleep(200_000)
        #expect(!FileManager.default.fileExists(atPath: launched), "the app added to the config was launched during shutdown")
        #expect(daemon.log.contains("SIGHUP ignored: shutting down"), "\(daemon.log)")
        #expect(!daemon.log.contains("reloaded"), "\(daemon.log)")
        #expect(!daemon.notify.messages.contains { $0.contains("RELOADING=1") })
    }

    @Test func aReloadInFlightWhenShutdownBeginsRelaunchesNothing() throws {
        let marker = TemporaryDirectory()
        defer { marker.remove() }
        let launches = marker.file("launches")
        let hooks = """
            on-will-terminate = /bin/sleep 1
            on-did-finish-launching = /bin/sh -c 'echo launched >> \(launches)'
            """
        let daemon = try TestDaemon(config: app("a", hooks))
        defer { daemon.stop() }
        // A new listener address: the reload restarts the app (will-terminate, then a new launch).
        daemon.directory.write("netlifed.conf", app("a", hooks).replacingOccurrences(of: "127.0.0.1:0", with: "127.0.0.2:0"))
        let reload = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "reload"])
        #expect(waitUntil { daemon.log.contains("terminate: will-terminate") }, "the reload began restarting a")
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit(timeout: 10))
        _ = reload.wait(timeout: 5)
        #expect(daemon.exitStatus == 0, "\(daemon.endDescription); log:\n\(daemon.log)")
        usleep(200_000)
        let launched = ((try? String(contentsOfFile: launches, encoding: .utf8)) ?? "").split(separator: "\n").count
        #expect(launched == 1, "a was launched \(launched) times: a restart finished after SIGTERM launched it again, and it never got will-terminate; log:\n\(daemon.log)")
    }

    @Test func reloadsThatChangeLoopStallAddNoThreads() throws {
        // Long thresholds: a watchdog thread left behind by a reload would sleep for a minute.
        let configs = ["[daemon]\nloop-stall = 5m\n" + app("a"), "[daemon]\nloop-stall = 6m\n" + app("a")]
        let daemon = try TestDaemon(config: configs[1])
        defer { daemon.stop() }
        func reload(to index: Int) -> ProcessResult {
            daemon.directory.write("netlifed.conf", configs[index])
            return daemon.ctl("reload")
        }
        // One round first, so that whatever a first reload creates lazily is counted in the baseline.
        for index in [0, 1] { #expect(reload(to: index).status == 0) }
        let before = daemon.probe.threadCount
        #expect(before > 0)
        var failures: [ProcessResult] = []
        for round in 0..<100 {
            let result = reload(to: round % 2)
            if result.status != 0 { failures.append(result) }
        }
        #expect(failures.isEmpty, "\(failures.count) reloads failed; first: \(String(describing: failures.first))")
        let after = daemon.probe.threadCount
        #expect(after == before, "threads: \(before) before 100 reloads that changed loop-stall, \(after) after")
        print("threads: \(before) before 100 loop-stall reloads, \(after) after")
        #expect(daemon.ctl("status").status == 0)
    }

    @Test func readyReachesAServiceManagerThatReadsLateEvenWhenManyAppsLaunch() throws {
        // A receiver that reads nothing until the launch is over, like a busy systemd: its queue holds 10
        // datagrams (net.unix.max_dgram_qlen), and a STATUS per state change of 12 apps used to fill it, so
        // READY=1 was dropped.
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let path = scratch.file("late.sock")
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        #expect(withUnixAddress(path, { bind(fd, $0, $1) }) == 0)
        let config = (0..<12).map { app("a\($0)") }.joined()
        let daemon = try TestDaemon(config: config, environment: ["NOTIFY_SOCKET": path], waitForReady: false)
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 10) { daemon.currentState("a11") == "active" })
        usleep(300_000)
        var messages: [String] = []
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline && !messages.contains(where: { $0.contains("READY=1") }) {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 { messages.append(String(decoding: buffer[0..<count], as: UTF8.self)) } else { usleep(20_000) }
        }
        #expect(messages.contains { $0.contains("READY=1") }, "READY=1 arrived; got \(messages.count) datagrams: \(messages)")
        #expect(messages.filter { $0.hasPrefix("STATUS=") }.count < 5, "STATUS lines were coalesced: \(messages)")
    }

    @Test func systemdsSettingsForTheDaemonDoNotReachItsHooks() throws {
        // The watchdog, notification and memory-pressure settings systemd gives netlifed are netlifed's: a
        // hook (or a program) that honoured them would ping for the daemon or watch the daemon's cgroup.
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let seen = scratch.file("env")
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: "on-did-finish-launching = /bin/sh -c 'env > \(seen)'"),
                                    environment: ["WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1",
                                                  "MEMORY_PRESSURE_WATCH": "/sys/fs/cgroup/x/memory.pressure",
                                                  "MEMORY_PRESSURE_WRITE": "c29tZSAxNTAwMDAgMjAwMDAwMAA="])
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 10) { ((try? String(contentsOfFile: seen, encoding: .utf8)) ?? "").contains("NETLIFE_CONTROL=") })
        let environment = (try? String(contentsOfFile: seen, encoding: .utf8)) ?? ""
        for key in ["WATCHDOG_USEC", "WATCHDOG_PID", "MEMORY_PRESSURE_WATCH", "MEMORY_PRESSURE_WRITE", "NOTIFY_SOCKET"] {
            #expect(!environment.contains("\n\(key)=") && !environment.hasPrefix("\(key)="), "\(key) reached the hook:\n\(environment)")
        }
    }

    @Test func signalsRepeatedUntilTheDaemonIsGoneStillEndInACleanExit() throws {
        // A service manager (or an impatient user) may send SIGTERM again while netlifed is already exiting:
        // the exit must stay clean (status 0), also in the last steps after the event loop has ended.
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app"))
        defer { daemon.stop() }
        let start = Date()
        var sent = 0
        while daemon.isRunning && Date().timeIntervalSince(start) < 10 {
            daemon.signal(sent % 2 == 0 ? SIGTERM : SIGINT)
            sent += 1
            usleep(200)
        }
        #expect(daemon.waitForExit(timeout: 10))
        print("repeated SIGTERM/SIGINT: \(sent) signals until exit, \(Int(Date().timeIntervalSince(start) * 1000)) ms")
    }
}

