// What the daemon does for each control request: the request is typed (NetLifeControl's ControlRequest
// names what is wrong with a bad one), the app it names is resolved, and the reply is sent when the work is
// done (a transition replies when its pipeline has finished).

@preconcurrency import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent

enum ControlCommands {
    /// Runs a request, or replies with the error that explains why it cannot run.
    ///
    /// - Parameter session: the connection the request came on (a `watch` takes it over).
    static func dispatch(_ json: JSON, supervisor: Supervisor, daemon: DaemonRuntime, session: ControlSession?,
                         reply: @escaping (JSON) -> Void) {
        let request: ControlRequest
        do {
            request = try ControlRequest(json: json)
        } catch {
            return reply(error.json)
        }
        if case .debugStall = request, !daemon.configuration.debugCommands {
            return reply(Reply.error(.unknownCommand, "unknown command 'debug-stall' (it needs debug-commands = yes in [daemon])"))
        }
        var app: App?
        if let name = request.app {
            guard let found = supervisor.app(named: name) else {
                let known = supervisor.apps.map(\.name).joined(separator: ", ")
                return reply(Reply.error(.unknownApp, "no app named '\(name.prefix(256))' (known: \(known.isEmpty ? "none" : known))"))
            }
            app = found
        }
        run(request, app: app, supervisor: supervisor, daemon: daemon, session: session, reply: reply)
    }

    private static func run(_ request: ControlRequest, app: App?, supervisor: Supervisor, daemon: DaemonRuntime,
                            session: ControlSession?, reply: @escaping (JSON) -> Void) {
        switch request {
        case .version:
            reply(VersionReply(version: ControlProtocol.daemonVersion, protocolVersion: ControlProtocol.version,
                               openFiles: daemon.openFileLimit.map(OpenFileLimit.reported)).json)
        case .status:
            let apps = app.map { [$0] } ?? supervisor.apps
            reply(StatusReply(apps: apps.map { Reply.app($0.status) }, degradedReasons: supervisor.degradedReasons).json)
        case .launch(_, let background):
            transition(.launch(background: background), app, daemon, reply)
        case .foreground:
            transition(.foreground, app, daemon, reply)
        case .background:
            transition(.background, app, daemon, reply)
        case .suspend:
            transition(.suspend, app, daemon, reply)
        case .terminate:
            transition(.terminate, app, daemon, reply)
        case .interruptBegin:
            transition(.interruptBegin, app, daemon, reply)
        case .interruptEnd:
            transition(.interruptEnd, app, daemon, reply)
        case .taskBegin(_, let name):
            guard let app else { return reply(missingApp) }
            guard app.openBackgroundTaskCount < ControlProtocol.maxTasksPerApp else {
                return reply(Reply.error(.limit, "app \(app.name) already has \(ControlProtocol.maxTasksPerApp) open background tasks, the most allowed; end some first"))
            }
            // The client's process group: a hook's (or what it started) makes the task the hook's.
            let group = session?.peerProcess.map { getpgid($0) }.flatMap { $0 > 0 ? $0 : nil }
            switch app.beginControlTask(name: name, processGroup: group) {
            case .success(let id): reply(TaskBeginReply(app: app.name, id: id).json)
            case .failure(let refusal): reply(TaskBeginReply(app: app.name, id: BackgroundTaskRegistry.invalid, reason: refusal.message).json)
            }
        case .taskEnd(_, let id):
            guard let app else { return reply(missingApp) }
            let warning: String? = switch app.endBackgroundTask(id) {
            case .ended: nil
            case .invalidIdentifier: "task id 0 is the invalid id; nothing to end"
            case .unknown: "app \(app.name) has no task \(id)"
            case .alreadyEnded: "task \(id) of app \(app.name) has already ended"
            }
            reply(TaskEndReply(app: app.name, id: id, ended: warning == nil, warning: warning).json)
        case .taskList:
            guard let app else { return reply(missingApp) }
            let status = app.status
            reply(TaskListReply(app: app.name, state: status.state.rawValue, tasks: status.tasks.map(Reply.task),
                                backgroundTimeRemaining: status.backgroundTimeRemaining.map(Reply.seconds)).json)
        case .mode(_, let text):
            guard let app, let mode = BackgroundMode(rawValue: text) else { return reply(missingApp) }
            app.backgroundMode = mode
            reply(ModeReply(app: app.name, mode: mode.rawValue, state: app.state.rawValue).json)
        case .reload:
            daemon.reload(completion: reply)
        case .debugStall(let text):
            guard let duration = ConfigValues.duration(text), duration <= .seconds(60) else {
                return reply(Reply.error(.badRequest, "debug-stall needs \"duration\" such as \"3s\" (at most 60s)"))
            }
            daemon.logger.warning("debug stall: blocking the event loop for \(text)")
            // Deliberately blocks the loop thread: this is what the loop-stall watchdog exists to catch.
            let until = MonotonicTime.now() + duration
            while MonotonicTime.now() < until {
                var step = (until - MonotonicTime.now()).timespec
                nanosleep(&step, nil)
            }
            reply(StallReply(stalled: text).json)
        case .watch(let name):
            guard let session else { return reply(Reply.error(.badRequest, "watch needs a control connection")) }
            daemon.watchers.add(session, app: name)
            reply(WatchReply(app: name).json)
        case .reclaim:
            guard let app else { return reply(missingApp) }
            switch app.reclaim() {
            case .success(let reclaimed):
                reply(ReclaimReply(reclaimed: [ReclaimInfo(app: app.name, sockets: reclaimed.sockets, connections: reclaimed.connections)]).json)
            case .failure(let refusal):
                reply(Reply.error(.invalidTransition, refusal.message))
            }
        case .lock:
            // As pressing the lock button (SPEC section 6): the app in the foreground goes to the background
            // (will-resign-active, did-enter-background) first; then, TN2277's test recipe, the sockets of
            // every suspended app are reclaimed.
            backgroundForegroundApps(supervisor.apps) { reclaimSuspended(supervisor, reply) }
        case .memoryPressure(let free):
            daemon.relieveMemoryPressure(free: free) { terminated in reply(MemoryPressureReply(terminated: terminated).json) }
        case .download(_, let url, let output, let clientSees):
            guard let app else { return reply(missingApp) }
            switch daemon.transfers.download(app: app, url: url, output: output, clientSees: clientSees) {
            case .success(let info): reply(TransfersReply(transfers: [info]).json)
            case .failure(let error): reply(error.json)
            }
        case .transfers(let name):
            reply(TransfersReply(transfers: daemon.transfers.list(app: name)).json)
        case .transfersCancel(let id, let name, let url):
            switch daemon.transfers.cancel(id: id, app: name, url: url) {
            case .success(let cancelled): reply(cancelled.json)
            case .failure(let error): reply(error.json)
            }
        case .upload(_, let file, let url):
            guard let app else { return reply(missingApp) }
            switch daemon.transfers.upload(app: app, file: file, url: url) {
            case .success(let info): reply(TransfersReply(transfers: [info]).json)
            case .failure(let error): reply(error.json)
            }
        }
    }

    /// Sends every app in the foreground (active, or inactive under an interruption) to the background, as
    /// locking the screen does, then calls `then`.
    private static func backgroundForegroundApps(_ apps: [App], then: @escaping () -> Void) {
        let foreground = apps.filter { $0.state == .active || $0.state == .inactive }
        var waiting = foreground.count
        guard waiting > 0 else { return then() }
        for app in foreground {
            app.perform(.background) { _ in
                waiting -= 1
                if waiting == 0 { then() }
            }
        }
    }

    /// `lock`'s reclaim (TN2277's test recipe): the sockets of every suspended app.
    private static func reclaimSuspended(_ supervisor: Supervisor, _ reply: @escaping (JSON) -> Void) {
        let reclaimed = supervisor.apps.compactMap { app -> ReclaimInfo? in
            guard case .success(let result) = app.reclaim() else { return nil }
            return ReclaimInfo(app: app.name, sockets: result.sockets, connections: result.connections)
        }
        reply(ReclaimReply(reclaimed: reclaimed).json)
    }

    /// Not reachable: ControlRequest guarantees an app for the commands that need one, and dispatch resolves
    /// it. Answered rather than trapped all the same.
    private static let missingApp = Reply.error(.badRequest, "this command needs \"app\"")

    private static func transition(_ command: LifecycleCommand, _ app: App?, _ daemon: DaemonRuntime,
                                   _ reply: @escaping (JSON) -> Void) {
        guard let app else { return reply(missingApp) }
        guard !daemon.isShuttingDown else {
            return reply(Reply.error(.shuttingDown, "netlifed is shutting down"))
        }
        app.perform(command) { outcome in reply(Reply.transition(app: app, outcome)) }
    }
}
