// The metric families `/metrics` serves, one entry each, in the order a scrape shows them (docs/metrics.md lists
// them; a test checks the page against this table and every name against Prometheus' naming rules). Every
// label's values come from the config (app names) or from a fixed vocabulary (the states, the commands of the
// control protocol's table, the lifecycle's stages, the wake-up and termination reasons, the error codes), so
// the number of series is bounded by the config.

/// One metric family: its name, type, labels and help.
struct MetricFamily: Equatable, Sendable {
    /// The three types netlifed uses.
    enum Kind: String, Sendable {
        case counter, gauge, histogram
    }

    /// Which family it is, for a switch (its name is for the text).
    enum ID: Sendable {
        case appState, appTransitions, appStageDuration, appWatchdogKills, appTerminations, appJetsamTerminations
        case appIdleBackgrounds, appWakeups, appWakeLatency, appMemory, appConnections, appConnectionsAccepted
        case appBackgroundTimeRemaining, appBackgroundTasks, appTransferBytes
        case controlRequests, loopTurnDuration, buildInfo
        case processCPU, processResidentMemory, processVirtualMemory, processOpenFDs, processMaxFDs, processStartTime
    }

    let id: ID
    let name: String
    let kind: Kind
    /// The label names of its series, in the order they are written (a histogram's `le` is not listed).
    let labels: [String]
    /// One line for `# HELP`.
    let help: String

    init(_ id: ID, _ name: String, _ kind: Kind, labels: [String] = [], help: String) {
        self.id = id
        self.name = name
        self.kind = kind
        self.labels = labels
        self.help = help
    }
}

extension MetricFamily {
    // MARK: Each app (the label `app`: the app's name in the config)

    static let appState = MetricFamily(.appState, "netlife_app_state", .gauge, labels: ["app", "state"],
                                       help: "1 for the lifecycle state the app is in, 0 for the other four.")
    static let appTransitions = MetricFamily(.appTransitions, "netlife_app_transitions_total", .counter, labels: ["app", "command"],
                                             help: "Transitions whose pipeline ran to its end, by the command that ran them (a restart is a launch).")
    static let appStageDuration = MetricFamily(.appStageDuration, "netlife_app_stage_duration_seconds", .histogram, labels: ["app", "stage"],
                                               help: "How long each stage of a transition took (policy steps, delegate, hook or program).")
    static let appWatchdogKills = MetricFamily(.appWatchdogKills, "netlife_app_watchdog_kills_total", .counter, labels: ["app"],
                                               help: "Times the watchdog killed the app (0x8badf00d): a budget overrun.")
    static let appTerminations = MetricFamily(.appTerminations, "netlife_app_terminations_total", .counter, labels: ["app", "reason"],
                                              help: "Times the app stopped running, by why (the reason of lastTermination).")
    static let appJetsamTerminations = MetricFamily(.appJetsamTerminations, "netlife_app_jetsam_terminations_total", .counter, labels: ["app"],
                                                    help: "Times memory pressure ended the suspended app (jetsam).")
    static let appIdleBackgrounds = MetricFamily(.appIdleBackgrounds, "netlife_app_idle_backgrounds_total", .counter, labels: ["app"],
                                                 help: "Times idle-background moved the unused active app to the background.")
    static let appWakeups = MetricFamily(.appWakeups, "netlife_app_wakeups_total", .counter, labels: ["app", "reason"],
                                         help: "Times the suspended app was woken into the background, by reason.")
    static let appWakeLatency = MetricFamily(.appWakeLatency, "netlife_app_wake_latency_seconds", .histogram, labels: ["app", "reason"],
                                             help: "From the connection or data that woke the suspended app to the app serving it again.")
    static let appMemory = MetricFamily(.appMemory, "netlife_app_memory_bytes", .gauge, labels: ["app"],
                                        help: "Memory the app holds: its sockets' buffers and kernel queues, and a process app's cgroup charge.")
    static let appConnections = MetricFamily(.appConnections, "netlife_app_connections", .gauge, labels: ["app"],
                                             help: "Connections accepted on the app's listeners and open now.")
    static let appConnectionsAccepted = MetricFamily(.appConnectionsAccepted, "netlife_app_connections_accepted_total", .counter, labels: ["app"],
                                                     help: "Connections accepted on the app's listeners.")
    static let appBackgroundTimeRemaining = MetricFamily(.appBackgroundTimeRemaining, "netlife_app_background_time_remaining_seconds", .gauge, labels: ["app"],
                                                         help: "Background time left to the app's tasks: +Inf in the foreground, 0 suspended or not running.")
    static let appBackgroundTasks = MetricFamily(.appBackgroundTasks, "netlife_app_background_tasks", .gauge, labels: ["app"],
                                                 help: "Background tasks open now.")
    static let appTransferBytes = MetricFamily(.appTransferBytes, "netlife_app_transfer_bytes_total", .counter, labels: ["app", "direction"],
                                               help: "Bytes of the app's downloads written to disk and of its uploads taken by the server.")

    // MARK: The daemon

    static let controlRequests = MetricFamily(.controlRequests, "netlife_control_requests_total", .counter, labels: ["command", "result"],
                                              help: "Requests on the control socket, by command (unknown: none of the table) and result (ok, or the error code).")
    static let loopTurnDuration = MetricFamily(.loopTurnDuration, "netlife_loop_turn_duration_seconds", .histogram,
                                               help: "How long each turn of the event loop took, from its first callback to its next wait for events.")
    static let buildInfo = MetricFamily(.buildInfo, "netlife_build_info", .gauge, labels: ["version"], help: "netlifed's version; always 1.")

    // MARK: The process (the names every Prometheus client library uses)

    static let processCPU = MetricFamily(.processCPU, "process_cpu_seconds_total", .counter, help: "Total user and system CPU time spent in seconds.")
    static let processResidentMemory = MetricFamily(.processResidentMemory, "process_resident_memory_bytes", .gauge, help: "Resident memory size in bytes.")
    static let processVirtualMemory = MetricFamily(.processVirtualMemory, "process_virtual_memory_bytes", .gauge, help: "Virtual memory size in bytes.")
    static let processOpenFDs = MetricFamily(.processOpenFDs, "process_open_fds", .gauge, help: "Number of open file descriptors.")
    static let processMaxFDs = MetricFamily(.processMaxFDs, "process_max_fds", .gauge, help: "Maximum number of open file descriptors.")
    static let processStartTime = MetricFamily(.processStartTime, "process_start_time_seconds", .gauge,
                                               help: "Start time of the process since unix epoch in seconds.")

    /// The families of each app, in the order a scrape shows them.
    static let perApp: [MetricFamily] = [
        appState, appTransitions, appStageDuration, appWatchdogKills, appTerminations, appJetsamTerminations, appIdleBackgrounds,
        appWakeups, appWakeLatency, appMemory, appConnections, appConnectionsAccepted, appBackgroundTimeRemaining,
        appBackgroundTasks, appTransferBytes,
    ]

    /// The daemon's and the process's families, after the apps'.
    static let daemon: [MetricFamily] = [
        controlRequests, loopTurnDuration, buildInfo,
        processCPU, processResidentMemory, processVirtualMemory, processOpenFDs, processMaxFDs, processStartTime,
    ]

    /// Every family, in the order a scrape shows them.
    static let all: [MetricFamily] = perApp + daemon
}
