// A Prometheus histogram as a value: observations counted in buckets of fixed upper bounds, their sum and
// their count. The exposition writes the buckets cumulatively with a last `+Inf` bucket (Exposition.swift);
// here each bucket counts only its own observations, so that observing is one increment.

/// Observations counted in buckets.
struct Histogram: Equatable, Sendable {
    /// The buckets' upper bounds, ascending; the `+Inf` bucket is implied.
    let bounds: [Double]
    /// The bounds as the exposition writes them (`le="0.005"`), made once.
    let boundTexts: [String]
    /// Observations per bucket, not cumulative: `bucketCounts[i]` are at most `bounds[i]` and more than the
    /// bound before it; the last entry counts those past every bound.
    private(set) var bucketCounts: [UInt64]
    /// The observations added up.
    private(set) var sum: Double = 0
    /// How many observations were made.
    private(set) var count: UInt64 = 0

    /// An empty histogram with these bounds (sorted, duplicates and non-finite values dropped).
    init(bounds: [Double]) {
        self.bounds = Array(Set(bounds.filter(\.isFinite))).sorted()
        boundTexts = self.bounds.map(Exposition.text)
        bucketCounts = [UInt64](repeating: 0, count: self.bounds.count + 1)
    }

    /// A histogram made of counts kept elsewhere (the loop's turn times): `bucketCounts` has one entry more
    /// than `bounds`, the last for observations past every bound. Counts of another length are taken as none.
    init(bounds: [Double], bucketCounts: [UInt64], sum: Double, count: UInt64) {
        self.bounds = bounds
        boundTexts = bounds.map(Exposition.text)
        guard bucketCounts.count == bounds.count + 1 else {
            self.bucketCounts = [UInt64](repeating: 0, count: bounds.count + 1)
            return
        }
        self.bucketCounts = bucketCounts
        self.sum = sum
        self.count = count
    }

    /// Counts `value` in its bucket. A NaN is not an observation and is dropped.
    mutating func observe(_ value: Double) {
        guard !value.isNaN else { return }
        var index = 0
        while index < bounds.count, value > bounds[index] { index += 1 }
        bucketCounts[index] &+= 1
        sum += value
        count &+= 1
    }

    /// Observations at most each bound, then all of them (the `+Inf` bucket): what the exposition shows.
    var cumulativeCounts: [UInt64] {
        var running: UInt64 = 0
        return bucketCounts.map { count in
            running &+= count
            return running
        }
    }
}

extension Histogram {
    /// The bounds of a transition stage's duration, in seconds: a policy step takes microseconds, a hook
    /// milliseconds, and budgets run up to an hour (20 s by default for a launch). Eleven, as Prometheus'
    /// default buckets: an app has a series for each of its stages, and 1,000 apps have 5,000 of them.
    static let stageBounds: [Double] = [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60]
    /// The bounds of a wake-up's latency, in seconds, around the 5 ms target (first byte within 5 ms of the
    /// connection at p99).
    static let wakeBounds: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
}
