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

    /// The instant `duration` after `time`, saturating at the ends of the clock instead of trapping.
    public static func + (time: MonotonicTime, duration: Duration) -> MonotonicTime {
        let delta = duration.nanoseconds
        if delta >= 0 {
            let (sum, overflow) = time.nanoseconds.addingReportingOverflow(UInt64(delta))
            return MonotonicTime(nanoseconds: overflow ? .max : sum)
        }
        return MonotonicTime(nanoseconds: time.nanoseconds - min(time.nanoseconds, delta.magnitude))
    }

    /// The duration from `b` to `a`; negative when `a` is earlier. Saturates at ±Int64.max nanoseconds.
    public static func - (a: MonotonicTime, b: MonotonicTime) -> Duration {
        let distance = a >= b ? a.nanoseconds - b.nanoseconds : b.nanoseconds - a.nanoseconds
        let magnitude = Int64(clamping: distance)
        return .nanoseconds(a >= b ? magnitude : -magnitude)
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
