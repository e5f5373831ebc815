// The duration keys of the config and the range each accepts. A range keeps a value from being able to
// break the daemon (a zero budget kills the app on every transition; a task-time of centuries overflows
// the clock; a loop-stall of a few milliseconds aborts the daemon on any busy turn) while leaving room for
// the compressed timings tests use.

import NetLife

/// A duration key and the values it accepts.
struct DurationKey {
    let key: String
    let range: ClosedRange<Duration>

    /// The range as the error message writes it: `between 10ms and 1h`.
    var rangeDescription: String { "between \(ConfigValues.format(range.lowerBound)) and \(ConfigValues.format(range.upperBound))" }
}

/// The keys of `[app]` that set a budget, in the order docs/configuration.md lists them, with where each goes.
enum BudgetKeys {
    static let transitionRange: ClosedRange<Duration> = .milliseconds(10) ... .seconds(3600)

    static var all: [(key: DurationKey, path: WritableKeyPath<Budgets, Duration>)] { [
        (DurationKey(key: "launch-budget", range: transitionRange), \.launch),
        (DurationKey(key: "background-budget", range: transitionRange), \.background),
        (DurationKey(key: "foreground-budget", range: transitionRange), \.foreground),
        (DurationKey(key: "terminate-budget", range: transitionRange), \.terminate),
        (DurationKey(key: "expiration-budget", range: transitionRange), \.expiration),
        (DurationKey(key: "task-time", range: .seconds(1) ... .seconds(86_400)), \.taskTime),
        (DurationKey(key: "expiration-lead", range: .zero ... .seconds(86_400)), \.expirationLead),
        (DurationKey(key: "expiration-grace", range: .zero ... .seconds(3600)), \.expirationGrace),
        (DurationKey(key: "keepalive-budget", range: transitionRange), \.keepalive),
    ] }

    /// The entry for `key`, if it is a budget key.
    static func named(_ key: String) -> (key: DurationKey, path: WritableKeyPath<Budgets, Duration>)? {
        all.first { $0.key.key == key }
    }
}

/// The other duration keys.
enum OtherDurationKeys {
    static let autoSuspend = DurationKey(key: "auto-suspend", range: .zero ... .seconds(86_400))
    static let loopStall = DurationKey(key: "loop-stall", range: .milliseconds(100) ... .seconds(600))
    static let keepaliveMinimum = DurationKey(key: "keepalive-min", range: .seconds(1) ... .seconds(86_400))
    /// A process app's WATCHDOG_USEC: under 100 ms a program pings more than it works; `no` turns it off.
    static let programWatchdog = DurationKey(key: "watchdog", range: .milliseconds(100) ... .seconds(86_400))
    /// A transfer always has an idle limit: without one a silent server holds it (and its app's background
    /// task) for ever.
    static let transferIdleTimeout = DurationKey(key: "transfer-idle-timeout", range: .milliseconds(100) ... .seconds(86_400))
    static let transferLowSpeedTime = DurationKey(key: "transfer-low-speed-time", range: .milliseconds(100) ... .seconds(86_400))
    /// Bytes per second; 0 turns the low-speed limit off, as curl's 0 does.
    static let transferLowSpeedLimitRange = 0 ... (1 << 30)
}

/// Key names that follow from the framework's vocabulary.
enum ConfigKeys {
    /// The `[listener APP.NAME]` keys that make a listener TLS. The http service takes them (its
    /// `optionKeys`); on any other listener they are refused with that explanation rather than as unknown.
    static let tlsListenerKeys: Set<String> = ["tls-certificate", "tls-key"]

    /// The `[app]` key of a callback's hook, for example `on-did-enter-background`.
    static func hook(for event: LifecycleEvent) -> String { "on-" + event.rawValue }

    /// Whether `key`'s value is a command line, split into words as a shell would: every hook (`on-...`),
    /// `exec`, `environment` and `mdns-txt`. Quotes in such a value keep a `#` from starting a comment.
    static func isCommandLine(_ key: String) -> Bool {
        key.hasPrefix("on-") || key == "exec" || key == "environment" || key == "mdns-txt"
    }
}
