// An app at run time: the UIApplication of netlife. It holds the app's state and its command queue, and
// drives each transition's pipeline (built-in policy steps, the Swift delegate, the hook) under the
// watchdog. Its parts do the rest: BackgroundTasks (tasks and expiration), HookRunner (hook processes),
// AppTimers (timers that wait while suspended), AppSockets (listeners and their connections).
//
// The rules live in pure values (LifecycleRules, TransitionPipeline, BackgroundTaskRegistry); this class
// performs what they decide. Everything runs on the loop thread.

import NetLifeEvent

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
    /// `suspend` of an app that is not suspend-eligible yet: it suspends once it is; the reason says what
    /// keeps it in background.
    case suspendPending(reason: String)
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
    /// A process app's program (`exec`), set by its owner before the first launch.
    public var program: (any AppProgram)? {
        didSet {
            program?.onExit = { [weak self] status in self?.programFailed(status, reason: nil) }
            program?.beginTask = { [weak self] name in self?.beginProgramTask(name: name) ?? 0 }
            program?.endTask = { [weak self] id in _ = self?.endBackgroundTask(id) }
        }
    }
    /// Whether a process app's program (or its cgroup) is still there: the daemon waits for it at exit.
    public var hasProgramLeft: Bool { program.map { !$0.isGone } ?? false }
    /// While a process app's program runs to its restart: the relaunch timer.
    private var restartTimer: EventTimer?
    /// The restart rules of a process app and what they remember.
    private var restartPolicy: RestartPolicy
    /// Told everything that happens to the app (for `watch`, systemd's STATUS= and mDNS).
    public var onEvent: ((App, AppEvent) -> Void)?
    /// Whether `suspend` was asked while the app was not yet suspend-eligible.
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
    /// How and when the app last stopped running.
    public private(set) var lastTermination: TerminationRecord?
    /// Why the app left the daemon, once it has: every command is then answered `.cancelled` with it.
    public private(set) var retirement: String?

    let logger: Logger
    let hooks: HookRunner
    let backgroundTasks: BackgroundTasks
    let timers: AppTimers
    private let sockets: AppSockets

    private struct QueuedCommand {
        var command: LifecycleCommand
        var cause: TerminationCause
        var completion: (TransitionOutcome) -> Void
    }
    private var commandQueue: [QueuedCommand] = []
    private var pipeline: TransitionPipeline?
    private var pipelineCause: TerminationCause = .command
    private var pipelineCompletion: ((TransitionOutcome) -> Void)?
    private var pipelineDeadline: DeadlineTimer?
    private var autoSuspendTimer: EventTimer?
    private var lastStages: [StageReport] = []
    /// While a wake-up's handler runs (VoIP data, keep-alive): its deadline (`keepalive-budget`).
    private var wakeDeadline: EventTimer?
    /// The hook run of the current wake-up, if one runs.
    private var wakeHook: HookRun?

    /// Creates the app, not running. Services of the listeners are made from `services`.
    ///
    /// - Parameter hookEnvironment: the environment hook commands run with (NETLIFE_APP, NETLIFE_EVENT,
    ///   NETLIFE_TASK are added per run; the daemon puts NETLIFE_CONTROL here).
    public init(configuration: AppConfiguration, services: ServiceRegistry, loop: EventLoop, logger: Logger,
                hookEnvironment: [String: String] = [:]) throws(ServiceOptionError) {
        self.name = configuration.name
        self.configuration = configuration
        self.loop = loop
        let logger = logger.labeled("app \(configuration.name)").adding(field: "NETLIFE_APP", configuration.name)
        self.logger = logger
        hooks = HookRunner(appName: configuration.name, environment: hookEnvironment, loop: loop, logger: logger)
        backgroundTasks = BackgroundTasks(budgets: configuration.budgets, expirationHook: configuration.expirationHook,
                                          hooks: hooks, loop: loop, logger: logger)
        timers = AppTimers(loop: loop)
        backgroundMode = configuration.backgroundMode
        var listeners: [AppListener] = []
        var handed: [HandedListener] = []
        for listener in configuration.listeners where configuration.program != nil {
            handed.append(HandedListener(configuration: listener, logger: logger))
        }
        for listener in configuration.listeners where configuration.program == nil {
            guard let descriptor = services[listener.service] else {
                throw ServiceOptionError(key: "service", "unknown service '\(listener.service)'")
            }
            let service = try descriptor.make(listener.serviceOptions)
            listeners.append(AppListener(configuration: listener, service: service, loop: loop, logger: logger))
        }
        var dataSockets: [DataSocket] = []
        for socket in configuration.sockets {
            guard let descriptor = services.dataProtocol(socket.protocolName) else {
                throw ServiceOptionError(key: "protocol", "unknown protocol '\(socket.protocolName)'")
            }
            let handler = try descriptor.make(socket)
            dataSockets.append(DataSocket(configuration: socket, handler: handler, loop: loop, logger: logger))
        }
        sockets = AppSockets(listeners: listeners, handedListeners: handed, dataSockets: dataSockets)
        restartPolicy = RestartPolicy(mode: configuration.program?.restart ?? .no)
        backgroundTasks.owner = self
        sockets.onEvent = { [weak self] event in self?.emit(event) }
        pipelineDeadline = DeadlineTimer(loop: loop) { [weak self] in self?.pipelineBudgetExpired() }
        sockets.attach(to: self)
    }

    // MARK: Commands

    /// Runs `command` once the commands sent before it have finished; `completion` gets the outcome when
    /// the transition's pipeline has finished (or the app was killed).
    ///
    /// - Parameter cause: for `terminate`, who asked (recorded in `lastTermination`).
    public func perform(_ command: LifecycleCommand, cause: TerminationCause = .command,
                        completion: @escaping (TransitionOutcome) -> Void) {
        loop.assertInLoop()
        if let retirement { return completion(.cancelled(retirement)) }
        commandQueue.append(QueuedCommand(command: command, cause: cause, completion: completion))
        runQueuedCommands()
    }

    /// Whether a transition's pipeline is running now.
    public var isInTransition: Bool { pipeline != nil }

    private func runQueuedCommands() {
        while pipeline == nil, !commandQueue.isEmpty {
            start(commandQueue.removeFirst())
        }
    }

    private func start(_ queued: QueuedCommand) {
        // A terminate asked while a process app waits for its restart cancels the restart.
        if case .terminate = queued.command {
            restartTimer?.cancel()
            restartTimer = nil
        }
        let traits = configuration.traits(hasDelegate: delegate != nil)
        switch LifecycleRules.decide(queued.command, in: state, traits: traits, suspendEligible: isSuspendEligible) {
        case .already(let state):
            queued.completion(.already(state))
        case .refused(let reason):
            queued.completion(.refused("app \(name) \(reason)"))
        case .suspendNow:
            suspend()
            queued.completion(.completed(.suspended, []))
        case .suspendWhenEligible:
            suspendPending = true
            let reason = suspendBlocker ?? "it is not suspend-eligible yet"
            logger.info("suspend pending: \(reason)")
            queued.completion(.suspendPending(reason: reason))
        case .run(let plan):
            runPipeline(plan, cause: queued.cause, completion: queued.completion)
        }
    }

    // MARK: The pipeline

    /// How long after a transition's reply its opened listeners start accepting: long enough for the client
    /// that was answered to run first on 2 cores (see `AppSockets.prepareReopen(on:)`), short next to a
    /// connection's first round trip.
    static let acceptAfterReply = Duration.milliseconds(1)

    private func runPipeline(_ plan: TransitionPlan, cause: TerminationCause, completion: @escaping (TransitionOutcome) -> Void) {
        autoSuspendTimer?.cancel()
        autoSuspendTimer = nil
        if case .launch = plan.command { backgroundTasks.removeAll() }
        let pipeline = TransitionPipeline(plan: plan, budget: configuration.budgets.duration(of: plan.budget), now: .now())
        self.pipeline = pipeline
        pipelineCause = cause
        pipelineCompletion = completion
        pipelineDeadline?.arm(at: pipeline.deadline)
        logger.debug("\(plan.command): \(plan.stages.map(\.event.rawValue).joined(separator: ", "))")
        advancePipeline()
    }

    private func pipelineBudgetExpired() {
        if case .kill(let timeout) = pipeline?.budgetExpired(now: .now()) { watchdogKill(timeout) }
    }

    /// Performs the pipeline's actions until it waits for a hook, finishes, or kills the app.
    private func advancePipeline() {
        while let action = pipeline?.next(now: .now()) {
            switch action {
            case .enterState(let newState, _):
                enter(newState)
            case .perform(.policy(let step), _):
                if step == .startProgram, waitForEarlierRuns() { return }
                perform(step)
            case .perform(.program, let event):
                sockets.startAccepting(on: loop)
                if deliverToProgram(event) { return }
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

    /// Starts the stage's hook; returns whether the pipeline must wait for it.
    private func startPipelineHook(_ event: LifecycleEvent) -> Bool {
        guard let command = configuration.hooks[event] else { return false }
        // The hook may connect to the app's own listeners: they accept before it runs.
        sockets.startAccepting(on: loop)
        // A kill abandons the run, so its exit never advances a pipeline that is gone.
        return hooks.run(command, event: event.rawValue) { [weak self] _ in self?.advancePipeline() } != nil
    }

    private func finishPipeline(_ finalState: AppState, stages: [StageReport]) {
        guard let plan = pipeline?.plan else { return }
        let stateBefore = plan.stages.first?.state ?? state
        pipeline = nil
        pipelineDeadline?.cancel()
        let completion = pipelineCompletion
        pipelineCompletion = nil
        lastStages = stages
        if finalState == .notRunning {
            tearDown(closing: .afterFlush)
            let record = TerminationRecord(reason: terminationReason(of: plan, stateBefore: stateBefore))
            lastTermination = record
            // The seeds' path for an app that exits on suspend: ... Background -> Suspended -> Not Running.
            if case .exitedOnSuspend = record.reason { enter(.suspended) }
            enter(.notRunning)
            logger.notice("stopped: \(record.reason.name)\(record.reason.cause.map { " (by \($0.rawValue))" } ?? "")")
            emit(.stopped(record))
        }
        emit(.transitionFinished(command: plan.command, state: state, stages: stages))
        completion?(.completed(state, stages))
        // After the reply: the opened listeners start accepting (the reply waited only for them to listen),
        // and the closed listeners' sockets are made for the reopen on `foreground`.
        sockets.startAccepting(after: Self.acceptAfterReply, on: loop)
        if state == .background { sockets.prepareReopen(on: loop) }
        evaluateSuspension()
        runQueuedCommands()
    }

    /// Why a transition that ended in not-running ended it.
    private func terminationReason(of plan: TransitionPlan, stateBefore: AppState) -> TerminationReason {
        switch plan.command {
        case .terminate:
            return plan.stages.isEmpty ? .terminatedWhileSuspended(pipelineCause) : .terminated(pipelineCause)
        case .background, .launch(background: true):
            return .exitedOnSuspend
        case .launch, .foreground, .suspend, .interruptBegin, .interruptEnd:
            return .terminated(pipelineCause)
        }
    }

    private func enter(_ newState: AppState) {
        guard newState != state else { return }
        // iOS: will-enter-foreground runs while the app is still in the background; it is inactive for a
        // moment, then active for did-become-active.
        if state == .background, newState == .active { enter(.inactive) }
        let oldState = state
        state = newState
        switch (oldState, newState) {
        case (_, .background):
            // A fresh background time on every entry into the background, and on every wake.
            backgroundTasks.enterBackground()
        case (.background, .inactive), (.suspended, .inactive), (_, .active):
            backgroundTasks.enterForeground()
            suspendPending = false
        default:
            break
        }
        if newState != .background { endWake() }
        logger.info("\(oldState) -> \(newState)")
        emit(.stateChanged(from: oldState, to: newState))
    }

    func emit(_ event: AppEvent) {
        onEvent?(self, event)
    }

    private func perform(_ step: PolicyStep) {
        sockets.perform(step, launchingInBackground: pipeline?.currentStage == .didFinishLaunching && state == .background)
        switch step {
        case .resumeApp:
            program?.thaw()
            timers.isSuspended = false
            timers.fireDeferred()
        case .startProgram:
            startProgram()
        default:
            break
        }
    }

    // MARK: Process apps (SPEC section 12)

    /// Binds the listeners and starts the program with them; a program that cannot start makes the launch
    /// fail as a watchdog kill would (the app ends not running, `lastTermination` says why).
    private func startProgram() {
        guard let program else { return }
        restartTimer?.cancel()
        restartTimer = nil
        let handed = sockets.handedListeners
        // The program gets all its listeners or does not start: without one, a socket-activated server
        // would fall back to its own configuration (lighttpd binds its server.port).
        for listener in handed where !listener.open() {
            programFailed(.exited(1), reason: "cannot start: listener \(listener.configuration.name): \(listener.openError ?? "not open")")
            return
        }
        do {
            try program.start(listeners: handed.filter { $0.fd >= 0 }.map { ($0.configuration.name, $0.fd) })
            restartPolicy.launched(now: .now())
        } catch {
            logger.error("cannot start the program \(configuration.program?.arguments.first ?? ""): \(error)")
            programFailed(.exited(127), reason: "cannot start: \(error)")
            return
        }
        // In the background from the start: listening stops as soon as the program holds them.
        if state == .background { for listener in handed { listener.close() } }
    }

    /// A launch while an earlier run of the program still ends (a terminate's grace, a cgroup still
    /// emptying) waits for it, under the launch budget, then starts the program and goes on; returns whether
    /// the pipeline waits.
    private func waitForEarlierRuns() -> Bool {
        guard let program else { return false }
        return program.afterEarlierRunsEnd { [weak self] in
            guard let self, pipeline != nil else { return }
            perform(.startProgram)
            advancePipeline()
        }
    }

    /// Tells the program the stage; whether the pipeline waits for its answer.
    private func deliverToProgram(_ event: LifecycleEvent) -> Bool {
        guard let program, program.isRunning, let pipeline else { return false }
        let hint: ListenerHint? = switch event {
        case .didEnterBackground: .stopPolling
        case .willEnterForeground: .resumePolling
        default: nil
        }
        let budget = max(.zero, pipeline.deadline - .now())
        return program.deliver(event, budget: budget, listeners: hint) { [weak self] in self?.advancePipeline() }
    }

    /// A task the program began over the protocol: its expiration is told to the program, which must end it.
    private func beginProgramTask(name: String?) -> BackgroundTaskIdentifier {
        var id: BackgroundTaskIdentifier = 0
        id = beginBackgroundTask(name: name) { [weak self] in
            guard let self else { return }
            program?.taskExpiring(id, budget: configuration.budgets.expirationGrace)
        }
        return id
    }

    /// The program ended on its own (or could not start): the app stops, and the restart rules decide.
    private func programFailed(_ status: ChildExitStatus, reason: String?) {
        guard state != .notRunning, retirement == nil else { return }
        logger.warning("the program ended: \(reason ?? status.description)")
        pipeline = nil
        pipelineDeadline?.cancel()
        let completion = pipelineCompletion
        pipelineCompletion = nil
        tearDown(closing: .now)
        var record = TerminationRecord(reason: .programExited(reason ?? status.description))
        let decision = restartPolicy.exited(status, expected: false, now: .now())
        if case .giveUp(let why) = decision { record = TerminationRecord(reason: .programExited("\(reason ?? status.description); \(why)")) }
        lastTermination = record
        lastStages = []
        enter(.notRunning)
        emit(.stopped(record))
        completion?(.completed(.notRunning, []))
        if case .relaunch(let delay) = decision {
            logger.notice("restarting the program in \(format(delay)) (restart = \(restartPolicy.mode.rawValue))")
            restartTimer = loop.schedule(after: delay) { [weak self] in
                guard let self else { return }
                restartTimer = nil
                perform(.launch(background: configuration.launch == .background)) { _ in }
            }
        }
        runQueuedCommands()
    }

    // MARK: Watchdog and teardown

    /// Kills the app for overrunning a budget: its hooks' process groups get SIGKILL, its sockets are
    /// closed, its tasks dropped; it becomes not-running without any callback. Other apps are untouched.
    func watchdogKill(_ timeout: WatchdogTimeout) {
        logger.critical("0x8badf00d: watchdog killed app \(name): \(timeout.stage) took \(format(timeout.elapsed)), over its budget of \(format(timeout.budget))")
        pipeline = nil
        pipelineDeadline?.cancel()
        let completion = pipelineCompletion
        pipelineCompletion = nil
        emit(.watchdogKilled(timeout))
        tearDown(closing: .now)
        let record = TerminationRecord(reason: .watchdog(timeout))
        lastTermination = record
        lastStages = []
        enter(.notRunning)
        emit(.stopped(record))
        completion?(.killed(timeout))
        runQueuedCommands()
    }

    /// Stops everything the app runs: hooks (killed and abandoned), sockets, tasks, timers.
    private func tearDown(closing mode: Connection.CloseMode) {
        hooks.killAll()
        // Also when it does not run: an earlier run may still be ending, or a launch waiting for it.
        if let program {
            if mode == .now { program.kill() } else { program.stop(grace: configuration.budgets.terminate) }
        }
        sockets.closeAll(mode)
        backgroundTasks.removeAll()
        timers.cancelAll()
        timers.isSuspended = false
        endWake()
        autoSuspendTimer?.cancel()
        autoSuspendTimer = nil
        suspendPending = false
    }

    // MARK: Suspension

    /// Why the app is not suspend-eligible, or nil when it is (SPEC section 2).
    private var suspendBlocker: String? {
        LifecycleRules.suspendBlocker(state: state, transitionRunning: pipeline != nil,
                                      openTasks: backgroundTasks.tasks.count,
                                      expirationRunning: backgroundTasks.isRunningExpiration,
                                      continuousMode: backgroundMode == .continuous,
                                      wakeRunning: wakeDeadline != nil)
    }

    /// Whether the app is suspend-eligible now.
    private var isSuspendEligible: Bool { suspendBlocker == nil }

    /// Suspends the app if it is eligible and asked to be, or arms the auto-suspend timer.
    ///
    /// - Parameter lastTaskEnded: the app's last background task has just ended (or expired): iOS suspends
    ///   it at once; `auto-suspend` is the grace after did-enter-background only.
    func evaluateSuspension(lastTaskEnded: Bool = false) {
        guard isSuspendEligible else {
            autoSuspendTimer?.cancel()
            autoSuspendTimer = nil
            return
        }
        // A program that does not speak the protocol cannot be told to stop polling its shut-down
        // listeners (EPOLLHUP without pause): it is frozen as soon as it may be.
        let silentProgram = program.map { $0.isRunning && !$0.speaksProtocol } ?? false
        if suspendPending || silentProgram || lastTaskEnded {
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
        // No code of a suspended app runs: a hook left behind goes too.
        hooks.killAll()
        endWake()
        backgroundTasks.suspend()
        timers.isSuspended = true
        sockets.suspend()
        program?.freeze()
        enter(.suspended)
        if configuration.reclaimOnSuspend { _ = reclaim() }
    }

    // MARK: Wake-ups, reclaim and memory pressure (SPEC section 6)

    /// Runs the suspended app in the background for a moment, as iOS wakes a VoIP app: state background
    /// (no did-become-active), timers and reads resume, `on-voip-data` runs for VoIP data; after the
    /// handler (at the latest after `keepalive-budget`) the app is suspended again, not killed.
    func wake(for reason: WakeReason) {
        guard state == .suspended, retirement == nil, pipeline == nil else { return }
        logger.info("woken: \(reason)")
        program?.thaw()
        timers.isSuspended = false
        sockets.wake()
        enter(.background)
        emit(.woken(reason))
        // Back to suspended once eligible: the wake-up is not a `background` command.
        suspendPending = true
        wakeDeadline = loop.schedule(after: configuration.budgets.keepalive) { [weak self] in
            self?.wakeBudgetExpired()
        }
        if case .voipData = reason, let command = configuration.voipDataHook {
            wakeHook = hooks.run(command, event: "voip-data") { [weak self] _ in
                self?.wakeHook = nil
                self?.finishWake()
            }
        }
        timers.fireDeferred()
        if wakeHook == nil {
            // The protocol handler runs right after this (same loop turn); then the wake-up is over.
            loop.schedule(after: .zero) { [weak self] in self?.finishWake() }
        }
    }

    private func finishWake() {
        guard wakeDeadline != nil, wakeHook == nil else { return }
        endWake()
        evaluateSuspension()
    }

    private func wakeBudgetExpired() {
        guard wakeDeadline != nil else { return }
        logger.warning("the wake-up's handler took longer than keepalive-budget (\(format(configuration.budgets.keepalive))); suspending again")
        if let wakeHook { hooks.abandon(wakeHook) }
        hooks.killAll()
        endWake()
        evaluateSuspension()
    }

    private func endWake() {
        wakeDeadline?.close()
        wakeDeadline = nil
        wakeHook = nil
    }

    /// Socket resource reclaim (`netlifectl reclaim`, `lock`, `reclaim-on-suspend`): every non-VoIP socket
    /// of the suspended app becomes defunct (the peer sees RST; the app's first use of it fails).
    /// Refused, changing nothing, unless the app is suspended.
    public func reclaim() -> Result<(sockets: [String], connections: Int), ReclaimRefusal> {
        guard state == .suspended else {
            return .failure(ReclaimRefusal(message: "app \(name) is \(state), not suspended: only a suspended app's sockets are reclaimed"))
        }
        var reclaimed = sockets.reclaim()
        if let program { reclaimed.connections += program.reclaimSockets() }
        logger.info("reclaimed: \(reclaimed.sockets.count) data socket(s) defunct, \(reclaimed.connections) accepted connection(s) reset")
        emit(.reclaimed(sockets: reclaimed.sockets, connections: reclaimed.connections))
        return .success(reclaimed)
    }

    /// The memory the app holds: its sockets' buffers and kernel queues, and a process app's program's
    /// memory. Memory pressure ends the largest suspended app first.
    public var heldBytes: Int { sockets.heldBytes + (program?.status.memoryBytes ?? 0) }

    /// Whether the app has a VoIP socket: memory pressure ends it after the other apps, and relaunches it
    /// into the background.
    public var hasVoIPSocket: Bool { sockets.dataSockets.contains { $0.configuration.voip } }

    /// Whether memory pressure can end the app now: it is suspended, and no command is under way.
    public var canTerminateForMemoryPressure: Bool { state == .suspended && retirement == nil && pipeline == nil }

    /// Memory pressure (jetsam): a suspended app is terminated without any callback. Returns false,
    /// changing nothing, when the app is not suspended.
    @discardableResult
    public func terminateForMemoryPressure() -> Bool {
        guard canTerminateForMemoryPressure else { return false }
        logger.notice("terminated for memory pressure (held \(heldBytes) bytes)")
        tearDown(closing: .now)
        let record = TerminationRecord(reason: .memoryPressure)
        lastTermination = record
        lastStages = []
        enter(.notRunning)
        emit(.stopped(record))
        return true
    }

    /// Opens a data socket from Swift, as a `[socket]` section does (the seeds' CFStream with the VoIP
    /// service type): it connects now if the app runs, and follows its lifecycle from then on.
    @discardableResult
    public func openDataSocket(_ configuration: DataSocketConfiguration, handler: any DataSocketHandler) -> DataSocket {
        loop.assertInLoop()
        let socket = DataSocket(configuration: configuration, handler: handler, loop: loop, logger: logger)
        sockets.add(socket, app: self)
        return socket
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
        backgroundTasks.update(budgets: newConfiguration.budgets, expirationHook: newConfiguration.expirationHook)
        evaluateSuspension()
        return true
    }

    /// Takes the last termination of the app this one replaces (a reload restarted it).
    public func inheritLastTermination(from old: App) {
        if lastTermination == nil { lastTermination = old.lastTermination }
    }

    // MARK: Leaving the daemon

    /// Drains the app before its owner lets it go: commands still queued are answered `.cancelled(reason)`
    /// (as is every later one), a running transition ends without its callbacks, hooks are killed and reaped,
    /// sockets closed at once, timers freed. Nothing of the app runs afterwards, so no callback can reach a
    /// released object.
    public func retire(reason: String) {
        loop.assertInLoop()
        guard retirement == nil else { return }
        retirement = reason
        let queued = commandQueue
        commandQueue.removeAll()
        let completion = pipelineCompletion
        pipeline = nil
        pipelineCompletion = nil
        pipelineDeadline?.close()
        pipelineDeadline = nil
        tearDown(closing: .now)
        hooks.close()
        backgroundTasks.close()
        if state != .notRunning { enter(.notRunning) }
        completion?(.cancelled(reason))
        for entry in queued { entry.completion(.cancelled(reason)) }
        delegate = nil
        onEvent = nil
        logger.info("retired: \(reason)")
    }

    // MARK: Status

    /// A snapshot for `status`.
    public var status: AppStatus {
        let now = MonotonicTime.now()
        return AppStatus(name: name, state: state, suspendPending: suspendPending,
                         backgroundTimeRemaining: backgroundTimeRemaining,
                         backgroundMode: backgroundMode,
                         listeners: sockets.listenerStatus,
                         sockets: sockets.dataSocketStatus,
                         tasks: backgroundTasks.tasks.map { TaskStatus(id: $0.id, name: $0.name, age: now - $0.begunAt) },
                         lastTermination: lastTermination,
                         lastStages: lastStages,
                         program: program?.status)
    }
}

/// Why `reclaim` changed nothing.
public struct ReclaimRefusal: Error, Equatable, Sendable {
    public var message: String
}

extension App: DataSocketOwner {
    var isSuspended: Bool { state == .suspended }

    func endSocketTask(_ id: BackgroundTaskIdentifier) {
        _ = endBackgroundTask(id)
    }

    func dataSocketReport(_ event: AppEvent) {
        emit(event)
    }
}

extension App: BackgroundTasksOwner {
    func backgroundTasksRequireKill(_ timeout: WatchdogTimeout) {
        if timeout.stage == .backgroundTask {
            let open = backgroundTasks.tasks.map { String($0.id) }.joined(separator: ", ")
            logger.error("background task(s) \(open) still open after the background time and its grace")
        }
        watchdogKill(timeout)
    }

    func backgroundTasksDidChange() {
        evaluateSuspension(lastTaskEnded: backgroundTasks.tasks.isEmpty)
    }

    func backgroundTasksReport(_ event: AppEvent) {
        emit(event)
    }
}

func format(_ duration: Duration) -> String {
    let ms = duration.milliseconds
    return ms < 10_000 ? "\(Int(ms.rounded()))ms" : "\(Int(duration.seconds.rounded()))s"
}
