// When a process app's program is started again after it exits (docs/process-apps.md), as systemd's Restart=,
// RestartSec= with RestartSteps= and StartLimitBurst= decide it, as a pure value driven by explicit instants
// so that a fake clock can test it. Its owner reports launches and exits and performs the decision: relaunch
// after a delay, give up (the reason goes to `lastTermination`), or nothing.
//
// Only exits netlifed did not cause count: a program that netlifed terminated, killed by the watchdog or for
// memory pressure, or stopped for a reload is `expected` and never restarted (as iOS does not relaunch an
// app the watchdog killed; `netlifectl launch` does). The delay starts at 100 ms and doubles with each
// restart in a row, up to 30 s; a program that ran 10 s before it exited starts the series over. More than
// 5 starts within 10 s is a crash loop: the policy gives up, as systemd's start limit does.

import Glibc
import NetLifeEvent

/// Which exits restart the program (the `restart` app key).
public enum RestartMode: String, Equatable, Sendable, CaseIterable {
    /// Never.
    case no
    /// After an exit with a non-zero status, or a signal other than the clean ones (SIGHUP, SIGINT, SIGTERM,
    /// SIGPIPE), as systemd's `on-failure`.
    case onFailure = "on-failure"
    /// After any exit netlifed did not cause.
    case always
}

/// What to do after the program exited.
public enum RestartDecision: Equatable, Sendable {
    /// Leave the app not running.
    case none
    /// Start the program again after this delay.
    case relaunch(after: Duration)
    /// Leave the app not running, and say why in `lastTermination` (after the exit status).
    case giveUp(String)
}

/// The restart rules of one process app, and what they remember of its starts.
public struct RestartPolicy: Equatable, Sendable {
    public var mode: RestartMode
    /// The delay before the first restart in a row.
    public var initialDelay: Duration
    /// The longest delay.
    public var maxDelay: Duration
    /// How long the program must have run for the next restart to start the series over.
    public var resetAfter: Duration
    /// The most starts within `startLimitInterval`.
    public var startLimitBurst: Int
    public var startLimitInterval: Duration

    /// The restarts in a row so far.
    public private(set) var consecutiveRestarts = 0
    /// When the program was last started, if it runs.
    public private(set) var runningSince: MonotonicTime?
    /// The latest starts, at most `startLimitBurst`, oldest first.
    public private(set) var recentStarts: [MonotonicTime] = []

    public init(mode: RestartMode, initialDelay: Duration = .milliseconds(100), maxDelay: Duration = .seconds(30),
                resetAfter: Duration = .seconds(10), startLimitBurst: Int = 5, startLimitInterval: Duration = .seconds(10)) {
        self.mode = mode
        self.initialDelay = max(.zero, initialDelay)
        self.maxDelay = max(self.initialDelay, maxDelay)
        self.resetAfter = resetAfter
        self.startLimitBurst = max(1, startLimitBurst)
        self.startLimitInterval = startLimitInterval
    }

    /// The program was started at `now` (by the policy or by hand).
    public mutating func launched(now: MonotonicTime) {
        runningSince = now
        recentStarts.append(now)
        if recentStarts.count > startLimitBurst { recentStarts.removeFirst(recentStarts.count - startLimitBurst) }
    }

    /// Forgets the restarts in a row and the start limit's count: `netlifectl launch` after the policy gave
    /// up (as `systemctl reset-failed`).
    public mutating func reset() {
        consecutiveRestarts = 0
        recentStarts.removeAll()
    }

    /// The program exited at `now` with `status`; `expected` when netlifed caused it. Decides what follows.
    public mutating func exited(_ status: ChildExitStatus, expected: Bool, now: MonotonicTime) -> RestartDecision {
        let ranFor = runningSince.map { now - $0 }
        runningSince = nil
        if let ranFor, ranFor >= resetAfter { consecutiveRestarts = 0 }
        guard !expected, Self.restarts(mode, after: status) else { return .none }
        if recentStarts.count >= startLimitBurst, let oldest = recentStarts.first, now - oldest < startLimitInterval {
            return .giveUp("started \(recentStarts.count) times within \(startLimitInterval), it is not restarted again "
                           + "(netlifectl launch starts it)")
        }
        let delay = Self.delay(initial: initialDelay, max: maxDelay, restartsBefore: consecutiveRestarts)
        consecutiveRestarts += 1
        return .relaunch(after: delay)
    }

    /// Whether `mode` restarts after `status`.
    public static func restarts(_ mode: RestartMode, after status: ChildExitStatus) -> Bool {
        switch mode {
        case .no: return false
        case .always: return true
        case .onFailure:
            switch status {
            case .exited(let code): return code != 0
            case .signaled(let signal): return ![SIGHUP, SIGINT, SIGTERM, SIGPIPE].contains(signal)
            }
        }
    }

    /// `initial` doubled `restartsBefore` times, at most `max` (no overflow however many).
    static func delay(initial: Duration, max maximum: Duration, restartsBefore: Int) -> Duration {
        var delay = initial
        for _ in 0..<min(restartsBefore, 64) {
            guard delay < maximum else { break }
            delay = delay * 2
        }
        return min(delay, maximum)
    }
}
