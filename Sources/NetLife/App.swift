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
    /// The environment hooks inherit, before NETLIFE_* are added.
    private let hookEnvironment: [String: String]
    private var listeners: [AppListener]
    private var commandQueue: [(LifecycleCommand, (TransitionOutcome) -> Void)] = []
    private var pipeline: TransitionPipeline?
    private var pipelineCompletion: ((TransitionOutcome) -> Void)?
    private var pipelineWatchdog: EventTimer?
    /// Increases on every launch and kill, so that late callbacks of an earlier run are ignored.
    private(set) var generation = 0
    private var hooks: [ObjectIdentifier: ChildProcess] = [:]
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
        self.hookEnvironment = hookEnvironment
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
        pipelineWatchdog = loop.schedule(after: budget) { [unowned self] in
            pipelineWatchdog = nil
            guard self.generation == generation, self.pipeline != nil else { return }
            let action = self.pipeline!.budgetExpired(now: .now())
            if case .kill(let timeout) = action { watchdogKill(timeout) }
        }
        logger.debug("\(plan.command): \(plan.stages.map(\.event.rawValue).joined(separator: ", "))")
        advancePipeline()
    }

    /// Performs the pipeline's actions until it waits for a hook, finishes, or kills the app.
    private func advancePipeline() {
        while pipeline != nil {
            switch pipeline!.next(now: .now()) {
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
        return runHook(command, event: event.rawValue, task: nil) { [unowned self] _ in
            guard self.generation == generation, pipeline != nil else { return }
            advancePipeline()
        }
    }

    // MARK: Hooks

    /// Spawns a hook without a shell in its own process group; `completion` runs when it exits. Returns
    /// false (and logs) when it cannot be spawned; then `completion` is never called.
    func runHook(_ command: HookCommand, event: String, task: BackgroundTaskIdentifier?,
                 completion: @escaping (ChildExitStatus) -> Void) -> Bool {
        var environment = hookEnvironment
        environment["NETLIFE_APP"] = name
        environment["NETLIFE_EVENT"] = event
        if let task { environment["NETLIFE_TASK"] = String(task) }
        let label = "hook on-\(event)"
        let logger = self.logger
        do {
            var process: ChildProcess?
            process = try ChildProcess(loop: loop, arguments: command.arguments, environment: environment,
                                       onOutputLine: { logger.info("\(label): \($0)") },
                                       onExit: { [unowned self] status in
                                           if let process { hooks[ObjectIdentifier(process)] = nil }
                                           if status.isSuccess {
                                               logger.debug("\(label) finished")
                                           } else {
                                               logger.warning("\(label) failed: \(status)")
                                           }
                                           completion(status)
                                       })
            hooks[ObjectIdentifier(process!)] = process
            return true
        } catch {
            logger.error("\(label) could not start: \(error)")
            return false
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
        for hook in Array(hooks.values) {
            hook.signalGroup(SIGKILL)
        }
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
            autoSuspendTimer = loop.schedule(after: delay) { [unowned self] in
                autoSuspendTimer = nil
                if isSuspendEligible { suspend() }
            }
        }
    }

    private func suspend() {
        autoSuspendTimer?.cancel()
        autoSuspendTimer = nil
        suspendPending = false
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
    /// The background mode follows the config only if the config changed it.
    public func update(configuration newConfiguration: AppConfiguration) {
        precondition(canUpdateInPlace(to: newConfiguration), "update(configuration:) with other listeners")
        if newConfiguration.backgroundMode != configuration.backgroundMode {
            backgroundMode = newConfiguration.backgroundMode
        }
        configuration = newConfiguration
        tasks.taskTime = newConfiguration.budgets.taskTime
        tasks.expirationLead = newConfiguration.budgets.expirationLead
        tasks.expirationGrace = newConfiguration.budgets.expirationGrace
        rearmTaskTimers()
        evaluateSuspension()
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
