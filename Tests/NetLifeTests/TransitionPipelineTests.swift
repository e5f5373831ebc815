// The pipeline engine walked with a fake clock: order of actions, stage timing, and the watchdog.

import NetLife
import NetLifeEvent
import Testing

private func at(_ ms: UInt64) -> MonotonicTime { MonotonicTime(nanoseconds: 1_000_000_000 + ms * 1_000_000) }

private func backgroundPlan(hooks: Set<LifecycleEvent> = []) -> TransitionPlan {
    guard case .run(let plan) = LifecycleRules.decide(.background, in: .active, traits: LifecycleTraits(hooks: hooks)) else {
        fatalError("background of an active app must run")
    }
    return plan
}

@Suite struct TransitionPipelineTests {
    @Test func walksStagesAndStepsInOrderAndTimesEachStage() {
        var pipeline = TransitionPipeline(plan: backgroundPlan(hooks: [.didEnterBackground]), budget: .milliseconds(500), now: at(0))
        #expect(pipeline.next(now: at(0)) == .enterState(.inactive, .willResignActive))
        #expect(pipeline.currentStage == .willResignActive)
        #expect(pipeline.next(now: at(10)) == .enterState(.background, .didEnterBackground))
        #expect(pipeline.next(now: at(10)) == .perform(.policy(.closeListeners), .didEnterBackground))
        #expect(pipeline.next(now: at(11)) == .perform(.policy(.closeConnections), .didEnterBackground))
        #expect(pipeline.next(now: at(11)) == .perform(.policy(.applyDataSocketPolicy), .didEnterBackground))
        #expect(pipeline.next(now: at(12)) == .perform(.hook, .didEnterBackground))
        let end = pipeline.next(now: at(300))
        #expect(end == .finished(state: .background, stages: [
            StageReport(event: .willResignActive, duration: .milliseconds(10)),
            StageReport(event: .didEnterBackground, duration: .milliseconds(290)),
        ]))
    }

    @Test func aStepReturningAfterTheDeadlineKillsTheApp() {
        var pipeline = TransitionPipeline(plan: backgroundPlan(hooks: [.didEnterBackground]), budget: .milliseconds(500), now: at(0))
        for _ in 0..<5 { _ = pipeline.next(now: at(0)) }
        #expect(pipeline.next(now: at(0)) == .perform(.hook, .didEnterBackground))
        #expect(pipeline.next(now: at(501)) == .kill(WatchdogTimeout(stage: .transition(.didEnterBackground), budget: .milliseconds(500), elapsed: .milliseconds(501))))
    }

    @Test func theWatchdogTimerBlamesTheRunningStage() {
        var pipeline = TransitionPipeline(plan: backgroundPlan(hooks: [.willResignActive]), budget: .milliseconds(200), now: at(0))
        _ = pipeline.next(now: at(0))
        #expect(pipeline.next(now: at(1)) == .perform(.hook, .willResignActive))
        #expect(pipeline.deadline == at(200))
        #expect(pipeline.budgetExpired(now: at(203)) == .kill(WatchdogTimeout(stage: .transition(.willResignActive), budget: .milliseconds(200), elapsed: .milliseconds(203))))
    }

    @Test func anEmptyPlanFinishesAtOnce() {
        guard case .run(let plan) = LifecycleRules.decide(.terminate, in: .suspended, traits: LifecycleTraits()) else {
            Issue.record("terminate of a suspended app must run")
            return
        }
        var pipeline = TransitionPipeline(plan: plan, budget: .seconds(5), now: at(0))
        #expect(pipeline.next(now: at(0)) == .finished(state: .notRunning, stages: []))
    }
}
