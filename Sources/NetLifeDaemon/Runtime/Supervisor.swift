// The supervisor owns the apps of a daemon: it makes them from the configuration, launches those that
// `launch` says to at start-up, routes control commands to them, and terminates them all at shutdown.

import NetLife
import NetLifeEvent

/// The apps of one daemon.
final class Supervisor {
    private(set) var apps: [App] = []
    private unowned let loop: EventLoop
    private let logger: Logger
    /// Told everything that happens to every app.
    var onAppEvent: ((App, AppEvent) -> Void)?
    /// How many transfers of the app named so run now (idle detection counts them as use).
    var runningTransfers: ((String) -> Int)?

    init(loop: EventLoop, logger: Logger) {
        self.loop = loop
        self.logger = logger
    }

    /// Makes the apps of `configuration`. A service that cannot be made fails the whole start.
    func makeApps(_ configuration: DaemonConfiguration, services: ServiceRegistry,
                  delegates: [String: () -> AppDelegate], hookEnvironment: [String: String]) throws(ServiceOptionError) {
        for appConfiguration in configuration.apps {
            apps.append(try makeApp(appConfiguration, services: services, delegates: delegates, hookEnvironment: hookEnvironment))
        }
        for name in delegates.keys where !apps.contains(where: { $0.name == name }) {
            logger.warning("a delegate is registered for app '\(name)', which the config does not define")
        }
    }

    func makeApp(_ configuration: AppConfiguration, services: ServiceRegistry,
                 delegates: [String: () -> AppDelegate], hookEnvironment: [String: String]) throws(ServiceOptionError) -> App {
        let app = try App(configuration: configuration, services: services, loop: loop, logger: logger,
                          hookEnvironment: hookEnvironment)
        app.delegate = delegates[app.name]?()
        if let program = configuration.program {
            app.program = ProcessProgram(app: app.name, configuration: program, environment: hookEnvironment, loop: loop, logger: logger)
        }
        app.onEvent = { [weak self] app, event in self?.onAppEvent?(app, event) }
        app.runningTransfers = { [weak self, name = app.name] in self?.runningTransfers?(name) ?? 0 }
        return app
    }

    /// Adds an app at the end.
    func add(_ app: App) {
        apps.append(app)
    }

    /// Removes an app (after it has been terminated), draining it first: commands still queued for it are
    /// answered with `reason`.
    func remove(_ app: App, reason: String) {
        apps.removeAll { $0 === app }
        app.retire(reason: reason)
    }

    /// Puts `new` in the place of `old`, draining `old` first (its queued commands are answered with `reason`).
    func replace(_ old: App, with new: App, reason: String) {
        if let index = apps.firstIndex(where: { $0 === old }) {
            apps[index] = new
        } else {
            apps.append(new)
        }
        old.retire(reason: reason)
    }

    /// The app called `name`.
    func app(named name: String) -> App? {
        apps.first { $0.name == name }
    }

    /// Launches every app whose `launch` is not `no`; `completion` runs when every launch has finished.
    func launchApps(completion: @escaping () -> Void) {
        let launching = apps.filter { $0.configuration.launch != .no }
        var remaining = launching.count
        guard remaining > 0 else { completion(); return }
        for app in launching {
            app.perform(.launch(background: app.configuration.launch == .background)) { [logger] outcome in
                if case .killed = outcome { logger.error("app \(app.name) was killed by the watchdog while launching") }
                remaining -= 1
                if remaining == 0 { completion() }
            }
        }
    }

    /// Terminates every running app (will-terminate, under each app's terminate budget); `completion` runs
    /// when all are not-running.
    func terminateAll(completion: @escaping () -> Void) {
        var remaining = apps.count
        guard remaining > 0 else { completion(); return }
        for app in apps {
            app.perform(.terminate, cause: .shutdown) { _ in
                remaining -= 1
                if remaining == 0 { completion() }
            }
        }
    }

    /// One line for systemd's STATUS=: each app and its state, after what degrades the daemon, if anything.
    var statusLine: String { statusLine(degradedBy: degradedReasons) }

    /// The status line, given `degradedReasons`.
    func statusLine(degradedBy reasons: [String]) -> String {
        let states = apps.isEmpty ? "no app configured" : apps.map { "\($0.name) \($0.state)" }.joined(separator: ", ")
        return reasons.isEmpty ? states : "degraded (\(reasons.joined(separator: "; "))): \(states)"
    }

    /// Why the daemon serves less than its config asks: each listener that cannot open (its port is taken,
    /// its address is gone), with its error, while its open is retried. READY=1 is sent all the same: the
    /// other apps serve.
    var degradedReasons: [String] {
        apps.flatMap { app in
            app.status.listeners.compactMap { listener in
                listener.error.map { "listener \(app.name).\(listener.name) on \(listener.address): \($0)" }
            }
        }
    }
}
