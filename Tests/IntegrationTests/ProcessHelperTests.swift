// The tests' own way of running helper programs (`run`, `BackgroundProcess`): bounded by its time limit
// whatever the program leaves behind, and leaving nothing behind when the limit runs out. A helper that
// hung here once held a whole suite for 25 minutes: a script killed at its limit had left a `swift build`
// running, which Foundation's Process took for the script itself.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1)))
struct ProcessHelperTests {
    @Test func aProgramThatLeavesAChildRunningIsDoneWhenItExits() throws {
        let started = Date()
        // The child keeps the script's stdout and stderr open for a minute.
        let result = run(["/bin/sh", "-c", "sleep 60 & echo $!; exit 3"], timeout: 20)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(result.status == 3, "\(result)")
        let child = try #require(Int32(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(result)")
        #expect(processIsLive(child))
        kill(child, SIGKILL)
    }

    @Test func aTimeLimitEndsTheProgramAndEverythingItStarted() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let started = Date()
        // The script's child ignores SIGTERM: only the SIGKILL that follows ends it.
        let script = "echo $$ > \(scratch.file("pid")); (trap '' TERM; exec sleep 60) & sleep 60"
        let result = run(["/bin/sh", "-c", script], timeout: 0.5)
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == -2, "\(result)")
        #expect(result.stderr.hasPrefix("timed out after 0.5s"), "\(result)")
        #expect(elapsed >= 0.5 && elapsed < 3, "\(elapsed) s")
        let group = try #require(Int32(scratch.read("pid").trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(waitUntilGroupIsGone(group))
    }

    @Test func aBackgroundProgramIsEndedWithItsGroupAfterItsTimeLimit() throws {
        let server = try BackgroundProcess(["/bin/sh", "-c", "echo $$; (trap '' TERM; exec sleep 60) & wait"])
        #expect(waitUntil { server.output.contains("\n") })
        let group = try #require(Int32(server.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        let (result, elapsed) = server.wait(timeout: 0.2)
        #expect(result.status == SIGTERM, "\(result)")
        #expect(elapsed < 3)
        #expect(waitUntilGroupIsGone(group))
    }
}
