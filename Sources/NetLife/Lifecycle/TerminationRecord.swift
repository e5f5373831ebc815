// Why an app last stopped, as the lifecycle records it, and how `status` shows that record and a stage.

import NetLifeEvent
import Glibc

/// Why an app last stopped running.
public enum TerminationReason: Equatable, Sendable {
    /// will-terminate ran.
    case terminated(TerminationCause)
    /// The app was suspended: it ended without running any code, as iOS ends a suspended app.
    case terminatedWhileSuspended(TerminationCause)
    /// `exits-on-suspend = yes` or `multitasking = no`: leaving the foreground ended it.
    case exitedOnSuspend
    /// The watchdog killed it.
    case watchdog(WatchdogTimeout)
    /// Memory pressure ended it while suspended (jetsam): `netlifectl memory-pressure`, or the kernel's
    /// pressure trigger, with what its pressure file said then.
    case memoryPressure(PressureStall?)
    /// A process app's program ended on its own (its exit status or signal, and whether it is restarted).
    case programExited(String)

    /// Who asked, for the reasons that have a cause.
    public var cause: TerminationCause? {
        switch self {
        case .terminated(let cause), .terminatedWhileSuspended(let cause): return cause
        case .exitedOnSuspend, .watchdog, .memoryPressure, .programExited: return nil
        }
    }

    /// The name `status` gives the reason.
    public var kind: TerminationKind {
        switch self {
        case .terminated(.reload), .terminatedWhileSuspended(.reload): return .reload
        case .terminated: return .terminated
        case .terminatedWhileSuspended: return .terminatedWhileSuspended
        case .exitedOnSuspend: return .exitedOnSuspend
        case .watchdog: return .watchdog
        case .memoryPressure: return .memoryPressure
        case .programExited: return .programExited
        }
    }
}

/// How and when an app last stopped running.
public struct TerminationRecord: Equatable, Sendable {
    public var reason: TerminationReason
    /// When it happened, in seconds since the Unix epoch.
    public var at: Double

    public init(reason: TerminationReason, at: Double = WallClock.now()) {
        self.reason = reason
        self.at = at
    }
}

/// The wall clock, for records a person reads.
public enum WallClock {
    /// Seconds since the Unix epoch, with sub-second precision. The corresponding C function is
    /// `clock_gettime(CLOCK_REALTIME)`.
    public static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}

extension TerminationRecord {
    /// The record as `status` shows it.
    public var status: TerminationStatus {
        var status = TerminationStatus(reason: reason.kind, at: (at * 1000).rounded() / 1000)
        switch reason {
        case .terminated(let cause), .terminatedWhileSuspended(let cause):
            if cause != .reload { status.by = cause }
        case .watchdog(let timeout):
            status.stage = timeout.stage.description
            status.budget = StatusTime.seconds(timeout.budget)
            status.elapsed = StatusTime.seconds(timeout.elapsed)
        case .programExited(let detail):
            status.detail = detail
        case .memoryPressure(let pressure):
            status.pressure = pressure
        case .exitedOnSuspend:
            break
        }
        return status
    }
}

extension StageReport {
    /// The stage as `status` and `watch` show it.
    public var timing: StageTiming { StageTiming(event: event, duration: duration) }
}
