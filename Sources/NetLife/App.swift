// An app at run time: the UIApplication of netlife. It holds the app's state, runs each transition's
// pipeline (built-in policy steps, the Swift delegate, the hook) under the watchdog, serialises the
// commands it is sent, and owns its listeners, background tasks and suspension.
//
// The rules live in pure values (LifecycleRules, TransitionPipeline, BackgroundTaskRegistry); this class
// performs what they decide. Everything runs on the loop thread.

import NetLifeEvent
import Glibc

/// How a command sent to an app ended.
public enum TransitionOutcome: Equatable, Sendable {
    /// The app was already in the asked-for state; nothing ran.
    case already(AppState)
    /// The command is impossible in the app's state; nothing changed.
    case refused(String)
    /// The transition ran: the app is now in this state; the stages and their durations.
    case completed(AppState, [StageReport])
    /// The watchdog killed the app during the transition.
    case killed(WatchdogTimeout)
    /// `suspend` of an app that holds background tasks: it suspends when they end.
    case suspendPending
    /// The app left the daemon (a reload removed or replaced it) before the command could run.
    case cancelled(String)
}

/// A hosted app.
public final class App {
    /// The app's name, from `[app NAME]`.
    public let name: String
    /// The app's configuration.
    public private(set) var configuration: AppConfiguration
    /// The current state.
    public private(set) var state: AppState = .notRunning
    /// The Swift delegate receiving lifecycle callbacks.
    public var delegate: AppDelegate?
    /// Called after every change of state (for `watch` and systemd's STATUS=).
    public var onStateChange: ((App) -> Void)?
    /// Whether `suspend` was asked while background tasks were open.
    public private(set) var suspendPending = false
    /// The app's background mode (`background-mode`; `netlifectl mode`).
    public var backgroundMode: BackgroundMode {
        didSet {
            guard backgroundMode != oldValue else { return }
            logger.info("background mode \(backgroundMode.rawValue)")
            evaluateSuspension()
        }
    }
    /// The event loop the app runs on.
    public let loop: EventLoop

    let logger: Logger
    let hooks: HookRunner
    private var listeners: [AppListener]
    private var commandQueue: [(LifecycleCommand, (TransitionOutcome) -> Void)] = []
    private var pipeline: TransitionPipeline?
    private var pipelineCompletion: ((TransitionOutcome) -> Void)?
    private var pipelineWatchdog: EventTimer?
    /// Increases on every launch and kill, so that late callbacks of an earlier run are ignored.
    private(set) var generation = 0
    /// Why the app left the daemon, once it has: every command is then answered `.cancelled` with it.
    public private(set) var retirement: String?
    var tasks: BackgroundTaskRegistry
    var expirationHandlers: [BackgroundTaskIdentifier: () -> Void] = [:]
    var expirationQueue: [BackgroundTaskRegistry.Task] = []
    var expirationRunning = false
    var expirationTimer: EventTimer?
    var graceTimer: EventTimer?
    private var autoSuspendTimer: EventTimer?
    var appTimers: [ObjectIdentifier: AppTimer] = [:]
    /// While a Swift expiration handler runs: when its budget ends.
    var expirationHandlerDeadline: MonotonicTime?
    private(set) var lastTermination: TerminationRecord?
    private var lastStages: [StageReport] = []

    /// Creates the app, not running. Services of the listeners are made from `services`.
    ///
    /// - Parameter hookEnvironment: the environment hook commands run with (NETLIFE_APP, NETLIFE_EVENT,
    ///   NETLIFE_TASK are added per run; the daemon puts NETLIFE_CONTROL here).
    public init(configuration: AppConfiguration, services: ServiceRegistry, loop: EventLoop, logger: Logger,
                hookEnvironment: [String: String] = [:]) throws(ServiceOptionError) {
        self.name = configuration.name
        self.configuration = configuration
        self.loop = loop
        self.logger = logger.labeled("app \(configuration.name)")
        self.hooks = HookRunner(appName: configuration.name, environment: hookEnvironment, loop: loop, logger: self.logger)
        self.backgroundMode = configuration.backgroundMode
        self.tasks = BackgroundTaskRegistry(budgets: configuration.budgets)
        var listeners: [AppListener] = []
        for listener in configuration.listeners {
            guard let descriptor = services[listener.service] else {
                throw ServiceOptionError(key: "service", "unknown service '\(listener.service)'")
            }
            let service = try descriptor.make(listener.serviceOptions)
            listeners.append(AppListener(configuration: listener, service: service, loop: loop, logger: self.logger))
        }
        self.listeners = listeners
        for listener in listeners { listener.service.didAttach(to: self) }
    }

    // MARK: Commands

    /// Runs `command` once the commands sent before it have finished; `completion` gets the outcome when
    /// the transition's pipeline has finished (or the app was killed).
    public func perform(_ command: LifecycleCommand, completion: @escaping (TransitionOutcome) -> Void) {
        loop.assertInLoop()
        if let retirement { return completion(.cancelled(retirement)) }
        commandQueue.append((command, completion))
        runQueuedCommands()
    }

    /// Whether a transition's pipeline is running now.
    public var isInTransition: Bool { pipeline != nil }

    private func runQueuedCommands() {
        while pipeline == nil, !commandQueue.isEmpty {
            let (command, completion) = commandQueue.removeFirst()
            start(command, completion: completion)
        }
    }

    private func start(_ command: LifecycleCommand, completion: @escaping (TransitionOutcome) -> Void) {
        let traits = configuration.traits(hasDelegate: delegate != nil)
        switch LifecycleRules.decide(command, in: state, traits: traits, suspendEligible: isSuspendEligible) {
        case .already(let state):
            completion(.already(state))
        case .refused(let reason):
            completion(.refused("app \(name) \(reason)"))
        case .suspendNow:
            suspend()
            completion(.completed(.suspended, []))
        case .suspendWhenEligible:
            suspendPending = true
            logger.info("suspend pending: \(tasks.tasks.count) background task(s) open")
            completion(.suspendPending)
        case .run(let plan):
            runPipeline(plan, completion: completion)
        }
    }

    // MARK: The pipeline

    private func runPipeline(_ plan: TransitionPlan, completion: @escaping (TransitionOutcome) -> Void) {
        autoSuspendTimer?.cancel()
        autoSuspendTimer = nil
        if case .launch = plan.command {
            generation += 1
            tasks.removeAll()
        }
        let budget = configuration.budgets.duration(of: plan.budget)
        let pipeline = TransitionPipeline(plan: plan, budget: budget, now: .now())
        self.pipeline = pipeline
        pipelineCompletion = completion
        let generation = self.generation
        pipelineWatchdog = loop.schedule(after: budget) { [weak self] in
            guard let self else { return }
            pipelineWatchdog = nil
            guard self.generation == generation, self.pipeline != nil else { return }
            if case .kill(let timeout) = self.pipeline?.budgetExpired(now: .now()) { watchdogKill(timeout) }
        }
        logger.debug("\(plan.command): \(plan.stages.map(\.event.rawValue).joined(separator: ", "))")
        advancePipeline()
    }

    /// Performs the pipeline's actions until it waits for a hook, finishes, or kills the app.
    private func advancePipeline() {
        while let action = pipeline?.next(now: .now()) {
            switch action {
            case .enterState(let newState, _):
                enter(newState)
            case .perform(.policy(let step), _):
                perform(step)
            case .perform(.delegate, let event):
                if let delegate { event.deliver(to: delegate, app: self) }
            case .perform(.hook, let event):
                if startPipelineHook(event) { return }
            case .finished(let finalState, let stages):
                finishPipeline(finalState, stages: stages)
                return
            case .kill(let timeout):
                watchdogKill(timeout)
                return
            }
        }
    }

    private func finishPipeline(_ finalState: AppState, stages: [StageReport]) {
        pipeline = nil
        pipelineWatchdog?.cancel()
        pipelineWatchdog = nil
        let completion = pipelineCompletion
        pipelineCompletion = nil
        lastStages = stages
        if finalState == .notRunning {
            tearDown(closing: .afterFlush)
            lastTermination = TerminationRecord(reason: configuration.exitsOnSuspend || !configuration.multitasking
                                                ? "exited-on-suspend" : "terminated")
            enter(.notRunning)
        }
        completion?(.completed(state, stages))
        evaluateSuspension()
        rearmTaskTimers()
        runQueuedCommands()
    }

    private func enter(_ newState: AppState) {
        guard newState != state else { return }
        let oldState = state
        state = newState
        switch (oldState, newState) {
        case (.active, .background), (.inactive, .background), (.notRunning, .background):
            // The background time counts from the moment the app entered the background.
            tasks.enterBackground(now: .now())
        case (.background, .inactive), (.suspended, .inactive), (_, .active):
            tasks.enterForeground()
            suspendPending = false
        default:
            break
        }
        logger.info("\(oldState) -> \(newState)")
        onStateChange?(self)
    }

    private func perform(_ step: PolicyStep) {
        switch step {
        case .openListeners:
            for listener in listeners { listener.open() }
        case .closeListeners:
            for listener in listeners { listener.close() }
        case .closeConnections:
            for listener in listeners { listener.applyConnectionPolicy() }
        case .resumeApp:
            for listener in listeners { listener.setConnectionsPaused(false) }
            fireDeferredTimers()
        }
    }

    private func startPipelineHook(_ event: LifecycleEvent) -> Bool {
        guard let command = configuration.hooks[event] else { return false }
        let generation = self.generation
        return hooks.run(command, event: event.rawValue) { [weak self] _ in
            guard let self, self.generation == generation, pipeline != nil else { return }
            advancePipeline()
        }
    }

    // MARK: Watchdog and teardown

    /// Kills the app for overrunning a budget: its hooks' process groups get SIGKILL, its sockets are
    /// closed, its tasks dropped; it becomes not-running without any callback. Other apps are untouched.
    func watchdogKill(_ timeout: WatchdogTimeout) {
        logger.critical("0x8badf00d: watchdog killed app \(name): \(timeout.stage) took \(format(timeout.elapsed)), over its budget of \(format(timeout.budget))")
        generation += 1
        pipeline = nil
        pipelineWatchdog?.cancel()
        pipelineWatchdog = nil
        let completion = pipelineCompletion
        pipelineCompletion = nil
        tearDown(closing: .now)
        lastTermination = TerminationRecord(reason: "watchdog", stage: timeout.stage, budget: timeout.budget,
                                            elapsed: timeout.elapsed)
        lastStages = []
        enter(.notRunning)
        completion?(.killed(timeout))
        runQueuedCommands()
    }

    private func tearDown(closing mode: Connection.CloseMode) {
        hooks.killAll()
        for listener in listeners {
            listener.close()
            listener.closeConnections(mode)
        }
        if !tasks.tasks.isEmpty {
            logger.warning("dropping \(tasks.tasks.count) background task(s)")
        }
        tasks.removeAll()
        cancelAppTimers()
        expirationHandlers.removeAll()
        expirationQueue.removeAll()
        expirationRunning = false
        expirationTimer?.close()
        graceTimer?.close()
        autoSuspendTimer?.cancel()
        expirationTimer = nil
        graceTimer = nil
        autoSuspendTimer = nil
        suspendPending = false
    }

    // MARK: Suspension

    /// Whether the app is suspend-eligible now (SPEC section 2).
    private var isSuspendEligible: Bool {
        LifecycleRules.isSuspendEligible(state: state, transitionRunning: pipeline != nil,
                                         openTasks: tasks.tasks.count, continuousMode: backgroundMode == .continuous)
    }

    /// Suspends the app if it is eligible and asked to be, or arms the auto-suspend timer.
    func evaluateSuspension() {
        guard isSuspendEligible else {
            autoSuspendTimer?.cancel()
            autoSuspendTimer = nil
            return
        }
        if suspendPending {
            suspend()
        } else if let delay = configuration.autoSuspend, autoSuspendTimer == nil {
            autoSuspendTimer = loop.schedule(after: delay) { [weak self] in
                guard let self else { return }
                autoSuspendTimer = nil
                if isSuspendEligible { suspend() }
            }
        }
    }

    private func suspend() {
        autoSuspendTimer?.cancel()
        autoSuspendTimer = nil
        suspendPending = false
        // No code of a suspended app runs: a hook left behind (one that daemonized) goes too.
        hooks.killAll()
        for listener in listeners { listener.setConnectionsPaused(true) }
        enter(.suspended)
    }

    // MARK: Reconfiguration

    /// Whether `newConfiguration` can replace the running one without restarting the app: the same name and
    /// the same listeners.
    public func canUpdateInPlace(to newConfiguration: AppConfiguration) -> Bool {
        newConfiguration.canReplaceInPlace(configuration)
    }

    /// Applies a reloaded configuration with the same listeners: budgets, hooks, launch mode and suspension
    /// settings take effect from now on (a transition already running keeps the budget it started with).
    /// The background mode follows the config only if the config changed it. Returns false, changing
    /// nothing, when the configuration cannot replace this one in place.
    @discardableResult
    public func update(configuration newConfiguration: AppConfiguration) -> Bool {
        guard retirement == nil, canUpdateInPlace(to: newConfiguration) else { return false }
        if newConfiguration.backgroundMode != configuration.backgroundMode {
            backgroundMode = newConfiguration.backgroundMode
        }
        configuration = newConfiguration
        tasks.taskTime = newConfiguration.budgets.taskTime
        tasks.expirationLead = newConfiguration.budgets.expirationLead
        tasks.expirationGrace = newConfiguration.budgets.expirationGrace
        rearmTaskTimers()
        evaluateSuspension()
        return true
    }

    // MARK: Leaving the daemon

    /// Drains the app before its owner lets it go: commands still queued are answered `.cancelled(reason)`
    /// (as is every later one), a running transition ends without its callbacks, hooks are killed and reaped,
    /// sockets closed at once, timers cancelled. Nothing of the app runs afterwards, so no callback can reach
    /// a released object.
    public func retire(reason: String) {
        loop.assertInLoop()
        guard retirement == nil else { return }
        retirement = reason
        generation += 1
        let queued = commandQueue
        commandQueue.removeAll()
        let completion = pipelineCompletion
        pipeline = nil
        pipelineCompletion = nil
        pipelineWatchdog?.cancel()
        pipelineWatchdog = nil
        tearDown(closing: .now)
        hooks.close()
        if state != .notRunning { enter(.notRunning) }
        completion?(.cancelled(reason))
        for (_, completion) in queued { completion(.cancelled(reason)) }
        delegate = nil
        onStateChange = nil
        logger.info("retired: \(reason)")
    }

    // MARK: Status

    /// A snapshot for `status`.
    public var status: AppStatus {
        let now = MonotonicTime.now()
        return AppStatus(name: name, state: state, suspendPending: suspendPending,
                         backgroundTimeRemaining: backgroundTimeRemaining,
                         backgroundMode: backgroundMode,
                         listeners: listeners.map(\.status),
                         tasks: tasks.tasks.map { TaskStatus(id: $0.id, name: $0.name, age: now - $0.begunAt) },
                         lastTermination: lastTermination,
                         lastStages: lastStages)
    }
}


func format(_ duration: Duration) -> String {
    let ms = duration.milliseconds
    return ms < 10_000 ? "\(Int(ms.rounded()))ms" : "\(Int(duration.seconds.rounded()))s"
}
