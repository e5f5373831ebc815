// The rules of one data socket (docs/data-sockets.md, TN2277 "Data Socket" and "Socket Resource
// Reclaim") as a pure state machine: the app's lifecycle and the socket's own events go in, the actions to
// perform come out. No I/O and no clock here; `DataSocket` performs what it decides.

/// The rules of one data socket.
public struct DataSocketMachine: Equatable, Sendable {
    /// Where the app is, as far as its sockets care.
    public enum Phase: String, Sendable {
        /// Not running: nothing is connected or reconnected.
        case stopped
        /// Inactive or active: sockets are connected and reconnected after errors.
        case foreground
        /// Running in the background: the policy has been applied; no reconnect until the foreground.
        case background
        /// Suspended: nothing is read (VoIP sockets excepted), nothing reconnects.
        case suspended
    }

    /// What the shell does.
    public enum Action: Equatable, Sendable {
        /// Start connecting (the state is `connecting`).
        case connect
        /// Close the connection; `flush`: after writing what is queued (the peer sees FIN), otherwise now.
        case close(flush: Bool)
        /// Have the protocol send its goodbye (IMAP: LOGOUT) before a close.
        case sayGoodbye
        /// Have the protocol enter quiet mode (IMAP: DONE).
        case enterQuiet
        /// Have the protocol leave quiet mode (IMAP: IDLE).
        case leaveQuiet
        /// Stop reading (the kernel keeps what the peer sends) or read again.
        case pauseReading, resumeReading
        /// Reset the kernel connection in place (`connect(fd, AF_UNSPEC)`); the descriptor stays.
        case dissolve
        /// Reconnect after `delay` (replaces a reconnect already scheduled).
        case scheduleReconnect(Duration)
        /// Forget a scheduled reconnect.
        case cancelReconnect
    }

    /// The first delay of the reconnect back-off, and its ceiling.
    public static let firstRetryDelay: Duration = .milliseconds(100)
    public static let maxRetryDelay: Duration = .seconds(5)
    /// How long a connection must last before the back-off starts over: a peer that accepts and then closes
    /// at once (or refuses a login) is retried with growing delays, not ten times a second.
    public static let stableAfter: Duration = .seconds(5)

    public let policy: DataSocketPolicy
    public let voip: Bool
    public private(set) var state: DataSocketState = .closed
    public private(set) var phase: Phase = .stopped
    /// The delay before the next reconnect after an error.
    public private(set) var retryDelay: Duration = DataSocketMachine.firstRetryDelay
    /// Whether a reconnect is scheduled.
    public private(set) var reconnectScheduled = false
    /// Whether the socket's reads are paused: from suspension until the app comes to the foreground (a
    /// wake-up runs only the VoIP socket that woke it, so a plain socket stays unread through it).
    public private(set) var readsPaused = false

    public init(policy: DataSocketPolicy, voip: Bool) {
        self.policy = policy
        self.voip = voip
    }

    /// Whether the socket holds a connection (or a connect under way) that the kernel still knows.
    public var isLive: Bool { state == .connecting || state == .connected || state == .quiet }

    /// Whether reads are delivered in the current phase.
    private var reads: Bool { phase != .suspended || voip }

    /// Whether the socket reconnects after an error in the current phase: in the foreground; a VoIP socket
    /// also in the background and while suspended (the push channel must come back without the user).
    private var reconnects: Bool { phase == .foreground || (voip && phase != .stopped) }

    // MARK: The app's lifecycle

    /// The app was launched, into the foreground or the background. A socket with `policy = close` waits
    /// for the foreground when the launch is a background one.
    public mutating func appLaunched(background: Bool) -> [Action] {
        phase = background ? .background : .foreground
        readsPaused = false
        retryDelay = Self.firstRetryDelay
        if background && policy == .close { return [] }
        return connectIfClosed()
    }

    /// did-enter-background: the policy.
    public mutating func appEnteredBackground() -> [Action] {
        phase = .background
        var actions = voip ? [] : cancelReconnect()
        switch (policy, state) {
        case (.close, .connecting), (.close, .connected), (.close, .quiet):
            state = .closed
            actions.append(.close(flush: true))
        case (.quiet, .connected):
            state = .quiet
            actions.append(.enterQuiet)
        case (.close, _), (.quiet, _), (.keep, _):
            break
        }
        return actions
    }

    /// will-enter-foreground: quiet mode is left and closed sockets connect again (at once, with the
    /// back-off reset). A defunct socket is closed by its first read, which resumes now; it reconnects then.
    public mutating func appWillEnterForeground() -> [Action] {
        phase = .foreground
        retryDelay = Self.firstRetryDelay
        var actions: [Action] = readsPaused ? [.resumeReading] : []
        readsPaused = false
        switch state {
        case .quiet:
            state = .connected
            actions.append(.leaveQuiet)
        case .closed:
            actions += cancelReconnect() + connectIfClosed()
        case .connecting, .connected, .defunct:
            break
        }
        return actions
    }

    /// The app was suspended: reads stop and reconnects wait (VoIP sockets excepted). A connect still under
    /// way is dropped, so that no protocol code runs for it while the app is suspended; the foreground
    /// connects again.
    public mutating func appSuspended() -> [Action] {
        phase = .suspended
        if voip { return [] }
        var actions = cancelReconnect()
        if state == .connecting {
            state = .closed
            actions.append(.close(flush: false))
        } else if !readsPaused {
            readsPaused = true
            actions.append(.pauseReading)
        }
        return actions
    }

    /// A suspended app runs again in the background for a moment (a VoIP wake-up or a keep-alive): only
    /// what woke it runs, so a plain socket stays unread until the foreground.
    public mutating func appWokeInBackground() -> [Action] {
        guard phase == .suspended else { return [] }
        phase = .background
        return []
    }

    /// will-terminate: the protocol says goodbye, then the socket closes after its output is written.
    public mutating func appTerminating() -> [Action] {
        phase = .stopped
        var actions = cancelReconnect()
        switch state {
        case .connected, .quiet:
            actions += [.sayGoodbye, .close(flush: true)]
        case .connecting, .defunct:
            actions.append(.close(flush: false))
        case .closed:
            break
        }
        state = .closed
        return actions
    }

    /// The app stopped without callbacks (watchdog, a suspended app terminated, memory pressure, a reload):
    /// everything closes at once.
    public mutating func appStopped() -> [Action] {
        phase = .stopped
        var actions = cancelReconnect()
        if state != .closed { actions.append(.close(flush: false)) }
        state = .closed
        return actions
    }

    /// Socket resource reclaim: a non-VoIP socket of a suspended app loses its kernel connection. Returns
    /// nil when the socket is not reclaimed (VoIP, not connected, or the app is not suspended).
    public mutating func reclaim() -> [Action]? {
        guard phase == .suspended, !voip else { return nil }
        switch state {
        case .connected, .quiet:
            state = .defunct
            return [.dissolve]
        case .connecting:
            // Nothing was exchanged yet: the attempt is dropped, and the foreground connects again.
            state = .closed
            return [.close(flush: false)]
        case .closed, .defunct:
            return nil
        }
    }

    // MARK: The socket's own events

    /// The connect completed. The back-off starts over only once the connection proves stable
    /// (`connectionStable()`).
    public mutating func connected() -> [Action] {
        guard state == .connecting else { return [] }
        state = .connected
        var actions: [Action] = []
        if !reads { actions.append(.pauseReading) }
        if phase != .foreground && policy == .quiet {
            state = .quiet
            actions.append(.enterQuiet)
        }
        return actions
    }

    /// The connection has lasted `stableAfter`: the next error starts the back-off from its first delay.
    public mutating func connectionStable() {
        if state == .connected || state == .quiet { retryDelay = Self.firstRetryDelay }
    }

    /// The connect failed, or the connection ended (an error, the peer's close, a defunct socket's first
    /// operation). In the foreground (a VoIP socket: whenever the app runs or sleeps) a reconnect follows
    /// with back-off; otherwise the next foreground connects again.
    public mutating func disconnected() -> [Action] {
        state = .closed
        guard reconnects else { return [] }
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, Self.maxRetryDelay)
        reconnectScheduled = true
        return [.scheduleReconnect(delay)]
    }

    /// The reconnect delay has passed.
    public mutating func reconnectDue() -> [Action] {
        reconnectScheduled = false
        guard reconnects else { return [] }
        return connectIfClosed()
    }

    // MARK: Helpers

    private mutating func connectIfClosed() -> [Action] {
        guard state == .closed else { return [] }
        state = .connecting
        return [.connect]
    }

    private mutating func cancelReconnect() -> [Action] {
        guard reconnectScheduled else { return [] }
        reconnectScheduled = false
        return [.cancelReconnect]
    }
}
