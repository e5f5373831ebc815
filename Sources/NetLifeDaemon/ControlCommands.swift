// The control commands, in one table as tmux keeps its commands: a name, what the request must carry, and a
// handler that replies (possibly later, when a transition's pipeline has finished).

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// The context a command runs in.
struct CommandContext {
    let supervisor: Supervisor
    let daemon: DaemonRuntime
    let request: JSON
    let session: ControlSession?
    let reply: (JSON) -> Void

    /// The request's `app` member, resolved; replies with an error and returns nil when missing or unknown.
    func app() -> App? {
        guard let name = request["app"]?.stringValue else {
            reply(Reply.error(.badRequest, "this command needs \"app\""))
            return nil
        }
        guard let app = supervisor.app(named: name) else {
            let known = supervisor.apps.map(\.name).joined(separator: ", ")
            reply(Reply.error(.unknownApp, "no app named '\(name)' (known: \(known.isEmpty ? "none" : known))"))
            return nil
        }
        return app
    }
}

/// A control command.
struct ControlCommand {
    let name: String
    /// Whether it exists only with `debug-commands = yes`.
    var debugOnly = false
    let run: @Sendable (CommandContext) -> Void
}

enum ControlCommands {
    /// Every command the daemon knows. Commands the spec names that arrive in later versions answer
    /// `unsupported`.
    static let table: [ControlCommand] = [
        ControlCommand(name: "version") { context in
            context.reply(Reply.ok(["version": .string(ControlProtocol.daemonVersion),
                                    "protocol": .number(Double(ControlProtocol.version))]))
        },
        ControlCommand(name: "status") { context in
            if context.request["app"] != nil {
                guard let app = context.app() else { return }
                context.reply(Reply.ok(["apps": [Reply.status(app.status)]]))
            } else {
                context.reply(Reply.ok(["apps": .array(context.supervisor.apps.map { Reply.status($0.status) })]))
            }
        },
        transition("launch") { request in .launch(background: request["background"]?.boolValue ?? false) },
        transition("foreground") { _ in .foreground },
        transition("background") { _ in .background },
        transition("suspend") { _ in .suspend },
        transition("terminate") { _ in .terminate },
        ControlCommand(name: "task-begin") { context in
            guard let app = context.app() else { return }
            let name = context.request["name"]?.stringValue
            if let name, name.utf8.count > ControlProtocol.maxTaskNameBytes {
                context.reply(Reply.error(.badRequest, "a task name is at most \(ControlProtocol.maxTaskNameBytes) bytes long"))
                return
            }
            guard app.openBackgroundTaskCount < ControlProtocol.maxTasksPerApp else {
                context.reply(Reply.error(.limit, "app \(app.name) already has \(ControlProtocol.maxTasksPerApp) open background tasks, the most allowed; end some first"))
                return
            }
            context.reply(Reply.ok(["app": .string(app.name), "id": .number(Double(app.beginControlTask(name: name)))]))
        },
        ControlCommand(name: "task-end") { context in
            guard let app = context.app() else { return }
            guard let number = context.request["id"]?.doubleValue, number >= 0, number.rounded() == number,
                  number < 9.0e15 else {
                context.reply(Reply.error(.badRequest, "task-end needs \"id\", a whole number"))
                return
            }
            let id = BackgroundTaskIdentifier(number)
            var reply: JSONObject = ["app": .string(app.name), "id": .number(number)]
            switch app.endBackgroundTask(id) {
            case .ended: reply["ended"] = true
            case .invalidIdentifier: reply["ended"] = false; reply["warning"] = "task id 0 is the invalid id; nothing to end"
            case .unknown: reply["ended"] = false; reply["warning"] = .string("app \(app.name) has no task \(id)")
            case .alreadyEnded: reply["ended"] = false; reply["warning"] = .string("task \(id) of app \(app.name) has already ended")
            }
            context.reply(Reply.ok(reply))
        },
        ControlCommand(name: "task-list") { context in
            guard let app = context.app() else { return }
            let status = app.status
            context.reply(Reply.ok(["app": .string(app.name), "tasks": .array(status.tasks.map(Reply.task)),
                                    "backgroundTimeRemaining": status.backgroundTimeRemaining.map { .number(Reply.seconds($0)) } ?? .null]))
        },
        ControlCommand(name: "mode") { context in
            guard let app = context.app() else { return }
            guard let text = context.request["mode"]?.stringValue, let mode = BackgroundMode(rawValue: text) else {
                context.reply(Reply.error(.badRequest, "mode needs \"mode\": \"idle\" or \"continuous\""))
                return
            }
            app.backgroundMode = mode
            context.reply(Reply.ok(["app": .string(app.name), "mode": .string(mode.rawValue), "state": .string(app.state.rawValue)]))
        },
        ControlCommand(name: "debug-stall", debugOnly: true) { context in
            guard let text = context.request["duration"]?.stringValue, let duration = ConfigValues.duration(text),
                  duration <= .seconds(60) else {
                context.reply(Reply.error(.badRequest, "debug-stall needs \"duration\" such as \"3s\" (at most 60s)"))
                return
            }
            context.daemon.logger.warning("debug stall: blocking the event loop for \(text)")
            // Deliberately blocks the loop thread: this is what the loop-stall watchdog exists to catch.
            let until = MonotonicTime.now() + duration
            while MonotonicTime.now() < until {
                var step = (until - MonotonicTime.now()).timespec
                nanosleep(&step, nil)
            }
            context.reply(Reply.ok(["stalled": .string(text)]))
        },
        ControlCommand(name: "reload") { context in
            guard !context.daemon.isShuttingDown else {
                context.reply(Reply.error(.shuttingDown, "netlifed is shutting down"))
                return
            }
            context.daemon.reload(completion: context.reply)
        },
    ] + ["reclaim", "lock", "memory-pressure", "download", "upload", "transfers", "watch"].map(unsupported)

    static func transition(_ name: String, _ command: @escaping @Sendable (JSON) -> LifecycleCommand) -> ControlCommand {
        ControlCommand(name: name) { context in
            guard let app = context.app() else { return }
            guard !context.daemon.isShuttingDown else {
                context.reply(Reply.error(.shuttingDown, "netlifed is shutting down"))
                return
            }
            app.perform(command(context.request)) { outcome in
                context.reply(Reply.transition(app: app, outcome))
            }
        }
    }

    static func unsupported(_ name: String) -> ControlCommand {
        ControlCommand(name: name) { context in
            context.reply(Reply.error(.unsupported, "'\(name)' is not supported by this version of netlifed yet"))
        }
    }

    /// Runs the request's command, or replies with the error that explains why it cannot run.
    static func dispatch(_ request: JSON, supervisor: Supervisor, daemon: DaemonRuntime, session: ControlSession?,
                         reply: @escaping (JSON) -> Void) {
        guard case .object = request else {
            reply(Reply.error(.badRequest, "a request is a JSON object like {\"cmd\": \"status\"}"))
            return
        }
        if let version = request["protocol"] {
            guard let number = version.intValue, number >= 1 else {
                reply(Reply.error(.badRequest, "\"protocol\" must be a positive whole number"))
                return
            }
            guard number <= ControlProtocol.version else {
                reply(Reply.error(.protocolVersion, "protocol \(number) is newer than this netlifed speaks (\(ControlProtocol.version)); upgrade netlifed"))
                return
            }
        }
        guard let name = request["cmd"]?.stringValue else {
            reply(Reply.error(.badRequest, "the request has no \"cmd\" string"))
            return
        }
        guard let command = table.first(where: { $0.name == name }),
              !command.debugOnly || daemon.configuration.debugCommands else {
            reply(Reply.error(.unknownCommand, "unknown command '\(name)'"))
            return
        }
        command.run(CommandContext(supervisor: supervisor, daemon: daemon, request: request, session: session, reply: reply))
    }
}
