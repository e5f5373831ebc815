// One run of a process app's program (docs/process-apps.md): its main process, its cgroups and the timers that
// end them, in one value. A run lives from its start until nothing of it is left: its main process has
// exited and its cgroups are empty and removed. Each run has cgroups of its own (named for the app and the
// run's number), so a run still emptying when the next one starts (a child that takes a while to die, a
// restart 100 ms after a crash) is cleaned up apart from it: its cleanup can only ever touch its own
// directories. Signals, counts and removal walk each cgroup's whole subtree (CgroupSubtree).

@preconcurrency import Glibc
import NetLifeEvent

/// One start of a process app's program and everything that belongs to it alone. Loop thread only.
final class ProgramRun {
    /// The run's number among its app's runs, from 1.
    let number: Int
    /// Its cgroup, nil when it runs in a process group only.
    let cgroup: ProcessCgroup?
    /// Its v1 memory and pids cgroups, where cgroup2 accounts neither (a hybrid layout).
    let accounting: [AccountingCgroup]
    /// Its main process, once started.
    private(set) var child: ChildProcess?
    /// Whether netlifed has frozen it.
    private(set) var isFrozen = false
    /// Whether netlifed asked it to end (`terminate` or `kill`): its exit is then expected.
    private(set) var isEnding = false
    /// Whether nothing of it is left (or what is left was given up on, with an error in the log).
    private(set) var isGone = false
    /// Told when the main process exits, before the cleanup of what it left.
    var onExit: ((ProgramRun, ChildExitStatus) -> Void)?
    /// Told once, when the run is gone.
    var onGone: ((ProgramRun) -> Void)?

    private unowned let loop: EventLoop
    private let logger: Logger
    private var stopTimer: EventTimer?
    private var cleanup: EventTimer?
    private var cleanupRounds = 0
    /// The run itself from its launch until it is gone: an owner that lets go of it early (a reload that
    /// drops its app) does not stop its cleanup, so its cgroups are still emptied and removed.
    private var keepAlive: ProgramRun?

    /// How long one cleanup round kills and waits for the cgroup to empty; and how many rounds before what
    /// is left (a process stuck in the kernel) is given up on, so that the daemon can still exit.
    static let cleanupRound = Duration.seconds(5)
    static let maxCleanupRounds = 3

    init(number: Int, cgroup: ProcessCgroup?, accounting: [AccountingCgroup], loop: EventLoop, logger: Logger) {
        self.number = number
        self.cgroup = cgroup
        self.accounting = accounting
        self.loop = loop
        self.logger = logger
    }

    /// Starts the main process; on failure the run's cgroups are removed and the error thrown.
    func launch(arguments: [String], environment: [String: String], options: ChildLaunchOptions,
                onOutput: @escaping (ChildOutput) -> Void) throws(SystemError) {
        do {
            child = try ChildProcess(loop: loop, arguments: arguments, environment: environment, options: options,
                                     onOutput: onOutput, onExit: { [weak self] status in self?.exited(status) })
            keepAlive = self
        } catch {
            abandon()
            throw error
        }
    }

    /// The run could not be launched (its main process never started): its cgroups are removed.
    func abandon() {
        guard child == nil else { return }
        removeCgroups()
        isGone = true
    }

    /// Whether the main process runs.
    var isRunning: Bool { child.map { $0.exitStatus == nil } ?? false }

    /// The main process's pid while it runs.
    var pid: Int32? { isRunning ? child?.pid : nil }

    /// How the run is held, as `status` words it.
    var containment: ProgramContainment {
        cgroup.map { $0.kind == .v2 ? .cgroupV2 : .cgroupV1Freezer } ?? .processGroup
    }

    /// Its members, in one small file whatever their number: the tasks the pids controller counts in its
    /// cgroup subtree (processes, and the threads of multithreaded ones); where no pids controller counts
    /// them, the processes `cgroup.procs` lists (O(processes) in the kernel); its main process alone in a
    /// process group. No file of /proc is read.
    var memberCount: Int {
        guard let cgroup else { return isRunning ? 1 : 0 }
        if let tasks = cgroup.taskCount() ?? accounting(.pids)?.count() { return Int(clamping: tasks) }
        return cgroup.subtreeMemberCount()
    }

    /// The memory its cgroup accounts, nil where no cgroup accounts memory.
    var memoryBytes: Int? {
        (cgroup?.memoryBytes() ?? accounting(.memory)?.count()).map { Int(clamping: $0) }
    }

    private func accounting(_ controller: AccountingCgroup.Controller) -> AccountingCgroup? {
        accounting.first { $0.controller == controller }
    }

    /// Whether process `pid` is one of the run's: in its cgroup (or below it), or, without a cgroup, in its
    /// main process's process group. The corresponding C function is `getpgid`.
    func hasMember(pid: Int32) -> Bool {
        guard pid > 0, let main = child?.pid else { return false }
        // Its main process may have exited a moment ago: what it sent before is still its own.
        if pid == main { return true }
        if let cgroup { return cgroup.hasMember(pid: pid) }
        return getpgid(pid) == main
    }

    /// The cgroup directories a new main process joins before it execs.
    var joinDirectories: [String] { (cgroup.map { [$0.directory] } ?? []) + accounting.map(\.directory) }

    // MARK: Freezing

    func freeze() {
        guard isRunning, !isFrozen else { return }
        isFrozen = true
        if let cgroup {
            do { try cgroup.freeze() } catch { logger.error("cannot freeze \(cgroup.directory): \(error)") }
        } else {
            child?.signalGroup(SIGSTOP)
        }
    }

    func thaw() {
        guard isFrozen else { return }
        isFrozen = false
        if let cgroup {
            do { try cgroup.thaw() } catch { logger.error("cannot thaw \(cgroup.directory): \(error)") }
        } else {
            child?.signalGroup(SIGCONT)
        }
    }

    // MARK: Ending

    /// Asks every process of the run to end (SIGTERM to each member of the cgroup's subtree, or to the
    /// process group), and kills what is left after `grace`.
    func terminate(grace: Duration) {
        guard isRunning, !isEnding else { return }
        isEnding = true
        thaw()
        if let cgroup {
            cgroup.signalSubtree(SIGTERM)
        } else {
            child?.signalGroup(SIGTERM)
        }
        stopTimer = loop.schedule(after: grace) { [weak self] in
            guard let self, isRunning else { return }
            logger.warning("run \(number) still running \(Int(grace.milliseconds.rounded()))ms after SIGTERM: killed")
            kill()
        }
    }

    /// Kills every process of the run now: the whole cgroup subtree (`cgroup.kill`, or the freezer and
    /// SIGKILL to each member) and the main process's group. The cleanup that follows the main process's
    /// exit repeats it until the cgroups are empty.
    func kill() {
        isEnding = true
        stopTimer?.close()
        stopTimer = nil
        isFrozen = false
        if let cgroup {
            do { try cgroup.kill() } catch { logger.warning("cannot kill \(cgroup.directory): \(error)") }
        }
        // The group only while the main process runs: once it is reaped, its pid (the group's id) may be reused.
        guard isRunning else { return }
        child?.signalGroup(SIGCONT)
        child?.signalGroup(SIGKILL)
    }

    private func exited(_ status: ChildExitStatus) {
        stopTimer?.close()
        stopTimer = nil
        isFrozen = false
        onExit?(self, status)
        clean()
    }

    /// Kills what the main process left in its cgroups until they are empty, then removes them; the run is
    /// then gone. A round that cannot empty them is repeated, up to `maxCleanupRounds`.
    private func clean() {
        guard let cgroup else { return finish() }
        cleanupRounds += 1
        cleanup?.close()
        cleanup = cgroup.killUntilEmpty(loop: loop, timeout: Self.cleanupRound) { [weak self] empty in
            guard let self else { return }
            cleanup = nil
            if empty, removeCgroups() { return finish() }
            if cleanupRounds < Self.maxCleanupRounds { return clean() }
            logger.error("run \(number): \(cgroup.subtreeMemberCount()) process(es) left in \(cgroup.directory) after "
                         + "\(cleanupRounds) rounds of SIGKILL; given up on")
            finish()
        }
    }

    /// Removes the run's cgroups, deepest first; whether all are gone.
    @discardableResult
    private func removeCgroups() -> Bool {
        var removed = true
        if let cgroup {
            do { try cgroup.removeSubtree() } catch {
                logger.warning("cannot remove \(cgroup.directory) yet: \(error)")
                removed = false
            }
        }
        for cgroup in accounting {
            do { try cgroup.remove() } catch {
                logger.warning("cannot remove \(cgroup.directory) yet: \(error)")
                removed = false
            }
        }
        return removed
    }

    private func finish() {
        guard !isGone else { return }
        isGone = true
        keepAlive = nil
        let onGone = self.onGone
        self.onGone = nil
        onExit = nil
        onGone?(self)
    }

    /// Its owner is going away: nothing more is reported to it, and every process of the run is killed;
    /// the run empties and removes its cgroups on its own (`keepAlive`).
    func close() {
        onExit = nil
        onGone = nil
        kill()
    }
}
