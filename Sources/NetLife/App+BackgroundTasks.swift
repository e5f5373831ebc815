// Background tasks of an app (SPEC section 5): begin and end, the shared background time, the expiration
// handlers run once each in begin order, and the watchdog for a task left open past the grace period.

import NetLifeEvent

extension App {
    /// Whether the app may run in the background at all (UIDevice.multitaskingSupported, per app here:
    /// `multitasking = no` makes it false).
    public var isMultitaskingSupported: Bool { configuration.multitasking }

    /// The background time left: nil (unlimited) in the foreground, counting down from `task-time` in the
    /// background, shared by all tasks; zero when spent.
    public var backgroundTimeRemaining: Duration? {
        state.isRunning ? tasks.remaining(now: .now()) : nil
    }

    /// Begins a background task: while one is open the app is not suspended. Every begin must be matched by
    /// `endBackgroundTask(_:)`.
    ///
    /// - Parameters:
    ///   - name: shown by `netlifectl task list`.
    ///   - expirationHandler: runs once, `expiration-lead` before the background time is spent; it should
    ///     end the task. It runs under `expiration-budget`.
    /// - Returns: a unique, increasing identifier, or 0 when the app is suspended, not running, has
    ///   `multitasking = no`, or its background time is spent.
    public func beginBackgroundTask(name: String? = nil, expirationHandler: (() -> Void)? = nil) -> BackgroundTaskIdentifier {
        loop.assertInLoop()
        let id = beginTask(name: name, origin: .api)
        if id != BackgroundTaskRegistry.invalid, let expirationHandler { expirationHandlers[id] = expirationHandler }
        return id
    }

    /// How many background tasks are open.
    public var openBackgroundTaskCount: Int { tasks.tasks.count }

    /// Begins a task for a control-socket client; its expiration handler is the `on-expiration` hook.
    public func beginControlTask(name: String?) -> BackgroundTaskIdentifier {
        beginTask(name: name, origin: .control)
    }

    private func beginTask(name: String?, origin: BackgroundTaskRegistry.Origin) -> BackgroundTaskIdentifier {
        let allowed = state != .notRunning && state != .suspended && configuration.multitasking
        let id = tasks.begin(name: name, origin: origin, now: .now(), allowed: allowed)
        if id == BackgroundTaskRegistry.invalid {
            logger.info("background task\(name.map { " '\($0)'" } ?? "") refused (state \(state)\(configuration.multitasking ? "" : ", multitasking = no"))")
        } else {
            logger.debug("background task \(id) begun\(name.map { " ('\($0)')" } ?? "")")
            evaluateSuspension()
            rearmTaskTimers()
        }
        return id
    }

    /// Ends a background task. Ending 0, an unknown or an already ended id does nothing but log a warning.
    @discardableResult
    public func endBackgroundTask(_ id: BackgroundTaskIdentifier) -> BackgroundTaskRegistry.EndResult {
        loop.assertInLoop()
        let result = tasks.end(id)
        switch result {
        case .ended:
            expirationHandlers[id] = nil
            expirationQueue.removeAll { $0.id == id }
            logger.debug("background task \(id) ended")
            rearmTaskTimers()
            evaluateSuspension()
        case .invalidIdentifier:
            logger.warning("endBackgroundTask(0): the invalid task id; nothing to end")
        case .unknown:
            logger.warning("endBackgroundTask(\(id)): no such task")
        case .alreadyEnded:
            logger.warning("endBackgroundTask(\(id)): the task has already ended")
        }
        return result
    }

    /// Arms the expiration and grace timers from the registry's deadlines.
    func rearmTaskTimers() {
        let now = MonotonicTime.now()
        if let deadline = tasks.expirationDeadline {
            if expirationTimer == nil { expirationTimer = EventTimer(loop: loop) { [weak self] in self?.expirationDue() } }
            expirationTimer!.arm(after: max(.zero, deadline - now))
        } else {
            expirationTimer?.close()
            expirationTimer = nil
        }
        if let deadline = tasks.graceDeadline {
            if graceTimer == nil { graceTimer = EventTimer(loop: loop) { [weak self] in self?.graceDue() } }
            graceTimer!.arm(after: max(.zero, deadline - now))
        } else {
            graceTimer?.close()
            graceTimer = nil
        }
    }

    private func expirationDue() {
        let due = tasks.takeExpiringTasks(now: .now())
        guard !due.isEmpty else { return }
        logger.info("background time nearly spent: expiring task(s) \(due.map { String($0.id) }.joined(separator: ", "))")
        expirationQueue.append(contentsOf: due)
        runNextExpiration()
    }

    /// Runs the queued expiration handlers one after another, in begin order.
    private func runNextExpiration() {
        while !expirationRunning, !expirationQueue.isEmpty {
            let task = expirationQueue.removeFirst()
            let budget = configuration.budgets.expiration
            switch task.origin {
            case .api:
                guard let handler = expirationHandlers.removeValue(forKey: task.id) else { continue }
                let started = MonotonicTime.now()
                expirationHandlerDeadline = started + budget
                handler()
                expirationHandlerDeadline = nil
                let elapsed = MonotonicTime.now() - started
                if elapsed > budget {
                    watchdogKill(WatchdogTimeout(stage: "expiration", budget: budget, elapsed: elapsed))
                    return
                }
            case .control:
                guard let hook = configuration.expirationHook else {
                    logger.warning("task \(task.id) is expiring and the app has no on-expiration hook")
                    continue
                }
                let runGeneration = generation
                let started = MonotonicTime.now()
                let watchdog = loop.schedule(after: budget) { [weak self] in
                    guard let self, generation == runGeneration else { return }
                    watchdogKill(WatchdogTimeout(stage: "expiration", budget: budget, elapsed: MonotonicTime.now() - started))
                }
                let spawned = hooks.run(hook, event: "expiration", task: task.id) { [weak self] _ in
                    watchdog.cancel()
                    guard let self, generation == runGeneration else { return }
                    expirationRunning = false
                    runNextExpiration()
                }
                if spawned { expirationRunning = true } else { watchdog.cancel() }
            }
        }
    }

    private func graceDue() {
        guard let since = tasks.backgroundSince, !tasks.tasks.isEmpty else { return }
        let now = MonotonicTime.now()
        guard let deadline = tasks.graceDeadline, now >= deadline else { rearmTaskTimers(); return }
        let open = tasks.tasks.map { String($0.id) }.joined(separator: ", ")
        logger.error("background task(s) \(open) still open \(format(tasks.expirationGrace)) after the background time was spent")
        watchdogKill(WatchdogTimeout(stage: "background-task", budget: tasks.taskTime + tasks.expirationGrace,
                                     elapsed: now - since))
    }
}

extension App {
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
        if let deadline = expirationHandlerDeadline {
            // Leave a little of the budget for the handler to end its task after the run.
            limit = min(limit, (deadline - MonotonicTime.now()) - .milliseconds(20))
        }
        guard limit > .zero else { return condition() }
        let started = MonotonicTime.now()
        let done = loop.runRestricted(serving: connections, timeout: limit, until: condition)
        logger.debug("restricted run loop served \(connections.count) connection(s) for \(format(MonotonicTime.now() - started)): \(done ? "done" : "gave up")")
        return done
    }
}
