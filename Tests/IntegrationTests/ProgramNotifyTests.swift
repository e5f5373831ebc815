// systemd's notify protocol for process apps, against the real netlifed with real programs:
// with `ready = notify` a launch waits for the program's READY=1 (and fails at the launch budget without
// it, or when the program exits first); STATUS= shows in `status`; READY=1, RELOADING=1 and STOPPING=1 show
// in `watch`; with `watchdog` a program that stops sending WATCHDOG=1 is killed by the watchdog, and its
// clock stops while the app is suspended; a datagram from outside the program's cgroup is dropped; a
// program that does not speak the protocol launches as before; redis-server (`supervised systemd`) gates
// its launch on its own READY=1.

import Foundation
import Testing
import NetLifeTestSupport

/// The `notify` lines of a watch stream read within `timeout`, until one says `last`.
private func notifyMessages(_ watcher: RawControlClient, until last: String, timeout: TimeInterval = 10) -> [String] {
    var messages: [String] = []
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline, let line = watcher.line(timeout: max(0.1, deadline.timeIntervalSinceNow)) {
        guard let event = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
              event["event"] as? String == "notify", let message = event["message"] as? String else { continue }
        messages.append(message)
        if message == last { break }
    }
    return messages
}

/// A watch of `app` on `daemon`'s control socket.
private func watch(_ daemon: TestDaemon, _ app: String) throws -> RawControlClient {
    let watcher = try #require(RawControlClient(path: daemon.controlPath))
    #expect(watcher.send("{\"cmd\":\"watch\",\"app\":\"\(app)\"}\n") > 0)
    #expect(watcher.reply()?["watching"] as? String == app)
    return watcher
}

@Suite(.timeLimit(.minutes(2)))
struct ProgramNotifyTests {
    let scripts = TemporaryDirectory()
    var script: String { scripts.file("notify_program.py") }

    init() {
        scripts.write("notify_program.py", notifyProgramSource)
    }

    @Test func readyGatesTheLaunchAndStatusReloadingAndStoppingAreSeen() throws {
        defer { scripts.remove() }
        let daemon = try TestDaemon(config: notifyProgramApp("n", script: script, environment: ["NOTIFY_READY_AFTER": "0.8"],
                                                              appLines: "ready = notify"))
        defer { daemon.stop() }
        let watcher = try watch(daemon, "n")
        defer { watcher.close() }
        let started = Date()
        let launch = daemon.ctl("launch", "n")
        let launchMs = milliseconds(since: started)
        #expect(launch.status == 0, "\(launch)")
        #expect(launchMs >= 800, "the launch returned after \(launchMs) ms, before the program's READY=1")
        #expect(daemon.state("n") == "active")
        let program = daemon.program("n")
        #expect(program["ready"] as? Bool == true)
        #expect(program["statusText"] as? String == "serving[0m1 client", "control characters removed")
        #expect(daemon.ctl("status", "n").stdout.contains("program status: serving[0m1 client"))
        #expect(notifyMessages(watcher, until: "READY=1") == ["READY=1"])
        #expect(daemon.log.contains("own-WATCHDOG_PID=False"), "no watchdog: WATCHDOG_PID is not set")

        let pid = try #require(daemon.programPid("n"))
        kill(pid, SIGHUP)
        #expect(notifyMessages(watcher, until: "READY=1") == ["RELOADING=1", "READY=1"])
        #expect(waitUntil { daemon.program("n")["statusText"] as? String == "reloaded" })
        #expect(daemon.state("n") == "active", "a READY=1 after the launch changes no state")

        #expect(daemon.ctl("terminate", "n").status == 0)
        #expect(notifyMessages(watcher, until: "STOPPING=1") == ["STOPPING=1"])
        #expect(waitUntil { processIsGone(pid) })
        print("ready = notify: launch returned \(format(ms: launchMs)) after it began, READY=1 sent at 800 ms")
    }

    @Test func aProgramThatNeverSaysReadyFailsTheLaunchAtTheBudget() throws {
        defer { scripts.remove() }
        let daemon = try TestDaemon(config: notifyProgramApp("silent", script: script, appLines: "ready = notify\nlaunch-budget = 1s"))
        defer { daemon.stop() }
        let started = Date()
        let launch = daemon.ctl("launch", "silent")
        let launchMs = milliseconds(since: started)
        #expect(launch.status == 1, "\(launch)")
        #expect(launchMs >= 1000 && launchMs < 5000, "\(launchMs) ms")
        #expect(daemon.state("silent") == "not-running")
        let record = try #require(daemon.lastTermination("silent"))
        #expect(record["reason"] as? String == "watchdog")
        #expect(record["stage"] as? String == "program-ready")
        #expect(record["budget"] as? Double == 1)
        #expect(daemon.program("silent")["statusText"] as? String == nil)
        #expect(daemon.log.contains("0x8badf00d"))
        #expect(waitUntil { daemon.program("silent")["members"] as? Int == 0 }, "the program is gone")
    }

    @Test func aProgramThatExitsBeforeReadyFailsTheLaunchSayingSo() throws {
        scripts.remove()
        let daemon = try TestDaemon(config: """
            [app quits]
            exec = /bin/sh -c "sleep 0.2; exit 3"
            launch = no
            ready = notify

            """)
        defer { daemon.stop() }
        let launch = daemon.ctl("launch", "quits")
        #expect(launch.stdout.contains("not-running"), "\(launch)")
        #expect(daemon.state("quits") == "not-running")
        let record = try #require(daemon.lastTermination("quits"))
        #expect(record["reason"] as? String == "program-exited")
        #expect((record["detail"] as? String ?? "").contains("exit status 3 before READY=1"), "\(record)")
    }

    @Test func aMissedWatchdogPingIsAWatchdogKillReportedAsSuch() throws {
        defer { scripts.remove() }
        // Five pings 100 ms apart, then silence: killed 400 ms after the last one.
        let daemon = try TestDaemon(config: notifyProgramApp("dog", script: script, environment: ["NOTIFY_READY_AFTER": "0", "NOTIFY_PINGS": "5"],
                                                            appLines: "ready = notify\nwatchdog = 400ms"))
        defer { daemon.stop() }
        let watcher = try watch(daemon, "dog")
        defer { watcher.close() }
        let started = Date()
        #expect(daemon.ctl("launch", "dog").status == 0)
        let pid = try #require(daemon.programPid("dog"))
        #expect(daemon.log.contains("WATCHDOG_USEC=400000 own-WATCHDOG_PID=True"))
        var killed: [String: Any]?
        while killed == nil, let line = watcher.line(timeout: 5) {
            let event = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
            if event?["event"] as? String == "watchdog" { killed = event }
        }
        let killedMs = milliseconds(since: started)
        let event = try #require(killed, "no watchdog event")
        #expect(event["stage"] as? String == "program-watchdog")
        #expect(event["budget"] as? Double == 0.4)
        #expect((event["elapsed"] as? Double ?? 0) >= 0.4)
        #expect(killedMs >= 800, "killed \(killedMs) ms after the launch, while it still pinged")
        let record = try #require(daemon.lastTermination("dog"))
        #expect(record["reason"] as? String == "watchdog")
        #expect(record["stage"] as? String == "program-watchdog")
        #expect(daemon.state("dog") == "not-running")
        #expect(waitUntil { processIsGone(pid) })
        print("watchdog = 400ms: killed \(format(ms: killedMs)) after the launch (5 pings 100 ms apart)")
    }

    @Test func theWatchdogWaitsWhileTheAppIsSuspendedAndWatchdogTriggerKillsAtOnce() throws {
        defer { scripts.remove() }
        let daemon = try TestDaemon(config: notifyProgramApp("frozen", script: script, environment: ["NOTIFY_READY_AFTER": "0"],
                                                            appLines: "ready = notify\nwatchdog = 300ms\nauto-suspend = 0s"))
        defer { daemon.stop() }
        #expect(daemon.ctl("launch", "frozen").status == 0)
        #expect(daemon.ctl("background", "frozen").status == 0)
        #expect(waitUntil { daemon.currentState("frozen") == "suspended" })
        #expect(daemon.program("frozen")["frozen"] as? Bool == true)
        usleep(1_200_000)   // four intervals without a ping
        #expect(daemon.state("frozen") == "suspended", "\(daemon.lastTermination("frozen") ?? [:])")
        #expect(daemon.ctl("foreground", "frozen").status == 0)
        usleep(1_000_000)   // pinging again after the thaw
        #expect(daemon.state("frozen") == "active", "\(daemon.lastTermination("frozen") ?? [:])")

        let pid = try #require(daemon.programPid("frozen"))
        // A child the program forks is one of its processes: its WATCHDOG=trigger kills the app at once.
        kill(pid, SIGUSR1)
        #expect(waitUntil { daemon.state("frozen") == "not-running" })
        #expect(daemon.lastTermination("frozen")?["stage"] as? String == "program-watchdog-trigger")
        #expect(waitUntil { processIsGone(pid) })
    }

    @Test func aDatagramFromOutsideTheProgramIsDropped() throws {
        defer { scripts.remove() }
        let daemon = try TestDaemon(config: notifyProgramApp("guarded", script: script, appLines: "ready = notify\nlaunch-budget = 3s"))
        defer { daemon.stop() }
        let launch = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "launch", "guarded"])
        defer { _ = launch.wait(timeout: 10) }
        #expect(waitUntil { notifySocket(in: daemon.log) != nil })
        let address = try #require(notifySocket(in: daemon.log))
        #expect(sendNotify(to: address, "READY=1\nSTATUS=forged"))
        #expect(waitUntil { daemon.log.contains("notify socket: dropped 1 datagram(s); the last one from pid") })
        #expect(daemon.currentState("guarded") == "inactive", "still launching")
        #expect(daemon.program("guarded")["ready"] as? Bool == false)
        #expect(daemon.program("guarded")["statusText"] as? String == "starting")
        #expect(waitUntil(timeout: 6) { daemon.lastTermination("guarded")?["stage"] as? String == "program-ready" })
    }

    @Test func aProgramThatDoesNotSpeakTheProtocolLaunchesAsBefore() throws {
        scripts.remove()
        let daemon = try TestDaemon(config: """
            [app plain]
            exec = /bin/sleep 60

            """)
        defer { daemon.stop() }
        #expect(daemon.state("plain") == "active")
        let program = daemon.program("plain")
        #expect(program["ready"] as? Bool == false)
        #expect(program["statusText"] is NSNull)
        #expect(daemon.ctl("terminate", "plain").status == 0)
    }
}

@Suite(.timeLimit(.minutes(2)))
struct RedisReadinessTests {
    /// A redis.conf in `directory` for a redis on a random 127.a.b.c with redis's port (so that no port is
    /// guessed and parallel tests never collide), supervised by systemd's protocol; returns the address.
    private func redisConfig(in directory: TemporaryDirectory) throws -> String {
        // A missing redis fails the test (scripts/install-deps installs it): a skip would count as a pass.
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-server"), "redis-server is missing: run scripts/install-deps")
        let host = "127.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 2...254))"
        directory.write("redis.conf", redisConfiguration(host: host, port: 6379, directory: directory))
        return host
    }

    @Test func redisSupervisedBySystemdGatesItsLaunchOnItsOwnReady() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let host = try redisConfig(in: directory)
        let daemon = try TestDaemon(config: """
            [app redis]
            exec = /usr/bin/redis-server \(directory.file("redis.conf"))
            launch = no
            ready = notify
            launch-budget = 10s

            """)
        defer { daemon.stop() }
        let started = Date()
        let launch = daemon.ctl("launch", "redis")
        let launchMs = milliseconds(since: started)
        #expect(launch.status == 0, "\(launch)\n\(daemon.log)")
        let pid = try #require(daemon.programPid("redis"))
        defer { if !processIsGone(pid) { kill(pid, SIGKILL) } }
        // Ready means ready: the first command after the launch returned is answered.
        let ping = run(["/usr/bin/redis-cli", "-h", host, "-p", "6379", "PING"], timeout: 5)
        #expect(ping.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "PONG", "\(ping)")
        let program = daemon.program("redis")
        #expect(program["ready"] as? Bool == true)
        #expect(program["statusText"] as? String == "Ready to accept connections")
        #expect(daemon.ctl("terminate", "redis").status == 0)
        #expect(waitUntil(timeout: 6) { processIsGone(pid) }, "redis is left running")
        print("redis-server: launch with ready = notify returned after \(format(ms: launchMs))")
    }

    /// redis speaks READY=1 and STATUS= but never pings a watchdog: with `watchdog =` set, netlifed holds it to
    /// it as systemd's WatchdogSec= would, and a redis that does not ping is killed as a watchdog kill.
    @Test func aRedisThatDoesNotPingIsKilledByTheWatchdog() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        _ = try redisConfig(in: directory)
        let daemon = try TestDaemon(config: """
            [app redis]
            exec = /usr/bin/redis-server \(directory.file("redis.conf"))
            launch = no
            ready = notify
            watchdog = 3s
            launch-budget = 10s

            """)
        defer { daemon.stop() }
        let started = Date()
        #expect(daemon.ctl("launch", "redis").status == 0, "\(daemon.log)")
        let pid = try #require(daemon.programPid("redis"))
        defer { if !processIsGone(pid) { kill(pid, SIGKILL) } }
        #expect(waitUntil(timeout: 10) { daemon.state("redis") == "not-running" }, "\(daemon.log)")
        let killedMs = milliseconds(since: started)
        let record = try #require(daemon.lastTermination("redis"))
        #expect(record["reason"] as? String == "watchdog" && record["stage"] as? String == "program-watchdog", "\(record)")
        #expect(killedMs >= 3000, "killed \(killedMs) ms after the launch: before its watchdog ran out")
        #expect(waitUntil(timeout: 6) { processIsGone(pid) }, "redis is left running")
        print("redis-server with watchdog = 3s and no pings: killed \(format(ms: killedMs)) after the launch")
    }
}

/// The NOTIFY_SOCKET the notify program printed in the daemon's log, if it has.
private func notifySocket(in log: String) -> String? {
    guard let range = log.range(of: "NOTIFY_SOCKET=") else { return nil }
    let address = log[range.upperBound...].prefix { $0 != " " && $0 != "\n" }
    return address.hasPrefix("@") ? String(address) : nil
}

