// The time limits of an app: the budgets of each transition and of expiration handlers, and the background
// time of tasks. A profile sets them all; each can be overridden per app (docs/configuration.md).

/// The time limits that bound an app's code.
public struct Budgets: Equatable, Sendable {
    /// did-finish-launching (and the stages after it in the same launch).
    public var launch: Duration = .seconds(20)
    /// will-resign-active + did-enter-background.
    public var background: Duration = .seconds(5)
    /// will-enter-foreground + did-become-active.
    public var foreground: Duration = .seconds(10)
    /// will-terminate.
    public var terminate: Duration = .seconds(5)
    /// Each run of the expiration handlers.
    public var expiration: Duration = .seconds(1)
    /// The background time shared by all background tasks.
    public var taskTime: Duration = .seconds(30)
    /// How long before the background time is spent the expiration handlers run.
    public var expirationLead: Duration = .seconds(5)
    /// How long after the background time is spent an open task is tolerated before the watchdog acts.
    public var expirationGrace: Duration = .seconds(1)
    /// The time a VoIP keep-alive handler may take.
    public var keepalive: Duration = .seconds(10)

    public init() {}

    /// The budget of a transition.
    public func duration(of kind: BudgetKind) -> Duration {
        switch kind {
        case .launch: return launch
        case .background: return background
        case .foreground: return foreground
        case .terminate: return terminate
        }
    }

    /// A named profile: the iOS version whose background time it copies.
    public enum Profile: String, Sendable, CaseIterable {
        /// iOS 4: 600 s of background time.
        case ios4
        /// iOS 7: 180 s.
        case ios7
        /// iOS 13 and later: 30 s. The default.
        case ios13

        /// The budgets of the profile.
        public var budgets: Budgets {
            var budgets = Budgets()
            switch self {
            case .ios4: budgets.taskTime = .seconds(600)
            case .ios7: budgets.taskTime = .seconds(180)
            case .ios13: budgets.taskTime = .seconds(30)
            }
            return budgets
        }
    }
}
