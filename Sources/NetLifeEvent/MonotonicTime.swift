// A point on CLOCK_MONOTONIC, constructible from plain numbers so that the pure state machines of netlife
// can be driven by a fake clock in tests.

@preconcurrency import Glibc

/// An instant of the monotonic clock, in nanoseconds since an unspecified origin (boot).
public struct MonotonicTime: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: UInt64
    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// The current time. The corresponding C function is `clock_gettime(CLOCK_MONOTONIC)`.
    public static func now() -> MonotonicTime {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return MonotonicTime(nanoseconds: UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec))
    }

    public static func < (a: MonotonicTime, b: MonotonicTime) -> Bool { a.nanoseconds < b.nanoseconds }

    public static func + (time: MonotonicTime, duration: Duration) -> MonotonicTime {
        let delta = duration.nanoseconds
        return delta >= 0 ? MonotonicTime(nanoseconds: time.nanoseconds &+ UInt64(delta))
                          : MonotonicTime(nanoseconds: time.nanoseconds &- min(time.nanoseconds, UInt64(-delta)))
    }

    /// The duration from `b` to `a`; negative when `a` is earlier.
    public static func - (a: MonotonicTime, b: MonotonicTime) -> Duration {
        a >= b ? .nanoseconds(Int64(a.nanoseconds - b.nanoseconds)) : .nanoseconds(-Int64(b.nanoseconds - a.nanoseconds))
    }

    public var description: String { "\(nanoseconds)ns" }
}

extension Duration {
    /// The whole duration in nanoseconds (saturating).
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }

    /// The duration in milliseconds as a floating-point number, for reports.
    public var milliseconds: Double { Double(nanoseconds) / 1_000_000 }

    /// The duration in seconds as a floating-point number, for reports.
    public var seconds: Double { Double(nanoseconds) / 1_000_000_000 }

    var timeval: timeval {
        let ns = max(0, nanoseconds)
        return Glibc.timeval(tv_sec: Int(ns / 1_000_000_000), tv_usec: Int((ns % 1_000_000_000) / 1000))
    }
}
