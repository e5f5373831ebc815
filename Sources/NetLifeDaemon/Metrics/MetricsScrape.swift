// One scrape as a value: what it shows of each app (read from the app while the scrape runs, counts from the
// registry), of the daemon and of the process, and how far its text has been written. The text is written in
// slices (`render(into:maxUnits:)`), family after family, so that the server can spread a scrape of 1,000 apps
// over several loop turns: each family is whole and in one place (HELP and TYPE once, then its samples), as
// the format requires, however the slices fall.

import NetLife

/// What a scrape shows of one app.
struct AppSample: Equatable, Sendable {
    var name: String
    var state: AppState
    /// `App.heldBytes`: socket buffers and kernel queues, and a process app's cgroup charge.
    var memoryBytes: Int
    var connections: Int
    var acceptedConnections: UInt64
    /// Seconds; nil: unlimited (the foreground), shown as +Inf.
    var backgroundTimeRemaining: Double?
    var backgroundTasks: Int
    /// Bytes moved by its transfers, by direction (MetricVocabulary.directions' order); nil: none counted.
    var transferBytes: [UInt64]?
    /// What the registry counted of it when the scrape read it.
    var counters: MetricsRegistry.AppCounters

    init(name: String, state: AppState, memoryBytes: Int = 0, connections: Int = 0, acceptedConnections: UInt64 = 0,
         backgroundTimeRemaining: Double? = nil, backgroundTasks: Int = 0, transferBytes: [UInt64]? = nil,
         counters: MetricsRegistry.AppCounters = MetricsRegistry.AppCounters()) {
        self.name = name
        self.state = state
        self.memoryBytes = memoryBytes
        self.connections = connections
        self.acceptedConnections = acceptedConnections
        self.backgroundTimeRemaining = backgroundTimeRemaining
        self.backgroundTasks = backgroundTasks
        self.transferBytes = transferBytes
        self.counters = counters
    }
}

/// What a scrape shows of the process (from /proc/self); nil where it could not be read.
struct ProcessSample: Equatable, Sendable {
    var cpuSeconds: Double?
    var residentBytes: UInt64?
    var virtualBytes: UInt64?
    var openFileDescriptors: UInt64?
    var maxFileDescriptors: UInt64?
    var startTimeSeconds: Double?

    init(cpuSeconds: Double? = nil, residentBytes: UInt64? = nil, virtualBytes: UInt64? = nil, openFileDescriptors: UInt64? = nil,
         maxFileDescriptors: UInt64? = nil, startTimeSeconds: Double? = nil) {
        self.cpuSeconds = cpuSeconds
        self.residentBytes = residentBytes
        self.virtualBytes = virtualBytes
        self.openFileDescriptors = openFileDescriptors
        self.maxFileDescriptors = maxFileDescriptors
        self.startTimeSeconds = startTimeSeconds
    }
}

/// A scrape's data and how far its text has been written.
struct MetricsScrape: Sendable {
    /// The apps, in the config's order.
    var apps: [AppSample]
    var controlRequests: [(key: MetricsRegistry.ControlRequestKey, count: UInt64)]
    var loopTurns: Histogram
    var process: ProcessSample
    var version: String

    /// The family being written, and the app within it (for the apps' families).
    private var family = 0
    private var app = 0

    init(apps: [AppSample], controlRequests: [(key: MetricsRegistry.ControlRequestKey, count: UInt64)] = [],
         loopTurns: Histogram = Histogram(bounds: []), process: ProcessSample = ProcessSample(), version: String = "") {
        self.apps = apps
        self.controlRequests = controlRequests
        self.loopTurns = loopTurns
        self.process = process
        self.version = version
    }

    /// Whether the whole text has been written.
    var isFinished: Bool { family >= MetricFamily.all.count }

    /// Writes the next part of the text to `text`: at most `maxUnits` units, a unit being one app's samples of
    /// one family, or one of the daemon's families whole, and no unit more once `maxBytes` have been written (at
    /// least one unit when anything is left). Returns whether the text is finished.
    @discardableResult
    mutating func render(into text: inout Exposition, maxUnits: Int, maxBytes: Int = .max) -> Bool {
        var units = 0
        let start = text.bytes.count
        while !isFinished, units < max(1, maxUnits), units == 0 || text.bytes.count - start < maxBytes {
            let current = MetricFamily.all[family]
            if family < MetricFamily.perApp.count {
                if app == 0 { text.header(current) }
                if app < apps.count { writeApp(apps[app], current, into: &text) }
                app += 1
                if app >= apps.count {
                    app = 0
                    family += 1
                }
            } else {
                writeDaemonFamily(current, into: &text)
                family += 1
            }
            units += 1
        }
        return isFinished
    }

    /// The whole text at once (tests, and the benchmark of one render).
    mutating func renderAll() -> [UInt8] {
        var text = Exposition()
        while !render(into: &text, maxUnits: .max) {}
        return text.bytes
    }

    private func writeApp(_ sample: AppSample, _ family: MetricFamily, into text: inout Exposition) {
        let name = sample.name
        let counters = sample.counters
        switch family.id {
        case .appState:
            for state in AppState.allCases { text.sample(family, name, state.rawValue, count: state == sample.state ? 1 : 0) }
        case .appTransitions:
            writeCounts(counters.transitions, MetricVocabulary.commands, family, name, into: &text)
        case .appStageDuration:
            writeHistograms(counters.stageDurations, MetricVocabulary.stages, family, name, into: &text)
        case .appWatchdogKills:
            text.sample(family, name, count: counters.watchdogKills)
        case .appTerminations:
            writeCounts(counters.terminations, MetricVocabulary.terminations, family, name, into: &text)
        case .appJetsamTerminations:
            text.sample(family, name, count: counters.jetsamTerminations)
        case .appIdleBackgrounds:
            text.sample(family, name, count: counters.idleBackgrounds)
        case .appWakeups:
            writeCounts(counters.wakeups, MetricVocabulary.wakeReasons, family, name, into: &text)
        case .appWakeLatency:
            writeHistograms(counters.wakeLatency, MetricVocabulary.wakeReasons, family, name, into: &text)
        case .appMemory:
            text.sample(family, name, count: UInt64(max(0, sample.memoryBytes)))
        case .appConnections:
            text.sample(family, name, count: UInt64(max(0, sample.connections)))
        case .appConnectionsAccepted:
            text.sample(family, name, count: sample.acceptedConnections)
        case .appBackgroundTimeRemaining:
            text.sample(family, name, value: sample.backgroundTimeRemaining ?? .infinity)
        case .appBackgroundTasks:
            text.sample(family, name, count: UInt64(max(0, sample.backgroundTasks)))
        case .appTransferBytes:
            guard let bytes = sample.transferBytes else { return }
            for (index, direction) in MetricVocabulary.directions.enumerated() where index < bytes.count {
                text.sample(family, name, direction, count: bytes[index])
            }
        case .controlRequests, .loopTurnDuration, .buildInfo, .processCPU, .processResidentMemory, .processVirtualMemory,
             .processOpenFDs, .processMaxFDs, .processStartTime:
            break
        }
    }

    /// A labelled counter's series: one per value counted so far.
    private func writeCounts(_ counts: LabeledCounts, _ vocabulary: [String], _ family: MetricFamily, _ app: String,
                             into text: inout Exposition) {
        for (index, value) in vocabulary.enumerated() where counts[index] > 0 {
            text.sample(family, app, value, count: counts[index])
        }
    }

    /// A labelled histogram's series: one per value observed so far.
    private func writeHistograms(_ histograms: [Histogram?], _ vocabulary: [String], _ family: MetricFamily, _ app: String,
                                 into text: inout Exposition) {
        for (index, value) in vocabulary.enumerated() where index < histograms.count {
            if let histogram = histograms[index] { text.histogram(family, app, value, histogram: histogram) }
        }
    }

    private func writeDaemonFamily(_ family: MetricFamily, into text: inout Exposition) {
        // A process figure that could not be read leaves its family out: no HELP without a sample.
        let processValue: Double? = switch family.id {
        case .processCPU: process.cpuSeconds
        case .processResidentMemory: process.residentBytes.map { Double($0) }
        case .processVirtualMemory: process.virtualBytes.map { Double($0) }
        case .processOpenFDs: process.openFileDescriptors.map { Double($0) }
        case .processMaxFDs: process.maxFileDescriptors.map { Double($0) }
        case .processStartTime: process.startTimeSeconds
        default: nil
        }
        switch family.id {
        case .controlRequests:
            text.header(family)
            for (key, count) in controlRequests { text.sample(family, key.command, key.result, count: count) }
        case .loopTurnDuration:
            text.header(family)
            text.histogram(family, histogram: loopTurns)
        case .buildInfo:
            text.header(family)
            text.sample(family, version, count: 1)
        default:
            guard let processValue else { return }
            text.header(family)
            text.sample(family, value: processValue)
        }
    }
}
