// `idle-background` against the real netlifed, as a peer sees it: an echo app in use stays in the foreground
// however long; once nothing uses it for its idle time, netlifed moves it to the background by itself (a new
// connect is refused at once), `watch` shows why, and `status` says how long it has gone unused.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(2)))
struct IdleBackgroundIntegrationTests {
    @Test func anAppInUseStaysActiveAndAnIdleOneIsBackgroundedByTheDaemon() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0, appLines: "idle-background = 1s\nauto-suspend = never"))
        defer { daemon.stop() }
        let port = daemon.port(of: "echo")
        let watcher = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "watch", "echo"])
        // In use: a line echoed every 300 ms for 3 s, three times the idle time.
        let client = try #require(Peer.connect(port: port))
        var lastUse = Date()
        for _ in 0..<10 {
            client.send("ping\n")
            #expect(client.readUntil("ping\n").hasSuffix("ping\n"))
            lastUse = Date()
            usleep(300_000)
            #expect(daemon.state("echo") == "active")
        }
        let status = daemon.ctl("status", "echo")
        #expect(status.stdout.contains("idle-background: 1.0s, unused for"), "\(status)")
        // The connection stays open and silent: idle.
        #expect(waitUntil(timeout: 5) { daemon.state("echo") == "background" })
        let waited = Date().timeIntervalSince(lastUse)
        #expect(waited >= 0.95 && waited < 2.5, "backgrounded \(waited) s after the last use (1 s, looked at every 100 ms)")
        #expect(tcpConnect(port: port) == ECONNREFUSED, "its listener closed: a new connect is refused at once")
        #expect(waitUntil(timeout: 5) { watcher.output.contains("echo: unused for") })
        let lines = watcher.output.split(separator: "\n")
        let idle = lines.firstIndex { $0.contains("(idle-background): moving to the background") }
        let done = lines.firstIndex { $0.contains("background done: background") }
        #expect(idle != nil && done != nil && idle! < done!, "the idle event comes before the transition's: \(lines)")
        #expect(daemon.log.contains("(idle-background = 1s): moving to the background"), "\(daemon.log.split(separator: "\n").filter { $0.contains("idle") })")
        client.close()
        watcher.signal(SIGTERM)
        _ = watcher.wait(timeout: 5)
    }

    /// A process app's program serves its connections itself: what netlifed sees of its use is its CPU time
    /// (above 1 % of the time between looks) and the connections it holds. A program that works stays active;
    /// one that waits is moved to the background.
    @Test func aProcessAppsProgramAtWorkStaysActiveAndAnIdleOneIsBackgrounded() throws {
        // 10 ms of CPU every 100 ms: a job at work.
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("work.py", "import time\nwhile True:\n    t = time.monotonic()\n    while time.monotonic() - t < 0.01: pass\n    time.sleep(0.09)\n")
        let daemon = try TestDaemon(config: """
            [daemon]

            [app working]
            exec = /usr/bin/python3 \(scratch.file("work.py"))
            idle-background = 1s
            auto-suspend = never

            [app waiting]
            exec = /bin/sleep 600
            idle-background = 1s
            auto-suspend = never
            """)
        defer { daemon.stop() }
        // A program that speaks no lifecycle protocol is frozen as soon as it is in the background.
        #expect(waitUntil(timeout: 10) { daemon.state("waiting") == "suspended" }, "the program that waits is idle")
        usleep(1_500_000)
        #expect(daemon.state("working") == "active", "the program at work is in use: \(daemon.ctl("status", "working").stdout)")
        #expect(daemon.log.contains("waiting") && daemon.log.contains("(idle-background = 1s): moving to the background"))
    }
}
