// What a hook leaves in its process group and how long it lives, decision by decision (HookLeftovers).

@testable import NetLife
import Testing

/// HookLeftovers with each decision returned by a non-mutating call, for `#expect` (which cannot call a
/// mutating method).
private final class Leftovers {
    var value = HookLeftovers()
    func started(_ run: HookRun) { value.started(run) }
    func taskBegun(_ id: BackgroundTaskIdentifier, by run: HookRun) -> Bool { value.taskBegun(id, by: run) }
    func hookExited(_ run: HookRun) -> HookLeftovers.Action { value.hookExited(run) }
    func taskEnded(_ id: BackgroundTaskIdentifier) -> HookLeftovers.Action? { value.taskEnded(id) }
    func graceEnded(_ run: HookRun) -> HookLeftovers.Action? { value.graceEnded(run) }
    func killAll() -> [HookRun] { value.killAll() }
    func keepsGroup(_ run: HookRun) -> Bool { value.keepsGroup(run) }
    var phases: [HookRun: HookLeftovers.Phase] { value.phases }
}

@Suite struct HookLeftoversTests {
    @Test func aHookThatHoldsNoTaskHasItsGroupKilledAtItsExit() {
        let leftovers = Leftovers()
        leftovers.started(1)
        #expect(!leftovers.keepsGroup(1))
        #expect(leftovers.hookExited(1) == .kill(1))
        #expect(leftovers.phases.isEmpty)
    }

    @Test func aTaskTheGroupBeganKeepsItAfterTheExitUntilTheTaskEnds() {
        let leftovers = Leftovers()
        leftovers.started(1)
        #expect(leftovers.taskBegun(7, by: 1))
        #expect(leftovers.keepsGroup(1))
        #expect(leftovers.hookExited(1) == .keep(1))
        #expect(leftovers.phases[1] == .kept(holding: [7]))
        #expect(!leftovers.keepsGroup(1), "only a running hook's exit is decided")
        #expect(leftovers.taskEnded(99) == nil, "a task the group did not begin changes nothing")
        #expect(leftovers.taskEnded(7) == .end(1))
        #expect(leftovers.phases[1] == .ending)
        #expect(leftovers.graceEnded(1) == .kill(1))
        #expect(leftovers.phases.isEmpty)
        #expect(leftovers.graceEnded(1) == nil)
    }

    @Test func theGroupLivesUntilTheLastOfItsTasksEnds() {
        let leftovers = Leftovers()
        leftovers.started(1)
        #expect(leftovers.taskBegun(3, by: 1))
        #expect(leftovers.taskBegun(4, by: 1))
        #expect(leftovers.hookExited(1) == .keep(1))
        #expect(leftovers.taskEnded(3) == nil)
        // What the hook left behind may begin tasks of its own: they hold the group too.
        #expect(leftovers.taskBegun(5, by: 1))
        #expect(leftovers.taskEnded(4) == nil)
        #expect(leftovers.value.tasks(heldBy: 1) == [5])
        #expect(leftovers.taskEnded(5) == .end(1))
    }

    @Test func aTaskEndedBeforeTheHookExitsHoldsNothing() {
        let leftovers = Leftovers()
        leftovers.started(1)
        #expect(leftovers.taskBegun(3, by: 1))
        #expect(leftovers.taskEnded(3) == nil)
        #expect(!leftovers.keepsGroup(1))
        #expect(leftovers.hookExited(1) == .kill(1))
    }

    @Test func eachTaskHoldsOnlyTheGroupThatBeganIt() {
        let leftovers = Leftovers()
        leftovers.started(1)
        leftovers.started(2)
        #expect(leftovers.taskBegun(10, by: 1))
        #expect(leftovers.taskBegun(20, by: 2))
        #expect(leftovers.hookExited(1) == .keep(1))
        #expect(leftovers.hookExited(2) == .keep(2))
        #expect(leftovers.taskEnded(20) == .end(2))
        #expect(leftovers.phases[1] == .kept(holding: [10]))
        #expect(leftovers.taskEnded(10) == .end(1))
    }

    @Test func anUnknownOrEndingRunTakesNoTask() {
        let leftovers = Leftovers()
        #expect(!leftovers.taskBegun(1, by: 9), "no such run (killed, or never started)")
        leftovers.started(1)
        #expect(leftovers.taskBegun(2, by: 1))
        #expect(leftovers.hookExited(1) == .keep(1))
        #expect(leftovers.taskEnded(2) == .end(1))
        #expect(!leftovers.taskBegun(3, by: 1), "its SIGTERM is sent: a new task is an ordinary one")
        #expect(leftovers.taskEnded(3) == nil)
        #expect(leftovers.hookExited(9) == .kill(9), "the exit of a run killed earlier kills its group")
    }

    @Test func killingEverythingForgetsEveryRunWhateverItHolds() {
        let leftovers = Leftovers()
        for run: HookRun in 1...3 { leftovers.started(run) }
        #expect(leftovers.taskBegun(5, by: 1))
        #expect(leftovers.taskBegun(6, by: 2))
        #expect(leftovers.hookExited(1) == .keep(1))
        #expect(leftovers.hookExited(2) == .keep(2))
        #expect(leftovers.taskEnded(6) == .end(2))
        #expect(leftovers.killAll() == [1, 2, 3])
        #expect(leftovers.phases.isEmpty)
        #expect(leftovers.hookExited(3) == .kill(3), "a running hook killed with the rest: its exit kills its group")
        #expect(leftovers.taskEnded(5) == nil)
        #expect(leftovers.graceEnded(2) == nil)
    }
}
