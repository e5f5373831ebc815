// An app as `status` shows it, typed once: the framework fills these values in from the app it runs, the daemon
// sends their `json`, and netlifectl reads the same types back with `init(json:)`. Each record spells its member
// names once, in its schema. Times are seconds with millisecond precision (a stage's duration is milliseconds
// with microsecond precision): what the wire carries, so that a value read back equals the value sent.

import NetLifeJSON

/// Durations as the status records carry them.
public enum StatusTime {
    /// Seconds, rounded to the millisecond.
    public static func seconds(_ duration: Duration) -> Double {
        (milliseconds(duration)).rounded() / 1000
    }

    /// Milliseconds, rounded to the microsecond.
    public static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return ((Double(seconds) * 1000 + Double(attoseconds) / 1e15) * 1000).rounded() / 1000
    }
}

/// How long one stage of a transition took.
public struct StageTiming: Equatable, Sendable, JSONRecord {
    public var event: LifecycleEvent
    public var milliseconds: Double

    public init(event: LifecycleEvent, milliseconds: Double) {
        self.event = event
        self.milliseconds = milliseconds
    }

    public init(event: LifecycleEvent, duration: Duration) {
        self.init(event: event, milliseconds: StatusTime.milliseconds(duration))
    }

    public static let schema = JSONSchema<StageTiming>("a stage", blank: StageTiming(event: .didFinishLaunching, milliseconds: 0), [
        .name("name", \.event), .number("ms", \.milliseconds),
    ])
}

/// A listener.
public struct ListenerStatus: Equatable, Sendable, JSONRecord {
    public var name: String
    public var address: String
    public var service: String
    public var open: Bool
    /// Why the listener is not open, if an open failed.
    public var error: String?
    public var connections: Int
    /// The processes holding an adopted listener's sockets (`adopt = yes`); empty (and left out) for the others.
    public var pids: [Int] = []

    public init(name: String, address: String, service: String, open: Bool, error: String?, connections: Int, pids: [Int] = []) {
        self.name = name
        self.address = address
        self.service = service
        self.open = open
        self.error = error
        self.connections = connections
        self.pids = pids
    }

    public static let schema = JSONSchema<ListenerStatus>("a listener", blank: ListenerStatus(name: "", address: "", service: "", open: false, error: nil, connections: 0), [
        .string("name", \.name), .string("address", \.address), .string("service", \.service), .bool("open", \.open),
        .string("error", \.error), .count("connections", \.connections), .when({ !$0.pids.isEmpty }, .counts("pids", \.pids)),
    ])

    /// The address as netlifectl prints it. A listener configured on port 0 shows port 0 until its first open,
    /// when the kernel chooses the port (from then on `address` carries it, across closes): it is said so,
    /// lest port 0 be taken for a bound port.
    public var addressText: String {
        let isUnixPath = address.hasPrefix("/") || address.hasPrefix("unix:")
        return !isUnixPath && address.hasSuffix(":0") ? "\(address) (not bound yet: the port is chosen at the first open)" : address
    }
}

/// One figure a protocol shows of its own state in `status`, under its own name (`lines`, `exists`, ...).
public struct DataProtocolDetail: Sendable, Equatable {
    /// A detail's value: a count, a text or a flag.
    public enum Value: Sendable, Equatable {
        case count(Int)
        case text(String)
        case flag(Bool)
    }

    /// The name `status` shows it under; each protocol chooses its own.
    public var name: String
    /// What it is now.
    public var value: Value

    public init(_ name: String, _ value: Value) {
        self.name = name
        self.value = value
    }
}

/// What `status` shows of a protocol's own state: the details it chose to report, in order. The framework
/// knows no protocol's figures; the built-in ones report theirs (line: `lines`, `lastLine`; imap: `exists`,
/// `existsUpdates`, `expunges`, `idle`), an app author's protocol its own.
public struct DataProtocolStatus: Sendable, Equatable {
    /// The details, in the order the protocol reports them.
    public var details: [DataProtocolDetail]

    public init(_ details: [DataProtocolDetail] = []) {
        self.details = details
    }

    /// The value of the detail named `name`, if the protocol reported one.
    public subscript(name: String) -> DataProtocolDetail.Value? {
        details.first { $0.name == name }?.value
    }

    /// The detail named `name` if it is a count.
    public func count(_ name: String) -> Int? {
        if case .count(let count)? = self[name] { count } else { nil }
    }

    /// The detail named `name` if it is a text.
    public func text(_ name: String) -> String? {
        if case .text(let text)? = self[name] { text } else { nil }
    }

    /// The detail named `name` if it is a flag.
    public func flag(_ name: String) -> Bool? {
        if case .flag(let flag)? = self[name] { flag } else { nil }
    }

    /// The details as members of the socket's object, in order.
    var members: [(key: String, value: JSON)] {
        details.map { detail in
            switch detail.value {
            case .count(let count): (detail.name, .number(Double(count)))
            case .text(let text): (detail.name, .string(text))
            case .flag(let flag): (detail.name, .bool(flag))
            }
        }
    }

    /// Reads back the members no other field of the socket names: a whole number is a count, a string a text,
    /// a boolean a flag; null stands for no value.
    init(members: [(key: String, value: JSON)]) throws(JSONRecordError) {
        var details: [DataProtocolDetail] = []
        for (key, value) in members {
            switch value {
            case .number(let number) where JSON.isCount(number) && number < 0x1p63: details.append(DataProtocolDetail(key, .count(Int(number))))
            case .string(let text): details.append(DataProtocolDetail(key, .text(text)))
            case .bool(let flag): details.append(DataProtocolDetail(key, .flag(flag)))
            case .null: continue
            default: throw JSONRecordError("\"\(key)\" must be a whole number, a string or true or false")
            }
        }
        self.init(details)
    }
}

/// A data socket: its configuration's members, then what its protocol shows of itself, each detail a member
/// under the protocol's own name.
public struct DataSocketStatus: Equatable, Sendable, JSONRecord {
    public var name: String
    public var peer: String
    public var policy: DataSocketPolicy
    public var voip: Bool
    public var state: DataSocketState
    /// The last error, if there was one (it stays after a reconnect; `state` says how the socket is now).
    public var error: String?
    /// `line`, `imap`, or an app author's protocol.
    public var protocolName: String
    /// Successful connects so far.
    public var connects: Int
    public var protocolStatus: DataProtocolStatus

    public init(name: String, peer: String, policy: DataSocketPolicy, voip: Bool, state: DataSocketState, error: String?,
                protocolName: String, connects: Int, protocolStatus: DataProtocolStatus = DataProtocolStatus()) {
        self.name = name
        self.peer = peer
        self.policy = policy
        self.voip = voip
        self.state = state
        self.error = error
        self.protocolName = protocolName
        self.connects = connects
        self.protocolStatus = protocolStatus
    }

    public static let schema = JSONSchema<DataSocketStatus>("a socket", blank: DataSocketStatus(name: "", peer: "", policy: .keep, voip: false, state: .closed,
                                                                                           error: nil, protocolName: "", connects: 0), [
        .string("name", \.name), .string("peer", \.peer), .name("policy", \.policy), .bool("voip", \.voip),
        .name("state", \.state), .string("error", \.error), .string("protocol", \.protocolName, default: ""),
        .count("connects", \.connects, default: 0),
        .rest(write: { $0.protocolStatus.members }) { members, socket throws(JSONRecordError) in
            socket.protocolStatus = try DataProtocolStatus(members: members)
        },
    ])
}

/// A background task's identifier; 0 (`BackgroundTaskRegistry.invalid`) means the task was refused.
public typealias BackgroundTaskIdentifier = UInt64

/// An open background task.
public struct TaskStatus: Equatable, Sendable, JSONRecord {
    public var id: BackgroundTaskIdentifier
    public var name: String?
    /// Seconds since it began.
    public var age: Double

    public init(id: BackgroundTaskIdentifier, name: String?, age: Double) {
        self.id = id
        self.name = name
        self.age = age
    }

    public static let schema = JSONSchema<TaskStatus>("a task", blank: TaskStatus(id: 0, name: nil, age: 0), [
        .count("id", \.id), .string("name", \.name), .number("age", \.age),
    ])
}

/// Why and when an app last stopped running.
public struct TerminationStatus: Equatable, Sendable, JSONRecord {
    public var reason: TerminationKind
    /// Seconds since the Unix epoch.
    public var at: Double
    /// Who asked, for `terminated` and `terminated-while-suspended`: `command` or `shutdown`.
    public var by: TerminationCause?
    /// For `watchdog`: what overran, its budget and the time it took (seconds).
    public var stage: String?
    public var budget: Double?
    public var elapsed: Double?
    /// For `program-exited`: how the program ended (`exit status 3`, `killed by signal 11`), and what the
    /// restart rules made of it.
    public var detail: String?
    /// For `memory-pressure` that the kernel's pressure trigger asked for: what its pressure file said then.
    public var pressure: PressureStall?

    public init(reason: TerminationKind, at: Double, by: TerminationCause? = nil, stage: String? = nil, budget: Double? = nil,
                elapsed: Double? = nil, detail: String? = nil, pressure: PressureStall? = nil) {
        self.reason = reason
        self.at = at
        self.by = by
        self.stage = stage
        self.budget = budget
        self.elapsed = elapsed
        self.detail = detail
        self.pressure = pressure
    }

    public static let schema = JSONSchema<TerminationStatus>("a termination", blank: TerminationStatus(reason: .terminated, at: 0), [
        .name("reason", \.reason), .number("at", \.at, default: 0), .name("by", \.by, absent: .omitted),
        .string("stage", \.stage, absent: .omitted), .number("budget", \.budget, absent: .omitted),
        .number("elapsed", \.elapsed, absent: .omitted), .string("detail", \.detail, absent: .omitted),
        .record("pressure", \.pressure),
    ])
}

/// A process app's program.
public struct ProgramStatus: Equatable, Sendable, JSONRecord {
    /// Its pid while it runs.
    public var pid: Int?
    /// Its cgroup directory, if it has one.
    public var cgroup: String?
    public var containment: ProgramContainment
    /// Whether it is frozen now.
    public var frozen: Bool
    /// Bytes of memory its cgroup's memory controller charges (v2 `memory.current`, or the v1 memory cgroup of
    /// the same name on a hybrid layout); nil where no memory controller counts for it. Never a sum of the
    /// processes' resident sets, which counts shared pages once per process. Memory pressure ranks by it.
    public var memoryBytes: Int?
    /// Whether it speaks the lifecycle protocol (said hello on NETLIFE_EVENTS).
    public var speaksProtocol: Bool
    /// Its cgroup subtree's tasks as the pids controller counts them (processes, and the threads of
    /// multithreaded ones); without a pids controller, the processes in the subtree's `cgroup.procs`; 1 in
    /// a process group. While a launch waits for an earlier run to end, that run's.
    public var members: Int
    /// Whether it said READY=1 on its NOTIFY_SOCKET (this run).
    public var ready: Bool
    /// Its last STATUS= line on its NOTIFY_SOCKET (this run; at most 256 bytes, no control characters), or nil.
    public var statusText: String?

    public init(pid: Int?, cgroup: String?, containment: ProgramContainment, frozen: Bool, memoryBytes: Int?, speaksProtocol: Bool,
                members: Int, ready: Bool = false, statusText: String? = nil) {
        self.pid = pid
        self.cgroup = cgroup
        self.containment = containment
        self.frozen = frozen
        self.memoryBytes = memoryBytes
        self.speaksProtocol = speaksProtocol
        self.members = members
        self.ready = ready
        self.statusText = statusText
    }

    /// A program that has never run.
    public static let none = ProgramStatus(pid: nil, cgroup: nil, containment: .processGroup, frozen: false, memoryBytes: nil,
                                           speaksProtocol: false, members: 0)

    public static let schema = JSONSchema<ProgramStatus>("a program", blank: .none, [
        .count("pid", \.pid), .string("cgroup", \.cgroup), .name("containment", \.containment, default: .processGroup),
        .bool("frozen", \.frozen), .count("memory", \.memoryBytes), .bool("protocol", \.speaksProtocol),
        .count("members", \.members, default: 0), .bool("ready", \.ready), .string("statusText", \.statusText),
    ])
}

/// An app.
public struct AppStatus: Equatable, Sendable, JSONRecord {
    public var name: String
    public var state: AppState
    public var suspendPending: Bool
    /// Seconds; nil means unlimited (the app is in the foreground); 0 while suspended or not running.
    public var backgroundTimeRemaining: Double?
    public var backgroundMode: BackgroundMode
    public var listeners: [ListenerStatus]
    public var sockets: [DataSocketStatus]
    public var tasks: [TaskStatus]
    public var lastTermination: TerminationStatus?
    /// The stages of the last transition.
    public var lastStages: [StageTiming]
    /// A process app's program (absent for other apps).
    public var program: ProgramStatus?
    /// `idle-background` in seconds (absent when off), and while the app is active how long it has gone
    /// unused (seconds).
    public var idleBackground: Double?
    public var unusedFor: Double?

    public init(name: String, state: AppState, suspendPending: Bool = false, backgroundTimeRemaining: Double?,
                backgroundMode: BackgroundMode = .idle, listeners: [ListenerStatus] = [], sockets: [DataSocketStatus] = [],
                tasks: [TaskStatus] = [], lastTermination: TerminationStatus? = nil, lastStages: [StageTiming] = [],
                program: ProgramStatus? = nil, idleBackground: Double? = nil, unusedFor: Double? = nil) {
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
        self.program = program
        self.idleBackground = idleBackground
        self.unusedFor = unusedFor
    }

    public static let schema = JSONSchema<AppStatus>("an app", blank: AppStatus(name: "", state: .notRunning, backgroundTimeRemaining: nil), [
        .string("name", \.name), .name("state", \.state), .bool("suspendPending", \.suspendPending),
        .number("backgroundTimeRemaining", \.backgroundTimeRemaining), .name("backgroundMode", \.backgroundMode, default: .idle),
        .records("listeners", \.listeners), .records("sockets", \.sockets), .records("tasks", \.tasks),
        .record("lastTermination", \.lastTermination, absent: .null), .records("lastStages", \.lastStages), .record("program", \.program),
        .number("idleBackground", \.idleBackground, absent: .omitted), .number("unusedFor", \.unusedFor, absent: .omitted),
    ])
}
