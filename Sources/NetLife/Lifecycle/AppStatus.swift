// Snapshots of an app for `status`: plain values, made on the loop thread and encoded by the daemon.

import NetLifeEvent
import Glibc

/// A listener as `status` shows it.
public struct ListenerStatus: Equatable, Sendable {
    public var name: String
    public var address: String
    public var service: String
    public var open: Bool
    /// Why the listener is not open, if an open failed.
    public var error: String?
    public var connections: Int
    /// The processes holding an adopted listener's sockets (`adopt = yes`); empty for the others.
    public var pids: [Int32] = []
}

/// An open background task as `status` shows it.
public struct TaskStatus: Equatable, Sendable {
    public var id: BackgroundTaskIdentifier
    public var name: String?
    public var age: Duration
}

/// Who asked an app to terminate.
public enum TerminationCause: String, Equatable, Sendable {
    /// `netlifectl terminate` (or the Swift API).
    case command
    /// The daemon is shutting down (SIGTERM, SIGINT).
    case shutdown
    /// A reload removed the app or restarted it with other listeners.
    case reload
}

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
    /// Memory pressure ended it while suspended (jetsam).
    case memoryPressure
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
    public var name: String {
        switch self {
        case .terminated(.reload), .terminatedWhileSuspended(.reload): return "reload"
        case .terminated: return "terminated"
        case .terminatedWhileSuspended: return "terminated-while-suspended"
        case .exitedOnSuspend: return "exited-on-suspend"
        case .watchdog: return "watchdog"
        case .memoryPressure: return "memory-pressure"
        case .programExited: return "program-exited"
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

/// An app as `status` shows it.
public struct AppStatus: Equatable, Sendable {
    public var name: String
    public var state: AppState
    public var suspendPending: Bool
    /// Nil means unlimited (the app is in the foreground); zero while suspended or not running.
    public var backgroundTimeRemaining: Duration?
    public var backgroundMode: BackgroundMode
    public var listeners: [ListenerStatus]
    public var sockets: [DataSocketStatus]
    public var tasks: [TaskStatus]
    public var lastTermination: TerminationRecord?
    /// The stages of the last transition and their durations.
    public var lastStages: [StageReport]
    /// A process app's program.
    public var program: ProgramStatus? = nil
}

extension App {
    /// A snapshot for `status`.
    public var status: AppStatus {
        let now = MonotonicTime.now()
        return AppStatus(name: name, state: state, suspendPending: suspendPending,
                         backgroundTimeRemaining: backgroundTimeRemaining,
                         backgroundMode: backgroundMode,
                         listeners: sockets.listenerStatus,
                         sockets: sockets.dataSocketStatus,
                         tasks: backgroundTasks.tasks.map { TaskStatus(id: $0.id, name: $0.name, age: now - $0.begunAt) },
                         lastTermination: lastTermination,
                         lastStages: lifecycle.lastStages,
                         program: program?.status)
    }
}
