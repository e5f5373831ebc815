// The counters and histograms netlifed keeps for `/metrics`, as one value: events in (what happens to an app,
// a control request answered), counts out. Each app's are kept under its name from the config, each labelled
// count at its place in a fixed vocabulary (MetricVocabulary), so that nothing a client or a peer sends can add
// a series. The gauges (state, memory, connections, ...) are read from the apps when a scrape runs
// (MetricsScrape.swift); only what must be counted as it happens is here.

import NetLife
import NetLifeControl

/// The label values a labelled family may take, in the order a scrape shows them.
enum MetricVocabulary {
    /// The lifecycle states.
    static let states = AppState.allCases.map(\.rawValue)
    /// The commands that run a transition, by their names in the control protocol (as `watch` names them).
    static let commands = ["launch", "foreground", "background", "suspend", "terminate", "interrupt-begin", "interrupt-end"]
    /// The stages of a transition.
    static let stages = LifecycleEvent.allCases.map(\.rawValue)
    /// Why an app stopped.
    static let terminations = TerminationKind.allCases.map(\.rawValue)
    /// Why a suspended app was woken.
    static let wakeReasons = ["voip-data", "keepalive", "voip-reconnect", "connection"]
    /// A transfer's direction.
    static let directions = TransferDirection.allCases.map(\.rawValue)

    static func index(of command: LifecycleCommand) -> Int {
        switch command {
        case .launch: 0
        case .foreground: 1
        case .background: 2
        case .suspend: 3
        case .terminate: 4
        case .interruptBegin: 5
        case .interruptEnd: 6
        }
    }

    static func index(of reason: WakeReason) -> Int {
        switch reason {
        case .voipData: 0
        case .keepalive: 1
        case .voipReconnect: 2
        case .connection: 3
        }
    }
}

/// Counts indexed by a vocabulary's values: a series exists once its value has been counted.
struct LabeledCounts: Equatable, Sendable {
    private(set) var counts: [UInt64]

    init(_ vocabulary: [String]) {
        counts = [UInt64](repeating: 0, count: vocabulary.count)
    }

    mutating func add(at index: Int, _ amount: UInt64 = 1) {
        guard counts.indices.contains(index) else { return }
        counts[index] &+= amount
    }

    subscript(index: Int) -> UInt64 { counts.indices.contains(index) ? counts[index] : 0 }
}

/// The counters and histograms of `/metrics`.
struct MetricsRegistry: Equatable, Sendable {
    /// What is counted of one app.
    struct AppCounters: Equatable, Sendable {
        var transitions = LabeledCounts(MetricVocabulary.commands)
        /// By stage (the vocabulary's order); nil until the stage first ran.
        var stageDurations = [Histogram?](repeating: nil, count: MetricVocabulary.stages.count)
        var watchdogKills: UInt64 = 0
        var terminations = LabeledCounts(MetricVocabulary.terminations)
        var jetsamTerminations: UInt64 = 0
        var idleBackgrounds: UInt64 = 0
        var wakeups = LabeledCounts(MetricVocabulary.wakeReasons)
        /// By wake reason; nil until a wake-up of that reason was served.
        var wakeLatency = [Histogram?](repeating: nil, count: MetricVocabulary.wakeReasons.count)
    }

    /// A control request's labels.
    struct ControlRequestKey: Hashable, Sendable {
        /// The command's name in the table, or `unknown`.
        var command: String
        /// `ok`, or the error code (`unknown` for a code this daemon does not have).
        var result: String
    }

    /// Each app's counts, by name.
    private(set) var apps: [String: AppCounters] = [:]
    /// Requests answered on the control socket.
    private(set) var controlRequests: [ControlRequestKey: UInt64] = [:]

    init() {}

    /// What `event` of the app named `app` adds.
    mutating func record(_ event: AppEvent, app: String) {
        switch event {
        case .transitionFinished(let command, _, let stages):
            update(app) { counters in
                counters.transitions.add(at: MetricVocabulary.index(of: command))
                for stage in stages {
                    guard let index = MetricVocabulary.stages.firstIndex(of: stage.event.rawValue) else { continue }
                    var histogram = counters.stageDurations[index] ?? Histogram(bounds: Histogram.stageBounds)
                    histogram.observe(stage.duration.seconds)
                    counters.stageDurations[index] = histogram
                }
            }
        case .watchdogKilled:
            update(app) { $0.watchdogKills &+= 1 }
        case .stopped(let record):
            let kind = record.reason.kind
            update(app) { counters in
                counters.terminations.add(at: MetricVocabulary.terminations.firstIndex(of: kind.rawValue) ?? -1)
                if kind == .memoryPressure { counters.jetsamTerminations &+= 1 }
            }
        case .idle:
            update(app) { $0.idleBackgrounds &+= 1 }
        case .woken(let reason):
            update(app) { $0.wakeups.add(at: MetricVocabulary.index(of: reason)) }
        case .wakeServed(let reason, let latency):
            let index = MetricVocabulary.index(of: reason)
            update(app) { counters in
                var histogram = counters.wakeLatency[index] ?? Histogram(bounds: Histogram.wakeBounds)
                histogram.observe(latency.seconds)
                counters.wakeLatency[index] = histogram
            }
        case .stateChanged, .taskBegan, .taskEnded, .taskExpiring, .listenerOpened, .listenerClosed, .listenerFailed,
             .socketChanged, .socketQuietModeChanged, .reclaimed, .programNotified:
            break
        }
    }

    /// The counts of the app named `name` (all zero for an app nothing was counted of yet).
    func counters(of name: String) -> AppCounters {
        apps[name] ?? AppCounters()
    }

    /// Forgets the apps not named in `names` (a reload removed them): the series follow the config.
    mutating func keepApps(_ names: Set<String>) {
        guard apps.keys.contains(where: { !names.contains($0) }) else { return }
        apps = apps.filter { names.contains($0.key) }
    }

    /// A control request answered: `request` as it came (nil when it was no JSON, or too long), and its reply.
    mutating func recordControlRequest(_ request: JSON?, reply: JSON) {
        controlRequests[Self.controlRequestKey(request, reply: reply), default: 0] &+= 1
    }

    /// The labels of a control request: its command when the table has it (any other text would let a client
    /// make series without end), and `ok` or the reply's error code.
    static func controlRequestKey(_ request: JSON?, reply: JSON) -> ControlRequestKey {
        let name = request?["cmd"]?.stringValue
        let command = name.flatMap(ControlCommand.named)?.name ?? "unknown"
        let result = reply["ok"]?.boolValue == true ? "ok" : (ControlError(reply: reply)?.code ?? .unknown).rawValue
        return ControlRequestKey(command: command, result: result)
    }

    /// The control requests in the order a scrape shows them: by the table's order of commands (`unknown`
    /// last), then by result.
    var orderedControlRequests: [(key: ControlRequestKey, count: UInt64)] {
        let order = Dictionary(uniqueKeysWithValues: ControlCommand.all.enumerated().map { ($1.name, $0) })
        return controlRequests.map { (key: $0.key, count: $0.value) }.sorted { a, b in
            let first = order[a.key.command] ?? Int.max, second = order[b.key.command] ?? Int.max
            return first != second ? first < second : a.key.result < b.key.result
        }
    }

    private mutating func update(_ app: String, _ change: (inout AppCounters) -> Void) {
        change(&apps[app, default: AppCounters()])
    }
}
