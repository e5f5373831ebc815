// The replies of the control protocol, typed once for both ends: the daemon fills one in and sends its
// `json`; netlifectl reads it back with `init(json:)` and prints it. Each type spells its member names once,
// in its schema; an app's status is NetLifeStatus's AppStatus. Times are seconds (durations in a transition's
// stages are milliseconds).

extension JSONField {
    /// `"ok": true`, first in a successful reply (not read back).
    public static var ok: JSONField { JSONField("ok", write: { _ in .bool(true) }, read: { _, _, _ throws(JSONRecordError) in }) }
}

/// The reply to `launch`, `foreground`, `background`, `suspend` and `terminate`.
public struct TransitionReply: Equatable, Sendable, JSONRecord {
    public var app: String
    public var state: AppState
    /// The app was already in the asked-for state; nothing ran.
    public var already: Bool
    /// `suspend` of an app not yet suspend-eligible; `reason` says what keeps it in background.
    public var suspendPending: Bool
    /// Asked from a hook of the app's own transition in progress: queued to run once that transition is done,
    /// answered at once (waiting would deadlock); `state` is the state now, `reason` says why.
    public var queued: Bool
    public var reason: String?
    public var stages: [StageTiming]

    public init(app: String, state: AppState, already: Bool = false, suspendPending: Bool = false, queued: Bool = false,
                reason: String? = nil, stages: [StageTiming] = []) {
        self.app = app
        self.state = state
        self.already = already
        self.suspendPending = suspendPending
        self.queued = queued
        self.reason = reason
        self.stages = stages
    }

    public static let schema = JSONSchema<TransitionReply>("a reply", blank: TransitionReply(app: "", state: .notRunning), [
        .ok, .string("app", \.app), .name("state", \.state), .bool("already", \.already),
        .when({ $0.suspendPending }, .bool("suspendPending", \.suspendPending)), .when({ $0.queued }, .bool("queued", \.queued)),
        .when({ $0.suspendPending || $0.queued }, .string("reason", \.reason)),
        .records("stages", \.stages),
    ])
}

/// The reply to `status`.
public struct StatusReply: Equatable, Sendable, JSONRecord {
    public var apps: [AppStatus]
    /// Why the daemon serves less than its config asks (each listener that cannot open, with its error);
    /// empty when it serves all. `"degraded"` in JSON says whether there are any.
    public var degradedReasons: [String]
    /// Where the daemon serves `/metrics` (`[daemon] metrics`, with the port the kernel chose for port 0), or
    /// nil when it does not.
    public var metrics: String?
    /// The kernel's memory pressure trigger (`[daemon] memory-pressure-trigger`), or nil without one.
    public var memoryPressureTrigger: PressureTriggerStatus?

    public init(apps: [AppStatus], degradedReasons: [String] = [], metrics: String? = nil,
                memoryPressureTrigger: PressureTriggerStatus? = nil) {
        self.apps = apps
        self.degradedReasons = degradedReasons
        self.metrics = metrics
        self.memoryPressureTrigger = memoryPressureTrigger
    }

    /// Whether some of what the config asks is not served.
    public var degraded: Bool { !degradedReasons.isEmpty }

    /// "apps" first, as every status reply began before "degraded" was added: a reader that tells replies apart
    /// by their first member (a pipelining client) keeps working. Older daemons said nothing of degradation.
    public static let schema = JSONSchema<StatusReply>("a reply", blank: StatusReply(apps: []), [
        .ok, .records("apps", \.apps), .derived("degraded") { .bool($0.degraded) }, .strings("degradedReasons", \.degradedReasons),
        .string("metrics", \.metrics, absent: .omitted),
        .record("memoryPressureTrigger", \.memoryPressureTrigger, absent: .omitted),
    ])
}

/// The kernel's memory pressure trigger as `status` shows it.
public struct PressureTriggerStatus: Equatable, Sendable, JSONRecord {
    /// As the config writes it (`some 150ms 2s`).
    public var trigger: String
    /// The pressure file it is armed on.
    public var file: String
    /// Whether it is watched: false once its file went away (its cgroup removed; a reload arms it again).
    public var watching: Bool
    /// How many times it has fired.
    public var events: Int

    public init(trigger: String, file: String, watching: Bool, events: Int) {
        self.trigger = trigger
        self.file = file
        self.watching = watching
        self.events = events
    }

    public static let schema = JSONSchema<PressureTriggerStatus>("a memory pressure trigger",
        blank: PressureTriggerStatus(trigger: "", file: "", watching: false, events: 0), [
        .string("trigger", \.trigger), .string("file", \.file), .bool("watching", \.watching), .count("events", \.events),
    ])

    /// One line of `netlifectl status`.
    public var text: String {
        "memory-pressure-trigger \(trigger) on \(file): " + (watching ? "watching" : "not watching (its file went away: a reload arms it again)")
            + ", fired \(events) time\(events == 1 ? "" : "s")"
    }
}

/// The reply to `task begin`: the id, 0 when refused.
public struct TaskBeginReply: Equatable, Sendable, JSONRecord {
    public var app: String
    /// The task's id; 0 when it was refused (UIBackgroundTaskInvalid).
    public var id: UInt64
    /// Why the task was refused (only with the id 0): "app mail is not running".
    public var reason: String?

    public init(app: String, id: UInt64, reason: String? = nil) {
        self.app = app
        self.id = id
        self.reason = reason
    }

    public static let schema = JSONSchema<TaskBeginReply>("a reply", blank: TaskBeginReply(app: "", id: 0), [
        .ok, .string("app", \.app), .count("id", \.id), .string("reason", \.reason, absent: .omitted),
    ])

    /// What netlifectl says of a refused task (nil when one began): the reason, or where to find it when the
    /// daemon gave none.
    public var refusal: String? {
        guard id == 0 else { return nil }
        return "task refused: " + (reason ?? "netlifed gave no reason (its log may say)")
    }
}

/// The reply to `task end`.
public struct TaskEndReply: Equatable, Sendable, JSONRecord {
    public var app: String
    public var id: UInt64
    public var ended: Bool
    /// Why nothing ended (the invalid id, an unknown or already ended task).
    public var warning: String?

    public init(app: String, id: UInt64, ended: Bool, warning: String?) {
        self.app = app
        self.id = id
        self.ended = ended
        self.warning = warning
    }

    public static let schema = JSONSchema<TaskEndReply>("a reply", blank: TaskEndReply(app: "", id: 0, ended: false, warning: nil), [
        .ok, .string("app", \.app), .count("id", \.id), .bool("ended", \.ended), .string("warning", \.warning, absent: .omitted),
    ])
}

/// The reply to `task list`.
public struct TaskListReply: Equatable, Sendable, JSONRecord {
    public var app: String
    /// The app's state (nil from a daemon that does not say it).
    public var state: AppState?
    public var tasks: [TaskStatus]
    /// Seconds; nil means unlimited (the app is in the foreground).
    public var backgroundTimeRemaining: Double?

    public init(app: String, state: AppState?, tasks: [TaskStatus], backgroundTimeRemaining: Double?) {
        self.app = app
        self.state = state
        self.tasks = tasks
        self.backgroundTimeRemaining = backgroundTimeRemaining
    }

    public static let schema = JSONSchema<TaskListReply>("a reply", blank: TaskListReply(app: "", state: nil, tasks: [], backgroundTimeRemaining: nil), [
        .ok, .string("app", \.app), .name("state", \.state, absent: .omitted), .records("tasks", \.tasks),
        .number("backgroundTimeRemaining", \.backgroundTimeRemaining),
    ])
}

/// The reply to `mode`.
public struct ModeReply: Equatable, Sendable, JSONRecord {
    public var app: String
    public var mode: BackgroundMode
    public var state: AppState
    public init(app: String, mode: BackgroundMode, state: AppState) { self.app = app; self.mode = mode; self.state = state }

    public static let schema = JSONSchema<ModeReply>("a reply", blank: ModeReply(app: "", mode: .idle, state: .notRunning), [
        .ok, .string("app", \.app), .name("mode", \.mode), .name("state", \.state),
    ])
}

/// The reply to `reload`: what happened to which app.
public struct ReloadReply: Equatable, Sendable, JSONRecord {
    public var added: [String]
    public var removed: [String]
    public var restarted: [String]
    public var updated: [String]

    public init(added: [String], removed: [String], restarted: [String], updated: [String]) {
        self.added = added
        self.removed = removed
        self.restarted = restarted
        self.updated = updated
    }

    public static let schema = JSONSchema<ReloadReply>("a reply", blank: ReloadReply(added: [], removed: [], restarted: [], updated: []), [
        .ok, .strings("added", \.added), .strings("removed", \.removed), .strings("restarted", \.restarted), .strings("updated", \.updated),
    ])
}

/// The reply to `version`.
public struct VersionReply: Equatable, Sendable, JSONRecord {
    public var version: String
    public var protocolVersion: Int
    /// The daemon's open-file limit and use (absent from a daemon that does not say).
    public var openFiles: OpenFiles?

    /// `openFiles`: RLIMIT_NOFILE as the daemon runs with it (after raising its soft limit to the hard one at
    /// start) and how many descriptors it has open.
    public struct OpenFiles: Equatable, Sendable, JSONRecord {
        /// The soft limit, which applies; nil: unlimited.
        public var limit: UInt64?
        /// The hard limit; nil: unlimited.
        public var hardLimit: UInt64?
        /// Descriptors open now; nil: unknown.
        public var open: UInt64?

        public init(limit: UInt64?, hardLimit: UInt64?, open: UInt64?) {
            self.limit = limit
            self.hardLimit = hardLimit
            self.open = open
        }

        public static let schema = JSONSchema<OpenFiles>("openFiles", blank: OpenFiles(limit: nil, hardLimit: nil, open: nil), [
            limit("limit", \.limit, beyond: .max), limit("hardLimit", \.hardLimit, beyond: .max), limit("open", \.open, beyond: 0),
        ])

        /// A number that may be beyond a Double's whole numbers (RLIM_INFINITY): read as `beyond`.
        static func limit(_ key: String, _ path: WritableKeyPath<OpenFiles, UInt64?> & Sendable, beyond: UInt64) -> JSONField<OpenFiles> {
            .stored(key, path, encode: { $0.map { .number(Double($0)) } ?? .null }) {
                fields, key throws(JSONRecordError) in try fields.optionalNumber(key).map { UInt64(exactly: $0.rounded()) ?? beyond }
            }
        }

        /// `open files: 12 of 4096 (hard limit 4096)`.
        public var text: String {
            let name = { (value: UInt64?) in value.map(String.init) ?? "unlimited" }
            return "open files: \(open.map(String.init) ?? "?") of \(name(limit)) (hard limit \(name(hardLimit)))"
        }
    }

    public init(version: String, protocolVersion: Int, openFiles: OpenFiles? = nil) {
        self.version = version
        self.protocolVersion = protocolVersion
        self.openFiles = openFiles
    }

    public static let schema = JSONSchema<VersionReply>("a reply", blank: VersionReply(version: "", protocolVersion: 0), [
        .ok, .string("version", \.version), .count("protocol", \.protocolVersion), .record("openFiles", \.openFiles),
    ])
}

/// The reply to `debug stall`.
public struct StallReply: Equatable, Sendable, JSONRecord {
    public var stalled: String
    public init(stalled: String) { self.stalled = stalled }

    public static let schema = JSONSchema<StallReply>("a reply", blank: StallReply(stalled: ""), [.ok, .string("stalled", \.stalled)])
}

/// What reclaim did to one app: its data sockets made defunct, its accepted connections reset.
public struct ReclaimInfo: Equatable, Sendable, JSONRecord {
    public var app: String
    public var sockets: [String]
    public var connections: Int

    public init(app: String, sockets: [String], connections: Int) {
        self.app = app
        self.sockets = sockets
        self.connections = connections
    }

    public static let schema = JSONSchema<ReclaimInfo>("a reclaim", blank: ReclaimInfo(app: "", sockets: [], connections: 0), [
        .string("app", \.app), .strings("sockets", \.sockets), .count("connections", \.connections),
    ])

    /// One line of text for netlifectl.
    public var text: String {
        let names = sockets.isEmpty ? "no data socket" : sockets.joined(separator: ", ")
        return "\(app): reclaimed \(names); \(connections) accepted connection\(connections == 1 ? "" : "s") reset"
    }
}

/// The reply to `reclaim APP` (one app) and `lock` (every suspended app): `{"ok": true, "reclaimed": [...]}`.
public struct ReclaimReply: Equatable, Sendable, JSONRecord {
    public var reclaimed: [ReclaimInfo]
    public init(reclaimed: [ReclaimInfo]) { self.reclaimed = reclaimed }

    public static let schema = JSONSchema<ReclaimReply>("a reply", blank: ReclaimReply(reclaimed: []), [.ok, .records("reclaimed", \.reclaimed)])
}

/// An app that memory pressure terminated: the bytes it held (its sockets' buffers and kernel queues, plus a
/// process app's program's memory), whether it has a VoIP socket, and whether it was relaunched into the
/// background (VoIP apps are, as iOS relaunches them).
public struct JettisonInfo: Equatable, Sendable, JSONRecord {
    public var app: String
    public var bytes: Int
    public var voip: Bool
    public var relaunched: Bool

    public init(app: String, bytes: Int, voip: Bool = false, relaunched: Bool = false) {
        self.app = app
        self.bytes = bytes
        self.voip = voip
        self.relaunched = relaunched
    }

    public static let schema = JSONSchema<JettisonInfo>("a terminated app", blank: JettisonInfo(app: "", bytes: 0), [
        .string("app", \.app), .count("bytes", \.bytes), .bool("voip", \.voip), .bool("relaunched", \.relaunched),
    ])

    /// One line of text for netlifectl.
    public var text: String {
        var line = "\(app): terminated (memory pressure), held \(bytes) byte\(bytes == 1 ? "" : "s")"
        if relaunched {
            line += "; relaunched into the background (VoIP)"
        } else if voip {
            line += "; VoIP app not relaunched (see netlifed's log)"
        }
        return line
    }
}

/// The reply to `memory-pressure`: the suspended apps terminated, in the order they were (VoIP apps last,
/// each group largest first).
public struct MemoryPressureReply: Equatable, Sendable, JSONRecord {
    public var terminated: [JettisonInfo]
    public init(terminated: [JettisonInfo]) { self.terminated = terminated }

    public static let schema = JSONSchema<MemoryPressureReply>("a reply", blank: MemoryPressureReply(terminated: []), [
        .ok, .records("terminated", \.terminated),
    ])
}

/// The reply to `transfers [APP]`, and to `download` (the transfer it started): `{"ok": true, "transfers": [...]}`.
public struct TransfersReply: Equatable, Sendable, JSONRecord {
    public var transfers: [TransferStatus]
    public init(transfers: [TransferStatus]) { self.transfers = transfers }

    public static let schema = JSONSchema<TransfersReply>("a reply", blank: TransfersReply(transfers: []), [.ok, .records("transfers", \.transfers)])
}

/// The reply to `transfers-cancel`: the transfers stopped and forgotten, and the files of theirs removed
/// (parts and records; a finished file is never removed): `{"ok": true, "cancelled": [...], "removed": [...]}`.
public struct TransfersCancelReply: Equatable, Sendable, JSONRecord {
    public var cancelled: [TransferStatus]
    public var removed: [String]

    public init(cancelled: [TransferStatus], removed: [String]) {
        self.cancelled = cancelled
        self.removed = removed
    }

    public static let schema = JSONSchema<TransfersCancelReply>("a reply", blank: TransfersCancelReply(cancelled: [], removed: []), [
        .ok, .records("cancelled", \.cancelled), .strings("removed", \.removed),
    ])

    /// What netlifectl prints: one line per transfer, then the files removed.
    public var text: String {
        var lines = cancelled.map { "cancelled " + $0.text }
        lines += removed.map { "removed \($0)" }
        return lines.joined(separator: "\n")
    }
}
