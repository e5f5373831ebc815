// The vocabulary of the iOS lifecycle as netlife names it: states, the callbacks of each transition, and
// the commands that ask for a transition.

/// A request to move an app to another state, as `netlifectl` sends it.
public enum LifecycleCommand: Equatable, Sendable, CustomStringConvertible {
    /// Start a not-running app, into the foreground or straight into the background.
    case launch(background: Bool)
    /// Bring a background or suspended app to the foreground.
    case foreground
    /// Send an active app to the background.
    case background
    /// Suspend a background app (at once, or when its last background task ends).
    case suspend
    /// Terminate a running app.
    case terminate
    /// An interruption begins (an incoming call, a system sheet): an active app resigns active and rests
    /// inactive, its listeners open, until the interruption ends.
    case interruptBegin
    /// The interruption ends: the inactive app becomes active again.
    case interruptEnd

    public var description: String {
        switch self {
        case .launch(let background): return background ? "launch --background" : "launch"
        case .foreground: return "foreground"
        case .background: return "background"
        case .suspend: return "suspend"
        case .terminate: return "terminate"
        case .interruptBegin: return "interrupt begin"
        case .interruptEnd: return "interrupt end"
        }
    }
}

/// What `launch` in the config does at start-up.
public enum LaunchMode: String, Sendable, CaseIterable {
    /// Launch into the foreground (active): listeners open. The default.
    case foreground
    /// Launch straight into the background (iOS background launch): listeners stay closed.
    case background
    /// Leave the app not-running until `netlifectl launch`.
    case no
}
