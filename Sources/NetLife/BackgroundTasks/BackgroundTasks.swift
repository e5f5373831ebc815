// The background tasks of one app at run time (docs/design.md): the shell around BackgroundTaskRegistry. It
// keeps the Swift expiration handlers, arms one deadline timer for whatever the registry says is due next,
// runs the handlers it hands out (a closure for tasks begun through the Swift API, the `on-expiration` hook
// for tasks begun over the control socket), and tells its app when the watchdog must kill it or when the
// app's suspend-eligibility may have changed. It tells the hook runner which tasks begin, from which process
// group, and end: a task a hook's process group began keeps what the hook leaves there alive.

import NetLifeEvent

/// The open background tasks of one app and the running of their expiration handlers.
final class BackgroundTasks {
    private var registry: BackgroundTaskRegistry
    /// The Swift API's expiration handlers, by task.
    private var handlers: [BackgroundTaskIdentifier: () -> Void] = [:]
    private var deadline: DeadlineTimer?
    private let hooks: HookRunner
    private let logger: Logger
    /// The loop whose time the registry is driven by.
    private unowned let loop: EventLoop
    /// The `on-expiration` hook, for tasks begun over the control socket.
    var expirationHook: HookCommand?
    /// The `on-expiration` hook running now, if one is.
    private var runningHook: HookRun?
    weak var owner: AppPartOwner?

    init(budgets: Budgets, expirationHook: HookCommand?, hooks: HookRunner, loop: EventLoop, logger: Logger) {
        registry = BackgroundTaskRegistry(budgets: budgets)
        self.expirationHook = expirationHook
        self.hooks = hooks
        self.logger = logger
        self.loop = loop
        deadline = DeadlineTimer(loop: loop) { [weak self] in self?.drive() }
    }

    // MARK: Tasks

    /// The open tasks, in begin order.
    var tasks: [BackgroundTaskRegistry.Task] { registry.tasks }

    /// Whether an expiration handler is running.
    var isRunningExpiration: Bool { registry.isRunningExpiration }

    /// The background time left at `now` (see `BackgroundTaskRegistry.remaining(now:)`).
    func remaining(now: MonotonicTime) -> Duration? { registry.remaining(now: now) }

    /// While a Swift expiration handler runs: when its budget ends.
    var expirationHandlerDeadline: MonotonicTime? { registry.expirationHandlerDeadline }

    /// Begins a task (see `App.beginBackgroundTask`); 0 when refused.
    ///
    /// - Parameter processGroup: for a task begun over the control socket, the process group of the client
    ///   that asked (SO_PEERCRED), if known.
    func begin(name: String?, origin: BackgroundTaskRegistry.Origin, allowed: Bool, processGroup: Int32? = nil,
               expirationHandler: (() -> Void)?) -> BackgroundTaskIdentifier {
        let id = registry.begin(name: name, origin: origin, now: loop.now, allowed: allowed)
        guard id != BackgroundTaskRegistry.invalid else { return id }
        if let expirationHandler { handlers[id] = expirationHandler }
        if let processGroup { hooks.taskBegun(id, inProcessGroup: processGroup) }
        logger.debug("background task \(id) begun\(name.map { " ('\($0)')" } ?? "")")
        owner?.report(.taskBegan(id: id, name: registry.tasks.last?.name))
        changed()
        return id
    }

    /// Ends a task; its expiration handler, if it has not run, never will.
    func end(_ id: BackgroundTaskIdentifier) -> BackgroundTaskRegistry.EndResult {
        let result = registry.end(id)
        if case .ended = result {
            handlers[id] = nil
            logger.debug("background task \(id) ended")
            hooks.taskEnded(id)
            owner?.report(.taskEnded(id: id))
            changed()
        }
        return result
    }

    // MARK: The app's state

    /// The app entered the background (or was woken): a fresh background time.
    func enterBackground() {
        abandonRunningHook()
        registry.enterBackground(now: loop.now)
        deadline?.arm(at: registry.nextDeadline)
    }

    /// The app is coming to the foreground: expiration belongs to the background, so handlers not yet run are
    /// dropped and every deadline disarmed; the tasks stay open.
    func enterForeground() {
        abandonRunningHook()
        registry.enterForeground()
        deadline?.cancel()
    }

    /// The app was suspended: no time counts and nothing is due.
    func suspend() {
        registry.suspend()
        deadline?.cancel()
    }

    /// The app stopped running: every task and handler is dropped.
    func removeAll() {
        if !registry.tasks.isEmpty { logger.warning("dropping \(registry.tasks.count) background task(s)") }
        for task in registry.tasks { hooks.taskEnded(task.id) }
        abandonRunningHook()
        registry.removeAll()
        handlers.removeAll()
        deadline?.cancel()
    }

    /// Takes a reloaded configuration's budgets and hook.
    func update(budgets: Budgets, expirationHook: HookCommand?) {
        registry.update(budgets: budgets)
        self.expirationHook = expirationHook
        deadline?.arm(at: registry.nextDeadline)
    }

    /// Frees the timer (the app leaves the daemon).
    func close() {
        removeAll()
        deadline?.close()
        deadline = nil
    }

    // MARK: Expiration

    private func changed() {
        deadline?.arm(at: registry.nextDeadline)
        owner?.send(.lifecycle(.tasksChanged(open: registry.tasks.count, expirationRunning: registry.isRunningExpiration)))
    }

    /// The watchdog must end the app: an expiration handler overran its budget, or a task outlived the
    /// background time and its grace.
    private func requireKill(_ timeout: WatchdogTimeout) {
        if timeout.stage == .backgroundTask {
            let open = registry.tasks.map { String($0.id) }.joined(separator: ", ")
            logger.error("background task(s) \(open) still open after the background time and its grace")
        }
        owner?.send(.lifecycle(.watchdog(timeout)))
    }

    private func abandonRunningHook() {
        if let runningHook { hooks.abandon(runningHook) }
        runningHook = nil
    }

    /// Performs what the registry says is due, until it says to wait.
    private func drive() {
        while let action = registry.next(now: loop.now) {
            switch action {
            case .kill(let timeout):
                deadline?.cancel()
                requireKill(timeout)
                return
            case .runExpirationHandler(let task):
                logger.info("background time nearly spent: task \(task.id)\(task.name.map { " ('\($0)')" } ?? "") expires")
                owner?.report(.taskExpiring(id: task.id))
                if runExpirationHandler(of: task) {
                    // An `on-expiration` hook runs; the registry waits for it (under its budget).
                    changed()
                    return
                }
            }
        }
        changed()
    }

    /// Runs a task's expiration handler. Returns true when it runs asynchronously (a hook); otherwise it has
    /// finished, or there was none.
    private func runExpirationHandler(of task: BackgroundTaskRegistry.Task) -> Bool {
        switch task.origin {
        case .api, .program:
            if let handler = handlers.removeValue(forKey: task.id) {
                handler()
                // A closure cannot be interrupted: its overrun is judged when it returns.
                if let deadline = registry.expirationHandlerDeadline, loop.now > deadline,
                   case .kill(let timeout) = registry.next(now: loop.now) {
                    requireKill(timeout)
                    return true
                }
            }
        case .control:
            if let hook = expirationHook {
                runningHook = hooks.run(hook, event: "expiration", task: task.id) { [weak self] _ in
                    guard let self else { return }
                    runningHook = nil
                    registry.expirationHandlerFinished()
                    drive()
                }
                if runningHook != nil { return true }
            } else {
                logger.warning("task \(task.id) is expiring and the app has no on-expiration hook")
            }
        }
        registry.expirationHandlerFinished()
        return false
    }
}
