// The names netlife gives what `status`, `watch` and the replies report: the states of the iOS lifecycle,
// the stages of a transition, the background modes, the data sockets' policies and states, how a program is
// held and why an app stopped. A leaf below both the framework (which decides them) and the control protocol
// (which carries them): each is one enum, its raw values the names on the wire and in the config, so that
// netlifectl reads back the very values the daemon has and compares them as values, never as strings.

/// The state of an app (iOS: Not Running, Inactive, Active, Background, Suspended).
public enum AppState: String, Sendable, CaseIterable, CustomStringConvertible {
    case notRunning = "not-running"
    case inactive
    case active
    case background
    case suspended

    public var description: String { rawValue }

    /// Whether the app has been launched and not yet terminated.
    public var isRunning: Bool { self != .notRunning }
}

/// A delegate callback of a transition; each is one stage of a transition's pipeline.
public enum LifecycleEvent: String, Sendable, CaseIterable, CustomStringConvertible {
    case didFinishLaunching = "did-finish-launching"
    case willResignActive = "will-resign-active"
    case didEnterBackground = "did-enter-background"
    case willEnterForeground = "will-enter-foreground"
    case didBecomeActive = "did-become-active"
    case willTerminate = "will-terminate"

    public var description: String { rawValue }
}

/// Whether an app runs in a continuous background mode (TN2277 "background execution").
public enum BackgroundMode: String, Sendable, CaseIterable {
    /// Normal: the app becomes suspend-eligible in background once its tasks end.
    case idle
    /// Like an iOS audio app while it plays: never suspend-eligible while in this mode.
    case continuous
}

/// What a data socket does when its app enters the background (`policy`).
public enum DataSocketPolicy: String, Sendable, CaseIterable {
    /// Flushed and closed (the peer sees FIN); reconnected on will-enter-foreground.
    case close
    /// Kept open; the protocol's quiet command is sent (IMAP: DONE), and quiet mode is left on foreground.
    case quiet
    /// Left untouched, as iOS leaves a socket the app does not close. The default.
    case keep
}

/// A data socket's state as `status` shows it.
public enum DataSocketState: String, Sendable, CaseIterable, CustomStringConvertible {
    /// A connect is under way.
    case connecting
    /// Connected, in normal mode.
    case connected
    /// Connected, in the protocol's quiet mode (the app is in the background).
    case quiet
    /// Not connected: not yet, after a close for the background, or after an error.
    case closed
    /// Reclaimed while the app was suspended: the kernel connection is gone, the descriptor is not; the
    /// app's first operation on it fails and closes it.
    case defunct

    public var description: String { rawValue }
}

/// How a process app's program is held.
public enum ProgramContainment: String, Sendable, CaseIterable, CustomStringConvertible {
    /// A cgroup of the unified hierarchy: frozen with `cgroup.freeze`.
    case cgroupV2 = "cgroup-v2"
    /// A cgroup of the v1 freezer hierarchy.
    case cgroupV1Freezer = "cgroup-v1-freezer"
    /// Its process group alone (no cgroup could be made): stopped with SIGSTOP.
    case processGroup = "process-group"

    public var description: String { rawValue }
}

/// Who asked an app to terminate.
public enum TerminationCause: String, Sendable, CaseIterable {
    /// `netlifectl terminate` (or the Swift API).
    case command
    /// The daemon is shutting down (SIGTERM, SIGINT).
    case shutdown
    /// A reload removed the app or restarted it with other listeners.
    case reload
}

/// Why an app last stopped running, as `status` and `watch` name it.
public enum TerminationKind: String, Sendable, CaseIterable, CustomStringConvertible {
    /// will-terminate ran (`netlifectl terminate`, or the daemon's shutdown).
    case terminated
    /// It was suspended and ended without running any code, as iOS ends a suspended app.
    case terminatedWhileSuspended = "terminated-while-suspended"
    /// `exits-on-suspend = yes` or `multitasking = no`: leaving the foreground ended it.
    case exitedOnSuspend = "exited-on-suspend"
    /// The watchdog killed it.
    case watchdog
    /// A reload removed it or restarted it with other listeners.
    case reload
    /// Memory pressure ended it while suspended (jetsam).
    case memoryPressure = "memory-pressure"
    /// A process app's program ended on its own.
    case programExited = "program-exited"

    public var description: String { rawValue }
}

/// Why a suspended app runs for a moment in the background.
public enum WakeReason: Sendable, Equatable, CustomStringConvertible {
    /// Bytes arrived on a VoIP socket.
    case voipData(socket: String)
    /// A socket's keep-alive is due.
    case keepalive(socket: String)
    /// A VoIP socket was lost, or is reconnecting: the app handles it awake.
    case voipReconnect(socket: String)
    /// A connection arrived on a listener with `on-background = wake` (a built-in service's or a process app's).
    case connection(listener: String)

    public var description: String {
        switch self {
        case .voipData(let socket): return "data on VoIP socket \(socket)"
        case .keepalive(let socket): return "keep-alive of socket \(socket)"
        case .voipReconnect(let socket): return "VoIP socket \(socket) lost or reconnecting"
        case .connection(let listener): return "a connection on listener \(listener)"
        }
    }
}

extension WakeReason {
    /// The name `watch` gives the reason.
    public var name: String {
        switch self {
        case .voipData: return "voip-data"
        case .keepalive: return "keepalive"
        case .voipReconnect: return "voip-reconnect"
        case .connection: return "connection"
        }
    }

    /// The reason named `name`, about `socket` or `listener` (whichever the reason is about), or nil.
    public init?(name: String, socket: String?, listener: String?) {
        switch (name, socket, listener) {
        case ("voip-data", let socket?, _): self = .voipData(socket: socket)
        case ("keepalive", let socket?, _): self = .keepalive(socket: socket)
        case ("voip-reconnect", let socket?, _): self = .voipReconnect(socket: socket)
        case ("connection", _, let listener?): self = .connection(listener: listener)
        default: return nil
        }
    }

    /// The data socket it is about, if any.
    public var socket: String? {
        switch self {
        case .voipData(let socket), .keepalive(let socket), .voipReconnect(let socket): return socket
        case .connection: return nil
        }
    }

    /// The listener it is about, if any.
    public var listener: String? {
        if case .connection(let listener) = self { listener } else { nil }
    }
}
