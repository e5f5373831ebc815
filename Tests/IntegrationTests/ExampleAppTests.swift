// The example package (Examples/): an app written in Swift on the public API (NetLife, NetLifeDaemon), with
// its own service and delegate, run in its own daemon executable. The test builds it and drives it: a long
// report goes on in the background under a background task, its timers wait while the app is suspended,
// and when the background time runs out its expiration handler truncates the report and flushes it in a
// restricted run loop.

import Foundation
import Testing
import NetLifeTestSupport

private let repository = URL(fileURLWithPath: repositoryDirectory)

/// Builds the example package once per test run and returns its daemon's path.
private let reporterd: Result<String, BuildFailure> = {
    let examples = repository.appendingPathComponent("Examples").path
    let swift = ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":")
        .map { "\($0)/swift" }.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/swift"
    // With an explicit umask: unit tests in this same process briefly narrow the process-wide umask while they
    // bind Unix sockets, and a build started meanwhile would write its manifest program without execute bits.
    let build = run(["/bin/sh", "-c", "umask 022 && exec \"$0\" build --package-path \"$1\"", swift, examples], timeout: 600)
    guard build.status == 0 else { return .failure(BuildFailure(output: "\(build)")) }
    let binPath = run([swift, "build", "--package-path", examples, "--show-bin-path"], timeout: 120)
    return .success(binPath.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + "/reporterd")
}()

private struct BuildFailure: Error, CustomStringConvertible {
    var output: String
    var description: String { "building Examples/ failed: \(output)" }
}

/// A TestDaemon running reporterd instead of netlifed, its listener on a port the kernel picks.
private func startReporter(taskTime: String = "3s", lead: String = "1s") throws -> TestDaemon {
    let binary = try reporterd.get()
    return try TestDaemon(config: """
        [app reporter]
        task-time = \(taskTime)
        expiration-lead = \(lead)
        auto-suspend = 200ms
        [listener reporter.main]
        address = 127.0.0.1:0
        service = report
        interval = 50
        """, executable: binary)
}

/// Reads lines until `predicate` holds for the text so far, or `timeout`.
private func readUntil(_ peer: Peer, timeout: TimeInterval = 5, _ predicate: (String) -> Bool) -> String {
    var text = ""
    let deadline = Date().addingTimeInterval(timeout)
    while !predicate(text) && Date() < deadline {
        switch peer.read(timeout: max(0.01, deadline.timeIntervalSinceNow)) {
        case .bytes(let bytes): text += String(decoding: bytes, as: UTF8.self)
        default: return text
        }
    }
    return text
}

@Suite(.timeLimit(.minutes(10)), .serialized)
struct ExampleAppTests {
    @Test func aReportGoesOnInTheBackgroundAndIsTruncatedWhenTimeRunsOut() throws {
        let daemon = try startReporter()
        defer { daemon.stop() }
        let port = daemon.port(of: "reporter")
        #expect(daemon.log.contains("reporter delegate: launched; multitasking supported"))
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.readText(count: 6) == "READY\n")
        peer.send("REPORT 1000\n")
        #expect(readUntil(peer) { $0.contains("line 3 of 1000") }.contains("line 1 of 1000"))
        #expect(daemon.ctl("background", "reporter").status == 0)
        let tasks = daemon.ctl("task", "list", "reporter")
        #expect(tasks.stdout.contains("'report'"), "the report runs under a background task: \(tasks)")
        // The report goes on in the background, then the expiration handler truncates it (at 2 s).
        let rest = readUntil(peer, timeout: 4) { $0.contains("TRUNCATED") }
        #expect(rest.contains("line 20 of 1000"), "lines kept coming in the background")
        #expect(rest.contains("TRUNCATED after"))
        #expect(peer.read(timeout: 1) == .endOfStream, "the handler flushed and closed the connection")
        #expect(daemon.log.contains("reporter delegate: entered the background with"))
        #expect(daemon.log.contains("restricted run loop served 1 connection(s)"))
        #expect(waitUntil(timeout: 2) { daemon.state("reporter") == "suspended" }, "the task ended, so the app suspends")
        #expect(!daemon.log.contains("0x8badf00d"))
    }

    @Test func appTimersWaitWhileTheAppIsSuspended() throws {
        let daemon = try startReporter(taskTime: "30s", lead: "5s")
        defer { daemon.stop() }
        let port = daemon.port(of: "reporter")
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.readText(count: 6) == "READY\n")
        peer.send("REPORT 1000\n")
        _ = readUntil(peer) { $0.contains("line 2 of 1000") }
        #expect(daemon.ctl("background", "reporter").status == 0)
        // End the report's task from outside: the app becomes eligible and suspends.
        let json = daemon.ctl("--json", "task", "list", "reporter")
        let reply = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let id = try #require((reply?["tasks"] as? [[String: Any]])?.first?["id"] as? Int)
        #expect(daemon.ctl("task", "end", "reporter", String(id)).status == 0)
        #expect(waitUntil(timeout: 2) { daemon.state("reporter") == "suspended" })
        _ = readUntil(peer, timeout: 0.2) { _ in false }   // what was written before the suspension
        #expect(peer.read(timeout: 0.6) == .timedOut, "no app timer fires while the app is suspended")
        #expect(daemon.ctl("foreground", "reporter").status == 0)
        #expect(readUntil(peer, timeout: 2) { $0.contains("of 1000\n") }.contains("of 1000"), "the report resumes in the foreground")
    }
}
