// A running daemon: the loop and everything registered on it. Start-up binds the control socket and
// launches the apps, then tells systemd READY=1; SIGTERM and SIGINT terminate every app (will-terminate
// under its budget) and end the loop; the process then exits 0.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// Why the daemon could not start.
struct StartError: Error, CustomStringConvertible {
    var description: String
}

/// The daemon while it runs.
final class DaemonRuntime {
    var configuration: DaemonConfiguration
    let loop: EventLoop
    let logger: Logger
    let supervisor: Supervisor
    let notifier: SystemdNotifier
    let services: ServiceRegistry
    let delegates: [String: () -> AppDelegate]
    let hookEnvironment: [String: String]
    let options: DaemonOptions
    var isReloading = false
    private var controlServer: ControlServer?
    private var signalWatchers: [SignalWatcher] = []
    private var stallWatchdog: LoopStallWatchdog?
    private(set) var isShuttingDown = false

    init(configuration: DaemonConfiguration, options: DaemonOptions, services: ServiceRegistry,
         delegates: [String: () -> AppDelegate]) throws(StartError) {
        self.configuration = configuration
        self.options = options
        self.services = services
        self.delegates = delegates
        let environment = processEnvironment()
        logger = Logger(label: "netlifed", minimumLevel: configuration.logLevel)
        notifier = SystemdNotifier(environment: environment, logger: logger)
        do {
            loop = try EventLoop()
        } catch {
            throw StartError(description: "cannot create the event loop: \(error)")
        }
        supervisor = Supervisor(loop: loop, logger: logger)
        let controlPath = configuration.control ?? DaemonOptions.defaultControlPath(environment: environment)
        var hookEnvironment = environment
        hookEnvironment["NETLIFE_CONTROL"] = controlPath
        hookEnvironment["NOTIFY_SOCKET"] = nil
        self.hookEnvironment = hookEnvironment
        do {
            try supervisor.makeApps(configuration, services: services, delegates: delegates, hookEnvironment: hookEnvironment)
        } catch {
            throw StartError(description: "\(configuration.file): \(error.message)")
        }
        var group: gid_t?
        if let name = configuration.controlGroup {
            guard let entry = getgrnam(name) else { throw StartError(description: "control-group: no group named '\(name)'") }
            group = entry.pointee.gr_gid
        }
        let server = ControlServer(path: controlPath, group: group, loop: loop, logger: logger) { [unowned self] request, session, reply in
            ControlCommands.dispatch(request, supervisor: supervisor, daemon: self, session: session, reply: reply)
        }
        do {
            try server.start()
        } catch {
            throw StartError(description: error.description)
        }
        controlServer = server
        supervisor.onAppStateChange = { [unowned self] _ in
            notifier.notify("STATUS=\(supervisor.statusLine)")
        }
    }

    /// Runs until SIGTERM or SIGINT has terminated every app. Returns the exit status.
    func run() -> Int32 {
        do {
            for signal in [SIGTERM, SIGINT] {
                signalWatchers.append(try SignalWatcher(loop: loop, signal: signal) { [unowned self] in shutDown(signal: signal) })
            }
            signalWatchers.append(try SignalWatcher(loop: loop, signal: SIGHUP) { [unowned self] in
                logger.notice("SIGHUP: reloading \(configuration.file)")
                reload { _ in }
            })
        } catch {
            logger.critical("cannot watch signals: \(error)")
            return 1
        }
        restartStallWatchdog(threshold: configuration.loopStall)
        logger.notice("netlifed \(ControlProtocol.daemonVersion) starting with \(configuration.file): \(supervisor.apps.count) app(s)")
        supervisor.launchApps { [unowned self] in
            logger.notice("ready: \(supervisor.statusLine)")
            notifier.notify("READY=1\nSTATUS=\(supervisor.statusLine)\nMAINPID=\(getpid())")
        }
        do {
            try loop.run()
        } catch {
            logger.critical("event loop failed: \(error)")
            return 1
        }
        stallWatchdog?.stop()
        controlServer?.close()
        for watcher in signalWatchers { watcher.close() }
        logger.notice("stopped")
        return 0
    }

    /// (Re)starts the event loop's own watchdog (SPEC section 5): a stall longer than `threshold` sends
    /// WATCHDOG=trigger to systemd and aborts, so that systemd records the watchdog and restarts the unit.
    func restartStallWatchdog(threshold: Duration) {
        stallWatchdog?.stop()
        let notifier = self.notifier
        let logger = self.logger
        let watchdog = LoopStallWatchdog(threshold: threshold) { stalled in
            notifier.notify("WATCHDOG=trigger")
            logger.critical("the event loop has stalled for \(Int(stalled.milliseconds)) ms (loop-stall is \(Int(threshold.milliseconds)) ms): aborting")
            abort()
        }
        watchdog.start(on: loop)
        stallWatchdog = watchdog
    }

    private func shutDown(signal: CInt) {
        guard !isShuttingDown else {
            logger.notice("already shutting down; waiting for the apps' will-terminate")
            return
        }
        isShuttingDown = true
        logger.notice("\(signal == SIGTERM ? "SIGTERM" : "SIGINT"): terminating every app")
        notifier.notify("STOPPING=1")
        supervisor.terminateAll { [unowned self] in
            // Let the last replies and FINs go out before the loop ends.
            loop.schedule(after: .milliseconds(10)) { [unowned self] in loop.stop() }
        }
    }
}
