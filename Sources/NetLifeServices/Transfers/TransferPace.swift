// How long a transfer may go without progress, as a pure value (the timer is the shells'). Every transfer,
// download or upload, HTTP or FTP, in every phase that waits on the network (connecting, waiting for a
// response head or an FTP reply, receiving or sending a body), is watched the same way, with curl's
// semantics so that the limits carry over to a libcurl engine:
// - idle timeout: no byte moved for this long (curl has no exact twin; its `--connect-timeout` and a
//   low-speed limit of 1 byte/s come closest);
// - low-speed limit and time (curl's `--speed-limit` and `--speed-time`, CURLOPT_LOW_SPEED_LIMIT/TIME): fewer
//   than `lowSpeedLimit` bytes per second on average over `lowSpeedTime`.
// A limit hit ends the attempt as a pause (part and record kept, the background task ended); the next
// start resumes. A server that accepts and never answers, says `150` and falls silent, or trickles a byte now
// and then, can no longer hold a transfer `running` for ever.

import NetLifeEvent

/// The limits every transfer is held to; the daemon's `transfer-idle-timeout`, `transfer-low-speed-limit`
/// and `transfer-low-speed-time` keys.
public struct TransferLimits: Equatable, Sendable {
    /// No byte sent or received for this long ends the attempt (`.zero`: never).
    public var idleTimeout: Duration
    /// Bytes per second the transfer must average over `lowSpeedTime` (0: no low-speed limit).
    public var lowSpeedLimit: Int
    /// The period over which `lowSpeedLimit` is measured.
    public var lowSpeedTime: Duration

    /// Limits with these values.
    public init(idleTimeout: Duration = .seconds(60), lowSpeedLimit: Int = 100, lowSpeedTime: Duration = .seconds(60)) {
        self.idleTimeout = idleTimeout
        self.lowSpeedLimit = lowSpeedLimit
        self.lowSpeedTime = lowSpeedTime
    }

    /// The defaults: 60 s without a byte, or under 100 bytes/s over 60 s.
    public static let defaults = TransferLimits()

    /// How often the shell samples the byte count: a quarter of the shortest limit, between 10 ms and 1 s,
    /// so that a limit is noticed at most that late.
    public var checkInterval: Duration {
        var interval = Duration.seconds(1)
        if idleTimeout > .zero { interval = min(interval, idleTimeout / 4) }
        if lowSpeedLimit > 0, lowSpeedTime > .zero { interval = min(interval, lowSpeedTime / 4) }
        return max(interval, .milliseconds(10))
    }
}

/// Why a transfer's attempt was ended by its limits.
public enum TransferStall: Equatable, Sendable, CustomStringConvertible {
    /// No byte moved for `for`.
    case idle(for: Duration)
    /// Only `bytes` moved in `over`, under the `limit` in bytes per second.
    case slow(bytes: Int, over: Duration, limit: Int)

    /// The pause's reason, as `transfers` shows it.
    public var description: String {
        switch self {
        case .idle(let duration):
            return "no data for \(Self.format(duration))"
        case .slow(let bytes, let duration, let limit):
            return "slower than \(limit) bytes/s for \(Self.format(duration)) (\(bytes) bytes)"
        }
    }

    /// `60s`, `1500ms`: whole seconds when they are, else milliseconds.
    static func format(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}

/// The progress of one attempt against its limits. A value fed the cumulative byte count and the clock;
/// it says when a limit is hit. The low-speed limit is judged over consecutive periods of `lowSpeedTime`,
/// each beginning where the last one was judged, as curl's is from the moment the speed dropped.
public struct TransferPace: Sendable {
    public let limits: TransferLimits
    private var lastBytes: Int
    private var lastProgress: MonotonicTime
    private var periodStart: MonotonicTime
    private var periodStartBytes: Int

    /// An attempt beginning at `now` with `bytes` already counted.
    public init(limits: TransferLimits, bytes: Int = 0, now: MonotonicTime) {
        self.limits = limits
        lastBytes = bytes
        lastProgress = now
        periodStart = now
        periodStartBytes = bytes
    }

    /// Takes the cumulative count of bytes moved at `now`; returns the stall when a limit is hit (then the
    /// shell ends the attempt), nil otherwise. A count that goes down is taken as no progress.
    public mutating func check(bytes: Int, at now: MonotonicTime) -> TransferStall? {
        if bytes > lastBytes {
            lastBytes = bytes
            lastProgress = now
        }
        // A clock read before the attempt began (a caller's bug) must not underflow.
        let idle = now > lastProgress ? now - lastProgress : .zero
        if limits.idleTimeout > .zero, idle >= limits.idleTimeout { return .idle(for: limits.idleTimeout) }
        guard limits.lowSpeedLimit > 0, limits.lowSpeedTime > .zero else { return nil }
        let elapsed = now > periodStart ? now - periodStart : .zero
        guard elapsed >= limits.lowSpeedTime else { return nil }
        let moved = max(0, lastBytes - periodStartBytes)
        // limit x seconds, in bytes, without overflow for any configured limit and period.
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        if Double(moved) < Double(limits.lowSpeedLimit) * seconds {
            return .slow(bytes: moved, over: limits.lowSpeedTime, limit: limits.lowSpeedLimit)
        }
        periodStart = now
        periodStartBytes = lastBytes
        return nil
    }
}
