// The config's keys, one entry each, in the order of docs/configuration.md (see ConfigKeys.swift). The reader
// (Configuration.swift) stores each entry's value; tests check the pages (docs/configuration.md,
// netlifed.conf(5), Config/netlifed.conf) against this table. The services' and protocols' own keys plug into
// [listener] and [socket] (ConfigSection.optionKeys). The ranges keep a value from breaking the daemon (a zero
// budget kills the app on every transition; a task-time of centuries overflows the clock; a loop-stall of a few
// milliseconds aborts the daemon on any busy turn) while leaving room for the compressed timings tests use.

import NetLife

extension ConfigKey {
    private static let day: Duration = .seconds(86_400)
    private static let hour: Duration = .seconds(3600)
    private static let transition: ClosedRange<Duration> = .milliseconds(10) ... hour

    // MARK: [daemon]

    public static let control = ConfigKey("control", .daemon, .socketPath, help: "The control socket that netlifectl talks to.")
    public static let stateDirectory = ConfigKey("state-directory", .daemon, .absolutePath(maxBytes: 3999),
                                                 help: "Where the unfinished transfers are kept across restarts.")
    public static let controlGroup = ConfigKey("control-group", .daemon, .groupName, help: "A group whose members may use the control socket.")
    public static let include = ConfigKey("include", .daemon, .glob, help: "More config files, read after this one in name order.")
    public static let adminGroup = ConfigKey("admin-group", .daemon, .groups(one: true),
                                             help: "A group whose members may run the daemon-wide commands.")
    public static let loopStall = ConfigKey("loop-stall", .daemon, .duration(.milliseconds(100) ... .seconds(600)), default: "2s",
                                            help: "How long the event loop may stall before netlifed aborts.")
    public static let logLevel = ConfigKey("log-level", .daemon, .choice(["debug", "info", "notice", "warning", "error", "critical"]),
                                           default: "info", help: "The least important log records written.")
    /// A TCP address (a Unix path is refused by the reader: Prometheus scrapes over TCP).
    public static let metrics = ConfigKey("metrics", .daemon, .address(peer: false), help: "Serve Prometheus metrics at http://ADDRESS/metrics.")
    public static let keepaliveMinimum = ConfigKey("keepalive-min", .daemon, .duration(.seconds(1) ... day), default: "600s",
                                                   help: "The shortest keep-alive interval a VoIP socket may ask for.")
    public static let memoryPressureTrigger = ConfigKey("memory-pressure-trigger", .daemon, .pressureTrigger(off: "no"), default: "no",
                                                        help: "A kernel memory pressure trigger; each time it fires, the largest suspended app is ended.")
    /// A transfer always has an idle limit: without one a silent server holds it (and its app's background
    /// task) for ever.
    public static let transferIdleTimeout = ConfigKey("transfer-idle-timeout", .daemon, .duration(.milliseconds(100) ... day), default: "60s",
                                                      help: "A transfer that moves no byte for this long is paused.")
    /// Bytes per second; 0 turns the low-speed limit off, as curl's 0 does.
    public static let transferLowSpeedLimit = ConfigKey("transfer-low-speed-limit", .daemon,
                                                        .wholeNumber(0 ... (1 << 30), unit: "bytes per second", zero: "no limit"), default: "100",
                                                        help: "A transfer slower than this over transfer-low-speed-time is paused.")
    public static let transferLowSpeedTime = ConfigKey("transfer-low-speed-time", .daemon, .duration(.milliseconds(100) ... day), default: "60s",
                                                       help: "The period of transfer-low-speed-limit.")
    public static let debugCommands = ConfigKey("debug-commands", .daemon, .boolean, default: "no", help: "Enables netlifectl debug stall.")

    // MARK: [app NAME]

    public static let allowUsers = ConfigKey("allow-users", .app, .users, help: "Users who may change the app over the control socket.")
    public static let allowGroups = ConfigKey("allow-groups", .app, .groups(one: false), help: "Groups whose members may change the app.")
    public static let launch = ConfigKey("launch", .app, .choice(LaunchMode.allCases.map(\.rawValue)), default: "foreground",
                                         help: "How the app starts: active, in the background, or not until launched.")
    public static let profile = ConfigKey("profile", .app, .choice(Budgets.Profile.allCases.map(\.rawValue)), default: "ios13",
                                          help: "The iOS version whose background time (task-time) the app gets.")
    public static let autoSuspend = ConfigKey("auto-suspend", .app, .duration(.zero ... day, off: "never"), default: "1s",
                                              help: "Suspend the app this long after it becomes suspend-eligible.")
    public static let idleBackground = ConfigKey("idle-background", .app, .duration(.seconds(1) ... .seconds(30 * 86_400), off: "never"), default: "never",
                                                 help: "Move the active app to the background after this long without use.")
    public static let idleKeepsConnections = ConfigKey("idle-keeps-connections", .app, .boolean, default: "no",
                                                       help: "An open connection counts as use even when it moves nothing.")
    public static let exitsOnSuspend = ConfigKey("exits-on-suspend", .app, .boolean, default: "no",
                                                 help: "UIApplicationExitsOnSuspend: the app ends when it is suspended.")
    public static let multitasking = ConfigKey("multitasking", .app, .boolean, default: "yes", help: "no: as exits-on-suspend = yes.")
    public static let reclaimOnSuspend = ConfigKey("reclaim-on-suspend", .app, .boolean, default: "no",
                                                   help: "Reclaim the app's sockets each time it is suspended.")
    public static let backgroundMode = ConfigKey("background-mode", .app, .choice(BackgroundMode.allCases.map(\.rawValue)), default: "idle",
                                                 help: "continuous: never suspended while in the background.")

    // Budgets: the watchdog kills the app when a transition's pipeline overruns its budget.
    public static let launchBudget = ConfigKey("launch-budget", .app, .duration(transition), default: "20s",
                                               help: "did-finish-launching and did-become-active or did-enter-background.")
    public static let backgroundBudget = ConfigKey("background-budget", .app, .duration(transition), default: "5s",
                                                   help: "will-resign-active and did-enter-background.")
    public static let foregroundBudget = ConfigKey("foreground-budget", .app, .duration(transition), default: "10s",
                                                   help: "will-enter-foreground and did-become-active.")
    public static let terminateBudget = ConfigKey("terminate-budget", .app, .duration(transition), default: "5s", help: "will-terminate.")
    public static let expirationBudget = ConfigKey("expiration-budget", .app, .duration(transition), default: "1s",
                                                   help: "Each expiration handler.")
    /// The default is the default profile's (`ios13`).
    public static let taskTime = ConfigKey("task-time", .app, .duration(.seconds(1) ... day), default: "30s",
                                           help: "The background time shared by the app's background tasks.")
    public static let expirationLead = ConfigKey("expiration-lead", .app, .duration(.zero ... day), default: "5s",
                                                 help: "Expiration handlers run this long before task-time is spent.")
    public static let expirationGrace = ConfigKey("expiration-grace", .app, .duration(.zero ... hour), default: "1s",
                                                  help: "A task still open this long after task-time gets the app killed.")
    public static let keepaliveBudget = ConfigKey("keepalive-budget", .app, .duration(transition), default: "10s",
                                                  help: "What an on-voip-data hook or a keep-alive wake-up gets.")

    // Hooks: a command run at the callback of the same name.
    /// One per lifecycle event, `on-` and its name: `on-did-enter-background`.
    public static let hooks = LifecycleEvent.allCases.map(hook(for:))
    public static func hook(for event: LifecycleEvent) -> ConfigKey {
        ConfigKey("on-" + event.rawValue, .app, .commandLine(needsCommand: true), help: "Run at \(event.rawValue).")
    }
    /// The event of each hook key.
    static let hookEvents = Dictionary(uniqueKeysWithValues: LifecycleEvent.allCases.map { (hook(for: $0), $0) })
    public static let onExpiration = ConfigKey("on-expiration", .app, .commandLine(needsCommand: true),
                                               help: "The expiration handler of a task begun over the control socket.")
    public static let onVoipData = ConfigKey("on-voip-data", .app, .commandLine(needsCommand: true),
                                             help: "Run when data on a VoIP socket wakes the suspended app.")

    // A process app: the other keys need exec.
    public static let exec = ConfigKey("exec", .app, .commandLine(needsCommand: true), help: "The program and its arguments.")
    public static let user = ConfigKey("user", .app, .programUser, requires: "exec", help: "Run the program as this user.")
    public static let workingDirectory = ConfigKey("working-directory", .app, .absolutePath(), requires: "exec", help: "Where the program starts.")
    public static let environment = ConfigKey("environment", .app, .commandLine(needsCommand: false), requires: "exec",
                                              help: "NAME=VALUE words added to the program's environment.")
    public static let restart = ConfigKey("restart", .app, .choice(RestartMode.allCases.map(\.rawValue)), requires: "exec", default: "no",
                                          help: "When an exit starts the program again.")
    public static let ready = ConfigKey("ready", .app, .choice(ReadinessMode.allCases.map(\.rawValue)), requires: "exec", default: "start",
                                        help: "When the program counts as started: once it runs, or at READY=1.")
    /// Under 100 ms a program pings more than it works.
    public static let watchdog = ConfigKey("watchdog", .app, .duration(.milliseconds(100) ... day, off: "no"), requires: "exec", default: "no",
                                           help: "The program must send WATCHDOG=1 at least this often.")

    // MARK: [listener APP.NAME]

    public static let address = ConfigKey("address", .listener, .address(peer: false), help: "Where to listen.")
    public static let service = ConfigKey("service", .listener, .name, help: "What serves the connections (not in a process app).")
    public static let connections = ConfigKey("connections", .listener, .choice(ConnectionPolicy.allCases.map(\.rawValue)), default: "keep",
                                              help: "Whether accepted connections stay open when the app enters the background.")
    public static let maxConnections = ConfigKey("max-connections", .listener, .wholeNumber(1 ... Int.max),
                                                 help: "Serve at most this many connections at once.")
    public static let backlog = ConfigKey("backlog", .listener, .wholeNumber(1 ... Int(Int32.max)), default: "511",
                                          help: "The kernel's accept queue length.")
    public static let adopt = ConfigKey("adopt", .listener, .choice(["yes", "no"]), requires: "exec", default: "no",
                                        help: "The program binds the listener itself and netlifed adopts it.")
    public static let onBackground = ConfigKey("on-background", .listener, .choice(ListenerBackgroundRule.allCases.map(\.rawValue)),
                                               default: "close",
                                               help: "wake: go on listening in the background and while suspended; a connection wakes the app.")
    /// DNS-SD's limits (RFC 6763, RFC 6335).
    public static let mdns = ConfigKey("mdns", .listener, .serviceType, help: "Announce the listener over mDNS with this service type.")
    public static let mdnsName = ConfigKey("mdns-name", .listener, .label(maxBytes: 63), requires: "mdns", help: "The mDNS instance name.")
    public static let mdnsTxt = ConfigKey("mdns-txt", .listener, .commandLine(needsCommand: false), requires: "mdns",
                                          help: "The mDNS TXT strings, key=value words.")

    // MARK: [socket APP.NAME]

    public static let connect = ConfigKey("connect", .socket, .address(peer: true), help: "The peer.")
    public static let `protocol` = ConfigKey("protocol", .socket, .name, help: "What speaks on the connection.")
    public static let policy = ConfigKey("policy", .socket, .choice(DataSocketPolicy.allCases.map(\.rawValue)), default: "keep",
                                         help: "What did-enter-background does to the socket.")
    public static let voip = ConfigKey("voip", .socket, .boolean, default: "no", help: "Read while the app is suspended, and never reclaimed.")
    public static let keepalive = ConfigKey("keepalive", .socket, .duration(.seconds(1) ... day, floor: "keepalive-min"), requires: "voip",
                                            help: "Send the protocol's keep-alive this often, waking a suspended app for it.")

    /// Every key, in the order of docs/configuration.md; [daemon] metrics last, on a line of its own.
    public static let all: [ConfigKey] = [
        control, stateDirectory, controlGroup, include, adminGroup, loopStall, logLevel, keepaliveMinimum, memoryPressureTrigger, transferIdleTimeout,
        transferLowSpeedLimit, transferLowSpeedTime, debugCommands,
        allowUsers, allowGroups, launch, profile, autoSuspend, idleBackground, idleKeepsConnections, exitsOnSuspend, multitasking, reclaimOnSuspend, backgroundMode,
        launchBudget, backgroundBudget, foregroundBudget, terminateBudget, expirationBudget, taskTime, expirationLead, expirationGrace,
        keepaliveBudget,
    ] + hooks + [
        onExpiration, onVoipData, exec, user, workingDirectory, environment, restart, ready, watchdog,
        address, service, connections, maxConnections, backlog, adopt, onBackground, mdns, mdnsName, mdnsTxt,
        connect, `protocol`, policy, voip, keepalive,
        metrics,
    ]
}
