// What netlifed makes of one program run's notify datagrams (systemd's protocol, sd_notify(3)), as a pure
// value: whether it said READY=1, its last STATUS= line, and its watchdog (`watchdog = DURATION`, handed to it
// as WATCHDOG_USEC): a run whose last WATCHDOG=1 (or start) is older than the interval is killed as a
// watchdog kill, and WATCHDOG=trigger kills it at once, as systemd's WatchdogSec= does. A suspended app's
// program is frozen and cannot ping, so the watchdog's clock stops while it is frozen and starts afresh when
// it is thawed. Time comes in as `now`; the shell arms one timer for `deadline` and says `clock(now:)`.

import NetLifeEvent

/// One run's notify state.
public struct ProgramNotifyState: Equatable, Sendable {
    /// What the shell does.
    public enum Action: Equatable, Sendable {
        /// Tell the App (READY=1 completes a launch that waits for it; all three show in `watch`).
        case notify(ProgramNotification)
        /// The program's watchdog ran out (or it sent WATCHDOG=trigger): a watchdog kill.
        case watchdogKill(WatchdogTimeout)
    }

    /// The `watchdog` interval, nil when the program has none.
    public let watchdog: Duration?
    /// Whether the run has said READY=1.
    public private(set) var isReady = false
    /// Its last STATUS= text.
    public private(set) var statusText: String?
    /// The start of the current watchdog interval: the run's start, its last ping, or its thaw; nil while it
    /// is frozen, after a kill, or without a watchdog.
    public private(set) var lastPingAt: MonotonicTime?
    /// Whether the run was killed through this state: nothing more is acted on.
    public private(set) var isOver = false

    /// A run that starts at `now`: its watchdog's first interval starts with it.
    public init(watchdog: Duration?, startedAt now: MonotonicTime) {
        self.watchdog = watchdog
        lastPingAt = watchdog == nil ? nil : now
    }

    /// When the watchdog runs out, if it can.
    public var deadline: MonotonicTime? {
        guard let watchdog, let lastPingAt, !isOver else { return nil }
        return lastPingAt + watchdog
    }

    /// One datagram from the program.
    public mutating func receive(_ message: NotifyMessage, now: MonotonicTime) -> [Action] {
        guard !isOver else { return [] }
        var actions: [Action] = []
        if let status = message.status { statusText = status }
        if message.reloading { actions.append(.notify(.reloading)) }
        if message.ready {
            isReady = true
            actions.append(.notify(.ready))
        }
        if message.stopping { actions.append(.notify(.stopping)) }
        switch message.watchdog {
        case .ping?:
            if lastPingAt != nil { lastPingAt = now }
        case .trigger?:
            isOver = true
            let since = lastPingAt.map { now - $0 } ?? .zero
            actions.append(.watchdogKill(WatchdogTimeout(stage: .programWatchdog(triggered: true), budget: watchdog ?? .zero, elapsed: since)))
        case nil:
            break
        }
        return actions
    }

    /// The shell's timer fired: the kill, if the deadline has passed.
    public mutating func clock(now: MonotonicTime) -> [Action] {
        guard let deadline, let lastPingAt, let watchdog, now >= deadline else { return [] }
        isOver = true
        return [.watchdogKill(WatchdogTimeout(stage: .programWatchdog(triggered: false), budget: watchdog, elapsed: now - lastPingAt))]
    }

    /// The run is frozen: it cannot ping, so its watchdog waits.
    public mutating func froze() {
        lastPingAt = nil
    }

    /// The run is thawed at `now`: its watchdog starts a fresh interval.
    public mutating func thawed(now: MonotonicTime) {
        guard watchdog != nil, !isOver else { return }
        lastPingAt = now
    }
}
