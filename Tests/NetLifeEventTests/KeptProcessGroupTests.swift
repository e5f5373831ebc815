// A child whose owner keeps its process group after its exit: the exit is reported, the rest of the group
// runs on (its output still read), the child stays unreaped until the group is killed, and then nothing of it
// is left, not even a zombie.

import Foundation
import NetLifeEvent
import Testing
import NetLifeTestSupport

/// The state letter of process `pid` (R, S, Z, ...), nil when there is no such process.
private func state(of pid: pid_t) -> Substring? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    return stat[stat.index(after: close)...].split(separator: " ").first
}

/// Whether the child `pid` of this process has been reaped: no such process any more (looked up without
/// waiting for it, which would reap it).
private func isReaped(_ pid: pid_t) -> Bool { state(of: pid) == nil }

@Suite(.timeLimit(.minutes(1)))
struct KeptProcessGroupTests {
    /// Starts a child that leaves `sleep 30` (its pid on the first line) and a late writer in its group, then
    /// exits 4; `keep` answers whether the group is kept.
    private func startLeaver(_ loop: EventLoop, keep: Bool, lines: @escaping (String) -> Void,
                             exit: @escaping (ChildExitStatus) -> Void) throws -> ChildProcess {
        try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "sleep 30 & echo $!; (sleep 0.3; echo late) & exit 4"],
                         environment: ["PATH": "/usr/bin:/bin"],
                         onOutput: { if case .line(let line) = $0 { lines(line) } },
                         keepsGroupAfterExit: { keep }, onExit: exit)
    }

    @Test func aKeptGroupOutlivesTheExitAndItsOutputIsStillReadUntilItIsKilled() throws {
        let loop = try EventLoop()
        var lines: [String] = []
        var status: ChildExitStatus?
        let child = try startLeaver(loop, keep: true, lines: { lines.append($0) }, exit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(4))
        #expect(child.isGroupKept)
        #expect(state(of: child.pid) == "Z", "the child stays a zombie: its pid holds the group's id")
        let sleeper = try #require(lines.first.flatMap { pid_t($0) })
        #expect(processIsLive(sleeper), "what the child left in its group runs on")
        #expect(runLoop(loop) { lines.contains("late") }, "the group's output is still read after the exit: \(lines)")
        child.killKeptGroup()
        #expect(!child.isGroupKept)
        #expect(isReaped(child.pid))
        #expect(waitUntilGroupIsGone(child.pid))
        #expect(loop.registeredObjectCount == 0, "the pidfd and the pipes are closed")
        child.killKeptGroup()   // again: nothing
    }

    @Test func aKeptGroupCanBeAskedToEndWithSIGTERM() throws {
        let loop = try EventLoop()
        var lines: [String] = []
        var status: ChildExitStatus?
        let child = try startLeaver(loop, keep: true, lines: { lines.append($0) }, exit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        let sleeper = try #require(lines.first.flatMap { pid_t($0) })
        child.signalGroup(SIGTERM)
        #expect(waitUntilGroupIsGone(child.pid), "SIGTERM reached what was left in the group")
        #expect(!processIsLive(sleeper))
        #expect(child.isGroupKept, "still unreaped until its owner kills the group")
        child.close()
        #expect(isReaped(child.pid))
        #expect(loop.registeredObjectCount == 0)
    }

    @Test func withoutKeepingTheGroupIsKilledAtTheExit() throws {
        let loop = try EventLoop()
        var lines: [String] = []
        var status: ChildExitStatus?
        let child = try startLeaver(loop, keep: false, lines: { lines.append($0) }, exit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(4))
        #expect(!child.isGroupKept)
        #expect(isReaped(child.pid))
        #expect(waitUntilGroupIsGone(child.pid))
        #expect(loop.registeredObjectCount == 0)
    }

    @Test func closingTheLoopKillsAKeptGroup() throws {
        let loop = try EventLoop()
        var status: ChildExitStatus?
        let child = try startLeaver(loop, keep: true, lines: { _ in }, exit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        _ = loop.close()
        #expect(isReaped(child.pid))
        #expect(waitUntilGroupIsGone(child.pid))
    }
}
