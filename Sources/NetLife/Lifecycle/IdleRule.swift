// When an active app that nothing uses goes to the background by itself (`idle-background`), as a pure
// value: the shell looks at the app's use now and then and says what it saw; the rule says when to look again
// or that the app has been idle long enough. "Use" is what a user would call it: bytes moved on any accepted
// connection or data socket, a connection accepted, an open background task, a running transfer. A
// connection that stays open and moves nothing is no use (a forgotten keep-alive must not keep a service
// awake), unless the app says it is (`idle-keeps-connections = yes`: server-sent events, WebSockets).

/// The idle-background rule of one app.
public struct IdleRule: Equatable, Sendable {
    /// What the shell saw of the app's use at one look: counts that only grow, and what is open now.
    public struct Use: Equatable, Sendable {
        /// Connections accepted so far, on every listener.
        public var accepted: UInt64
        /// Reads and sends that moved bytes so far, on every connection and data socket.
        public var moves: UInt64
        /// Accepted connections open now.
        public var openConnections: Int
        /// Background tasks open now, and transfers running now.
        public var openTasks: Int
        public var runningTransfers: Int

        public init(accepted: UInt64 = 0, moves: UInt64 = 0, openConnections: Int = 0, openTasks: Int = 0, runningTransfers: Int = 0) {
            self.accepted = accepted
            self.moves = moves
            self.openConnections = openConnections
            self.openTasks = openTasks
            self.runningTransfers = runningTransfers
        }
    }

    /// What the shell does next.
    public enum Decision: Equatable, Sendable {
        /// Look again at this instant.
        case look(at: MonotonicTime)
        /// Nothing has used the app for this long: move it to the background.
        case idle(for: Duration)
    }

    /// How long without use moves the app to the background.
    public let after: Duration
    /// Whether an open connection counts as use even when it moves nothing.
    public let keepsConnections: Bool
    /// When the app was last seen in use.
    public private(set) var lastUse: MonotonicTime
    private var lastSeen: Use

    public init(after: Duration, keepsConnections: Bool, now: MonotonicTime, use: Use) {
        self.after = after
        self.keepsConnections = keepsConnections
        lastUse = now
        lastSeen = use
    }

    /// How often the shell looks: a tenth of `after` (so an idle app goes at most a tenth late), at least
    /// every 100 ms and at most every 10 s.
    public var interval: Duration { min(max(after / 10, .milliseconds(100)), .seconds(10)) }

    /// The app became active (or idle detection began): the time without use counts from `now`.
    public mutating func restart(now: MonotonicTime, use: Use) -> Decision {
        lastUse = now
        lastSeen = use
        return .look(at: now + min(interval, after))
    }

    /// A look at `now`: what changed since the last look, or what is open now, is use.
    public mutating func look(now: MonotonicTime, use: Use) -> Decision {
        let moved = use.accepted != lastSeen.accepted || use.moves != lastSeen.moves
        let held = use.openTasks > 0 || use.runningTransfers > 0 || (keepsConnections && use.openConnections > 0)
        if moved || held { lastUse = now }
        lastSeen = use
        let unused = now - lastUse
        if unused >= after { return .idle(for: unused) }
        return .look(at: min(lastUse + after, now + interval))
    }
}
