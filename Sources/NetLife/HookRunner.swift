// The hook commands of one app (SPEC section 5): each run without a shell in its own process group, with
// NETLIFE_APP, NETLIFE_EVENT (and NETLIFE_TASK) in its environment, its output logged under a rate limit,
// its exit seen on the loop. The runner knows which hooks are running, so that the app can kill them all
// when it suspends, terminates or leaves the daemon.

import NetLifeEvent
import Glibc

/// Spawns and tracks the hook processes of one app.
final class HookRunner {
    private let loop: EventLoop
    private let logger: Logger
    /// The environment hooks inherit, before NETLIFE_* are added.
    private let environment: [String: String]
    private let appName: String
    private var running: [UInt64: ChildProcess] = [:]
    private var nextRun: UInt64 = 0

    init(appName: String, environment: [String: String], loop: EventLoop, logger: Logger) {
        self.appName = appName
        self.environment = environment
        self.loop = loop
        self.logger = logger
    }

    /// How many hook processes are running.
    var count: Int { running.count }

    /// Spawns `command` for `event`; `completion` runs when it exits. Returns false (and logs) when it cannot
    /// be spawned; then `completion` is never called.
    func run(_ command: HookCommand, event: String, task: BackgroundTaskIdentifier? = nil,
             completion: @escaping (ChildExitStatus) -> Void) -> Bool {
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
                    self?.running[run] = nil
                    if status.isSuccess {
                        logger.debug("\(label) finished")
                    } else {
                        logger.warning("\(label) failed: \(status)")
                    }
                    completion(status)
                })
            return true
        } catch {
            logger.error("\(label) could not start: \(error)")
            return false
        }
    }

    /// Sends SIGKILL to every running hook's process group; their exits arrive through the loop as usual.
    func killAll() {
        for process in running.values { process.signalGroup(SIGKILL) }
    }

    /// Kills and reaps every running hook now; their completions are not called.
    func close() {
        let processes = running.values
        running.removeAll()
        for process in processes { process.close() }
    }
}
