// A token bucket for lines of output, as a pure value driven by explicit instants: a burst is let through,
// then a steady rate; what is over the rate is counted, not kept, so that a process that floods its output
// costs the daemon a counter rather than a log.

/// Decides which lines of a stream are let through, and counts the others.
public struct LineRateLimiter: Sendable, Equatable {
    /// How many lines may pass at once.
    public let burst: Int
    /// How many lines per second pass once the burst is spent.
    public let perSecond: Int
    private var tokens: Double
    private var lastRefill: MonotonicTime?
    /// Lines refused since the last `takeDropped()`.
    public private(set) var dropped = 0

    /// The limit hooks' and child processes' output is held to: 200 lines at once, then 50 a second.
    public static let hookOutput = LineRateLimiter(burst: 200, perSecond: 50)

    public init(burst: Int, perSecond: Int) {
        self.burst = max(1, burst)
        self.perSecond = max(1, perSecond)
        tokens = Double(self.burst)
    }

    /// Whether a line arriving at `now` passes; a refused line is counted in `dropped`.
    public mutating func admit(now: MonotonicTime) -> Bool {
        if let lastRefill, now > lastRefill {
            tokens = min(Double(burst), tokens + (now - lastRefill).seconds * Double(perSecond))
        }
        lastRefill = now
        if tokens >= 1 {
            tokens -= 1
            return true
        }
        dropped += 1
        return false
    }

    /// Counts `count` more lines refused at the instant of the last `admit(now:)` that refused one: no token
    /// can have come since, so a reader can count the rest of a chunk read at that instant at once.
    public mutating func refuse(_ count: Int) {
        dropped += max(0, count)
    }

    /// The count of refused lines, reset to zero.
    public mutating func takeDropped() -> Int {
        defer { dropped = 0 }
        return dropped
    }
}
