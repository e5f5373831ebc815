// The Swift API of background tasks (docs/swift-apps.md), as UIApplication has it: begin and end, the shared
// background time, and the restricted run loop an expiration handler may use. The work is done by the app's
// BackgroundTasks.

import NetLifeEvent

extension App {
    /// Whether the app may run in the background at all (UIDevice.multitaskingSupported, per app here:
    /// `multitasking = no` makes it false).
    public var isMultitaskingSupported: Bool { configuration.multitasking }

    /// The background time left: nil (unlimited) in the foreground, counting down from `task-time` in the
    /// background (afresh on every entry), shared by all tasks; zero when spent, and zero while suspended or
    /// not running: no code of the app runs then, so no time is offered (and a task begun then gets 0).
    public var backgroundTimeRemaining: Duration? {
        state.isRunning ? backgroundTasks.remaining(now: loop.now) : .zero
    }

    /// How many background tasks are open.
    public var openBackgroundTaskCount: Int { backgroundTasks.tasks.count }

    /// Begins a background task: while one is open the app is not suspended. Every begin must be matched by
    /// `endBackgroundTask(_:)`.
    ///
    /// - Parameters:
    ///   - name: shown by `netlifectl task list` (at most 256 bytes are kept).
    ///   - expirationHandler: runs once, `expiration-lead` before the background time is spent; it should
    ///     end the task. It runs under `expiration-budget`.
    /// - Returns: a unique, increasing identifier, or 0 when the app is suspended, not running, has
    ///   `multitasking = no`, its background time is spent, or 1,024 tasks are open.
    public func beginBackgroundTask(name: String? = nil, expirationHandler: (() -> Void)? = nil) -> BackgroundTaskIdentifier {
        loop.assertInLoop()
        switch beginTask(name: name, origin: .api, expirationHandler: expirationHandler) {
        case .success(let id): return id
        case .failure: return BackgroundTaskRegistry.invalid
        }
    }

    /// Begins a task for a control-socket client; its expiration handler is the `on-expiration` hook.
    /// Returns its id, or why it was refused (the client gets the id 0 and the reason).
    ///
    /// - Parameter processGroup: the process group of the client (from SO_PEERCRED), if known. When it is the
    ///   group of one of the app's hooks, what the hook leaves in its group lives until the task ends (TN2277's
    ///   recipe: begin a task, start the work asynchronously, return).
    public func beginControlTask(name: String?, processGroup: Int32? = nil) -> Result<BackgroundTaskIdentifier, BackgroundTaskRefusal> {
        beginTask(name: name, origin: .control, processGroup: processGroup, expirationHandler: nil)
    }

    /// Why a task begun now would be refused (the id 0), or nil when it would begin.
    public var backgroundTaskRefusal: BackgroundTaskRefusal? {
        if let retirement { return BackgroundTaskRefusal(message: "app \(name) has left the daemon (\(retirement))") }
        switch state {
        case .notRunning:
            return BackgroundTaskRefusal(message: "app \(name) is not running")
        case .suspended:
            return BackgroundTaskRefusal(message: "app \(name) is suspended: none of its code runs, so it is offered no background time")
        case .inactive, .active, .background:
            break
        }
        if !configuration.multitasking {
            return BackgroundTaskRefusal(message: "app \(name) has multitasking = no: it never runs in the background")
        }
        // An app that exits on suspend never runs in the background, so a task could not keep it there.
        if configuration.exitsOnSuspend {
            return BackgroundTaskRefusal(message: "app \(name) has exits-on-suspend = yes: it never runs in the background")
        }
        if backgroundTasks.remaining(now: loop.now) == .zero {
            return BackgroundTaskRefusal(message: "app \(name) has spent its background time (task-time \(format(configuration.budgets.taskTime)))")
        }
        if backgroundTasks.tasks.count >= BackgroundTaskRegistry.maxOpenTasks {
            return BackgroundTaskRefusal(message: "app \(name) already has \(BackgroundTaskRegistry.maxOpenTasks) open background tasks, the most allowed")
        }
        return nil
    }

    func beginTask(name: String?, origin: BackgroundTaskRegistry.Origin, processGroup: Int32? = nil,
                           expirationHandler: (() -> Void)?) -> Result<BackgroundTaskIdentifier, BackgroundTaskRefusal> {
        let refusal = backgroundTaskRefusal
        let id = backgroundTasks.begin(name: name, origin: origin, allowed: refusal == nil, processGroup: processGroup,
                                       expirationHandler: expirationHandler)
        guard id == BackgroundTaskRegistry.invalid else { return .success(id) }
        // The registry refuses only what `backgroundTaskRefusal` names; the fallback is never expected.
        let reason = refusal ?? BackgroundTaskRefusal(message: "app \(self.name) cannot begin a background task now")
        logger.info("background task\(name.map { " '\($0.prefix(64))'" } ?? "") refused: \(reason.message)")
        return .failure(reason)
    }

    /// Ends a background task. Ending 0, an unknown or an already ended id does nothing but log a warning.
    @discardableResult
    public func endBackgroundTask(_ id: BackgroundTaskIdentifier) -> BackgroundTaskRegistry.EndResult {
        loop.assertInLoop()
        let result = backgroundTasks.end(id)
        switch result {
        case .ended:
            break
        case .invalidIdentifier:
            logger.warning("endBackgroundTask(0): the invalid task id; nothing to end")
        case .unknown:
            logger.warning("endBackgroundTask(\(id)): no such task")
        case .alreadyEnded:
            logger.warning("endBackgroundTask(\(id)): the task has already ended")
        }
        return result
    }

    /// Lets chosen connections finish their work from an expiration handler (TN2277 "Run Loops"): runs the
    /// event loop in a restricted mode that serves only `connections` until `condition` holds or `timeout`
    /// passes. Nothing else of the app (nor of the daemon) runs meanwhile, and the loop's default mode is
    /// never re-entered. Inside an expiration handler the run also ends with the handler's budget.
    ///
    /// - Returns: whether `condition` holds.
    @discardableResult
    public func runLoop(serving connections: [Connection], timeout: Duration, until condition: () -> Bool) -> Bool {
        loop.assertInLoop()
        var limit = timeout
        if let deadline = backgroundTasks.expirationHandlerDeadline {
            // Leave a little of the budget for the handler to end its task after the run.
            limit = min(limit, (deadline - loop.now) - .milliseconds(20))
        }
        guard limit > .zero, !loop.isRunningRestricted else { return condition() }
        let started = MonotonicTime.now()
        let done = loop.runRestricted(serving: connections, timeout: limit, until: condition)
        logger.debug("restricted run loop served \(connections.count) connection(s) for \(format(MonotonicTime.now() - started)): \(done ? "done" : "gave up")")
        return done
    }
}

/// Why a background task was refused (UIBackgroundTaskInvalid): the app is not running, is suspended, has
/// `multitasking = no`, has spent its background time, holds the most tasks allowed, or has left the daemon.
public struct BackgroundTaskRefusal: Error, Equatable, Sendable {
    /// What a user is told: "app mail is not running".
    public var message: String

    public init(message: String) { self.message = message }
}
