// How netlifectl words an app's background time, in `status` and in `task list` alike, from what the reply
// says: the seconds left (null: unlimited) and the app's state. As UIApplication's backgroundTimeRemaining:
// unlimited in the foreground, counting down in the background, and none while no code of the app can run,
// suspended or not running (the replies say 0 then), so that the text says what the JSON says.

/// The "background time remaining" line of `status` and `task list`.
public enum BackgroundTimeText {
    /// `background time remaining: VALUE` for an app in `state` (nil from a daemon that does not say it) with
    /// `seconds` left (nil: unlimited).
    public static func line(seconds: Double?, state: AppState?) -> String {
        "background time remaining: " + value(seconds: seconds, state: state)
    }

    /// "unlimited", "12s", "2.5s", "0s (suspended)", "0s (not running)".
    public static func value(seconds: Double?, state: AppState?) -> String {
        switch state {
        case .notRunning: return "0s (not running)"
        case .suspended: return "0s (suspended)"
        default: return seconds.map(format) ?? "unlimited"
        }
    }

    /// Seconds as netlifectl prints durations: milliseconds kept under 10 s, whole seconds above, "0s" for none.
    private static func format(_ seconds: Double) -> String {
        if seconds <= 0 { return "0s" }
        return seconds < 10 ? "\((seconds * 1000).rounded() / 1000)s" : "\(Int(seconds.rounded()))s"
    }
}

extension AppStatus {
    /// The app's background time, as `status` prints it.
    public var backgroundTimeText: String {
        BackgroundTimeText.line(seconds: backgroundTimeRemaining, state: state)
    }
}

extension TaskListReply {
    /// The app's background time, as `task list` prints it.
    public var backgroundTimeText: String {
        BackgroundTimeText.line(seconds: backgroundTimeRemaining, state: state)
    }
}
