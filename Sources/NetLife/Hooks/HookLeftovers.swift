// How long what a hook leaves in its process group may live (docs/design.md), as a pure value. When a hook's
// main process exits, the rest of its group is killed, as systemd's KillMode=control-group does; except while
// a background task that a process of the group began for the app is open: then the group lives on until the
// last such task ends, so that TN2277's recipe (begin a task, start the work asynchronously, return) works
// from a hook as it does in an iOS app. When that task ends the group is asked to end (SIGTERM) and killed
// after a grace. Suspension, termination and the watchdog kill every hook process of the app at once,
// whatever it holds.
//
// A task is the group's when the process that began it over the control socket (SO_PEERCRED) is in the
// hook's process group: the hook itself, or anything it started that stayed in the group. A task begun by
// another client, or by another app's hook, keeps no hook's leftovers alive. HookRunner asks this value and
// performs what it decides.

/// The hook runs of one app whose process groups may outlive their main process, and what holds them.
struct HookLeftovers: Equatable {
    /// Where one run's process group stands.
    enum Phase: Equatable {
        /// The hook's main process runs; `holding` are the open tasks its group began.
        case running(holding: Set<BackgroundTaskIdentifier>)
        /// The main process has exited; the rest of the group lives while `holding` (never empty) are open.
        case kept(holding: Set<BackgroundTaskIdentifier>)
        /// The last task it held has ended: the group was asked to end and is killed after the grace.
        case ending
    }

    /// What the runner does to a run's process group.
    enum Action: Equatable {
        /// Kill the group now (SIGKILL) and reap the hook.
        case kill(HookRun)
        /// Leave the rest of the group running after the main process's exit.
        case keep(HookRun)
        /// Ask the group to end (SIGTERM), and call `graceEnded(_:)` after the grace.
        case end(HookRun)
    }

    /// Every run still known: running, kept or ending.
    private(set) var phases: [HookRun: Phase] = [:]

    /// A hook's main process started.
    mutating func started(_ run: HookRun) {
        phases[run] = .running(holding: [])
    }

    /// Whether the rest of `run`'s group would outlive its main process, were it to exit now.
    func keepsGroup(_ run: HookRun) -> Bool {
        if case .running(let holding)? = phases[run] { return !holding.isEmpty }
        return false
    }

    /// A process of `run`'s group began task `id`. Returns whether the task holds the group: not when the run
    /// is unknown (killed) or already ending (its SIGTERM is sent; the task is then an ordinary one).
    mutating func taskBegun(_ id: BackgroundTaskIdentifier, by run: HookRun) -> Bool {
        switch phases[run] {
        case .running(var holding)?:
            holding.insert(id)
            phases[run] = .running(holding: holding)
            return true
        case .kept(var holding)?:
            holding.insert(id)
            phases[run] = .kept(holding: holding)
            return true
        case .ending?, nil:
            return false
        }
    }

    /// The hook's main process exited: the rest of its group is kept while it holds a task, else killed.
    mutating func hookExited(_ run: HookRun) -> Action {
        guard case .running(let holding)? = phases[run], !holding.isEmpty else {
            phases[run] = nil
            return .kill(run)
        }
        phases[run] = .kept(holding: holding)
        return .keep(run)
    }

    /// Task `id` ended (ended, or dropped with its app). A kept group whose last task it was is to end.
    mutating func taskEnded(_ id: BackgroundTaskIdentifier) -> Action? {
        // Each task is held by at most one run: the one whose group began it.
        guard let run = phases.first(where: { $0.value.holds(id) })?.key, let phase = phases[run] else { return nil }
        switch phase {
        case .running(var holding):
            holding.remove(id)
            phases[run] = .running(holding: holding)
            return nil
        case .kept(var holding):
            holding.remove(id)
            guard holding.isEmpty else {
                phases[run] = .kept(holding: holding)
                return nil
            }
            phases[run] = .ending
            return .end(run)
        case .ending:
            return nil
        }
    }

    /// The grace of an ending group is over: what is left of it is killed.
    mutating func graceEnded(_ run: HookRun) -> Action? {
        guard phases[run] == .ending else { return nil }
        phases[run] = nil
        return .kill(run)
    }

    /// Every hook process of the app goes (it suspends, terminates or is killed): the runs to kill, in run
    /// order; none is known afterwards, so a later exit of one is a kill too.
    mutating func killAll() -> [HookRun] {
        let runs = phases.keys.sorted()
        phases.removeAll()
        return runs
    }

    /// The tasks `run`'s group holds (none once it is ending or unknown).
    func tasks(heldBy run: HookRun) -> Set<BackgroundTaskIdentifier> {
        switch phases[run] {
        case .running(let holding)?, .kept(let holding)?: return holding
        case .ending?, nil: return []
        }
    }
}

extension HookLeftovers.Phase {
    /// Whether task `id` holds this group.
    fileprivate func holds(_ id: BackgroundTaskIdentifier) -> Bool {
        switch self {
        case .running(let holding), .kept(let holding): return holding.contains(id)
        case .ending: return false
        }
    }
}
