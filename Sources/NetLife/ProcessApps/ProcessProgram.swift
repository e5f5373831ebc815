// The program of a process app (docs/process-apps.md): the shell that performs what the App decides, with the
// pieces that know the kernel. It starts the program through ChildProcess with the app's listeners at
// descriptors 3.. (socket activation) and its end of a socketpair after them (NETLIFE_EVENTS), inside a
// cgroup of its own (ProcessCgroup: v2, else the v1 freezer, else only a process group with SIGSTOP, with a
// warning), freezes and thaws it, ends it (SIGTERM, then the whole cgroup killed) and resets its TCP
// connections through pidfd_getfd (ProcessSockets). Each run gets a NOTIFY_SOCKET of its own
// (NotifySocketSession: systemd's READY=1, STATUS=, WATCHDOG=1), told to the App through `onNotify`; the
// watchdog's deadline is ProgramNotifyState's. The lifecycle protocol's rules are
// LifecycleChannelState's; this class carries its lines. It decides no deadline: an unanswered stage is the
// App's TransitionPipeline's to kill, and the program's tasks live in the App's BackgroundTaskRegistry
// (through `tasks`). Each start is a ProgramRun of its own: the current run is the one the
// app drives; runs asked to end, or whose main process exited, are kept until nothing of them is left, and a
// launch waits for them (`afterEarlierRunsEnd`).

@preconcurrency import Glibc
import NetLifeEvent

/// A process app's program on the loop: what the daemon hands an App whose configuration has a program.
public final class ProcessProgram: AppProgram {
    public var onExit: ((ChildExitStatus) -> Void)?
    public var onNotify: ((ProgramNotifyState.Action) -> Void)?
    public var tasks = ProgramTasks.none

    private let app: String
    private let configuration: ProgramConfiguration
    private let environment: [String: String]
    private unowned let loop: EventLoop
    private let logger: Logger
    /// The run the app drives: started, not asked to end, its main process not seen to exit.
    private var current: ProgramRun?
    /// Earlier runs still ending: asked to end, or their cgroups still emptying.
    private var endingRuns: [ProgramRun] = []
    /// How many runs were started (the next run's number is one more).
    private var runCount = 0
    /// Called once no earlier run is left (a launch waiting for them).
    private var afterRunsEnd: (() -> Void)?
    private var channel = LifecycleChannelState()
    private var channelSession: LifecycleChannelSession?
    /// Called when the stage awaited is answered.
    private var answered: (() -> Void)?
    /// The current run's NOTIFY_SOCKET.
    private var notifySession: NotifySocketSession?
    /// The NOTIFY_SOCKETs of runs asked to end, until their main process exits (their STOPPING=1 is told).
    private var endingNotifySessions: [ObjectIdentifier: NotifySocketSession] = [:]
    /// Counts the connections on the `on-background = wake` listeners' ports, remembering each socket.
    private let census = ServedConnectionCensus()

    /// A program for app `app`, run as `configuration` says with `environment` (the hooks'), on `loop`.
    public init(app: String, configuration: ProgramConfiguration, environment: [String: String], loop: EventLoop, logger: Logger) {
        self.app = app
        self.configuration = configuration
        self.environment = environment
        self.loop = loop
        self.logger = logger.labeled("app \(app) program").adding(field: "NETLIFE_APP", app)
    }

    public var isRunning: Bool { current?.isRunning ?? false }
    public var speaksProtocol: Bool { channel.isSubscribed && !channel.isClosed }
    public var onProtocolChange: (() -> Void)?
    /// `speaksProtocol` as last told to `onProtocolChange`.
    private var toldSpeaksProtocol = false
    public var isGone: Bool { current == nil && endingRuns.isEmpty }

    // MARK: Starting

    public func afterEarlierRunsEnd(_ done: @escaping () -> Void) -> Bool {
        guard current == nil, !endingRuns.isEmpty else { return false }
        let left = endingRuns.reduce(0) { $0 + $1.memberCount }
        logger.notice("waiting for run \(endingRuns.map { String($0.number) }.joined(separator: ", ")) to end "
                      + "(\(left) process(es) left) before starting run \(runCount + 1)")
        afterRunsEnd = done
        return true
    }

    public func start(listeners: [(name: String, fd: CInt)]) throws(SystemError) {
        guard !isRunning else { return }
        // A program that cannot be executed is an error here ("cannot start: execvp(NAME): ..."), not the
        // script's exit 127 after a cgroup was made for it. The script's PATH is the program's.
        let searchPath = configuration.environment["PATH"] ?? self.environment["PATH"]
        _ = try ChildProcess.locateProgram(configuration.arguments[0], searchPath: searchPath, directory: configuration.workingDirectory)
        resetChannel()
        runCount += 1
        let run = makeRun(number: runCount)
        var pair: [CInt] = [-1, -1]
        do {
            try sys("socketpair") { socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &pair) }
        } catch {
            run.abandon()
            throw error
        }
        defer { if pair[1] >= 0 { SocketCalls.close(pair[1]) } }
        var environment = self.environment
        for (key, value) in configuration.environment { environment[key] = value }
        environment["NETLIFE_APP"] = app
        environment["NETLIFE_EVENTS"] = String(ChildLaunchOptions.firstDescriptor + CInt(listeners.count))
        // The notify socket is netlifed's, whatever the configured environment says: it is how the program
        // says READY=1 and pings its watchdog.
        let notify: NotifySocketSession
        do {
            notify = try makeNotifySession(for: run)
        } catch {
            SocketCalls.close(pair[0])
            run.abandon()
            throw error
        }
        environment["NOTIFY_SOCKET"] = notify.address
        environment["WATCHDOG_USEC"] = configuration.watchdog.map { String(Self.microseconds($0)) }
        environment["WATCHDOG_PID"] = nil
        var options = ChildLaunchOptions(descriptors: listeners.map(\.fd) + [pair[1]], listenerNames: listeners.map(\.name),
                                         workingDirectory: configuration.workingDirectory, joinCgroups: run.joinDirectories,
                                         user: configuration.user.map { ChildUser(uid: $0.uid, gid: $0.gid) })
        options.watchdogPID = configuration.watchdog != nil
        let logger = self.logger
        run.onExit = { [weak self] run, status in self?.exited(run, status) }
        run.onGone = { [weak self] run in self?.gone(run) }
        do throws(SystemError) {
            try run.launch(arguments: configuration.arguments, environment: environment, options: options) { output in
                switch output {
                case .line(let text): logger.info(text)
                case .dropped(let count): logger.warning("dropped \(count) lines of output")
                }
            }
        } catch {
            SocketCalls.close(pair[0])
            notify.close()
            throw error
        }
        current = run
        notifySession = notify
        do {
            let session = try LifecycleChannelSession(loop: loop, fd: pair[0]) { [weak self] bytes in self?.received(bytes) }
                closed: { [weak self] in
                    guard let self else { return }
                    perform(channel.peerClosed())
                    tellProtocolChange()
                }
            channelSession = session
        } catch {
            SocketCalls.close(pair[0])
            logger.warning("the lifecycle channel could not be set up (\(error)): the program runs without it")
        }
        let where_ = run.cgroup.map { "in \($0.directory)" } ?? "in its own process group"
        let as_ = configuration.user.map { " as \($0.name)" } ?? ""
        logger.notice("started \(configuration.arguments[0])\(as_) (run \(run.number), pid \(run.pid ?? 0)) \(where_) with \(listeners.count) listener(s)")
    }

    /// A new run with its cgroups: cgroup2, else the v1 freezer, else none (a warning says why); and v1
    /// memory and pids cgroups where its cgroup accounts neither and those hierarchies are writable.
    private func makeRun(number: Int) -> ProgramRun {
        let layout: CgroupLayout?
        let choice: CgroupChoice
        do {
            var found = try CgroupLayout.current()
            // Apps' cgroups go beside netlifed's leaf, and get the memory and pids controllers where
            // netlifed may enable them (CgroupDelegation).
            if var unified = found.unified {
                unified.directory = CgroupDelegation.appsDirectory(forOwn: unified.directory)
                if ProcessCgroup.isWritable(unified.directory),
                   let note = CgroupDelegation.prepare(directory: unified.directory, mountPoint: unified.mountPoint) {
                    logger.notice(note)
                }
                found.unified = unified
            }
            layout = found
            choice = found.choose(isWritable: ProcessCgroup.isWritable)
        } catch {
            layout = nil
            choice = .processGroup(reason: "cannot read the cgroup layout: \(error)")
        }
        let name = ProcessCgroup.name(forApp: app, run: number)
        var cgroup: ProcessCgroup?
        do {
            cgroup = try ProcessCgroup.create(named: name, in: choice)
        } catch {
            logger.warning("cannot create a cgroup (\(error))")
        }
        if cgroup == nil, case .processGroup(let reason) = choice {
            logger.warning("no cgroup (\(reason)): the program is held in a process group, frozen with SIGSTOP, which it can observe")
        }
        // A cgroup2 without the memory or pids controller (a hybrid layout's) is joined by v1 cgroups of the
        // same name that count for it.
        var accounting: [AccountingCgroup] = []
        if let cgroup {
            let missing: [(AccountingCgroup.Controller, CgroupLayout.Hierarchy?)] = [
                (.memory, cgroup.memoryBytes() == nil ? layout?.memory : nil),
                (.pids, cgroup.taskCount() == nil ? layout?.pids : nil),
            ]
            for case let (controller, hierarchy?) in missing where ProcessCgroup.isWritable(hierarchy.directory) {
                do {
                    accounting.append(try AccountingCgroup(creating: hierarchy.directory + "/" + name, controller: controller))
                } catch {
                    logger.warning("cannot create a \(controller.rawValue) cgroup (\(error)): status counts without it")
                }
            }
        }
        return ProgramRun(number: number, cgroup: cgroup, accounting: accounting, loop: loop, logger: logger)
    }

    /// A NOTIFY_SOCKET for `run`: an abstract name made of netlifed's pid, the app, the run and 32 random
    /// bits (no other run's, no other netlifed's), which takes datagrams only from the run's processes.
    private func makeNotifySession(for run: ProgramRun) throws(SystemError) -> NotifySocketSession {
        let unique = String(ProcessCgroup.name(forApp: app, run: run.number).prefix(90))
        return try NotifySocketSession(loop: loop, name: "netlifed-notify/" + unique, watchdog: configuration.watchdog, logger: logger,
                                       isSender: { [weak run] pid in run?.hasMember(pid: pid) ?? false },
                                       onAction: { [weak self] action in self?.onNotify?(action) })
    }

    /// WATCHDOG_USEC's value.
    static func microseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
    }

    private func resetChannel() {
        channel = LifecycleChannelState()
        channelSession?.close()
        channelSession = nil
        answered = nil
        tellProtocolChange()
    }

    /// Tells the app when the program began or stopped speaking the protocol.
    private func tellProtocolChange() {
        guard speaksProtocol != toldSpeaksProtocol else { return }
        toldSpeaksProtocol = speaksProtocol
        onProtocolChange?()
    }

    // MARK: The protocol

    public func deliver(_ event: LifecycleEvent, budget: Duration, listeners: ListenerHint?, answered: @escaping () -> Void) -> Bool {
        guard isRunning else { return false }
        let actions = channel.deliver(event, budget: budget, listeners: listeners)
        if actions.contains(.stageCompleted(event)) { return false }
        self.answered = answered
        perform(actions)
        tellProtocolChange()
        return true
    }

    public func taskExpiring(_ id: BackgroundTaskIdentifier, budget: Duration) {
        perform(channel.taskExpiring(id, budget: budget))
        tellProtocolChange()
    }

    private func received(_ bytes: [UInt8]) {
        perform(channel.receive(bytes, tasks: tasks))
        tellProtocolChange()
    }

    private func perform(_ actions: [LifecycleChannelState.Action]) {
        for action in actions {
            switch action {
            case .send(let line):
                guard let session = channelSession else { continue }
                if session.pendingBytes > LifecycleChannelState.maxPendingOutputBytes {
                    perform([.cutOff("it does not read what netlifed sends")])
                    return
                }
                session.send(line)
            case .stageCompleted:
                let answered = self.answered
                self.answered = nil
                answered?()
            case .endTask(let id):
                tasks.end(id)
            case .endProgramTasks:
                tasks.endAll()
            case .declareVoIP:
                // Kept in the channel's state, which reclaim reads.
                break
            case .cutOff(let reason):
                logger.warning("lifecycle channel cut off: \(reason); the app goes on without the protocol")
                channelSession?.close()
                channelSession = nil
                perform(channel.peerClosed())
            }
        }
    }

    // MARK: Freezing, ending

    public func freeze() {
        current?.freeze()
        notifySession?.froze()
    }

    public func thaw() {
        current?.thaw()
        notifySession?.thawed()
    }

    public func stop(grace: Duration) {
        afterRunsEnd = nil
        answered = nil
        guard let run = current else { return }
        retire(run)
        run.terminate(grace: grace)
    }

    public func kill() {
        afterRunsEnd = nil
        answered = nil
        if let run = current { retire(run) }
        for run in endingRuns { run.kill() }
        for session in endingNotifySessions.values { session.close() }
        endingNotifySessions.removeAll()
    }

    /// The current run becomes an ending one: the app's protocol with it ends.
    private func retire(_ run: ProgramRun) {
        current = nil
        channelSession?.close()
        channelSession = nil
        if let session = notifySession {
            session.end()
            endingNotifySessions[ObjectIdentifier(run)] = session
        }
        notifySession = nil
        if !run.isGone { endingRuns.append(run) }
    }

    private func exited(_ run: ProgramRun, _ status: ChildExitStatus) {
        let unexpected = run === current
        if unexpected {
            notifySession?.drainAndClose()
            notifySession = nil
        } else {
            endingNotifySessions.removeValue(forKey: ObjectIdentifier(run))?.drainAndClose()
        }
        logger.notice("run \(run.number) (pid \(run.child?.pid ?? 0)) ended: \(status)\(unexpected ? "" : (run.isEnding ? " (asked to end)" : ""))")
        guard unexpected else { return }
        answered = nil
        retire(run)
        onExit?(status)
    }

    private func gone(_ run: ProgramRun) {
        endingNotifySessions.removeValue(forKey: ObjectIdentifier(run))?.close()
        endingRuns.removeAll { $0 === run }
        guard endingRuns.isEmpty, let done = afterRunsEnd else { return }
        afterRunsEnd = nil
        done()
    }

    // MARK: Reclaim, status

    /// Resets the connections of every process of the run (a master's workers hold theirs), the main
    /// process's first; the VoIP sockets the main process declared are spared, in any process that shares
    /// them.
    public func reclaimSockets() -> Int {
        guard let run = current, run.isRunning, let child = run.child, let pidfd = child.processDescriptor else { return 0 }
        var reset = 0
        var spared = Set<UInt64>()
        let others = run.cgroup?.subtreeMembers().filter { $0 != child.pid } ?? []
        for pid in [child.pid] + others {
            do {
                // Another member's pidfd is opened here and closed at the end of this turn.
                var member: FileDescriptor?
                if pid != child.pid { member = FileDescriptor(owning: try SocketCalls.openProcess(pid), name: "pidfd of \(pid)") }
                let memberPidfd = member?.rawValue ?? pidfd
                let descriptors = try ProcessSockets.socketDescriptors(pid: pid)
                if pid == child.pid {
                    spared = Set(descriptors.filter { channel.voipDescriptors.contains($0.fd) }.map(\.inode))
                }
                let targets = ProcessSockets.reclaimTargets(descriptors, sparing: []).filter { !spared.contains($0.inode) }
                let report = ProcessSockets.reset(targets, pidfd: memberPidfd)
                for failure in report.failures { logger.warning("reclaim (pid \(pid)): \(failure)") }
                if !report.reset.isEmpty {
                    logger.info("reclaimed \(report.reset.count) TCP connection(s) of pid \(pid) (descriptors \(report.reset.map { String($0.fd) }.joined(separator: ", ")))")
                }
                reset += report.reset.count
            } catch where pid != child.pid && (error.errno.rawValue == ESRCH || error.errno.rawValue == ENOENT) {
                // It exited while we looked.
            } catch {
                logger.warning("reclaim (pid \(pid)): \(error)")
            }
        }
        return reset
    }

    public func findListeners(at addresses: [SocketAddress]) throws(SystemError) -> [SocketAddress: [HeldListener]] {
        guard let run = current, run.isRunning, let main = run.pid else { return [:] }
        let others = run.cgroup?.subtreeMembers().filter { $0 != main } ?? []
        return try AdoptedListeners.find(addresses: addresses, pids: [main] + others)
    }

    public func take(_ listener: HeldListener) throws(SystemError) -> CInt {
        guard let run = current, run.isRunning, let child = run.child, let pidfd = child.processDescriptor else {
            throw SystemError("pidfd_getfd", Errno(rawValue: ESRCH))
        }
        return try AdoptedListeners.take(listener, mainPid: child.pid, mainPidfd: pidfd)
    }

    public func servedConnections(ports: Set<UInt16>) -> Int {
        currentProcesses.map { census.count(pids: $0, ports: ports) } ?? 0
    }

    /// What the current run's processes have done so far.
    public var activity: ProcessActivity? { currentProcesses.map(ProcessActivity.of(pids:)) }

    /// The current run's processes, its main process first, then the others of its cgroup; nil when it does
    /// not run.
    private var currentProcesses: [Int32]? {
        guard let run = current, run.isRunning, let main = run.pid else { return nil }
        return [main] + (run.cgroup?.subtreeMembers().filter { $0 != main } ?? [])
    }

    /// The current run's, else the newest ending run's figures: two small cgroup files per cgroup of its
    /// subtree, whatever the number of processes.
    public var status: ProgramStatus {
        guard let run = current ?? endingRuns.last else { return .none }
        return ProgramStatus(pid: current?.pid.map(Int.init), cgroup: run.cgroup?.directory, containment: run.containment,
                             frozen: run.isFrozen, memoryBytes: run.memoryBytes, speaksProtocol: current != nil && speaksProtocol,
                             members: run.memberCount, ready: notifySession?.state.isReady ?? false,
                             statusText: notifySession?.state.statusText)
    }

    deinit {
        current?.close()
        for run in endingRuns { run.close() }
        channelSession?.close()
        notifySession?.close()
        for session in endingNotifySessions.values { session.close() }
    }
}
