// An app at run time: the UIApplication of netlife, as a thin shell around its pure lifecycle. AppLifecycle
// decides (which transition runs, when the app suspends, wakes, stops or restarts) and returns actions; this
// class performs them with the app's parts: BackgroundTasks (tasks and expiration), HookRunner (hook
// processes), AppTimers (timers that wait while suspended), AppSockets (listeners and their connections) and,
// for a process app, its program (App+Program.swift). Everything runs on the loop thread.

import NetLifeEvent

/// A hosted app.
public final class App {
    /// The app's name, from `[app NAME]`.
    public let name: String
    /// The app's configuration.
    public internal(set) var configuration: AppConfiguration
    /// The current state: the last state the app entered (the lifecycle may be a step ahead while its
    /// actions are performed).
    public private(set) var state: AppState = .notRunning
    /// The Swift delegate receiving lifecycle callbacks.
    public var delegate: AppDelegate? { didSet { settingsChanged() } }
    /// A process app's program (`exec`), set by its owner before the first launch.
    public var program: (any AppProgram)? { didSet { attachProgram() } }
    /// Told everything that happens to the app (for `watch`, systemd's STATUS= and mDNS).
    public var onEvent: ((App, AppEvent) -> Void)?
    /// The app's background mode (`background-mode`; `netlifectl mode`).
    public var backgroundMode: BackgroundMode {
        didSet {
            guard backgroundMode != oldValue else { return }
            logger.info("background mode \(backgroundMode.rawValue)")
            settingsChanged()
        }
    }
    /// The event loop the app runs on.
    public let loop: EventLoop

    let logger: Logger
    let hooks: HookRunner
    let backgroundTasks: BackgroundTasks
    let timers: AppTimers
    let sockets: AppSockets
    /// The app's lifecycle: its phase, its command queue, what it last did.
    private(set) var lifecycle: AppLifecycle
    /// The completions of the commands under way, by ticket.
    private var completions: [CommandTicket: (TransitionOutcome) -> Void] = [:]
    private var nextTicket: CommandTicket = 1
    /// Whether the shell is performing the lifecycle's actions now (an event sent meanwhile is applied at once,
    /// and what follows from it is performed by the same loop).
    private(set) var isPerforming = false
    /// Fires at the lifecycle's next deadline (a pipeline's budget, auto-suspend, a wake-up's, a restart's).
    private var deadlineTimer: DeadlineTimer?
    /// The hook run of the current wake-up, if one runs.
    var wakeHook: HookRun?
    /// Looks again for the program's own listeners (`adopt = yes`) while a launch waits for them.
    var adoptionTimer: EventTimer?
    /// The sockets the last look for adopted listeners found (by address, their inodes): a launch takes them
    /// once two looks in a row agree.
    var adoptionLastLook: [SocketAddress: Set<UInt64>]?
    /// Looks at the adopted listeners' sockets while they listen (`watchAdoptedListeners`).
    var adoptedWatchTimer: EventTimer?
    /// The termination of the app this one replaced, until this one has its own.
    var inheritedTermination: TerminationRecord?
    /// The state the app was in when its last `terminate` began: what a reload that restarts it brings it
    /// back to, whatever commands were queued when the reload was asked.
    public private(set) var stateWhenTerminateBegan: AppState?
    /// What the program says on its NOTIFY_SOCKET is logged within this limit (a program may send without end).
    var notifyLog = LogLimiter()
    /// What `on-background = wake` listeners need watched and counted; nil without such a listener.
    let connectionWake: ConnectionWake?
    /// The idle-background rule while the app is active (`idle-background`), and the timer of its next look.
    var idle: IdleRule?
    var idleTimer: EventTimer?
    /// How many transfers of the app run now (the daemon's transfers set it): a running transfer is use.
    public var runningTransfers: (() -> Int)?

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
        sockets = try AppSockets(configuration: configuration, services: services, loop: loop, logger: logger)
        connectionWake = ConnectionWake(sockets: sockets)
        lifecycle = AppLifecycle(name: configuration.name,
                                 settings: Self.settings(configuration, backgroundMode: configuration.backgroundMode,
                                                         hasDelegate: false, program: nil),
                                 restart: configuration.program?.restart ?? .no)
        backgroundTasks.owner = self
        deadlineTimer = DeadlineTimer(loop: loop) { [weak self] in self?.send(.clock) }
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
        let ticket = nextTicket
        nextTicket += 1
        completions[ticket] = completion
        send(.command(command, cause: cause, ticket: ticket))
    }

    /// Whether a transition's pipeline is running now.
    public var isInTransition: Bool { lifecycle.isInTransition }

    /// The hook of the transition in progress whose process group is `group` (`hook on-did-become-active`),
    /// or nil. A command for this app asked from there would be queued behind the transition, which waits for
    /// the hook, which waits for the command's reply: the daemon refuses it at once instead.
    public func transitionHook(inProcessGroup group: Int32) -> String? {
        isInTransition ? hooks.runningHook(inProcessGroup: group) : nil
    }
    /// Whether `suspend` was asked while the app was not yet suspend-eligible.
    public var suspendPending: Bool { lifecycle.suspendPending }
    /// How and when the app last stopped running.
    public var lastTermination: TerminationRecord? { lifecycle.lastTermination ?? inheritedTermination }
    /// Why the app left the daemon, once it has: every command is then answered `.cancelled` with it.
    public var retirement: String? { lifecycle.retirement }

    /// How long after a transition's reply its opened listeners start accepting: long enough for the client
    /// that was answered to run first on 2 cores (see `AppSockets.prepareReopen(on:)`), short next to a
    /// connection's first round trip.
    static let acceptAfterReply = Duration.milliseconds(1)

    /// Tells the lifecycle `event` and performs what it decides, until it waits for the next event. An
    /// event sent while actions are performed is applied at once; the loop below goes on with its actions.
    func send(_ event: AppLifecycle.Event) {
        lifecycle.handle(event, now: loop.now)
        guard !isPerforming else { return }
        isPerforming = true
        while let action = lifecycle.nextAction(now: loop.now) { perform(action) }
        isPerforming = false
        syncConnectionWake()
        syncIdleDetection()
        deadlineTimer?.arm(at: lifecycle.nextDeadline)
    }

    private func perform(_ action: AppLifecycle.Action) {
        switch action {
        case .transitionStarted(let plan):
            logger.debug("\(plan.command): \(plan.stages.map(\.event.rawValue).joined(separator: ", "))")
            if plan.command == .terminate { stateWhenTerminateBegan = state }
        case .enter(let from, let to):
            entered(to, from: from)
        case .perform(let step, let launchingInBackground):
            // Before the listeners are shut down: every socket the program holds at their ports now is shut
            // down with them.
            if step == .closeListeners {
                followAdoptedListeners()
                adoptedWatchTimer?.close()
                adoptedWatchTimer = nil
            }
            sockets.perform(step, launchingInBackground: launchingInBackground)
            if step == .resumeApp { resume() }
            // Listening again: the sockets the program bound or let go meanwhile, and who holds them.
            if step == .openListeners {
                followAdoptedListeners()
                watchAdoptedListeners()
            }
        case .callDelegate(let event):
            if let delegate { event.deliver(to: delegate, app: self) }
        case .runHook(let event):
            runHook(event)
        case .deliverToProgram(let event, let budget):
            deliverToProgram(event, budget: budget)
        case .startProgram:
            startProgramAfterEarlierRuns()
        case .adoptListeners:
            lookForAdoptedListeners()
        case .transitionEnded(let state):
            // After the reply: the opened listeners start accepting (the reply waited only for them to listen),
            // and the closed listeners' sockets are made for the reopen on `foreground`.
            sockets.startAccepting(after: Self.acceptAfterReply, on: loop)
            if state == .background { sockets.prepareReopen(on: loop) }
        case .complete(let ticket, let outcome):
            completions.removeValue(forKey: ticket)?(outcome)
        case .report(let event):
            if case .watchdogKilled(let timeout) = event {
                logger.critical("0x8badf00d: watchdog killed app \(name): \(timeout.stage) took \(format(timeout.elapsed)), over its budget of \(format(timeout.budget))")
                if timeout.stage == .adoptListeners {
                    logger.error("the program did not bind \(unadoptedListenersText) within the launch budget (adopt = yes)")
                }
            }
            if case .stopped(let record) = event {
                logger.notice("stopped: \(record.reason.kind)\(record.reason.cause.map { " (by \($0.rawValue))" } ?? "")")
            }
            report(event)
        case .removeTasks:
            backgroundTasks.removeAll()
        case .suspend:
            // No code of a suspended app runs: a hook left behind goes too.
            hooks.killAll()
            wakeHook = nil
            backgroundTasks.suspend()
            timers.suspend()
            sockets.suspend()
            program?.freeze()
        case .reclaim:
            _ = reclaim()
        case .resumeForWake:
            resume()
            sockets.wake()
        case .serveWakeListeners(let listener):
            serveWakeListeners(woken: listener)
        case .startWakeHandler(let reason):
            startWakeHandler(reason)
        case .endWake(let killHandlers):
            if killHandlers {
                if let wakeHook { hooks.abandon(wakeHook) }
                hooks.killAll()
            }
            wakeHook = nil
        case .tearDown(let mode):
            tearDown(closing: mode)
        case .log(let level, let message):
            logger.log(level, message)
        }
    }

    private func entered(_ newState: AppState, from oldState: AppState) {
        state = newState
        switch (oldState, newState) {
        case (_, .background):
            // A fresh background time on every entry into the background, and on every wake.
            backgroundTasks.enterBackground()
        case (.background, .inactive), (.suspended, .inactive), (_, .active):
            backgroundTasks.enterForeground()
        default:
            break
        }
        if newState != .background { wakeHook = nil }
        logger.info("\(oldState) -> \(newState)")
        report(.stateChanged(from: oldState, to: newState))
    }

    /// The one report path: what the app and its parts did, for `onEvent` (watchers, the journal).
    func report(_ event: AppEvent) {
        onEvent?(self, event)
    }

    /// Runs the stage's hook; the lifecycle waits for it (or goes on at once when there is none).
    private func runHook(_ event: LifecycleEvent) {
        guard let command = configuration.hooks[event] else { return send(.stepDone) }
        // The hook may connect to the app's own listeners: they accept before it runs.
        sockets.startAccepting(on: loop)
        // A kill abandons the run, so its exit never advances a transition that is gone.
        if hooks.run(command, event: event.rawValue, completion: { [weak self] _ in self?.send(.stepDone) }) == nil {
            send(.stepDone)
        }
    }

    private func resume() {
        program?.thaw()
        timers.resume()
    }

    /// Stops everything the app runs: hooks (killed and abandoned), its program, sockets, tasks, timers.
    private func tearDown(closing mode: Connection.CloseMode) {
        hooks.killAll()
        adoptionTimer?.close()
        adoptionTimer = nil
        adoptionLastLook = nil
        adoptedWatchTimer?.close()
        adoptedWatchTimer = nil
        // Also when it does not run: an earlier run may still be ending, or a launch waiting for it.
        if let program {
            if mode == .now { program.kill() } else { program.stop(grace: configuration.budgets.terminate) }
        }
        sockets.closeAll(mode)
        backgroundTasks.removeAll()
        timers.cancelAll()
        wakeHook = nil
    }

    // MARK: Leaving the daemon

    /// Drains the app before its owner lets it go: commands still queued are answered `.cancelled(reason)`
    /// (as is every later one), a running transition ends without its callbacks, hooks are killed and reaped,
    /// sockets closed at once, timers freed. Nothing of the app runs afterwards, so no callback can reach a
    /// released object.
    public func retire(reason: String) {
        loop.assertInLoop()
        guard retirement == nil else { return }
        send(.retire(reason))
        deadlineTimer?.close()
        deadlineTimer = nil
        idleTimer?.close()
        idleTimer = nil
        hooks.close()
        backgroundTasks.close()
        delegate = nil
        onEvent = nil
        logger.info("retired: \(reason)")
    }
}
