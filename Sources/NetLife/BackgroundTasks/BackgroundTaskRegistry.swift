// Background tasks (beginBackgroundTaskWithExpirationHandler / endBackgroundTask / backgroundTimeRemaining)
// and their expiration, as a pure value driven by explicit instants, so that a fake clock can test it. Like
// TransitionPipeline, it decides and the caller performs: `next(now:)` says which expiration handler to run
// or that the watchdog must kill the app, and `nextDeadline` says when to ask again. `BackgroundTasks` is
// the shell that arms one timer for that deadline and runs the handlers.
//
// Expiration belongs to the background: each entry into the background starts a fresh background time, and
// coming to the foreground drops the handlers not yet run and every deadline (the tasks stay open, as in
// iOS). While suspended no time is offered (no code can run to use it).

import NetLifeEvent


/// The open background tasks of one app, its background time, and the expiration of its tasks.
public struct BackgroundTaskRegistry: Sendable {
    /// The identifier that means "no task" (UIBackgroundTaskInvalid).
    public static let invalid: BackgroundTaskIdentifier = 0
    /// The most tasks open at once; `begin` past it returns `invalid` (a leaking app cannot grow without bound).
    public static let maxOpenTasks = 1024
    /// The longest task name kept, in bytes of UTF-8; longer names are shortened.
    public static let maxNameBytes = 256

    /// Who began a task; it decides what its expiration handler is.
    public enum Origin: Equatable, Sendable {
        /// The Swift API; the handler is a closure kept by the app.
        case api
        /// The control socket (`task begin`); the handler is the app's `on-expiration` hook.
        case control
        /// A process app's program, over its lifecycle channel; the handler tells the program (a closure kept
        /// by the app, as for `api`).
        case program
    }

    /// An open task.
    public struct Task: Equatable, Sendable {
        public var id: BackgroundTaskIdentifier
        public var name: String?
        public var origin: Origin
        public var begunAt: MonotonicTime
        /// Whether its expiration handler has been handed out in this background period.
        public var expirationStarted = false
    }

    /// What ending a task did.
    public enum EndResult: Equatable, Sendable {
        case ended(Task)
        /// The id was 0.
        case invalidIdentifier
        /// The id was never issued.
        case unknown
        /// The id was issued and has already ended (or its app was terminated).
        case alreadyEnded
    }

    /// What the owner must do now.
    public enum Action: Equatable, Sendable {
        /// Run this task's expiration handler, then call `expirationHandlerFinished()`.
        case runExpirationHandler(Task)
        /// The watchdog kills the app: an expiration handler overran its budget, or a task outlived the grace.
        case kill(WatchdogTimeout)
    }

    /// The background time shared by all tasks.
    public var taskTime: Duration
    /// How long before the time is spent expiration handlers run.
    public var expirationLead: Duration
    /// How long after the time is spent an open task is tolerated.
    public var expirationGrace: Duration
    /// How long each expiration handler may run.
    public var expirationBudget: Duration

    /// The open tasks, in begin order.
    public private(set) var tasks: [Task] = []
    /// When the app entered the background (or was woken); nil in the foreground.
    public private(set) var backgroundSince: MonotonicTime?
    /// Whether the app is suspended (no time is offered then).
    public private(set) var isSuspended = false
    /// Tasks whose handler is due and waits for the one running to finish, in begin order.
    private var expirationQueue: [Task] = []
    /// The handler running now: its task and when it started.
    public private(set) var runningExpiration: (task: Task, startedAt: MonotonicTime)?
    private var nextIdentifier: BackgroundTaskIdentifier = 1

    public init(budgets: Budgets) {
        taskTime = budgets.taskTime
        expirationLead = budgets.expirationLead
        expirationGrace = budgets.expirationGrace
        expirationBudget = budgets.expiration
    }

    /// Takes the budgets of a reloaded configuration; deadlines follow from now on.
    public mutating func update(budgets: Budgets) {
        taskTime = budgets.taskTime
        expirationLead = budgets.expirationLead
        expirationGrace = budgets.expirationGrace
        expirationBudget = budgets.expiration
    }

    // MARK: The background time

    /// The app entered the background (or was woken from suspension): a fresh background time starts.
    public mutating func enterBackground(now: MonotonicTime) {
        backgroundSince = now
        isSuspended = false
        resetExpiration()
    }

    /// The app came to the foreground: the background time is unlimited again, handlers not yet run are
    /// dropped, and nothing is due any more. Open tasks stay open.
    public mutating func enterForeground() {
        backgroundSince = nil
        isSuspended = false
        resetExpiration()
    }

    /// The app was suspended: no time is offered until it runs again.
    public mutating func suspend() {
        isSuspended = true
        resetExpiration()
    }

    private mutating func resetExpiration() {
        expirationQueue.removeAll()
        runningExpiration = nil
        for index in tasks.indices { tasks[index].expirationStarted = false }
    }

    /// The background time left: nil (unlimited) in the foreground, 0 while suspended, else counting down
    /// to 0.
    public func remaining(now: MonotonicTime) -> Duration? {
        guard let backgroundSince else { return nil }
        if isSuspended { return .zero }
        let left = (backgroundSince + taskTime) - now
        return left > .zero ? left : .zero
    }

    /// Whether the background time is spent.
    public func isTimeSpent(now: MonotonicTime) -> Bool {
        remaining(now: now) == .zero
    }

    // MARK: Tasks

    /// Whether `maxOpenTasks` tasks are open.
    public var isFull: Bool { tasks.count >= Self.maxOpenTasks }

    /// Begins a task and returns its id, or 0 when `allowed` is false, the background time is spent or
    /// `maxOpenTasks` are open. A name longer than `maxNameBytes` is shortened.
    public mutating func begin(name: String?, origin: Origin, now: MonotonicTime, allowed: Bool) -> BackgroundTaskIdentifier {
        guard allowed, !isTimeSpent(now: now), !isFull else { return Self.invalid }
        let id = nextIdentifier
        nextIdentifier += 1
        tasks.append(Task(id: id, name: name.map(Self.shortened), origin: origin, begunAt: now))
        return id
    }

    /// `name` cut to at most `maxNameBytes` bytes of UTF-8, at a character boundary.
    static func shortened(_ name: String) -> String {
        guard name.utf8.count > maxNameBytes else { return name }
        var result = ""
        for character in name {
            guard result.utf8.count + character.utf8.count <= maxNameBytes else { break }
            result.append(character)
        }
        return result
    }

    /// Ends a task; its expiration handler, if still waiting, will not run.
    public mutating func end(_ id: BackgroundTaskIdentifier) -> EndResult {
        if id == Self.invalid { return .invalidIdentifier }
        if let index = tasks.firstIndex(where: { $0.id == id }) {
            expirationQueue.removeAll { $0.id == id }
            return .ended(tasks.remove(at: index))
        }
        return id < nextIdentifier ? .alreadyEnded : .unknown
    }

    /// Drops every task (the app was terminated or killed). Ids stay unique afterwards.
    public mutating func removeAll() {
        tasks.removeAll()
        backgroundSince = nil
        isSuspended = false
        resetExpiration()
    }

    // MARK: Expiration

    /// When the expiration handlers of the open tasks are due: `expiration-lead` before the background time
    /// is spent. Nil in the foreground, while suspended, or when every open task's handler has been handed out.
    public var expirationDeadline: MonotonicTime? {
        guard let backgroundSince, !isSuspended, tasks.contains(where: { !$0.expirationStarted }) else { return nil }
        return backgroundSince + (taskTime - expirationLead)
    }

    /// When a task still open gets the app killed: `expiration-grace` after the time is spent.
    public var graceDeadline: MonotonicTime? {
        guard let backgroundSince, !isSuspended, !tasks.isEmpty else { return nil }
        return backgroundSince + taskTime + expirationGrace
    }

    /// Whether an expiration handler is running (the app is then not suspend-eligible).
    public var isRunningExpiration: Bool { runningExpiration != nil }

    /// When the running expiration handler's budget ends.
    public var expirationHandlerDeadline: MonotonicTime? {
        runningExpiration.map { $0.startedAt + expirationBudget }
    }

    /// When `next(now:)` must be asked again, if nothing else changes first.
    public var nextDeadline: MonotonicTime? {
        [expirationHandlerDeadline, runningExpiration == nil ? expirationDeadline : nil, graceDeadline]
            .compactMap { $0 }.min()
    }

    /// What to do at `now`: run the next due expiration handler (one at a time, in begin order), kill the app
    /// (a handler over its budget, or a task past the grace), or nothing (nil).
    public mutating func next(now: MonotonicTime) -> Action? {
        if let running = runningExpiration {
            guard now >= running.startedAt + expirationBudget else { return nil }
            runningExpiration = nil
            return .kill(WatchdogTimeout(stage: .expiration, budget: expirationBudget, elapsed: now - running.startedAt))
        }
        if let grace = graceDeadline, now >= grace, let since = backgroundSince {
            return .kill(WatchdogTimeout(stage: .backgroundTask, budget: taskTime + expirationGrace, elapsed: now - since))
        }
        expirationQueue += takeExpiringTasks(now: now)
        guard !expirationQueue.isEmpty else { return nil }
        let task = expirationQueue.removeFirst()
        runningExpiration = (task, now)
        return .runExpirationHandler(task)
    }

    /// The expiration handler handed out last has returned (or its hook exited).
    public mutating func expirationHandlerFinished() {
        runningExpiration = nil
    }

    /// The tasks whose expiration handler is due at `now`, in begin order; each is handed out once.
    public mutating func takeExpiringTasks(now: MonotonicTime) -> [Task] {
        guard let deadline = expirationDeadline, now >= deadline else { return [] }
        var due: [Task] = []
        for index in tasks.indices where !tasks[index].expirationStarted {
            tasks[index].expirationStarted = true
            due.append(tasks[index])
        }
        return due
    }
}
