// The replies of the control protocol, typed once for both ends: the daemon fills one in and sends its
// `json`; netlifectl reads it back with `init(json:)` and prints it. Each type spells its member names once,
// in its `Key` enum. Times are seconds (durations in a transition's stages are milliseconds).

/// How long one stage of a transition took.
public struct StageTiming: Equatable, Sendable {
    public var name: String
    public var milliseconds: Double
    public init(name: String, milliseconds: Double) { self.name = name; self.milliseconds = milliseconds }

    enum Key: String { case name, ms }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.name, name)
        members.set(.ms, milliseconds)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a stage")
        name = try fields.string(.name)
        milliseconds = try fields.number(.ms)
    }
}

/// The reply to `launch`, `foreground`, `background`, `suspend` and `terminate`.
public struct TransitionReply: Equatable, Sendable {
    public var app: String
    public var state: String
    /// The app was already in the asked-for state; nothing ran.
    public var already: Bool
    /// `suspend` of an app not yet suspend-eligible; `reason` says what keeps it in background.
    public var suspendPending: Bool
    public var reason: String?
    public var stages: [StageTiming]

    public init(app: String, state: String, already: Bool = false, suspendPending: Bool = false,
                reason: String? = nil, stages: [StageTiming] = []) {
        self.app = app
        self.state = state
        self.already = already
        self.suspendPending = suspendPending
        self.reason = reason
        self.stages = stages
    }

    enum Key: String { case app, state, already, suspendPending, reason, stages }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.app, app)
        members.set(.state, state)
        members.set(.already, already)
        if suspendPending {
            members.set(.suspendPending, true)
            members.set(.reason, reason)
        }
        members.set(.stages, .array(stages.map(\.json)))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        app = try fields.string(.app)
        state = try fields.string(.state)
        already = try fields.bool(.already, default: false)
        suspendPending = try fields.bool(.suspendPending, default: false)
        reason = try fields.optionalString(.reason)
        stages = try fields.array(.stages, StageTiming.init(json:))
    }
}

/// A listener in `status`.
public struct ListenerInfo: Equatable, Sendable {
    public var name: String
    public var address: String
    public var service: String
    public var open: Bool
    /// Why the listener is not open, if an open failed.
    public var error: String?
    public var connections: Int

    public init(name: String, address: String, service: String, open: Bool, error: String?, connections: Int) {
        self.name = name
        self.address = address
        self.service = service
        self.open = open
        self.error = error
        self.connections = connections
    }

    enum Key: String { case name, address, service, open, error, connections }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.name, name)
        members.set(.address, address)
        members.set(.service, service)
        members.set(.open, open)
        members.set(.error, error)
        members.set(.connections, Double(connections))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a listener")
        name = try fields.string(.name)
        address = try fields.string(.address)
        service = try fields.string(.service)
        open = try fields.bool(.open, default: false)
        error = try fields.optionalString(.error)
        connections = Int(try fields.count(.connections))
    }

    /// The address as netlifectl prints it. A listener configured on port 0 shows port 0 until its first open,
    /// when the kernel chooses the port (from then on `address` carries it, across closes): it is said so,
    /// lest port 0 be taken for a bound port.
    public var addressText: String {
        let isUnixPath = address.hasPrefix("/") || address.hasPrefix("unix:")
        return !isUnixPath && address.hasSuffix(":0") ? "\(address) (not bound yet: the port is chosen at the first open)" : address
    }
}

/// A data socket in `status` (SPEC section 8): the spec's members, then what the socket's protocol shows
/// (left out when the protocol has nothing to say).
public struct SocketInfo: Equatable, Sendable {
    public var name: String
    public var peer: String
    public var policy: String
    public var voip: Bool
    /// `connecting`, `connected`, `quiet`, `closed` or `defunct`.
    public var state: String
    /// The last error, if there was one (it stays after a reconnect; `state` says how the socket is now).
    public var error: String?
    /// `line`, `imap`, or an app author's protocol.
    public var protocolName: String?
    /// Successful connects so far.
    public var connects: Int?
    /// Lines received from the peer, and the last one.
    public var lines: Int?
    public var lastLine: String?
    /// IMAP: the mailbox size last reported, the EXISTS and EXPUNGE responses received, whether IDLE runs.
    public var exists: Int?
    public var existsUpdates: Int?
    public var expunges: Int?
    public var idle: Bool?

    public init(name: String, peer: String, policy: String, voip: Bool, state: String, error: String?) {
        self.name = name
        self.peer = peer
        self.policy = policy
        self.voip = voip
        self.state = state
        self.error = error
    }

    enum Key: String {
        case name, peer, policy, voip, state, error, connects, lines, lastLine, exists, existsUpdates, expunges, idle
        case protocolName = "protocol"
    }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.name, name)
        members.set(.peer, peer)
        members.set(.policy, policy)
        members.set(.voip, voip)
        members.set(.state, state)
        members.set(.error, error)
        members.setIfPresent(.protocolName, protocolName.map(JSON.string))
        for (key, value) in [(Key.connects, connects), (.lines, lines), (.exists, exists),
                             (.existsUpdates, existsUpdates), (.expunges, expunges)] {
            members.setIfPresent(key, value.map { .number(Double($0)) })
        }
        members.setIfPresent(.lastLine, lastLine.map(JSON.string))
        members.setIfPresent(.idle, idle.map(JSON.bool))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a socket")
        name = try fields.string(.name)
        peer = try fields.string(.peer)
        policy = try fields.string(.policy)
        voip = try fields.bool(.voip, default: false)
        state = try fields.string(.state)
        error = try fields.optionalString(.error)
        protocolName = try fields.optionalString(.protocolName)
        func optionalCount(_ key: Key) throws(ControlError) -> Int? {
            fields.value(key) == nil ? nil : Int(try fields.count(key))
        }
        connects = try optionalCount(.connects)
        lines = try optionalCount(.lines)
        lastLine = try fields.optionalString(.lastLine)
        exists = try optionalCount(.exists)
        existsUpdates = try optionalCount(.existsUpdates)
        expunges = try optionalCount(.expunges)
        idle = try fields.optionalBool(.idle)
    }
}

/// An open background task.
public struct TaskInfo: Equatable, Sendable {
    public var id: UInt64
    public var name: String?
    /// Seconds since it began.
    public var age: Double

    public init(id: UInt64, name: String?, age: Double) {
        self.id = id
        self.name = name
        self.age = age
    }

    enum Key: String { case id, name, age }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.id, .number(Double(id)))
        members.set(.name, name)
        members.set(.age, age)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a task")
        id = try fields.count(.id)
        name = try fields.optionalString(.name)
        age = try fields.number(.age)
    }
}

/// Why and when an app last stopped running.
public struct TerminationInfo: Equatable, Sendable {
    /// `terminated`, `terminated-while-suspended`, `exited-on-suspend`, `watchdog`, `reload`,
    /// `memory-pressure` or `program-exited`.
    public var reason: String
    /// Seconds since the Unix epoch.
    public var at: Double
    /// Who asked, for `terminated` and `terminated-while-suspended`: `command` or `shutdown`.
    public var by: String?
    /// For `watchdog`: what overran, its budget and the time it took (seconds).
    public var stage: String?
    public var budget: Double?
    public var elapsed: Double?
    /// For `program-exited`: how the program ended (`exit status 3`, `killed by signal 11`), and what the
    /// restart rules made of it.
    public var detail: String?

    public init(reason: String, at: Double, by: String? = nil, stage: String? = nil, budget: Double? = nil,
                elapsed: Double? = nil, detail: String? = nil) {
        self.detail = detail
        self.reason = reason
        self.at = at
        self.by = by
        self.stage = stage
        self.budget = budget
        self.elapsed = elapsed
    }

    enum Key: String { case reason, at, by, stage, budget, elapsed, detail }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.reason, reason)
        members.set(.at, at)
        members.setIfPresent(.by, by.map(JSON.string))
        members.setIfPresent(.stage, stage.map(JSON.string))
        members.setIfPresent(.budget, budget.map(JSON.number))
        members.setIfPresent(.elapsed, elapsed.map(JSON.number))
        members.setIfPresent(.detail, detail.map(JSON.string))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a termination")
        reason = try fields.string(.reason)
        at = try fields.optionalNumber(.at) ?? 0
        by = try fields.optionalString(.by)
        detail = try fields.optionalString(.detail)
        stage = try fields.optionalString(.stage)
        budget = try fields.optionalNumber(.budget)
        elapsed = try fields.optionalNumber(.elapsed)
    }
}

/// An app as `status` shows it.
public struct AppInfo: Equatable, Sendable {
    public var name: String
    public var state: String
    public var suspendPending: Bool
    /// Seconds; nil means unlimited (the app is in the foreground); 0 while suspended or not running.
    public var backgroundTimeRemaining: Double?
    public var backgroundMode: String
    public var listeners: [ListenerInfo]
    public var sockets: [SocketInfo]
    public var tasks: [TaskInfo]
    public var lastTermination: TerminationInfo?
    /// The stages of the last transition.
    public var lastStages: [StageTiming]
    /// A process app's program (absent for other apps).
    public var program: ProgramInfo?

    public init(name: String, state: String, suspendPending: Bool, backgroundTimeRemaining: Double?,
                backgroundMode: String, listeners: [ListenerInfo], sockets: [SocketInfo], tasks: [TaskInfo],
                lastTermination: TerminationInfo?, lastStages: [StageTiming]) {
        self.name = name
        self.state = state
        self.suspendPending = suspendPending
        self.backgroundTimeRemaining = backgroundTimeRemaining
        self.backgroundMode = backgroundMode
        self.listeners = listeners
        self.sockets = sockets
        self.tasks = tasks
        self.lastTermination = lastTermination
        self.lastStages = lastStages
    }

    enum Key: String {
        case name, state, suspendPending, backgroundTimeRemaining, backgroundMode, listeners, sockets, tasks,
             lastTermination, lastStages, program
    }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.name, name)
        members.set(.state, state)
        members.set(.suspendPending, suspendPending)
        members.set(.backgroundTimeRemaining, backgroundTimeRemaining)
        members.set(.backgroundMode, backgroundMode)
        members.set(.listeners, .array(listeners.map(\.json)))
        members.set(.sockets, .array(sockets.map(\.json)))
        members.set(.tasks, .array(tasks.map(\.json)))
        members.set(.lastTermination, lastTermination?.json ?? .null)
        members.set(.lastStages, .array(lastStages.map(\.json)))
        members.setIfPresent(.program, program?.json)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "an app")
        program = try fields.value(.program).map { json throws(ControlError) in try ProgramInfo(json: json) }
        name = try fields.string(.name)
        state = try fields.string(.state)
        suspendPending = try fields.bool(.suspendPending, default: false)
        backgroundTimeRemaining = try fields.optionalNumber(.backgroundTimeRemaining)
        backgroundMode = try fields.optionalString(.backgroundMode) ?? "idle"
        listeners = try fields.array(.listeners, ListenerInfo.init(json:))
        sockets = try fields.array(.sockets, SocketInfo.init(json:))
        tasks = try fields.array(.tasks, TaskInfo.init(json:))
        lastTermination = try fields.value(.lastTermination).map { json throws(ControlError) in try TerminationInfo(json: json) }
        lastStages = try fields.array(.lastStages, StageTiming.init(json:))
    }
}

/// A process app's program as `status` shows it.
public struct ProgramInfo: Equatable, Sendable {
    /// Its pid while it runs.
    public var pid: Int?
    /// Its cgroup directory, if it has one.
    public var cgroup: String?
    /// `cgroup-v2`, `cgroup-v1-freezer` or `process-group`.
    public var containment: String
    public var frozen: Bool
    /// Bytes of memory its cgroup's memory controller charges (v2 `memory.current`, or the v1 memory cgroup of
    /// the same name on a hybrid layout); null where no memory controller counts for it.
    public var memory: Int?
    /// Whether it speaks the lifecycle protocol (said hello on NETLIFE_EVENTS).
    public var speaksProtocol: Bool
    /// Its cgroup subtree's tasks as the pids controller counts them (processes, and the threads of
    /// multithreaded ones); without a pids controller, the processes in the subtree's `cgroup.procs`; 1 in
    /// a process group. While a launch waits for an earlier run to end, that run's.
    public var members: Int

    public init(pid: Int?, cgroup: String?, containment: String, frozen: Bool, memory: Int?, speaksProtocol: Bool, members: Int) {
        self.pid = pid
        self.cgroup = cgroup
        self.containment = containment
        self.frozen = frozen
        self.memory = memory
        self.speaksProtocol = speaksProtocol
        self.members = members
    }

    enum Key: String { case pid, cgroup, containment, frozen, memory, speaksProtocol = "protocol", members }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.pid, pid.map(Double.init))
        members.set(.cgroup, cgroup)
        members.set(.containment, containment)
        members.set(.frozen, frozen)
        members.set(.memory, memory.map(Double.init))
        members.set(.speaksProtocol, speaksProtocol)
        members.set(.members, Double(self.members))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a program")
        pid = try fields.optionalNumber(.pid).map { Int($0) }
        cgroup = try fields.optionalString(.cgroup)
        containment = try fields.optionalString(.containment) ?? "process-group"
        frozen = try fields.bool(.frozen, default: false)
        memory = try fields.optionalNumber(.memory).map { Int($0) }
        speaksProtocol = try fields.bool(.speaksProtocol, default: false)
        members = Int(try fields.optionalNumber(.members) ?? 0)
    }
}

/// The reply to `status`.
public struct StatusReply: Equatable, Sendable {
    public var apps: [AppInfo]
    /// Why the daemon serves less than its config asks (each listener that cannot open, with its error);
    /// empty when it serves all. `"degraded"` in JSON says whether there are any.
    public var degradedReasons: [String]
    public init(apps: [AppInfo], degradedReasons: [String] = []) {
        self.apps = apps
        self.degradedReasons = degradedReasons
    }

    /// Whether some of what the config asks is not served.
    public var degraded: Bool { !degradedReasons.isEmpty }

    enum Key: String { case degraded, degradedReasons, apps }

    public var json: JSON {
        // "apps" first, as every status reply began before "degraded" was added: a reader that tells replies
        // apart by their first member (a pipelining client) keeps working.
        var members = JSONMembers<Key>.reply()
        members.set(.apps, .array(apps.map(\.json)))
        members.set(.degraded, degraded)
        members.set(.degradedReasons, .array(degradedReasons.map(JSON.string)))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        apps = try fields.array(.apps, AppInfo.init(json:))
        // Older daemons said nothing of it.
        degradedReasons = try fields.array(.degradedReasons) { item throws(ControlError) in
            guard let reason = item.stringValue else { throw ControlError(.badRequest, "\"degradedReasons\" must hold strings") }
            return reason
        }
    }
}

/// The reply to `task begin`: the id, 0 when refused.
public struct TaskBeginReply: Equatable, Sendable {
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

    enum Key: String { case app, id, reason }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.app, app)
        members.set(.id, .number(Double(id)))
        members.setIfPresent(.reason, reason.map(JSON.string))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        app = try fields.string(.app)
        id = try fields.count(.id)
        reason = try fields.optionalString(.reason)
    }

    /// What netlifectl says of a refused task (nil when one began): the reason, or where to find it when the
    /// daemon gave none.
    public var refusal: String? {
        guard id == 0 else { return nil }
        return "task refused: " + (reason ?? "netlifed gave no reason (its log may say)")
    }
}

/// The reply to `task end`.
public struct TaskEndReply: Equatable, Sendable {
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

    enum Key: String { case app, id, ended, warning }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.app, app)
        members.set(.id, .number(Double(id)))
        members.set(.ended, ended)
        members.setIfPresent(.warning, warning.map(JSON.string))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        app = try fields.string(.app)
        id = try fields.count(.id)
        ended = try fields.bool(.ended, default: false)
        warning = try fields.optionalString(.warning)
    }
}

/// The reply to `task list`.
public struct TaskListReply: Equatable, Sendable {
    public var app: String
    /// The app's state (nil from a daemon that does not say it).
    public var state: String?
    public var tasks: [TaskInfo]
    /// Seconds; nil means unlimited (the app is in the foreground).
    public var backgroundTimeRemaining: Double?

    public init(app: String, state: String?, tasks: [TaskInfo], backgroundTimeRemaining: Double?) {
        self.app = app
        self.state = state
        self.tasks = tasks
        self.backgroundTimeRemaining = backgroundTimeRemaining
    }

    enum Key: String { case app, state, tasks, backgroundTimeRemaining }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.app, app)
        members.setIfPresent(.state, state.map(JSON.string))
        members.set(.tasks, .array(tasks.map(\.json)))
        members.set(.backgroundTimeRemaining, backgroundTimeRemaining)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        app = try fields.string(.app)
        state = try fields.optionalString(.state)
        tasks = try fields.array(.tasks, TaskInfo.init(json:))
        backgroundTimeRemaining = try fields.optionalNumber(.backgroundTimeRemaining)
    }
}

/// The reply to `mode`.
public struct ModeReply: Equatable, Sendable {
    public var app: String
    public var mode: String
    public var state: String
    public init(app: String, mode: String, state: String) { self.app = app; self.mode = mode; self.state = state }

    enum Key: String { case app, mode, state }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.app, app)
        members.set(.mode, mode)
        members.set(.state, state)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        app = try fields.string(.app)
        mode = try fields.string(.mode)
        state = try fields.string(.state)
    }
}

/// The reply to `reload`: what happened to which app.
public struct ReloadReply: Equatable, Sendable {
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

    enum Key: String, CaseIterable { case added, removed, restarted, updated }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        for (key, names) in [(Key.added, added), (.removed, removed), (.restarted, restarted), (.updated, updated)] {
            members.set(key, .array(names.map(JSON.string)))
        }
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        added = try fields.strings(.added)
        removed = try fields.strings(.removed)
        restarted = try fields.strings(.restarted)
        updated = try fields.strings(.updated)
    }
}

/// The reply to `version`.
public struct VersionReply: Equatable, Sendable {
    public var version: String
    public var protocolVersion: Int
    /// The daemon's open-file limit and use (absent from a daemon that does not say).
    public var openFiles: OpenFiles?

    /// `openFiles`: RLIMIT_NOFILE as the daemon runs with it (after raising its soft limit to the hard one at
    /// start) and how many descriptors it has open.
    public struct OpenFiles: Equatable, Sendable {
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

        enum Key: String { case limit, hardLimit, open }

        var json: JSON {
            var members = JSONMembers<Key>()
            members.set(.limit, limit.map { Double($0) })
            members.set(.hardLimit, hardLimit.map { Double($0) })
            members.set(.open, open.map { Double($0) })
            return members.json
        }

        init(json: JSON) throws(ControlError) {
            let fields = try JSONFields<Key>(json, what: "openFiles")
            limit = try fields.optionalNumber(.limit).map { UInt64(exactly: $0.rounded()) ?? UInt64.max }
            hardLimit = try fields.optionalNumber(.hardLimit).map { UInt64(exactly: $0.rounded()) ?? UInt64.max }
            open = try fields.optionalNumber(.open).map { UInt64(exactly: $0.rounded()) ?? 0 }
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

    enum Key: String { case version, `protocol`, openFiles }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.version, version)
        members.set(.protocol, .number(Double(protocolVersion)))
        members.setIfPresent(.openFiles, openFiles?.json)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        version = try fields.string(.version)
        protocolVersion = Int(try fields.count(.protocol))
        openFiles = try fields.value(.openFiles).map { json throws(ControlError) in try OpenFiles(json: json) }
    }
}

/// The reply to `debug stall`.
public struct StallReply: Equatable, Sendable {
    public var stalled: String
    public init(stalled: String) { self.stalled = stalled }

    enum Key: String { case stalled }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.stalled, stalled)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        stalled = try JSONFields<Key>(json, what: "a reply").string(.stalled)
    }
}

/// What reclaim did to one app: its data sockets made defunct, its accepted connections reset.
public struct ReclaimInfo: Equatable, Sendable {
    public var app: String
    public var sockets: [String]
    public var connections: Int

    public init(app: String, sockets: [String], connections: Int) {
        self.app = app
        self.sockets = sockets
        self.connections = connections
    }

    enum Key: String { case app, sockets, connections }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.app, app)
        members.set(.sockets, .array(sockets.map(JSON.string)))
        members.set(.connections, Double(connections))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reclaim")
        app = try fields.string(.app)
        sockets = try fields.strings(.sockets)
        connections = Int(try fields.count(.connections))
    }

    /// One line of text for netlifectl.
    public var text: String {
        let names = sockets.isEmpty ? "no data socket" : sockets.joined(separator: ", ")
        return "\(app): reclaimed \(names); \(connections) accepted connection\(connections == 1 ? "" : "s") reset"
    }
}

/// The reply to `reclaim APP` (one app) and `lock` (every suspended app): `{"ok": true, "reclaimed": [...]}`.
public struct ReclaimReply: Equatable, Sendable {
    public var reclaimed: [ReclaimInfo]
    public init(reclaimed: [ReclaimInfo]) { self.reclaimed = reclaimed }

    enum Key: String { case reclaimed }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.reclaimed, .array(reclaimed.map(\.json)))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        reclaimed = try JSONFields<Key>(json, what: "a reply").array(.reclaimed, ReclaimInfo.init(json:))
    }
}

/// An app that memory pressure terminated: the bytes it held (its sockets' buffers and kernel queues, plus a
/// process app's program's memory), whether it has a VoIP socket, and whether it was relaunched into the
/// background (VoIP apps are, as iOS relaunches them).
public struct JettisonInfo: Equatable, Sendable {
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

    enum Key: String { case app, bytes, voip, relaunched }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.app, app)
        members.set(.bytes, Double(bytes))
        members.set(.voip, voip)
        members.set(.relaunched, relaunched)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a terminated app")
        app = try fields.string(.app)
        bytes = Int(try fields.count(.bytes))
        voip = try fields.bool(.voip, default: false)
        relaunched = try fields.bool(.relaunched, default: false)
    }

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
public struct MemoryPressureReply: Equatable, Sendable {
    public var terminated: [JettisonInfo]
    public init(terminated: [JettisonInfo]) { self.terminated = terminated }

    enum Key: String { case terminated }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.terminated, .array(terminated.map(\.json)))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        terminated = try JSONFields<Key>(json, what: "a reply").array(.terminated, JettisonInfo.init(json:))
    }
}

/// A download or upload in `transfers` (SPEC section 8).
public struct TransferInfo: Equatable, Sendable {
    /// The transfer's id: given when it is made, kept in the journal across restarts, never reused by the
    /// daemon that gave it; what `transfers cancel ID` names. 0 from a daemon that gives none.
    public var id: UInt64
    public var app: String
    /// `download` or `upload`.
    public var direction: String
    public var url: String
    /// The local file: where a download goes, what an upload sends.
    public var output: String
    /// Bytes on disk (download) or acknowledged by the server (upload) so far.
    public var bytes: Int
    /// The whole length, when known.
    public var total: Int?
    /// `running`, `paused`, `done` or `failed`.
    public var state: String
    /// Why it is paused or failed.
    public var reason: String?
    /// Whether it stopped (paused or failed) on an error of the network, the server or the file, rather than
    /// by its app's lifecycle (suspended, background time spent, stopped) or not yet run.
    public var error: Bool

    public init(id: UInt64 = 0, app: String, direction: String = "download", url: String, output: String, bytes: Int,
                total: Int?, state: String, reason: String?, error: Bool = false) {
        self.id = id
        self.app = app
        self.direction = direction
        self.url = url
        self.output = output
        self.bytes = bytes
        self.total = total
        self.state = state
        self.reason = reason
        self.error = error
    }

    enum Key: String { case id, app, direction, url, output, bytes, total, state, reason, error }

    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.id, .number(Double(id)))
        members.set(.app, app)
        members.set(.direction, direction)
        members.set(.url, url)
        members.set(.output, output)
        members.set(.bytes, Double(bytes))
        members.set(.total, total.map(Double.init))
        members.set(.state, state)
        members.set(.reason, reason)
        members.set(.error, error)
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a transfer")
        // Older daemons gave no ids and had downloads only.
        id = fields.value(.id) == nil ? 0 : try fields.count(.id)
        app = try fields.string(.app)
        direction = try fields.optionalString(.direction) ?? "download"
        url = try fields.string(.url)
        output = try fields.string(.output)
        bytes = Int(try fields.count(.bytes))
        total = fields.value(.total) == nil || fields.value(.total) == .null ? nil : Int(try fields.count(.total))
        state = try fields.string(.state)
        reason = try fields.optionalString(.reason)
        error = try fields.bool(.error, default: state == "failed")
    }

    /// One line of text for netlifectl.
    public var text: String {
        let size = total.map { "\(bytes)/\($0) bytes" } ?? "\(bytes) bytes"
        let route = direction == "upload" ? "\(output) -> \(url)" : "\(url) -> \(output)"
        return "\(id == 0 ? "" : "[\(id)] ")\(app): \(route): \(state)\(reason.map { " (\($0))" } ?? ""), \(size)"
    }
}

/// The reply to `transfers [APP]`, and to `download` (the transfer it started): `{"ok": true, "transfers": [...]}`.
public struct TransfersReply: Equatable, Sendable {
    public var transfers: [TransferInfo]
    public init(transfers: [TransferInfo]) { self.transfers = transfers }

    enum Key: String { case transfers }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.transfers, .array(transfers.map(\.json)))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        transfers = try JSONFields<Key>(json, what: "a reply").array(.transfers, TransferInfo.init(json:))
    }
}

/// The reply to `transfers-cancel`: the transfers stopped and forgotten, and the files of theirs removed
/// (parts and records; a finished file is never removed): `{"ok": true, "cancelled": [...], "removed": [...]}`.
public struct TransfersCancelReply: Equatable, Sendable {
    public var cancelled: [TransferInfo]
    public var removed: [String]

    public init(cancelled: [TransferInfo], removed: [String]) {
        self.cancelled = cancelled
        self.removed = removed
    }

    enum Key: String { case cancelled, removed }

    public var json: JSON {
        var members = JSONMembers<Key>.reply()
        members.set(.cancelled, .array(cancelled.map(\.json)))
        members.set(.removed, .array(removed.map(JSON.string)))
        return members.json
    }

    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a reply")
        cancelled = try fields.array(.cancelled, TransferInfo.init(json:))
        removed = try fields.array(.removed) { item throws(ControlError) in
            guard let path = item.stringValue else { throw ControlError(.badRequest, "\"removed\" must hold strings") }
            return path
        }
    }

    /// What netlifectl prints: one line per transfer, then the files removed.
    public var text: String {
        var lines = cancelled.map { "cancelled " + $0.text }
        lines += removed.map { "removed \($0)" }
        return lines.joined(separator: "\n")
    }
}
