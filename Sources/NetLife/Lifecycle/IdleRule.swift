// When an active app that nothing uses goes to the background by itself (`idle-background`), as a pure
// value: the shell looks at the app's use now and then and says what it saw; the rule says when to look again
// or that the app has been idle long enough. "Use" is what a user would call it: bytes moved on any accepted
// connection or data socket, a connection accepted, an open background task, a running transfer. A
// connection that stays open and moves nothing is no use (a forgotten keep-alive must not keep a service
// awake), unless the app says it is (`idle-keeps-connections = yes`: server-sent events, WebSockets).
//
// A process app's program serves its connections itself: netlifed never sees their bytes. Its use is what
// netlifed can count of it: the TCP connections its processes hold on its listeners' ports (a change in their
// number is use, as an accept is; with `idle-keeps-connections = yes` an open one is), and its CPU time beyond
// `busyCPUShare` of the time between two looks (a job that computes). Below that share is the idle noise of a
// server's own timers (redis's cron takes about 0.2 %), which must not keep it awake. Short connections that
// come and go between two looks at a program that costs less are not seen: such an app is given
// `on-background = wake` listeners, so that a connection after an idle background wakes it.

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
        /// A process app's program: the CPU time of its processes so far, and the connections they hold on
        /// its listeners' ports now.
        public var programCPU: Duration
        public var programConnections: Int

        public init(accepted: UInt64 = 0, moves: UInt64 = 0, openConnections: Int = 0, openTasks: Int = 0, runningTransfers: Int = 0,
                    programCPU: Duration = .zero, programConnections: Int = 0) {
            self.accepted = accepted
            self.moves = moves
            self.openConnections = openConnections
            self.openTasks = openTasks
            self.runningTransfers = runningTransfers
            self.programCPU = programCPU
            self.programConnections = programConnections
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
    private var lastLook: MonotonicTime

    /// The share of the time between two looks a program's CPU time must grow by to be use.
    public static let busyCPUShare = 0.01

    public init(after: Duration, keepsConnections: Bool, now: MonotonicTime, use: Use) {
        self.after = after
        self.keepsConnections = keepsConnections
        lastUse = now
        lastSeen = use
        lastLook = now
    }

    /// How often the shell looks: a tenth of `after` (so an idle app goes at most a tenth late), at least
    /// every 100 ms and at most every 10 s.
    public var interval: Duration { min(max(after / 10, .milliseconds(100)), .seconds(10)) }

    /// The app became active (or idle detection began): the time without use counts from `now`.
    public mutating func restart(now: MonotonicTime, use: Use) -> Decision {
        lastUse = now
        lastSeen = use
        lastLook = now
        return .look(at: now + min(interval, after))
    }

    /// A look at `now`: what changed since the last look, or what is open now, is use.
    public mutating func look(now: MonotonicTime, use: Use) -> Decision {
        let moved = use.accepted != lastSeen.accepted || use.moves != lastSeen.moves
        // A program's CPU time counts when it grew by its share of the time since the last look, or fell (a
        // program that restarted starts from less).
        let cpu = use.programCPU - lastSeen.programCPU
        let programWorked = use.programConnections != lastSeen.programConnections
            || cpu < .zero || (cpu > .zero && cpu >= (now - lastLook) * Self.busyCPUShare)
        let open = use.openConnections + use.programConnections
        let held = use.openTasks > 0 || use.runningTransfers > 0 || (keepsConnections && open > 0)
        if moved || programWorked || held { lastUse = now }
        lastSeen = use
        lastLook = now
        let unused = now - lastUse
        if unused >= after { return .idle(for: unused) }
        return .look(at: min(lastUse + after, now + interval))
    }
}
