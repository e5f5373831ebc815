// The hook commands of one app (docs/design.md): each run without a shell in its own process group, with
// NETLIFE_APP, NETLIFE_EVENT (and NETLIFE_TASK) in its environment, its output logged under a rate limit,
// its exit seen on the loop. The runner knows which hooks are running, so that the app can kill them all
// when it suspends, terminates or leaves the daemon, and abandon them: an abandoned run is still killed,
// reaped and logged, but its completion is never called, so that a late exit cannot act on an app that has
// moved on.
//
// What a hook leaves in its process group is killed when its main process exits, unless the group holds a
// background task it began: then it runs on until the last such task ends (SIGTERM, then SIGKILL after
// `leftoverGrace`), or until every hook process of the app is killed. HookLeftovers decides; the runner
// performs, and its owner tells it which tasks begin (and from which process group) and end.

import NetLifeEvent
import Glibc

/// One run of a hook, as `HookRunner.run` returns it.
typealias HookRun = UInt64

/// Spawns and tracks the hook processes of one app.
final class HookRunner {
    /// How long what a hook left in its process group has to end after SIGTERM, once the last task that kept it
    /// has ended, before it is killed.
    static let leftoverGrace = Duration.seconds(1)

    private let loop: EventLoop
    private let logger: Logger
    /// The environment hooks inherit, before NETLIFE_* are added.
    private let environment: [String: String]
    private let appName: String
    /// One hook run: its process (running, or exited with its group kept) and what the log calls it.
    private struct Run {
        let process: ChildProcess
        let label: String
        /// While its group ends: the timer that kills what is left after the grace.
        var graceTimer: EventTimer?
    }
    /// Every run whose main process runs or whose process group is kept.
    private var runs: [HookRun: Run] = [:]
    /// Which groups outlive their main process, and why.
    private var leftovers = HookLeftovers()
    private var abandoned: Set<HookRun> = []
    private var nextRun: HookRun = 0

    init(appName: String, environment: [String: String], loop: EventLoop, logger: Logger) {
        self.appName = appName
        self.environment = environment
        self.loop = loop
        self.logger = logger
    }

    /// How many hook processes are running (main processes; kept groups are not counted).
    var count: Int { runs.values.filter { $0.process.exitStatus == nil }.count }

    /// Spawns `command` for `event`; `completion` runs when it exits (unless the run is abandoned first).
    /// Returns nil (and logs) when it cannot be spawned; then `completion` is never called.
    func run(_ command: HookCommand, event: String, task: BackgroundTaskIdentifier? = nil,
             completion: @escaping (ChildExitStatus) -> Void) -> HookRun? {
        var environment = self.environment
        environment["NETLIFE_APP"] = appName
        environment["NETLIFE_EVENT"] = event
        if let task { environment["NETLIFE_TASK"] = String(task) }
        let label = "hook on-\(event)"
        let logger = self.logger
        nextRun += 1
        let run = nextRun
        do {
            // The closures hold the runner weakly and the process not at all: nothing keeps a finished run alive.
            let process = try ChildProcess(
                loop: loop, arguments: command.arguments, environment: environment,
                onOutput: { output in
                    switch output {
                    case .line(let line): logger.info("\(label): \(line)")
                    case .dropped(let count): logger.warning("\(label): dropped \(count) lines of output")
                    }
                },
                keepsGroupAfterExit: { [weak self] in self?.leftovers.keepsGroup(run) ?? false },
                onExit: { [weak self] status in
                    if status.isSuccess {
                        logger.debug("\(label) finished")
                    } else {
                        logger.warning("\(label) failed: \(status)")
                    }
                    guard let self else { return }
                    hookExited(run)
                    if abandoned.remove(run) == nil { completion(status) }
                })
            runs[run] = Run(process: process, label: label)
            leftovers.started(run)
            return run
        } catch {
            logger.error("\(label) could not start: \(error)")
            return nil
        }
    }

    /// Lets a run finish unobserved: its completion will not be called.
    func abandon(_ run: HookRun) {
        if let process = runs[run]?.process, process.exitStatus == nil { abandoned.insert(run) }
    }

    // MARK: What a hook leaves behind

    private func hookExited(_ run: HookRun) {
        switch leftovers.hookExited(run) {
        case .keep:
            guard let entry = runs[run] else { return }
            let tasks = leftovers.tasks(heldBy: run).sorted().map(String.init).joined(separator: ", ")
            logger.info("\(entry.label) exited; what it left in its process group runs on while task(s) \(tasks) it began are open")
        case .kill, .end:
            // The process killed its group and was reaped before telling its exit.
            runs[run] = nil
        }
    }

    /// The run whose process group is `group`: a hook of this app running, or one whose group is kept.
    private func hookRun(inProcessGroup group: Int32) -> HookRun? {
        runs.first(where: { $0.value.process.pid == group })?.key
    }

    /// What the log calls the hook whose main process runs with process group `group` (nil: none does).
    func runningHook(inProcessGroup group: Int32) -> String? {
        runs.first(where: { $0.value.process.pid == group && $0.value.process.exitStatus == nil })?.value.label
    }

    /// Task `id` was begun over the control socket by a process in process group `group`: if that is the group
    /// of one of the app's hooks, the task holds what the hook leaves there.
    func taskBegun(_ id: BackgroundTaskIdentifier, inProcessGroup group: Int32) {
        guard let run = hookRun(inProcessGroup: group), leftovers.taskBegun(id, by: run), let entry = runs[run] else { return }
        logger.debug("task \(id) was begun from the process group of \(entry.label) (\(group)): it keeps the group")
    }

    /// Task `id` ended, or was dropped: a kept group whose last task it was is ended.
    func taskEnded(_ id: BackgroundTaskIdentifier) {
        if let action = leftovers.taskEnded(id) { perform(action) }
    }

    private func perform(_ action: HookLeftovers.Action) {
        switch action {
        case .keep:
            break
        case .end(let run):
            guard let entry = runs[run] else { return }
            logger.info("\(entry.label): the task(s) it began have ended; ending what it left in its process group")
            entry.process.signalGroup(SIGTERM)
            runs[run]?.graceTimer = loop.schedule(after: Self.leftoverGrace) { [weak self] in
                guard let self, let action = leftovers.graceEnded(run) else { return }
                perform(action)
            }
        case .kill(let run):
            guard let entry = runs.removeValue(forKey: run) else { return }
            entry.graceTimer?.cancel()
            entry.process.killKeptGroup()
        }
    }

    // MARK: Ending every hook

    /// Sends SIGKILL to every running hook's process group and abandons them all: their exits are reaped and
    /// logged through the loop, and no completion is called. Kept groups are killed and reaped now.
    func killAll() {
        _ = leftovers.killAll()
        for (run, entry) in runs {
            if entry.process.isGroupKept {
                runs[run] = nil
                entry.graceTimer?.cancel()
                entry.process.killKeptGroup()
            } else {
                abandoned.insert(run)
                entry.process.signalGroup(SIGKILL)
            }
        }
    }

    /// Kills and reaps every hook now, kept groups included; their completions are not called.
    func close() {
        let entries = runs.values
        runs.removeAll()
        abandoned.removeAll()
        _ = leftovers.killAll()
        for entry in entries {
            entry.graceTimer?.cancel()
            entry.process.close()
        }
    }
}
