// The lines of `netlifectl watch`: after its reply, a watch connection carries one event per line, typed
// here once for both ends. An event says when it happened, the app (for app events) and what happened: one
// case per kind, with the members of that kind and no others. `text` is how netlifectl prints it without
// --json. A command is named by its wire name (`interrupt-begin`), as in requests.

/// One line of a watch stream.
public struct WatchEvent: Equatable, Sendable {
    /// What happened, with what each kind carries.
    public enum Payload: Equatable, Sendable {
        /// A state change.
        case state(from: AppState, to: AppState)
        /// A transition finished: the command (its wire name) that asked for it, the state reached, its stages.
        case transition(command: String, to: AppState, stages: [StageTiming])
        /// A background task began, ended or began expiring (its expiration handler runs).
        case taskBegan(id: UInt64, name: String?)
        case taskEnded(id: UInt64)
        case taskExpiring(id: UInt64)
        /// The watchdog killed the app: what overran, its budget and the time it took (seconds).
        case watchdog(stage: String, budget: Double, elapsed: Double)
        /// The app stopped: why, who asked, and for memory pressure that the kernel's trigger asked for, what
        /// its pressure file said.
        case stopped(reason: TerminationKind, by: TerminationCause?, pressure: PressureStall? = nil)
        /// A listener opened, closed or failed to open.
        case listenerOpened(listener: String, address: String)
        case listenerClosed(listener: String)
        case listenerFailed(listener: String, error: String)
        /// A data socket changed state; entering and leaving the protocol's quiet mode also say `from`
        /// (`connected` to `quiet`, `quiet` to `connected`).
        case socket(socket: String, from: DataSocketState?, to: DataSocketState, error: String?)
        /// A suspended app was woken into the background.
        case woken(WakeReason)
        /// Socket reclaim: the data sockets made defunct, the accepted connections reset.
        case reclaimed(sockets: [String], connections: UInt64)
        /// A process app's program said `message` (`READY=1`, `RELOADING=1` or `STOPPING=1`) on its NOTIFY_SOCKET.
        case notify(message: String)
        /// The config was reloaded.
        case reload(added: [String], removed: [String], restarted: [String], updated: [String])
        /// A request that changes something was accepted: the command's wire name and who asked, as the kernel
        /// reported them. The events it causes follow.
        case request(command: String, uid: UInt32, pid: Int32)
        /// Nothing used the active app for `unused` seconds (`idle-background`): netlifed moves it to the
        /// background; the transition's events follow.
        case idle(unused: Double)
        /// The last line of a watch the daemon ends: why (e.g. the watcher did not read).
        case end(error: String)

        /// The kind's name, the `event` member.
        public var kind: String {
            switch self {
            case .state: "state"
            case .transition: "transition"
            case .taskBegan: "task-began"
            case .taskEnded: "task-ended"
            case .taskExpiring: "task-expiring"
            case .watchdog: "watchdog"
            case .stopped: "stopped"
            case .listenerOpened: "listener-opened"
            case .listenerClosed: "listener-closed"
            case .listenerFailed: "listener-failed"
            case .socket: "socket"
            case .woken: "woken"
            case .reclaimed: "reclaimed"
            case .notify: "notify"
            case .reload: "reload"
            case .request: "request"
            case .idle: "idle"
            case .end: "end"
            }
        }
    }

    /// Seconds since the Unix epoch.
    public var at: Double
    /// The app it happened to; nil for the daemon's own events (`reload`, `end`).
    public var app: String?
    public var payload: Payload

    public init(_ payload: Payload, at: Double, app: String? = nil) {
        self.payload = payload
        self.at = at
        self.app = app
    }

    /// Each member's name, spelled once for both directions.
    enum Key: String {
        case event, at, app, from, to, command, stages, id, name, stage, budget, elapsed, reason, by, listener,
             address, socket, sockets, error, message, added, removed, restarted, updated, uid, pid, unused, pressure
    }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.event, payload.kind)
        members.set(.at, at)
        members.setIfPresent(.app, app.map(JSON.string))
        let count = { (number: UInt64) in JSON.number(Double(number)) }
        let names = { (names: [String]) in JSON.array(names.map(JSON.string)) }
        switch payload {
        case .state(let from, let to):
            members.set(.from, from.rawValue)
            members.set(.to, to.rawValue)
        case .transition(let command, let to, let stages):
            members.set(.to, to.rawValue)
            members.set(.command, command)
            members.set(.stages, .array(stages.map { $0.json }))
        case .taskBegan(let id, let name):
            members.set(.id, count(id))
            members.setIfPresent(.name, name.map(JSON.string))
        case .taskEnded(let id), .taskExpiring(let id):
            members.set(.id, count(id))
        case .watchdog(let stage, let budget, let elapsed):
            members.set(.stage, stage)
            members.set(.budget, budget)
            members.set(.elapsed, elapsed)
        case .stopped(let reason, let by, let pressure):
            members.set(.reason, reason.rawValue)
            members.setIfPresent(.by, by.map { .string($0.rawValue) })
            members.setIfPresent(.pressure, pressure.map { $0.json })
        case .listenerOpened(let listener, let address):
            members.set(.listener, listener)
            members.set(.address, address)
        case .listenerClosed(let listener):
            members.set(.listener, listener)
        case .listenerFailed(let listener, let error):
            members.set(.listener, listener)
            members.set(.error, error)
        case .socket(let socket, let from, let to, let error):
            members.setIfPresent(.from, from.map { .string($0.rawValue) })
            members.set(.to, to.rawValue)
            members.set(.socket, socket)
            members.setIfPresent(.error, error.map(JSON.string))
        case .woken(let reason):
            members.set(.reason, reason.name)
            members.setIfPresent(.listener, reason.listener.map(JSON.string))
            members.setIfPresent(.socket, reason.socket.map(JSON.string))
        case .reclaimed(let sockets, let connections):
            members.set(.id, count(connections))
            members.set(.sockets, names(sockets))
        case .notify(let message):
            members.set(.message, message)
        case .reload(let added, let removed, let restarted, let updated):
            members.set(.added, names(added))
            members.set(.removed, names(removed))
            members.set(.restarted, names(restarted))
            members.set(.updated, names(updated))
        case .request(let command, let uid, let pid):
            members.set(.command, command)
            members.set(.uid, count(UInt64(uid)))
            members.set(.pid, count(UInt64(max(pid, 0))))
        case .idle(let unused):
            members.set(.unused, unused)
        case .end(let error):
            members.set(.error, error)
        }
        return members.json
    }

    /// Reads an event line; an unknown kind, or a member its kind needs missing or mistyped, is an error.
    public init(json: JSON) throws(JSONRecordError) {
        let fields = try JSONFields<Key>(json, what: "a watch event")
        at = try fields.optionalNumber(.at) ?? 0
        app = try fields.optionalString(.app)
        let kind = try fields.string(.event)
        let state = { (key: Key) throws(JSONRecordError) in try fields.name(key, AppState.self) }
        let socketState = { (key: Key) throws(JSONRecordError) in try fields.name(key, DataSocketState.self) }
        switch kind {
        case "state": payload = .state(from: try state(.from), to: try state(.to))
        case "transition":
            payload = .transition(command: try fields.string(.command), to: try state(.to),
                                  stages: try fields.array(.stages) { item throws(JSONRecordError) in try StageTiming(json: item) })
        case "task-began": payload = .taskBegan(id: try fields.count(.id), name: try fields.optionalString(.name))
        case "task-ended": payload = .taskEnded(id: try fields.count(.id))
        case "task-expiring": payload = .taskExpiring(id: try fields.count(.id))
        case "watchdog":
            payload = .watchdog(stage: try fields.string(.stage), budget: try fields.number(.budget), elapsed: try fields.number(.elapsed))
        case "stopped":
            payload = .stopped(reason: try fields.name(.reason, TerminationKind.self),
                               by: fields.value(.by) == nil ? nil : try fields.name(.by, TerminationCause.self),
                               pressure: try fields.value(.pressure).map { json throws(JSONRecordError) in try PressureStall(json: json) })
        case "listener-opened": payload = .listenerOpened(listener: try fields.string(.listener), address: try fields.string(.address))
        case "listener-closed": payload = .listenerClosed(listener: try fields.string(.listener))
        case "listener-failed": payload = .listenerFailed(listener: try fields.string(.listener), error: try fields.string(.error))
        case "socket":
            payload = .socket(socket: try fields.string(.socket), from: fields.value(.from) == nil ? nil : try socketState(.from),
                              to: try socketState(.to), error: try fields.optionalString(.error))
        case "woken":
            let name = try fields.string(.reason)
            guard let reason = WakeReason(name: name, socket: try fields.optionalString(.socket), listener: try fields.optionalString(.listener)) else {
                throw JSONRecordError("a woken event with reason '\(name.prefix(40))' needs the socket or listener it names")
            }
            payload = .woken(reason)
        case "reclaimed": payload = .reclaimed(sockets: try fields.strings(.sockets), connections: try fields.count(.id))
        case "notify": payload = .notify(message: try fields.string(.message))
        case "reload":
            payload = .reload(added: try fields.strings(.added), removed: try fields.strings(.removed),
                              restarted: try fields.strings(.restarted), updated: try fields.strings(.updated))
        case "request":
            guard let uid = UInt32(exactly: try fields.count(.uid)), let pid = Int32(exactly: try fields.count(.pid)) else {
                throw JSONRecordError("\"uid\" and \"pid\" must be a user id and a process id")
            }
            payload = .request(command: try fields.string(.command), uid: uid, pid: pid)
        case "idle": payload = .idle(unused: try fields.number(.unused))
        case "end": payload = .end(error: try fields.optionalString(.error) ?? "no reason given")
        default: throw JSONRecordError("unknown watch event '\(kind.prefix(40))'")
        }
    }

    /// The event as one line of readable text (without the time).
    public var text: String {
        let subject = app.map { "\($0): " } ?? ""
        switch payload {
        case .state(let from, let to):
            return "\(subject)\(from) -> \(to)"
        case .transition(let command, let to, let stages):
            let timings = stages.map { "\($0.event) \(Self.milliseconds($0.milliseconds))" }.joined(separator: ", ")
            let words = ControlCommand.named(command)?.words.joined(separator: " ") ?? command
            return "\(subject)\(words) done: \(to)\(timings.isEmpty ? "" : " (\(timings))")"
        case .taskBegan(let id, let name):
            return "\(subject)task \(id)\(name.map { " '\($0)'" } ?? "") began"
        case .taskEnded(let id):
            return "\(subject)task \(id) ended"
        case .taskExpiring(let id):
            return "\(subject)task \(id) expiring (its expiration handler runs)"
        case .watchdog(let stage, let budget, let elapsed):
            return "\(subject)killed by the watchdog (0x8badf00d): \(stage) took \(Self.milliseconds(elapsed * 1000)), budget \(Self.milliseconds(budget * 1000))"
        case .stopped(let reason, let by, let pressure):
            return "\(subject)stopped: \(reason)\(by.map { " (by \($0.rawValue))" } ?? "")\(pressure.map { " (\($0.file): \($0.text))" } ?? "")"
        case .listenerOpened(let listener, let address):
            return "\(subject)listener \(listener) open on \(address)"
        case .listenerClosed(let listener):
            return "\(subject)listener \(listener) closed"
        case .listenerFailed(let listener, let error):
            return "\(subject)listener \(listener) cannot open: \(error)"
        case .socket(let socket, _, .quiet, _):
            return "\(subject)socket \(socket) entered quiet mode"
        case .socket(let socket, .quiet?, _, _):
            return "\(subject)socket \(socket) left quiet mode"
        case .socket(let socket, _, let to, let error):
            return "\(subject)socket \(socket) \(to)\(error.map { ": \($0)" } ?? "")"
        case .woken(let reason):
            return "\(subject)woken into the background: \(reason.name)\(reason.socket.map { " on socket \($0)" } ?? "")\(reason.listener.map { " on listener \($0)" } ?? "")"
        case .reclaimed(let sockets, let connections):
            let names = sockets.isEmpty ? "no data socket" : "socket\(sockets.count == 1 ? "" : "s") \(sockets.joined(separator: ", "))"
            return "\(subject)reclaimed: \(names) defunct, \(connections) accepted connection\(connections == 1 ? "" : "s") reset"
        case .notify(let message):
            return "\(subject)the program says \(message)"
        case .reload(let added, let removed, let restarted, let updated):
            let parts = [("added", added), ("removed", removed), ("restarted", restarted), ("updated", updated)]
                .filter { !$0.1.isEmpty }.map { "\($0.0) \($0.1.joined(separator: ", "))" }
            return "reloaded the config" + (parts.isEmpty ? ": no app changed" : ": " + parts.joined(separator: "; "))
        case .request(let command, let uid, let pid):
            let words = ControlCommand.named(command)?.words.joined(separator: " ") ?? command
            return "\(subject)\(words) asked by uid \(uid) (pid \(pid))"
        case .idle(let unused):
            return "\(subject)unused for \(Self.milliseconds(unused * 1000)) (idle-background): moving to the background"
        case .end(let error):
            return "the daemon ended this watch: \(error)"
        }
    }

    private static func milliseconds(_ ms: Double) -> String {
        ms < 10 ? "\((ms * 100).rounded() / 100)ms" : "\(Int(ms.rounded()))ms"
    }
}

/// The reply that starts a watch: `{"ok": true, "watching": APP or null}`; event lines follow.
public struct WatchReply: Equatable, Sendable, JSONRecord {
    public var app: String?
    public init(app: String?) { self.app = app }

    public static let schema = JSONSchema<WatchReply>("a reply", blank: WatchReply(app: nil), [.ok, .string("watching", \.app)])
}
