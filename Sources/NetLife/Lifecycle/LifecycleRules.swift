// The lifecycle rules (docs/design.md) as pure functions: given an app's state and a command, which
// transition runs (its stages, their order, the state entered for each, the built-in steps), or why
// nothing runs. No side effects here; `App` performs what these functions decide.

/// A built-in step of a stage, run before the app's own code (delegate, then hook).
public enum PolicyStep: String, Sendable, Equatable, CaseIterable {
    /// Bind every listener of the app (at launch into the foreground, and on will-enter-foreground).
    case openListeners = "open-listeners"
    /// Close every listener: from now on the kernel refuses connections.
    case closeListeners = "close-listeners"
    /// Flush and close the accepted connections of listeners with `connections = close`.
    case closeConnections = "close-connections"
    /// Leave suspension: deliver reads and timers again.
    case resumeApp = "resume-app"
    /// Connect the data sockets that are closed, and leave quiet mode (at launch, on will-enter-foreground).
    case connectDataSockets = "connect-data-sockets"
    /// Apply each data socket's `policy` (close, quiet, keep) on did-enter-background.
    case applyDataSocketPolicy = "data-socket-policy"
    /// Let each data socket's protocol say goodbye (IMAP: LOGOUT) and close it after the flush.
    case closeDataSockets = "close-data-sockets"
    /// A process app: bind its listeners and start its program with them (socket activation).
    case startProgram = "start-program"
}

/// One step of a stage.
public enum TransitionStep: Equatable, Sendable {
    /// A built-in policy step.
    case policy(PolicyStep)
    /// A process app's program, told the stage over its lifecycle protocol (awaited when it speaks it).
    case program
    /// The app's Swift delegate callback.
    case delegate
    /// The app's hook command (`on-...` key).
    case hook
}

/// One stage of a transition: the state the app is in while it runs, and its ordered steps.
public struct TransitionStage: Equatable, Sendable {
    public var event: LifecycleEvent
    public var state: AppState
    public var steps: [TransitionStep]
}

/// Which budget bounds a transition.
public enum BudgetKind: String, Sendable, CaseIterable {
    case launch, background, foreground, terminate
}

/// A transition to run: its stages in order, the budget that bounds them all, and the state at the end.
public struct TransitionPlan: Equatable, Sendable {
    public var command: LifecycleCommand
    public var stages: [TransitionStage]
    public var budget: BudgetKind
    public var finalState: AppState
}

/// What the rules decide for a command.
public enum LifecycleDecision: Equatable, Sendable {
    /// The app is already in the asked-for state: nothing runs.
    case already(AppState)
    /// The command is impossible in this state: nothing changes.
    case refused(String)
    /// Run this transition.
    case run(TransitionPlan)
    /// Suspend now (no app code runs in the move).
    case suspendNow
    /// Mark the app suspend-pending: it suspends once eligible.
    case suspendWhenEligible
}

/// The facts about an app that the rules depend on.
public struct LifecycleTraits: Equatable, Sendable {
    /// `exits-on-suspend = yes` or `multitasking = no`: leaving the foreground terminates the app.
    public var exitsOnSuspend = false
    /// The key that makes it so, as the config writes it (for the reasons of refusals).
    public var exitsOnSuspendKey = "exits-on-suspend = yes"
    /// The app has a Swift delegate.
    public var hasDelegate = false
    /// The events for which the app has a hook.
    public var hooks: Set<LifecycleEvent> = []
    /// The app is a program (process app): it is started at launch and told each stage.
    public var hasProgram = false
    /// A listener of its built-in services stays open in the background (`on-background = wake`): a launch into
    /// the background opens it. (A process app's program gets all its listeners as it starts.)
    public var listensInBackground = false

    public init(exitsOnSuspend: Bool = false, hasDelegate: Bool = false, hooks: Set<LifecycleEvent> = [],
                hasProgram: Bool = false, listensInBackground: Bool = false) {
        self.exitsOnSuspend = exitsOnSuspend
        self.hasDelegate = hasDelegate
        self.hooks = hooks
        self.hasProgram = hasProgram
        self.listensInBackground = listensInBackground
    }
}

/// The transition rules, as pure functions.
public enum LifecycleRules {
    /// Decides what `command` does to an app in `state`.
    ///
    /// - Parameter suspendEligible: for `suspend`: whether the app holds no background task and runs in no
    ///   continuous background mode.
    public static func decide(_ command: LifecycleCommand, in state: AppState, traits: LifecycleTraits,
                              suspendEligible: Bool = true) -> LifecycleDecision {
        func stage(_ event: LifecycleEvent, _ state: AppState, _ policy: [PolicyStep] = []) -> TransitionStage {
            var steps = policy.map(TransitionStep.policy)
            if traits.hasProgram { steps.append(.program) }
            if traits.hasDelegate { steps.append(.delegate) }
            if traits.hooks.contains(event) { steps.append(.hook) }
            return TransitionStage(event: event, state: state, steps: steps)
        }
        func plan(_ budget: BudgetKind, _ final: AppState, _ stages: [TransitionStage]) -> LifecycleDecision {
            .run(TransitionPlan(command: command, stages: stages, budget: budget, finalState: final))
        }
        let enterBackground: [PolicyStep] = [.closeListeners, .closeConnections, .applyDataSocketPolicy]
        let terminating: [PolicyStep] = [.closeListeners, .closeDataSockets]
        let leaveBackground = [stage(.willResignActive, .inactive),
                               stage(.didEnterBackground, .background, enterBackground)]

        // A process app's program starts with its listeners bound (it gets them at launch, whatever the
        // state), after the data sockets connect.
        let startProgram: [PolicyStep] = traits.hasProgram ? [.startProgram] : []
        switch (command, state) {
        case (.launch(background: false), .notRunning):
            return plan(.launch, .active, [stage(.didFinishLaunching, .inactive, [.openListeners, .connectDataSockets] + startProgram),
                                          stage(.didBecomeActive, .active)])
        case (.launch(background: true), .notRunning):
            // A background launch opens only the listeners that listen in the background (`on-background =
            // wake`, and then the shell opens those alone); did-enter-background still runs its policy so
            // that the same steps hold whatever the path into the background.
            // An app that exits on suspend (UIApplicationExitsOnSuspend) never runs in the background.
            if traits.exitsOnSuspend {
                return .refused("\(traits.exitsOnSuspendKey): it never runs in the background (launch it without --background)")
            }
            let listen: [PolicyStep] = traits.listensInBackground ? [.openListeners] : []
            return plan(.launch, .background, [stage(.didFinishLaunching, .background, listen + [.connectDataSockets] + startProgram),
                                              stage(.didEnterBackground, .background, enterBackground)])
        case (.launch, _):
            return .already(state)

        case (.foreground, .notRunning):
            return .refused("is not running; launch it first (netlifectl launch APP)")
        case (.foreground, .active):
            return .already(.active)
        case (.foreground, .inactive):
            // Commands wait for a running transition, so an inactive app here is an interrupted one: still
            // the foreground app, resting inactive.
            return .refused("is interrupted (inactive); netlifectl interrupt end APP makes it active again")
        case (.foreground, .background), (.foreground, .suspended):
            // iOS: will-enter-foreground runs while the app is still in the background (a suspended one is
            // resumed into it first); it becomes inactive for a moment, then active for did-become-active.
            let resume: [PolicyStep] = (state == .suspended ? [.resumeApp] : []) + [.openListeners, .connectDataSockets]
            return plan(.foreground, .active, [stage(.willEnterForeground, .background, resume),
                                              stage(.didBecomeActive, .active)])

        case (.background, .notRunning):
            return .refused("is not running")
        case (.background, .background), (.background, .suspended):
            return .already(state)
        case (.background, .inactive):
            // An interrupted app leaves for the background: it has resigned active already.
            let enter = [stage(.didEnterBackground, .background, enterBackground)]
            return plan(.background, traits.exitsOnSuspend ? .notRunning : .background, enter)
        case (.background, .active):
            // An app that exits on suspend (iOS's UIApplicationExitsOnSuspend): Active -> Inactive ->
            // Background -> Suspended -> Not Running, with no callback after did-enter-background (App passes
            // it through suspended as it ends).
            return plan(.background, traits.exitsOnSuspend ? .notRunning : .background, leaveBackground)

        case (.suspend, .suspended):
            return .already(.suspended)
        case (.suspend, .background):
            return suspendEligible ? .suspendNow : .suspendWhenEligible
        case (.suspend, _):
            return .refused("cannot be suspended: it is \(state), not in background")

        case (.terminate, .notRunning):
            return .already(.notRunning)
        case (.terminate, .suspended):
            // iOS terminates a suspended app without running any of its code (jetsam).
            return plan(.terminate, .notRunning, [])
        case (.terminate, _):
            return plan(.terminate, .notRunning, [stage(.willTerminate, state, terminating)])

        // An interruption (iOS: an incoming call, a system alert): will-resign-active, then the app rests
        // inactive with its listeners open; its end runs did-become-active. It never enters the background.
        case (.interruptBegin, .active):
            return plan(.background, .inactive, [stage(.willResignActive, .inactive)])
        case (.interruptBegin, .inactive):
            return .already(.inactive)
        case (.interruptBegin, _):
            return .refused("cannot be interrupted: it is \(state), not active")
        case (.interruptEnd, .inactive):
            return plan(.foreground, .active, [stage(.didBecomeActive, .active)])
        case (.interruptEnd, _):
            return .refused("is not interrupted: it is \(state)")
        }
    }

    /// Why an app is not suspend-eligible, or nil when it is: it must be in background, with
    /// no transition running, no open background task, no expiration handler running, and no continuous
    /// background mode; nor, after a VoIP or keep-alive wake-up, may its handler still be running (it gets
    /// `keepalive-budget`). The reason is worded for the user.
    public static func suspendBlocker(state: AppState, transitionRunning: Bool, openTasks: Int,
                                      expirationRunning: Bool, continuousMode: Bool, wakeRunning: Bool = false) -> String? {
        if state != .background { return "it is \(state), not in background" }
        if transitionRunning { return "a transition is running" }
        if wakeRunning { return "it was woken and its handler is running" }
        if continuousMode { return "its background mode is continuous (netlifectl mode APP idle ends it)" }
        if expirationRunning { return "an expiration handler is running" }
        if openTasks > 0 { return "\(openTasks) background task\(openTasks == 1 ? " is" : "s are") open" }
        return nil
    }
}
