// What the daemon does for each control request: the request is typed (NetLifeControl's ControlRequest
// names what is wrong with a bad one), the app it names is resolved, and the handler that this file keys by
// the command's entry runs; the reply is sent when the work is done (a transition replies when its pipeline
// has finished).

@preconcurrency import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeServices

enum ControlCommands {
    /// What a handler runs with: the request, the app it names (resolved), where to reply.
    struct Context {
        let request: ControlRequest
        let app: App?
        let supervisor: Supervisor
        let daemon: DaemonRuntime
        /// The connection the request came on (a `watch` takes it over).
        let session: ControlSession?
        /// Who asked.
        let requester: Requester
        let reply: (JSON) -> Void

        /// The identity the files this request names are opened with (nil: the daemon's own).
        var fileOwner: FileCredentials? { requester.fileOwner(daemonUID: UInt32(geteuid())) }
    }

    /// Runs a request of its command.
    typealias Handler = @Sendable (Context) -> Void

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
        if request.command == .debugStall, !daemon.configuration.debugCommands {
            return reply(Reply.error(.unknownCommand, "unknown command '\(request.command)' (it needs debug-commands = yes in [daemon])"))
        }
        var app: App?
        if let name = request.app {
            guard let found = supervisor.app(named: name) else {
                let known = supervisor.apps.map(\.name).joined(separator: ", ")
                return reply(Reply.error(.unknownApp, "no app named '\(name.prefix(256))' (known: \(known.isEmpty ? "none" : known))"))
            }
            app = found
        }
        guard let handler = handlers[request.command] else {
            return reply(Reply.error(.unknownCommand, "unknown command '\(request.command)' (this netlifed has no handler for it)"))
        }
        // A request that came on no connection is the daemon's own.
        let requester = session?.requester ?? Requester(uid: UInt32(geteuid()), gid: UInt32(getegid()), pid: getpid())
        if let refusal = daemon.accessPolicy.refusal(request.command, app: app?.name, requester: requester) {
            daemon.refusalLog.log(daemon.logger, .notice, "refused \(requester): \(refusal.message)")
            return reply(refusal.json)
        }
        if request.command.access != .readOnly { daemon.attribute(request.command, app: app?.name ?? request.app, to: requester) }
        handler(Context(request: request, app: app, supervisor: supervisor, daemon: daemon, session: session, requester: requester, reply: reply))
    }

    /// A handler for every entry of the command table (a test checks that none is missing).
    static let handlers: [ControlCommand: Handler] = [
        .version: { context in
            context.reply(VersionReply(version: ControlProtocol.daemonVersion, protocolVersion: ControlProtocol.version,
                                       openFiles: context.daemon.openFileLimit.map(OpenFileLimit.reported)).json)
        },
        .status: { context in
            let apps = context.app.map { [$0] } ?? context.supervisor.apps
            context.reply(StatusReply(apps: apps.map(\.status), degradedReasons: context.supervisor.degradedReasons,
                                      metrics: context.daemon.metricsAddress,
                                      memoryPressureTrigger: context.daemon.pressureTrigger?.status).json)
        },
        .launch: { context in transition(.launch(background: context.request.flag(.background)), context) },
        .foreground: { context in transition(.foreground, context) },
        .background: { context in transition(.background, context) },
        .suspend: { context in transition(.suspend, context) },
        .terminate: { context in transition(.terminate, context) },
        .interruptBegin: { context in transition(.interruptBegin, context) },
        .interruptEnd: { context in transition(.interruptEnd, context) },
        .taskBegin: { context in
            guard let app = context.app else { return context.reply(missingApp) }
            guard app.openBackgroundTaskCount < ControlProtocol.maxTasksPerApp else {
                return context.reply(Reply.error(.limit, "app \(app.name) already has \(ControlProtocol.maxTasksPerApp) open background tasks, the most allowed; end some first"))
            }
            // The client's process group: a hook's (or what it started) makes the task the hook's.
            let group = context.session?.peerProcess.map { getpgid($0) }.flatMap { $0 > 0 ? $0 : nil }
            switch app.beginControlTask(name: context.request.optionalString(.name), processGroup: group) {
            case .success(let id): context.reply(TaskBeginReply(app: app.name, id: id).json)
            case .failure(let refusal):
                context.reply(TaskBeginReply(app: app.name, id: BackgroundTaskRegistry.invalid, reason: refusal.message).json)
            }
        },
        .taskEnd: { context in
            guard let app = context.app else { return context.reply(missingApp) }
            let id = context.request.count(.id)
            let warning: String? = switch app.endBackgroundTask(id) {
            case .ended: nil
            case .invalidIdentifier: "task id 0 is the invalid id; nothing to end"
            case .unknown: "app \(app.name) has no task \(id)"
            case .alreadyEnded: "task \(id) of app \(app.name) has already ended"
            }
            context.reply(TaskEndReply(app: app.name, id: id, ended: warning == nil, warning: warning).json)
        },
        .taskList: { context in
            guard let app = context.app else { return context.reply(missingApp) }
            let status = app.status
            context.reply(TaskListReply(app: app.name, state: status.state, tasks: status.tasks,
                                        backgroundTimeRemaining: status.backgroundTimeRemaining).json)
        },
        .mode: { context in
            guard let app = context.app, let mode = BackgroundMode(rawValue: context.request.string(.mode)) else {
                return context.reply(missingApp)
            }
            app.backgroundMode = mode
            context.reply(ModeReply(app: app.name, mode: mode, state: app.state).json)
        },
        .reload: { context in context.daemon.reload(completion: context.reply) },
        .debugStall: { context in
            let text = context.request.string(.duration)
            guard let duration = ConfigValues.duration(text), duration <= .seconds(60) else {
                return context.reply(Reply.error(.badRequest, "debug-stall needs \"duration\" such as \"3s\" (at most 60s)"))
            }
            context.daemon.logger.warning("debug stall: blocking the event loop for \(text)")
            // Deliberately blocks the loop thread: this is what the loop-stall watchdog exists to catch.
            let until = MonotonicTime.now() + duration
            while MonotonicTime.now() < until {
                var step = (until - MonotonicTime.now()).timespec
                nanosleep(&step, nil)
            }
            context.reply(StallReply(stalled: text).json)
        },
        .watch: { context in
            guard let session = context.session else { return context.reply(Reply.error(.badRequest, "watch needs a control connection")) }
            let name = context.request.optionalString(.app)
            context.daemon.watchers.add(session, app: name)
            context.reply(WatchReply(app: name).json)
        },
        .reclaim: { context in
            guard let app = context.app else { return context.reply(missingApp) }
            switch app.reclaim() {
            case .success(let reclaimed):
                context.reply(ReclaimReply(reclaimed: [ReclaimInfo(app: app.name, sockets: reclaimed.sockets, connections: reclaimed.connections)]).json)
            case .failure(let refusal):
                context.reply(Reply.error(.invalidTransition, refusal.message))
            }
        },
        .lock: { context in
            // As pressing the lock button: the app in the foreground goes to the background
            // (will-resign-active, did-enter-background) first; then, TN2277's test recipe, the sockets of
            // every suspended app are reclaimed.
            backgroundForegroundApps(context.supervisor.apps) { reclaimSuspended(context.supervisor, context.reply) }
        },
        .memoryPressure: { context in
            context.daemon.relieveMemoryPressure(free: context.request.optionalCount(.free).map { Int(clamping: $0) }) { terminated in
                context.reply(MemoryPressureReply(terminated: terminated).json)
            }
        },
        .download: { context in
            guard let app = context.app else { return context.reply(missingApp) }
            let request = context.request
            replyWithTransfer(context, context.daemon.transfers.download(app: app, url: request.string(.url), output: request.optionalString(.output),
                                                                         clientSees: request.optionalString(.outputDirectory), tls: transferTLS(request),
                                                                         owner: context.fileOwner))
        },
        .upload: { context in
            guard let app = context.app else { return context.reply(missingApp) }
            replyWithTransfer(context, context.daemon.transfers.upload(app: app, file: context.request.string(.file), url: context.request.string(.url),
                                                                       tls: transferTLS(context.request), owner: context.fileOwner))
        },
        .transfers: { context in
            context.reply(TransfersReply(transfers: context.daemon.transfers.list(app: context.request.optionalString(.app))).json)
        },
        .transfersCancel: { context in
            let request = context.request
            let policy = context.daemon.accessPolicy
            context.daemon.transfers.cancel(id: request.optionalCount(.id), app: request.optionalString(.app), url: request.optionalString(.url),
                                            refusal: { policy.refusal("transfers cancel", app: $0, requester: context.requester) }) { result in
                switch result {
                case .success(let cancelled): context.reply(cancelled.json)
                case .failure(let error): context.reply(error.json)
                }
            }
        },
    ]

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

    /// A started transfer's reply, or why it did not start.
    private static func replyWithTransfer(_ context: Context, _ result: Result<TransferStatus, ControlError>) {
        switch result {
        case .success(let info): context.reply(TransfersReply(transfers: [info]).json)
        case .failure(let error): context.reply(error.json)
        }
    }

    /// Not reachable: ControlRequest guarantees an app for the commands that need one, and dispatch resolves
    /// it. Answered rather than trapped all the same.
    private static let missingApp = Reply.error(.badRequest, "this command needs \"app\"")

    private static func transition(_ command: LifecycleCommand, _ context: Context) {
        guard let app = context.app else { return context.reply(missingApp) }
        guard !context.daemon.isShuttingDown else {
            return context.reply(Reply.error(.shuttingDown, "netlifed is shutting down"))
        }
        if let group = context.session?.peerProcess.map({ getpgid($0) }), group > 0, let hook = app.transitionHook(inProcessGroup: group) {
            // Asked from a hook of the transition in progress: waiting for the reply would deadlock (the
            // command runs after the transition, which waits for the hook). Queued, and answered at once.
            let words = context.request.command.words.joined(separator: " ")
            let logger = context.daemon.logger.labeled("app \(app.name)")
            app.perform(command) { outcome in logger.info("\(words) asked by \(hook): \(Reply.transition(app: app, outcome).serialized)") }
            return context.reply(TransitionReply(app: app.name, state: app.state, queued: true,
                                                 reason: "asked by its own \(hook) during its transition, '\(words)' runs once that transition is done").json)
        }
        app.perform(command) { outcome in context.reply(Reply.transition(app: app, outcome)) }
    }
}

/// A transfer request's TLS choices (`--cacert`, `--insecure`, `--ssl-reqd`).
private func transferTLS(_ request: ControlRequest) -> TransferTLS {
    TransferTLS(caFile: request.optionalString(.caFile), insecure: request.flag(.insecure), required: request.flag(.sslRequired))
}
