// The handler pipeline of one transition, as a pure value: it walks the plan's stages and steps, times each
// stage, and decides when the watchdog kills the app. `App` asks it for the next action, performs it (a
// policy step or a delegate call at once, a hook asynchronously), and asks again.

import NetLifeEvent

/// How long one stage of a transition took.
public struct StageReport: Equatable, Sendable {
    public var event: LifecycleEvent
    public var duration: Duration

    public init(event: LifecycleEvent, duration: Duration) {
        self.event = event
        self.duration = duration
    }
}

/// What overran its budget when the watchdog acted.
public enum WatchdogStage: Equatable, Sendable, CustomStringConvertible {
    /// A stage of a transition's pipeline.
    case transition(LifecycleEvent)
    /// An expiration handler.
    case expiration
    /// A background task left open past the background time and its grace.
    case backgroundTask
    /// A process app's program with `ready = notify` did not send READY=1 within the launch budget.
    case programReady
    /// A process app's program did not bind a listener it is to bind (`adopt = yes`) within the launch budget.
    case adoptListeners
    /// A process app's program with `watchdog` did not send WATCHDOG=1 within it (`triggered`: it sent
    /// WATCHDOG=trigger).
    case programWatchdog(triggered: Bool)

    /// The name `status` and the log use: the callback's name, `expiration`, `background-task`,
    /// `program-ready`, `adopt-listeners`, `program-watchdog` or `program-watchdog-trigger`.
    public var description: String {
        switch self {
        case .transition(let event): return event.rawValue
        case .expiration: return "expiration"
        case .backgroundTask: return "background-task"
        case .programReady: return "program-ready"
        case .adoptListeners: return "adopt-listeners"
        case .programWatchdog(let triggered): return triggered ? "program-watchdog-trigger" : "program-watchdog"
        }
    }
}

/// Why the watchdog killed an app: the stage that overran, its budget, and the time it had taken.
public struct WatchdogTimeout: Equatable, Sendable {
    public var stage: WatchdogStage
    public var budget: Duration
    public var elapsed: Duration

    public init(stage: WatchdogStage, budget: Duration, elapsed: Duration) {
        self.stage = stage
        self.budget = budget
        self.elapsed = elapsed
    }
}

/// Walks one `TransitionPlan`.
public struct TransitionPipeline: Equatable, Sendable {
    /// The next thing the app must do.
    public enum Action: Equatable, Sendable {
        /// Enter this state before the stage's steps run.
        case enterState(AppState, LifecycleEvent)
        /// Perform this step of the stage; ask for the next action once it has completed.
        case perform(TransitionStep, LifecycleEvent)
        /// The transition is over: the app is now in `state`.
        case finished(state: AppState, stages: [StageReport])
        /// The budget is spent: the watchdog kills the app.
        case kill(WatchdogTimeout)
    }

    public let plan: TransitionPlan
    public let budget: Duration
    public let startedAt: MonotonicTime
    /// The stages completed so far, with their durations.
    public private(set) var reports: [StageReport] = []
    private var stageIndex = 0
    private var stepIndex = -1   // -1: the stage's state has not been entered yet
    private var stageStartedAt: MonotonicTime
    private var isOver = false

    public init(plan: TransitionPlan, budget: Duration, now: MonotonicTime) {
        self.plan = plan
        self.budget = budget
        self.startedAt = now
        self.stageStartedAt = now
    }

    /// The stage running now, if any.
    public var currentStage: LifecycleEvent? {
        stageIndex < plan.stages.count && !isOver ? plan.stages[stageIndex].event : nil
    }

    /// When the budget runs out; the app arms its watchdog timer for this instant.
    public var deadline: MonotonicTime { startedAt + budget }

    /// The next action, given that everything asked for before has completed.
    public mutating func next(now: MonotonicTime) -> Action {
        if isOver { return .finished(state: plan.finalState, stages: reports) }
        if now > deadline { return budgetExpired(now: now) }
        while stageIndex < plan.stages.count {
            let stage = plan.stages[stageIndex]
            if stepIndex == -1 {
                stepIndex = 0
                stageStartedAt = now
                return .enterState(stage.state, stage.event)
            }
            if stepIndex < stage.steps.count {
                let step = stage.steps[stepIndex]
                stepIndex += 1
                return .perform(step, stage.event)
            }
            reports.append(StageReport(event: stage.event, duration: now - stageStartedAt))
            stageIndex += 1
            stepIndex = -1
        }
        isOver = true
        return .finished(state: plan.finalState, stages: reports)
    }

    /// The watchdog's timer fired (or a step returned after the deadline): the app is killed, and the
    /// stage running at that moment is blamed.
    public mutating func budgetExpired(now: MonotonicTime) -> Action {
        isOver = true
        // Past the last stage nothing of the app runs any more; the last stage is blamed then.
        let index = min(stageIndex, plan.stages.count - 1)
        let stage: WatchdogStage = index >= 0 ? .transition(plan.stages[index].event) : .transition(.willTerminate)
        return .kill(WatchdogTimeout(stage: stage, budget: budget, elapsed: now - startedAt))
    }
}
