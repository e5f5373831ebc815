// The records a peer can cause at will (a program's notify datagrams, a client's refused connections and
// requests) pass through a token bucket, as a program's output does: a burst is written, then a steady rate;
// what is over it is counted, and the count is written before the next record that passes. A peer that
// floods costs the daemon a counter, not a journal full of one line.

import NetLifeEvent

/// One source of peer-caused records and its rate limit.
public struct LogLimiter: Sendable {
    private var limiter: LineRateLimiter

    /// 20 records at once, then 5 a second.
    public init(burst: Int = 20, perSecond: Int = 5) {
        limiter = LineRateLimiter(burst: burst, perSecond: perSecond)
    }

    /// Writes `message` to `logger` at `level` if the limit lets it through; otherwise counts it.
    public mutating func log(_ logger: Logger, _ level: Logger.Level, _ message: @autoclosure () -> String,
                             now: MonotonicTime = .now()) {
        guard level >= logger.minimumLevel, limiter.admit(now: now) else { return }
        let dropped = limiter.takeDropped()
        if dropped > 0 {
            logger.log(level, "\(dropped) more such record(s) dropped (at most \(limiter.burst) at once, then \(limiter.perSecond) a second)")
        }
        logger.log(level, message())
    }
}
