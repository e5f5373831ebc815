// The lines of `netlifectl watch`: after its reply, a watch connection carries one event per line, typed
// here once for both ends. An event names its kind, when it happened, the app (for app events) and the
// members of its kind; `text` is how netlifectl prints it without --json.

/// One line of a watch stream.
public struct WatchEvent: Equatable, Sendable {
    /// What happened.
    public enum Kind: String, Sendable {
        /// A state change: `from`, `to`.
        case state
        /// A transition finished: `command`, `to` (the state reached), `stages`.
        case transition
        /// A background task began (`id`, `name`), ended (`id`) or began expiring (`id`).
        case taskBegan = "task-began"
        case taskEnded = "task-ended"
        case taskExpiring = "task-expiring"
        /// The watchdog killed the app: `stage`, `budget`, `elapsed` (seconds).
        case watchdog
        /// The app stopped: `reason`, `by`.
        case stopped
        /// A listener opened (`listener`, `address`), closed (`listener`) or failed to open (`listener`, `error`).
        case listenerOpened = "listener-opened"
        case listenerClosed = "listener-closed"
        case listenerFailed = "listener-failed"
        /// A data socket changed state: `socket`, `to` (the state), `error`; entering and leaving the protocol's
        /// quiet mode also say `from` (`connected` to `quiet`, `quiet` to `connected`).
        case socket
        /// A suspended app was woken into the background: `reason` (`voip-data`, `keepalive`, `voip-reconnect`:
        /// `socket`; `connection`: `listener`, one with `on-background = wake`).
        case woken
        /// Socket reclaim: `sockets` (made defunct), `id` (accepted connections reset).
        case reclaimed
        /// A process app's program said `message` (`READY=1`, `RELOADING=1` or `STOPPING=1`) on its NOTIFY_SOCKET.
        case notify
        /// The config was reloaded: `added`, `removed`, `restarted`, `updated`.
        case reload
        /// A request that changes something was accepted: `command` (its wire name), `app` when it names one,
        /// and who asked: `uid`, `pid`. The events it causes follow.
        case request
        /// The last line of a watch the daemon ends (`error`: why, e.g. the watcher did not read).
        case end
    }

    public var kind: Kind
    /// Seconds since the Unix epoch.
    public var at: Double
    public var app: String?
    public var from: String?
    public var to: String?
    public var command: String?
    public var stages: [StageTiming] = []
    public var id: UInt64?
    public var name: String?
    public var stage: String?
    public var budget: Double?
    public var elapsed: Double?
    public var reason: String?
    public var by: String?
    public var listener: String?
    public var address: String?
    public var socket: String?
    public var sockets: [String] = []
    public var error: String?
    public var message: String?
    public var added: [String] = []
    public var removed: [String] = []
    public var restarted: [String] = []
    public var updated: [String] = []
    /// Who asked (a `request`): the requester's uid and pid as the kernel reported them.
    public var uid: UInt32?
    public var pid: Int32?

    public init(kind: Kind, at: Double, app: String? = nil) {
        self.kind = kind
        self.at = at
        self.app = app
    }

    enum Key: String {
        case event, at, app, from, to, command, stages, id, name, stage, budget, elapsed, reason, by, listener,
             address, socket, sockets, error, message, added, removed, restarted, updated, uid, pid
    }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.event, kind.rawValue)
        members.set(.at, at)
        members.setIfPresent(.app, app.map(JSON.string))
        members.setIfPresent(.from, from.map(JSON.string))
        members.setIfPresent(.to, to.map(JSON.string))
        members.setIfPresent(.command, command.map(JSON.string))
        if kind == .transition { members.set(.stages, .array(stages.map(\.json))) }
        members.setIfPresent(.id, id.map { .number(Double($0)) })
        members.setIfPresent(.name, name.map(JSON.string))
        members.setIfPresent(.stage, stage.map(JSON.string))
        members.setIfPresent(.budget, budget.map(JSON.number))
        members.setIfPresent(.elapsed, elapsed.map(JSON.number))
        members.setIfPresent(.reason, reason.map(JSON.string))
        members.setIfPresent(.by, by.map(JSON.string))
        members.setIfPresent(.listener, listener.map(JSON.string))
        members.setIfPresent(.address, address.map(JSON.string))
        members.setIfPresent(.socket, socket.map(JSON.string))
        if kind == .reclaimed { members.set(.sockets, .array(sockets.map(JSON.string))) }
        members.setIfPresent(.error, error.map(JSON.string))
        members.setIfPresent(.message, message.map(JSON.string))
        members.setIfPresent(.uid, uid.map { .number(Double($0)) })
        members.setIfPresent(.pid, pid.map { .number(Double($0)) })
        if kind == .reload {
            for (key, names) in [(Key.added, added), (.removed, removed), (.restarted, restarted), (.updated, updated)] {
                members.set(key, .array(names.map(JSON.string)))
            }
        }
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a watch event")
        let text = try fields.string(.event)
        guard let kind = Kind(rawValue: text) else { throw ControlError(.badRequest, "unknown watch event '\(text.prefix(40))'") }
        self.kind = kind
        at = try fields.optionalNumber(.at) ?? 0
        app = try fields.optionalString(.app)
        from = try fields.optionalString(.from)
        to = try fields.optionalString(.to)
        command = try fields.optionalString(.command)
        stages = try fields.array(.stages, StageTiming.init(json:))
        id = fields.value(.id) == nil ? nil : try fields.count(.id)
        name = try fields.optionalString(.name)
        stage = try fields.optionalString(.stage)
        budget = try fields.optionalNumber(.budget)
        elapsed = try fields.optionalNumber(.elapsed)
        reason = try fields.optionalString(.reason)
        by = try fields.optionalString(.by)
        listener = try fields.optionalString(.listener)
        address = try fields.optionalString(.address)
        socket = try fields.optionalString(.socket)
        sockets = try fields.strings(.sockets)
        error = try fields.optionalString(.error)
        message = try fields.optionalString(.message)
        added = try fields.strings(.added)
        removed = try fields.strings(.removed)
        restarted = try fields.strings(.restarted)
        updated = try fields.strings(.updated)
        uid = fields.value(.uid) == nil ? nil : UInt32(exactly: try fields.count(.uid))
        pid = fields.value(.pid) == nil ? nil : Int32(exactly: try fields.count(.pid))
    }

    /// The event as one line of readable text (without the time).
    public var text: String {
        let subject = app.map { "\($0): " } ?? ""
        switch kind {
        case .state:
            return "\(subject)\(from ?? "?") -> \(to ?? "?")"
        case .transition:
            let timings = stages.map { "\($0.name) \(Self.milliseconds($0.milliseconds))" }.joined(separator: ", ")
            return "\(subject)\(command ?? "?") done: \(to ?? "?")\(timings.isEmpty ? "" : " (\(timings))")"
        case .taskBegan:
            return "\(subject)task \(id ?? 0)\(name.map { " '\($0)'" } ?? "") began"
        case .taskEnded:
            return "\(subject)task \(id ?? 0) ended"
        case .taskExpiring:
            return "\(subject)task \(id ?? 0) expiring (its expiration handler runs)"
        case .watchdog:
            return "\(subject)killed by the watchdog (0x8badf00d): \(stage ?? "?") took \(Self.milliseconds((elapsed ?? 0) * 1000)), budget \(Self.milliseconds((budget ?? 0) * 1000))"
        case .stopped:
            return "\(subject)stopped: \(reason ?? "?")\(by.map { " (by \($0))" } ?? "")"
        case .listenerOpened:
            return "\(subject)listener \(listener ?? "?") open on \(address ?? "?")"
        case .listenerClosed:
            return "\(subject)listener \(listener ?? "?") closed"
        case .listenerFailed:
            return "\(subject)listener \(listener ?? "?") cannot open: \(error ?? "?")"
        case .socket where to == "quiet":
            return "\(subject)socket \(socket ?? "?") entered quiet mode"
        case .socket where from == "quiet":
            return "\(subject)socket \(socket ?? "?") left quiet mode"
        case .socket:
            return "\(subject)socket \(socket ?? "?") \(to ?? "?")\(error.map { ": \($0)" } ?? "")"
        case .woken:
            return "\(subject)woken into the background: \(reason ?? "?")\(socket.map { " on socket \($0)" } ?? "")\(listener.map { " on listener \($0)" } ?? "")"
        case .reclaimed:
            let names = sockets.isEmpty ? "no data socket" : "socket\(sockets.count == 1 ? "" : "s") \(sockets.joined(separator: ", "))"
            return "\(subject)reclaimed: \(names) defunct, \(id ?? 0) accepted connection\(id == 1 ? "" : "s") reset"
        case .notify:
            return "\(subject)the program says \(message ?? "?")"
        case .reload:
            let parts = [("added", added), ("removed", removed), ("restarted", restarted), ("updated", updated)]
                .filter { !$0.1.isEmpty }.map { "\($0.0) \($0.1.joined(separator: ", "))" }
            return "reloaded the config" + (parts.isEmpty ? ": no app changed" : ": " + parts.joined(separator: "; "))
        case .request:
            return "\(subject)\(command ?? "?") asked by uid \(uid.map(String.init) ?? "?") (pid \(pid.map(String.init) ?? "?"))"
        case .end:
            return "the daemon ended this watch: \(error ?? "no reason given")"
        }
    }

    private static func milliseconds(_ ms: Double) -> String {
        ms < 10 ? "\((ms * 100).rounded() / 100)ms" : "\(Int(ms.rounded()))ms"
    }
}

/// The reply that starts a watch: `{"ok": true, "watching": APP or null}`; event lines follow.
public struct WatchReply: Equatable, Sendable {
    public var app: String?
    public init(app: String?) { self.app = app }

    enum Key: String { case watching }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.watching, app)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        app = try JSONFields<Key>(json, what: "a reply").optionalString(.watching)
    }
}
