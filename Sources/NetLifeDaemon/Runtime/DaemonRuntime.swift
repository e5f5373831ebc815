// A running daemon: the loop and everything registered on it. Start-up binds the control socket and
// launches the apps, then tells systemd READY=1; SIGTERM and SIGINT terminate every app (will-terminate
// under its budget) and end the loop; SIGHUP reloads the config (ignored once shutdown began). The loop is
// then closed with everything still registered on it, and the process exits 0.

@preconcurrency import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent

/// Why the daemon could not start.
struct StartError: Error, CustomStringConvertible {
    var description: String
    /// The config is at fault (netlifed exits with `Daemon.ExitStatus.configError`): starting again
    /// without changing it fails the same way.
    var isConfigError = false
}

/// The daemon while it runs.
final class DaemonRuntime {
    var configuration: DaemonConfiguration
    let loop: EventLoop
    let logger: Logger
    let supervisor: Supervisor
    let notifier: SystemdNotifier
    let announcer: SystemdAnnouncer
    /// Whether the last STATUS= said degraded: only then can a listener's opening change it.
    private var degradedAnnounced = false
    let services: ServiceRegistry
    let delegates: [String: () -> AppDelegate]
    let hookEnvironment: [String: String]
    let options: DaemonOptions
    var isReloading = false
    /// Refused control requests are logged within this limit (a member may send them without end).
    var refusalLog = LogLimiter()
    private var controlServer: ControlServer?
    private var signalWatchers: [SignalWatcher] = []
    private var stallWatchdog: LoopStallWatchdog?
    private var systemdPinger: SystemdWatchdogPinger?
    private var mdnsPublisher: MDNSPublisher?
    /// `/metrics` (`[daemon] metrics`), and the counts it keeps.
    private var metricsServer: MetricsServer?
    /// Kills and removes what a netlifed that is gone left in the cgroups apps are placed in.
    private var leftoverSweep: EventTimer?
    /// The kernel's memory pressure trigger (`memory-pressure-trigger`), while one is armed.
    var pressureTrigger: ArmedPressureTrigger?
    /// The `netlifectl watch` connections.
    let watchers: Watchers
    /// The downloads (`netlifectl download`, `transfers`).
    let transfers: Transfers
    private(set) var isShuttingDown = false
    /// RLIMIT_NOFILE after start-up raised it (nil when it could not be read), for the `version` reply.
    var openFileLimit: OpenFileLimit?

    init(configuration: DaemonConfiguration, options: DaemonOptions, services: ServiceRegistry,
         delegates: [String: () -> AppDelegate]) throws(StartError) {
        self.configuration = configuration
        self.options = options
        self.services = services
        self.delegates = delegates
        // A start-up error after the loop exists closes it (and the apps' sources) before throwing.
        let environment = processEnvironment()
        logger = Logger(label: "netlifed", minimumLevel: configuration.logLevel)
        notifier = SystemdNotifier(environment: environment, logger: logger)
        do {
            loop = try EventLoop()
        } catch {
            throw StartError(description: "cannot create the event loop: \(error)")
        }
        announcer = SystemdAnnouncer(notifier: notifier, loop: loop)
        watchers = Watchers(logger: logger)
        supervisor = Supervisor(loop: loop, logger: logger)
        let controlPath = configuration.control ?? DaemonOptions.defaultControlPath(environment: environment)
        // As systemd services do: the config's, else systemd's StateDirectory= ($STATE_DIRECTORY), else the
        // control socket's directory.
        let stateDirectory = configuration.stateDirectory
            ?? environment["STATE_DIRECTORY"].flatMap { $0.split(separator: ":").first.map(String.init) }.flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? directoryName(controlPath)
        transfers = Transfers(loop: loop, logger: logger, journalPath: stateDirectory + "/transfers.json",
                              limits: configuration.transferLimits)
        var hookEnvironment = environment
        hookEnvironment["NETLIFE_CONTROL"] = controlPath
        // systemd's notification, watchdog and memory-pressure settings are the daemon's, not its hooks' or
        // programs' (a program that honoured MEMORY_PRESSURE_WATCH would watch the daemon's cgroup, not its own).
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "MEMORY_PRESSURE_WATCH", "MEMORY_PRESSURE_WRITE"] {
            hookEnvironment[key] = nil
        }
        self.hookEnvironment = hookEnvironment
        do {
            try supervisor.makeApps(configuration, services: services, delegates: delegates, hookEnvironment: hookEnvironment)
        } catch {
            loop.close()
            throw StartError(description: "\(configuration.file): \(error.message)", isConfigError: true)
        }
        if let trigger = configuration.memoryPressureTrigger {
            do {
                pressureTrigger = try armPressureTrigger(trigger)
            } catch {
                loop.close()
                throw StartError(description: "\(configuration.file): \(error.message)", isConfigError: error.isConfigError)
            }
        }
        var group: gid_t?
        if let name = configuration.controlGroup {
            guard let entry = getgrnam(name) else {
                loop.close()
                throw StartError(description: "control-group: no group named '\(name)'", isConfigError: true)
            }
            group = entry.pointee.gr_gid
        }
        // The closures stored on the loop hold the runtime weakly: one that outlived it does nothing.
        let server = ControlServer(path: controlPath, group: group, loop: loop, logger: logger) { [weak self] request, session, reply in
            guard let self else { return }
            ControlCommands.dispatch(request, supervisor: supervisor, daemon: self, session: session, reply: reply)
        }
        do {
            try server.start()
        } catch {
            loop.close()
            throw StartError(description: error.description)
        }
        controlServer = server
        if let address = configuration.metrics {
            let metrics = MetricsServer(address: address, loop: loop, logger: logger)
            do {
                try metrics.start()
            } catch {
                server.close()
                loop.close()
                throw StartError(description: "cannot listen for metrics on \(address): \(error)")
            }
            metrics.apps = { [weak supervisor] in supervisor?.apps ?? [] }
            metrics.transferBytes = { [weak transfers] in transfers?.movedBytes ?? [:] }
            server.onReply = { [weak metrics] request, reply in metrics?.recordControlRequest(request, reply: reply) }
            metricsServer = metrics
        }
        supervisor.onAppEvent = { [weak self] app, event in self?.appEvent(app, event) }
    }

    /// Where `/metrics` is served (with the port the kernel chose), or nil.
    var metricsAddress: String? { metricsServer?.address.description }

    /// Runs until SIGTERM or SIGINT has terminated every app, then tears everything down (`tearDown()`).
    /// Returns the exit status.
    func run() -> Int32 {
        defer { tearDown() }
        do {
            // libevent remembers the disposition it finds and restores it when a watcher closes. Ignoring the
            // signals first makes that "ignore": a SIGTERM that arrives while the daemon tears down after a
            // clean shutdown never turns the exit into "killed by signal". (Between this line and the next a
            // signal would be lost; that is microseconds at start-up, before READY=1.)
            ignoreSignals([SIGTERM, SIGINT, SIGHUP])
            for signal in [SIGTERM, SIGINT] {
                signalWatchers.append(try SignalWatcher(loop: loop, signal: signal) { [weak self] in self?.shutDown(signal: signal) })
            }
            signalWatchers.append(try SignalWatcher(loop: loop, signal: SIGHUP) { [weak self] in self?.hangUp() })
        } catch {
            logger.critical("cannot watch signals: \(error)")
            return 1
        }
        restartStallWatchdog(threshold: configuration.loopStall)
        systemdPinger = SystemdWatchdogPinger(environment: processEnvironment(), pid: getpid(), notifier: notifier, loop: loop)
        removeLeftoverCgroups()
        // mDNS follows every listener; it connects to avahi-daemon only once a listener with `mdns` opens.
        let publisher = MDNSPublisher(loop: loop, logger: logger)
        mdnsPublisher = publisher
        logger.notice("netlifed \(ControlProtocol.daemonVersion) starting with \(configuration.file): \(supervisor.apps.count) app(s), open files limit \(openFileLimit.map { OpenFileLimit.format($0.soft) } ?? "unknown")")
        let supervisor = self.supervisor
        transfers.appNamed = { [weak supervisor] name in supervisor?.app(named: name) }
        supervisor.runningTransfers = { [weak transfers] name in transfers?.runningCount(app: name) ?? 0 }
        transfers.restore()
        supervisor.launchApps { [weak self] in
            guard let self else { return }
            transfers.resumeRestored()
            // Degraded or not, READY=1: the apps that could start serve.
            let reasons = supervisor.degradedReasons
            let line = supervisor.statusLine(degradedBy: reasons)
            degradedAnnounced = !reasons.isEmpty
            if reasons.isEmpty { logger.notice("ready: \(line)") } else { logger.warning("ready: \(line)") }
            announcer.state("READY=1\nSTATUS=\(line)\nMAINPID=\(getpid())")
        }
        do {
            try loop.run()
        } catch {
            logger.critical("event loop failed: \(error)")
            return 1
        }
        logger.notice("stopped")
        return 0
    }

    /// The end of `run()`: the watchdog thread is joined, the control socket and signal watchers closed, and
    /// the loop closes every source still registered (sessions, hooks, timers) and is freed. Those sources'
    /// closures reach this runtime, which holds the loop: only closing them breaks that cycle, so that the
    /// process ends with nothing leaked. Idempotent.
    /// The programs a netlifed that ended without cleaning up left running in their cgroups (killed, or
    /// aborted by its loop-stall watchdog) are killed and their cgroups removed, in the background of the
    /// start-up: nothing waits for it.
    private func removeLeftoverCgroups() {
        guard let layout = try? CgroupLayout.current() else { return }
        let logger = self.logger
        leftoverSweep = CgroupLeftovers.remove(in: layout, loop: loop, timeout: .seconds(10)) { removed, left in
            if !removed.isEmpty {
                logger.warning("removed \(removed.count) cgroup(s) that a netlifed no longer running left behind, with their processes: \(removed.joined(separator: ", "))")
            }
            for directory in left { logger.error("cannot empty and remove \(directory), left by a netlifed no longer running") }
        }
    }

    func tearDown() {
        leftoverSweep?.close()
        leftoverSweep = nil
        stallWatchdog?.stop()
        stallWatchdog = nil
        let madeControlDirectory = controlServer?.madeDirectory
        controlServer?.close()
        controlServer = nil
        metricsServer?.close()
        metricsServer = nil
        // The control socket's directory, if this daemon made it, goes at the very end, once nothing more
        // can be written there (the transfers' records, when it is also the state directory), and only if
        // it is empty: a host is left as it was found, and nothing in the directory is lost.
        defer { if let madeControlDirectory { rmdir(madeControlDirectory) } }
        // Closing a signal watcher restores the disposition libevent found when it was made: "ignore" (see
        // `run()`), so no signal can end the process during the rest of the teardown.
        let watched = signalWatchers.map(\.signal)
        for watcher in signalWatchers { watcher.close() }
        ignoreSignals(watched)
        signalWatchers = []
        announcer.close()
        systemdPinger?.close()
        systemdPinger = nil
        mdnsPublisher?.close()
        mdnsPublisher = nil
        pressureTrigger?.watcher.close()
        pressureTrigger = nil
        transfers.close()
        guard !loop.isClosed else { return }
        let leftovers = loop.close()
        if !leftovers.isEmpty {
            let counts = Dictionary(leftovers.map { ($0, 1) }, uniquingKeysWith: +).sorted { $0.key < $1.key }
            logger.debug("closed at exit: \(counts.map { "\($0.value) \($0.key)" }.joined(separator: ", "))")
        }
    }

    /// The loop-stall watchdog: a stall longer than `threshold` sends WATCHDOG=trigger to
    /// systemd and aborts, so that systemd records the watchdog and restarts the unit. The first call starts
    /// it; later ones (a reload) change its threshold in place: one watching thread for the daemon's lifetime.
    func restartStallWatchdog(threshold: Duration) {
        if let stallWatchdog {
            stallWatchdog.threshold = threshold
            return
        }
        // The handler runs on the watchdog's thread: it uses only copies (Logger's level is atomic).
        let notifier = self.notifier
        let logger = self.logger
        let watchdog = LoopStallWatchdog(threshold: threshold) { stalled, threshold in
            notifier.notify("WATCHDOG=trigger")
            logger.critical("the event loop has stalled for \(Int(stalled.milliseconds)) ms (loop-stall is \(Int(threshold.milliseconds)) ms): aborting")
            abort()
        }
        watchdog.start(on: loop)
        stallWatchdog = watchdog
    }

    /// SIGHUP: reload the config, unless shutdown has begun (a reload then could launch apps that would
    /// never get will-terminate).
    private func hangUp() {
        guard !isShuttingDown else {
            logger.notice("SIGHUP ignored: shutting down")
            return
        }
        logger.notice("SIGHUP: reloading \(configuration.file)")
        reload { _ in }
    }

    private func shutDown(signal: CInt) {
        guard !isShuttingDown else {
            logger.notice("already shutting down; waiting for the apps' will-terminate")
            return
        }
        isShuttingDown = true
        logger.notice("\(signal == SIGTERM ? "SIGTERM" : "SIGINT"): terminating every app")
        announcer.state("STOPPING=1")
        supervisor.terminateAll { [weak self] in
            guard let self else { return }
            let grace = (supervisor.apps.map(\.configuration.budgets.terminate).max() ?? .zero) + .seconds(1)
            waitForPrograms(until: .now() + grace) { [weak self] in
                guard let self else { return }
                watchers.endAll("netlifed is stopping")
                // Let the last replies and FINs go out before the loop ends.
                loop.schedule(after: .milliseconds(10)) { [weak self] in self?.loop.stop() }
            }
        }
    }

    /// Process apps' programs end after their app (SIGTERM, then their cgroup killed after the terminate
    /// budget): the daemon waits until nothing of them is left, polling every 10 ms, at most until `deadline`.
    private func waitForPrograms(until deadline: MonotonicTime, then done: @escaping () -> Void) {
        guard supervisor.apps.contains(where: \.hasProgramLeft), MonotonicTime.now() < deadline else { return done() }
        loop.schedule(after: .milliseconds(10)) { [weak self] in self?.waitForPrograms(until: deadline, then: done) }
    }

    /// Sends STATUS= (coalesced to one per loop turn), noting whether it said degraded.
    private func announceStatus() {
        let reasons = supervisor.degradedReasons
        degradedAnnounced = !reasons.isEmpty
        announcer.status(supervisor.statusLine(degradedBy: reasons))
    }

    /// Everything that happens to an app goes to systemd's STATUS= (state changes), the watch sessions, the
    /// transfers and mDNS, in that order, by direct calls (1,000 listeners closing make 1,000 events).
    private func appEvent(_ app: App, _ event: AppEvent) {
        switch event {
        case .stateChanged, .listenerFailed:
            announceStatus()
        case .listenerOpened, .listenerClosed:
            // Only a degraded daemon can become whole again by a listener opening; the check is skipped
            // otherwise (a foreground of 1,000 listeners makes 1,000 of these events).
            if degradedAnnounced { announceStatus() }
        default:
            break
        }
        metricsServer?.record(event, app: app.name)
        watchers.appEvent(app, event)
        transfers.appEvent(app, event)
        mdnsPublisher?.appEvent(app, event)
    }
}
