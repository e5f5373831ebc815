// Snapshots of an app for `status`: plain values, made on the loop thread and encoded by the daemon.

import NetLifeEvent

/// A listener as `status` shows it.
public struct ListenerStatus: Equatable, Sendable {
    public var name: String
    public var address: String
    public var service: String
    public var open: Bool
    /// Why the listener is not open, if an open failed.
    public var error: String?
    public var connections: Int
}

/// An open background task as `status` shows it.
public struct TaskStatus: Equatable, Sendable {
    public var id: BackgroundTaskIdentifier
    public var name: String?
    public var age: Duration
}

/// Why an app last stopped running.
public struct TerminationRecord: Equatable, Sendable {
    /// `watchdog`, `terminated` or `exited-on-suspend`.
    public var reason: String
    /// The stage that overran, for watchdog kills.
    public var stage: String?
    public var budget: Duration?
    public var elapsed: Duration?
}

/// An app as `status` shows it.
public struct AppStatus: Equatable, Sendable {
    public var name: String
    public var state: AppState
    public var suspendPending: Bool
    /// Nil means unlimited (the app is not in the background).
    public var backgroundTimeRemaining: Duration?
    public var backgroundMode: BackgroundMode
    public var listeners: [ListenerStatus]
    public var tasks: [TaskStatus]
    public var lastTermination: TerminationRecord?
    /// The stages of the last transition and their durations.
    public var lastStages: [StageReport]
}
