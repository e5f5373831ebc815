// What happens to an app, as events its owner can follow: the daemon turns them into `netlifectl watch`
// lines, systemd STATUS= updates and mDNS registrations. Plain values, emitted on the loop thread in the
// order things happen.

import NetLifeEvent

/// Something that happened to an app.
public enum AppEvent: Equatable, Sendable {
    /// The app moved from one state to another (each stage of a transition enters a state).
    case stateChanged(from: AppState, to: AppState)
    /// A transition's pipeline finished: the command, the state reached, each stage and its duration.
    case transitionFinished(command: LifecycleCommand, state: AppState, stages: [StageReport])
    /// A background task began or ended, or its expiration handler was started.
    case taskBegan(id: BackgroundTaskIdentifier, name: String?)
    case taskEnded(id: BackgroundTaskIdentifier)
    case taskExpiring(id: BackgroundTaskIdentifier)
    /// The watchdog killed the app.
    case watchdogKilled(WatchdogTimeout)
    /// The app stopped running (also after a watchdog kill), and why.
    case stopped(TerminationRecord)
    /// A listener is open on `address` (with the port the kernel gave).
    /// `mdns`: how it is announced, if it is (so that a follower needs no search of the configuration).
    case listenerOpened(name: String, address: SocketAddress, mdns: MDNSAnnouncement?)
    /// A listener was closed (the app left the foreground or stopped).
    case listenerClosed(name: String)
    /// A listener could not be opened; it is retried with back-off.
    case listenerFailed(name: String, error: String)
    /// A data socket changed state (connecting, connected, closed with or without an error, defunct).
    case socketChanged(name: String, state: DataSocketState, error: String?)
    /// A data socket entered its protocol's quiet mode (`quiet`: did-enter-background with `policy = quiet`,
    /// the quiet command sent; its state is now `quiet`) or left it (will-enter-foreground: `connected` again).
    case socketQuietModeChanged(name: String, quiet: Bool)
    /// A suspended app runs for a moment in the background, and why.
    case woken(WakeReason)
    /// The woken app serves what woke it, `latency` after the connection or data arrived (`App.wakeServed`).
    case wakeServed(WakeReason, latency: Duration)
    /// Socket reclaim made these data sockets defunct and reset this many accepted connections.
    case reclaimed(sockets: [String], connections: Int)
    /// A process app's program said READY=1, RELOADING=1 or STOPPING=1 on its NOTIFY_SOCKET.
    case programNotified(ProgramNotification)
    /// Nothing used the active app for this long (`idle-background`): netlifed moves it to the background;
    /// the transition's events follow.
    case idle(unusedFor: Duration)
}

/// What a program said over its notify socket that its App acts on.
public enum ProgramNotification: String, Equatable, Sendable {
    case ready = "READY=1"
    case reloading = "RELOADING=1"
    case stopping = "STOPPING=1"
}
