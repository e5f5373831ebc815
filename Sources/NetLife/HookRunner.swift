// The hook commands of one app (SPEC section 5): each run without a shell in its own process group, with
// NETLIFE_APP, NETLIFE_EVENT (and NETLIFE_TASK) in its environment, its output logged under a rate limit,
// its exit seen on the loop. The runner knows which hooks are running, so that the app can kill them all
// when it suspends, terminates or leaves the daemon, and abandon them: an abandoned run is still killed,
// reaped and logged, but its completion is never called, so that a late exit cannot act on an app that has
// moved on.

import NetLifeEvent
import Glibc

/// One run of a hook, as `HookRunner.run` returns it.
typealias HookRun = UInt64

/// Spawns and tracks the hook processes of one app.
final class HookRunner {
    private let loop: EventLoop
    private let logger: Logger
    /// The environment hooks inherit, before NETLIFE_* are added.
    private let environment: [String: String]
    private let appName: String
    private var running: [HookRun: ChildProcess] = [:]
    private var abandoned: Set<HookRun> = []
    private var nextRun: HookRun = 0

    init(appName: String, environment: [String: String], loop: EventLoop, logger: Logger) {
        self.appName = appName
        self.environment = environment
        self.loop = loop
        self.logger = logger
    }

    /// How many hook processes are running.
    var count: Int { running.count }

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
            running[run] = try ChildProcess(
                loop: loop, arguments: command.arguments, environment: environment,
                onOutput: { output in
                    switch output {
                    case .line(let line): logger.info("\(label): \(line)")
                    case .dropped(let count): logger.warning("\(label): dropped \(count) lines of output")
                    }
                },
                onExit: { [weak self] status in
                    if status.isSuccess {
                        logger.debug("\(label) finished")
                    } else {
                        logger.warning("\(label) failed: \(status)")
                    }
                    guard let self else { return }
                    running[run] = nil
                    if abandoned.remove(run) == nil { completion(status) }
                })
            return run
        } catch {
            logger.error("\(label) could not start: \(error)")
            return nil
        }
    }

    /// Lets a run finish unobserved: its completion will not be called.
    func abandon(_ run: HookRun) {
        if running[run] != nil { abandoned.insert(run) }
    }

    /// Sends SIGKILL to every running hook's process group and abandons them all: their exits are reaped and
    /// logged through the loop, and no completion is called.
    func killAll() {
        for (run, process) in running {
            abandoned.insert(run)
            process.signalGroup(SIGKILL)
        }
    }

    /// Kills and reaps every running hook now; their completions are not called.
    func close() {
        let processes = running.values
        running.removeAll()
        abandoned.removeAll()
        for process in processes { process.close() }
    }
}
