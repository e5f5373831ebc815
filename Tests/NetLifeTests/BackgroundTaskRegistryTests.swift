// Background tasks and the background time, with a fake clock.

import NetLife
import NetLifeEvent
import Testing

private func at(_ ms: UInt64) -> MonotonicTime { MonotonicTime(nanoseconds: 5_000_000_000 + ms * 1_000_000) }

private func registry(taskTime: Duration = .seconds(3), lead: Duration = .milliseconds(500), grace: Duration = .milliseconds(400)) -> BackgroundTaskRegistry {
    var budgets = Budgets()
    budgets.taskTime = taskTime
    budgets.expirationLead = lead
    budgets.expirationGrace = grace
    return BackgroundTaskRegistry(budgets: budgets)
}

@Suite struct BackgroundTaskRegistryTests {
    @Test func idsAreUniqueIncreasingAndNeverZero() {
        var tasks = registry()
        let ids = (0..<5).map { _ in tasks.begin(name: nil, origin: .control, now: at(0), allowed: true) }
        #expect(ids == [1, 2, 3, 4, 5])
        _ = tasks.end(3)
        tasks.removeAll()
        #expect(tasks.begin(name: nil, origin: .api, now: at(0), allowed: true) == 6)
    }

    @Test func refusedTasksGetTheInvalidId() {
        var tasks = registry()
        #expect(tasks.begin(name: "x", origin: .api, now: at(0), allowed: false) == BackgroundTaskRegistry.invalid)
        tasks.enterBackground(now: at(0))
        #expect(tasks.begin(name: "late", origin: .api, now: at(3000), allowed: true) == 0)
        #expect(tasks.tasks.isEmpty)
    }

    @Test func endingZeroUnknownOrEndedIdsIsReported() {
        var tasks = registry()
        let id = tasks.begin(name: "a", origin: .control, now: at(0), allowed: true)
        #expect(tasks.end(0) == .invalidIdentifier)
        #expect(tasks.end(99) == .unknown)
        guard case .ended(let task) = tasks.end(id) else { Issue.record("task did not end"); return }
        #expect(task.name == "a")
        #expect(tasks.end(id) == .alreadyEnded)
    }

    @Test func remainingIsUnlimitedInForegroundAndCountsDownInBackground() {
        var tasks = registry()
        #expect(tasks.remaining(now: at(0)) == nil)
        tasks.enterBackground(now: at(1000))
        #expect(tasks.remaining(now: at(1000)) == .seconds(3))
        #expect(tasks.remaining(now: at(2500)) == .milliseconds(1500))
        #expect(tasks.remaining(now: at(9000)) == .zero)
        #expect(tasks.isTimeSpent(now: at(4000)))
        tasks.enterForeground()
        #expect(tasks.remaining(now: at(9000)) == nil)
    }

    @Test func expirationRunsOnceInBeginOrderAtTheLead() {
        var tasks = registry()
        let ids = (0..<3).map { tasks.begin(name: "t\($0)", origin: .control, now: at(0), allowed: true) }
        #expect(tasks.expirationDeadline == nil)   // foreground: unlimited
        tasks.enterBackground(now: at(100))
        #expect(tasks.expirationDeadline == at(2600))
        #expect(tasks.graceDeadline == at(3500))
        #expect(tasks.takeExpiringTasks(now: at(2599)).isEmpty)
        #expect(tasks.takeExpiringTasks(now: at(2600)).map(\.id) == ids)
        #expect(tasks.takeExpiringTasks(now: at(2700)).isEmpty)
        #expect(tasks.expirationDeadline == nil)
        #expect(tasks.graceDeadline == at(3500))
    }

    @Test func aTaskBegunAfterTheExpirationPointExpiresAtOnce() {
        var tasks = registry()
        tasks.enterBackground(now: at(0))
        let id = tasks.begin(name: nil, origin: .api, now: at(2800), allowed: true)
        #expect(id != 0)
        #expect(tasks.takeExpiringTasks(now: at(2800)).map(\.id) == [id])
    }

    @Test func comingToTheForegroundResetsTheBackgroundTime() {
        var tasks = registry()
        _ = tasks.begin(name: nil, origin: .api, now: at(0), allowed: true)
        tasks.enterBackground(now: at(0))
        _ = tasks.takeExpiringTasks(now: at(2600))
        tasks.enterForeground()
        #expect(tasks.graceDeadline == nil)
        tasks.enterBackground(now: at(10_000))
        #expect(tasks.expirationDeadline == at(12_500))
    }

    @Test func expirationHandlersRunOneAtATimeInBeginOrderUnderTheirBudget() {
        var tasks = registry()
        tasks.expirationBudget = .milliseconds(100)
        let ids = (0..<3).map { tasks.begin(name: "t\($0)", origin: .control, now: at(0), allowed: true) }
        tasks.enterBackground(now: at(0))
        #expect(tasks.next(now: at(2499)) == nil)
        #expect(tasks.nextDeadline == at(2500))
        guard case .runExpirationHandler(let first) = tasks.next(now: at(2500)) else { Issue.record("first"); return }
        #expect(first.id == ids[0])
        #expect(tasks.isRunningExpiration)
        #expect(tasks.next(now: at(2550)) == nil, "the second waits for the first")
        #expect(tasks.nextDeadline == at(2600), "the running handler's budget")
        tasks.expirationHandlerFinished()
        _ = tasks.end(ids[1])
        guard case .runExpirationHandler(let third) = tasks.next(now: at(2560)) else { Issue.record("third"); return }
        #expect(third.id == ids[2], "an ended task's handler never runs")
        #expect(tasks.next(now: at(2660)) == .kill(WatchdogTimeout(stage: .expiration, budget: .milliseconds(100), elapsed: .milliseconds(100))))
    }

    @Test func aTaskOpenPastTheGraceGetsTheAppKilled() {
        var tasks = registry()
        _ = tasks.begin(name: nil, origin: .api, now: at(0), allowed: true)
        tasks.enterBackground(now: at(0))
        guard case .runExpirationHandler = tasks.next(now: at(2500)) else { Issue.record("no handler"); return }
        tasks.expirationHandlerFinished()
        #expect(tasks.nextDeadline == at(3400))
        #expect(tasks.next(now: at(3399)) == nil)
        #expect(tasks.next(now: at(3400)) == .kill(WatchdogTimeout(stage: .backgroundTask, budget: .milliseconds(3400), elapsed: .milliseconds(3400))))
    }

    @Test func theForegroundDropsWaitingAndRunningHandlersAndEveryDeadline() {
        var tasks = registry()
        let ids = (0..<3).map { _ in tasks.begin(name: nil, origin: .control, now: at(0), allowed: true) }
        tasks.enterBackground(now: at(0))
        _ = tasks.next(now: at(2500))
        #expect(tasks.isRunningExpiration)
        tasks.enterForeground()
        #expect(!tasks.isRunningExpiration)
        #expect(tasks.nextDeadline == nil)
        #expect(tasks.next(now: at(100_000)) == nil, "nothing is due in the foreground")
        #expect(tasks.tasks.map(\.id) == ids, "the tasks stay open")
        tasks.enterBackground(now: at(200_000))
        #expect(tasks.remaining(now: at(200_000)) == .seconds(3), "a fresh background time")
        guard case .runExpirationHandler(let again) = tasks.next(now: at(202_500)) else { Issue.record("none"); return }
        #expect(again.id == ids[0], "handlers run again only if a later background period runs out")
    }

    @Test func noTimeIsOfferedWhileSuspended() {
        var tasks = registry()
        tasks.enterBackground(now: at(0))
        #expect(tasks.remaining(now: at(1000)) == .seconds(2))
        tasks.suspend()
        #expect(tasks.remaining(now: at(1000)) == .zero)
        #expect(tasks.nextDeadline == nil)
        tasks.enterBackground(now: at(50_000))   // woken
        #expect(tasks.remaining(now: at(50_000)) == .seconds(3))
    }
}
