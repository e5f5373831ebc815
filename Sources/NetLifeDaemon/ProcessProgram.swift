// The program of a process app (SPEC section 12): the shell that performs what the App decides, with the
// pieces that know the kernel. It starts the program through ChildProcess with the app's listeners at
// descriptors 3.. (socket activation) and its end of a socketpair after them (NETLIFE_EVENTS), inside a
// cgroup of its own (ProcessCgroup: v2, else the v1 freezer, else only a process group with SIGSTOP, with a
// warning), freezes and thaws it, ends it (SIGTERM, then the whole cgroup killed) and resets its TCP
// connections through pidfd_getfd (ProcessSockets). The lifecycle protocol's rules are
// LifecycleChannelState's; this class carries its lines.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// A process app's program on the loop.
final class ProcessProgram: AppProgram {
    var onExit: ((ChildExitStatus) -> Void)?
    var beginTask: ((String?) -> BackgroundTaskIdentifier)?
    var endTask: ((BackgroundTaskIdentifier) -> Void)?

    private let app: String
    private let configuration: ProgramConfiguration
    private let environment: [String: String]
    private unowned let loop: EventLoop
    private let logger: Logger
    private var child: ChildProcess?
    private var cgroup: ProcessCgroup?
    private var cleanup: EventTimer?
    private var channel = LifecycleChannelState()
    private var channelSession: LifecycleChannelSession?
    /// Called when the stage awaited is answered.
    private var answered: (() -> Void)?
    /// Set once netlifed asked the program to end: its exit is then expected and not reported.
    private var ending = false
    private var stopTimer: EventTimer?
    private var frozen = false
    private var warnedAboutStop = false

    init(app: String, configuration: ProgramConfiguration, environment: [String: String], loop: EventLoop, logger: Logger) {
        self.app = app
        self.configuration = configuration
        self.environment = environment
        self.loop = loop
        self.logger = logger.labeled("app \(app) program")
    }

    var isRunning: Bool { child?.exitStatus == nil && child != nil }
    var speaksProtocol: Bool { channel.isSubscribed && !channel.isClosed }
    var isGone: Bool { !isRunning && cgroup == nil }

    // MARK: Starting

    func start(listeners: [(name: String, fd: CInt)]) throws(SystemError) {
        guard !isRunning else { return }
        // A program that cannot be executed is an error here ("cannot start: execvp(NAME): ..."), not the
        // script's exit 127 after a cgroup was made for it. The script's PATH is the program's.
        let searchPath = configuration.environment["PATH"] ?? self.environment["PATH"]
        _ = try ChildProcess.locateProgram(configuration.arguments[0], searchPath: searchPath, directory: configuration.workingDirectory)
        reset()
        let cgroup = makeCgroup()
        self.cgroup = cgroup
        var pair: [CInt] = [-1, -1]
        do {
            try sys("socketpair") { socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &pair) }
        } catch {
            removeCgroup()
            throw error
        }
        defer { if pair[1] >= 0 { Glibc.close(pair[1]) } }
        var environment = self.environment
        for (key, value) in configuration.environment { environment[key] = value }
        environment["NETLIFE_APP"] = app
        environment["NETLIFE_EVENTS"] = String(ChildLaunchOptions.firstDescriptor + CInt(listeners.count))
        let options = ChildLaunchOptions(descriptors: listeners.map(\.fd) + [pair[1]], listenerNames: listeners.map(\.name),
                                         workingDirectory: configuration.workingDirectory,
                                         joinCgroups: cgroup.map { [$0.directory] } ?? [],
                                         user: configuration.user.map { ChildUser(uid: $0.uid, gid: $0.gid) })
        let logger = self.logger
        do throws(SystemError) {
            child = try ChildProcess(loop: loop, arguments: configuration.arguments, environment: environment, options: options,
                                     onOutput: { output in
                                         switch output {
                                         case .line(let text): logger.info(text)
                                         case .dropped(let count): logger.warning("dropped \(count) lines of output")
                                         }
                                     },
                                     onExit: { [weak self] status in self?.exited(status) })
        } catch {
            Glibc.close(pair[0])
            removeCgroup()
            throw error
        }
        do {
            let session = try LifecycleChannelSession(loop: loop, fd: pair[0]) { [weak self] bytes in self?.received(bytes) }
                closed: { [weak self] in self?.perform(self?.channel.peerClosed() ?? []) }
            channelSession = session
        } catch {
            Glibc.close(pair[0])
            logger.warning("the lifecycle channel could not be set up (\(error)): the program runs without it")
        }
        let where_ = cgroup.map { "in \($0.directory)" } ?? "in its own process group"
        let as_ = configuration.user.map { " as \($0.name)" } ?? ""
        logger.notice("started \(configuration.arguments[0])\(as_) (pid \(child?.pid ?? 0)) \(where_) with \(listeners.count) listener(s)")
    }

    private func makeCgroup() -> ProcessCgroup? {
        let choice: CgroupChoice
        do {
            choice = try CgroupLayout.current().choose(isWritable: ProcessCgroup.isWritable)
        } catch {
            choice = .processGroup(reason: "cannot read the cgroup layout: \(error)")
        }
        do {
            if let made = try ProcessCgroup.create(named: ProcessCgroup.name(forApp: app), in: choice) { return made }
        } catch {
            logger.warning("cannot create a cgroup (\(error))")
        }
        if case .processGroup(let reason) = choice {
            logger.warning("no cgroup (\(reason)): the program is held in a process group, frozen with SIGSTOP, which it can observe")
        }
        return nil
    }

    private func reset() {
        channel = LifecycleChannelState()
        channelSession?.close()
        channelSession = nil
        answered = nil
        ending = false
        frozen = false
        stopTimer?.close()
        stopTimer = nil
    }

    // MARK: The protocol

    func deliver(_ event: LifecycleEvent, budget: Duration, listeners: NetLife.ListenerHint?, answered: @escaping () -> Void) -> Bool {
        guard isRunning else { return false }
        let hint = listeners.flatMap { ListenerHint(rawValue: $0.rawValue) }
        let actions = channel.deliver(event, budget: budget, listeners: hint, now: .now())
        if actions.contains(.stageCompleted(event)) { return false }
        self.answered = answered
        perform(actions)
        return true
    }

    func taskExpiring(_ id: BackgroundTaskIdentifier, budget: Duration) {
        perform(channel.taskExpiring(id, budget: budget))
    }

    private func received(_ bytes: [UInt8]) {
        perform(channel.receive(bytes, now: .now()) { [weak self] name in self?.beginTask?(name) ?? 0 })
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
            case .watchdogKill:
                // The app's pipeline deadline is the same budget: its watchdog kills the program.
                break
            case .endTask(let id):
                endTask?(id)
            case .expirationHandled, .declareVoIP:
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

    func freeze() {
        guard isRunning, !frozen else { return }
        frozen = true
        if let cgroup {
            do { try cgroup.freeze() } catch { logger.error("cannot freeze \(cgroup.directory): \(error)") }
        } else {
            child?.signalGroup(SIGSTOP)
        }
    }

    func thaw() {
        guard frozen else { return }
        frozen = false
        if let cgroup {
            do { try cgroup.thaw() } catch { logger.error("cannot thaw \(cgroup.directory): \(error)") }
        } else {
            child?.signalGroup(SIGCONT)
        }
    }

    func stop(grace: Duration) {
        guard isRunning, !ending else { return }
        ending = true
        answered = nil
        thaw()
        if let cgroup, let members = try? cgroup.members() {
            for pid in members { Glibc.kill(pid, SIGTERM) }
        } else {
            child?.signalGroup(SIGTERM)
        }
        stopTimer = loop.schedule(after: grace) { [weak self] in
            guard let self, isRunning else { return }
            logger.warning("still running \(grace) after SIGTERM: killed")
            killAll()
        }
    }

    func kill() {
        guard isRunning || cgroup != nil else { return }
        ending = true
        answered = nil
        killAll()
    }

    private func killAll() {
        frozen = false
        channelSession?.close()
        channelSession = nil
        if let cgroup {
            cleanup?.close()
            cleanup = cgroup.killUntilEmpty(loop: loop, timeout: .seconds(5)) { [weak self] empty in
                guard let self else { return }
                if !empty { logger.error("processes are left in \(cgroup.directory) after SIGKILL") }
            }
        }
        // The main process too (in a process group only, or faster than the cgroup round).
        child?.signalGroup(SIGCONT)
        child?.signalGroup(SIGKILL)
    }

    private func exited(_ status: ChildExitStatus) {
        stopTimer?.close()
        stopTimer = nil
        channelSession?.close()
        channelSession = nil
        frozen = false
        let expected = ending
        // What it left behind goes with it, then the cgroup.
        if let cgroup {
            cleanup?.close()
            cleanup = cgroup.killUntilEmpty(loop: loop, timeout: .seconds(5)) { [weak self] _ in self?.removeCgroup() }
        }
        logger.notice("the program exited: \(status)")
        answered = nil
        if !expected { onExit?(status) }
    }

    private func removeCgroup() {
        cleanup?.close()
        cleanup = nil
        guard let cgroup else { return }
        self.cgroup = nil
        do { try cgroup.remove() } catch { logger.warning("cannot remove \(cgroup.directory): \(error)") }
    }

    // MARK: Reclaim, status

    func reclaimSockets() -> Int {
        guard isRunning, let child, let pidfd = child.processDescriptor else { return 0 }
        do {
            let report = try ProcessSockets.reclaim(pid: child.pid, pidfd: pidfd, sparing: channel.voipDescriptors)
            for failure in report.failures { logger.warning("reclaim: \(failure)") }
            if !report.reset.isEmpty {
                logger.info("reclaimed \(report.reset.count) TCP connection(s) of the program (descriptors \(report.reset.map { String($0.fd) }.joined(separator: ", ")))")
            }
            return report.reset.count
        } catch {
            logger.warning("reclaim: \(error)")
            return 0
        }
    }

    var status: ProgramStatus {
        let members = (try? cgroup?.members())??.count ?? (isRunning ? 1 : 0)
        let memory = (try? cgroup?.memoryBytes()).flatMap { $0 }.map { Int(clamping: $0) }
        return ProgramStatus(pid: isRunning ? child?.pid : nil, cgroup: cgroup?.directory,
                             containment: cgroup.map { $0.kind == .v2 ? "cgroup-v2" : "cgroup-v1-freezer" } ?? "process-group",
                             frozen: frozen, memoryBytes: memory, speaksProtocol: speaksProtocol, members: members)
    }

    deinit {
        stopTimer?.close()
        cleanup?.close()
        channelSession?.close()
    }
}
