// How long the loop's turns take: a turn is the stretch between two waits for events, from the first callback
// after a poll to the moment libevent returns to poll again (a turn that ran `dispatchBatch` callbacks and
// polls again at once, without waiting, goes on in the same turn: the loop did not rest). The loop counts the
// turns in fixed buckets, as a Prometheus histogram does, so that reading them costs nothing and `/metrics`
// can show how often a turn passed 5 ms.
//
// libevent 2.1 has no hook before or after its poll (2.2's evwatch). While `EventLoop.measuresTurnTimes`, the
// loop runs `event_base_loop` one turn at a time (EVLOOP_ONCE), and every callback that libevent calls into
// NetLifeEvent marks the turn's start when it is the first since the last poll (`ReadContext.callbackBegins`):
// two clock reads per turn, a comparison per callback. Otherwise the loop runs as before, and the comparison
// is all that is left (the first callback's mark is never cleared).

/// The loop's turns, counted by duration.
public struct LoopTurnTimes: Equatable, Sendable {
    /// The buckets' upper bounds in nanoseconds: 100 µs to 1 s, with 5 ms among them.
    public static let boundNanoseconds: [UInt64] = [
        100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 50_000_000,
        100_000_000, 250_000_000, 1_000_000_000,
    ]

    /// Turns per bucket (not cumulative): `bucketCounts[i]` took at most `boundNanoseconds[i]` and more than
    /// the bound before it; the last one took longer than every bound.
    public private(set) var bucketCounts = [UInt64](repeating: 0, count: boundNanoseconds.count + 1)
    /// Every turn's duration added up, in nanoseconds.
    public private(set) var sumNanoseconds: UInt64 = 0
    /// The turns counted.
    public private(set) var count: UInt64 = 0

    public init() {}

    /// Counts a turn that took `nanoseconds`.
    public mutating func record(nanoseconds: UInt64) {
        var index = 0
        while index < Self.boundNanoseconds.count, nanoseconds > Self.boundNanoseconds[index] { index += 1 }
        bucketCounts[index] &+= 1
        sumNanoseconds &+= nanoseconds
        count &+= 1
    }
}
