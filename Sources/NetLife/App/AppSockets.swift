// The sockets of one app: its listeners with the connections accepted on them, and its data sockets. The
// app's pipeline asks for the built-in policy steps that concern sockets; suspension pauses reads (VoIP
// sockets excepted), reclaim dissolves connections, and a teardown closes everything. One place, so that
// each rule is applied to every kind of socket the same way.

import NetLifeEvent

/// The listeners (and accepted connections) and data sockets of one app.
final class AppSockets {
    private let listeners: [AppListener]
    /// The services behind `listeners`, told which app they belong to.
    private let services: [any Service]
    /// A process app's listeners, which its program serves.
    let handedListeners: [HandedListener]
    private(set) var dataSockets: [DataSocket]
    /// Makes the closed listeners' sockets for their reopen, a few per loop turn (`prepareReopen(on:)`).
    private var preparing: EventTimer?
    /// Registers the listeners with the loop after a transition's reply (`startAccepting(after:on:)`).
    private var starting: EventTimer?
    /// Whether `.openListeners` left listeners that do not accept yet.
    private var awaitingAccept = false
    /// Listeners served per loop turn: each costs two system calls (a few microseconds).
    private static let preparedPerTurn = 32
    /// How long after the background reply the preparation starts (`prepareReopen(on:)`).
    private static let prepareDelay = Duration.milliseconds(20)
    /// The background task that holds the app awake while a data socket waits for the reply to its quiet
    /// command, by socket (`AppPartEvent.quietWaitBegan`).
    private var quietWaits: [String: BackgroundTaskIdentifier] = [:]

    /// The sockets `configuration` declares: a process app's listeners are handed to its program; the others'
    /// services are made from `services`.
    convenience init(configuration: AppConfiguration, services: ServiceRegistry, loop: EventLoop,
                     logger: Logger) throws(ServiceOptionError) {
        var listeners: [AppListener] = []
        var made: [any Service] = []
        var handed: [HandedListener] = []
        for listener in configuration.listeners {
            if configuration.program != nil {
                handed.append(HandedListener(configuration: listener, logger: logger))
                continue
            }
            guard let descriptor = services[listener.service] else {
                throw ServiceOptionError(key: "service", "unknown service '\(listener.service)'")
            }
            let service = try descriptor.make(listener.serviceOptions)
            made.append(service)
            listeners.append(AppListener(configuration: listener, service: service, loop: loop, logger: logger))
        }
        var dataSockets: [DataSocket] = []
        for socket in configuration.sockets {
            guard let descriptor = services.dataProtocol(socket.protocolName) else {
                throw ServiceOptionError(key: "protocol", "unknown protocol '\(socket.protocolName)'")
            }
            let handler = try descriptor.make(socket)
            dataSockets.append(DataSocket(configuration: socket, handler: handler, loop: loop, logger: logger))
        }
        self.init(listeners: listeners, services: made, handedListeners: handed, dataSockets: dataSockets)
    }

    init(listeners: [AppListener], services: [any Service], handedListeners: [HandedListener] = [], dataSockets: [DataSocket] = []) {
        self.listeners = listeners
        self.services = services
        self.handedListeners = handedListeners
        self.dataSockets = dataSockets
    }

    /// The built-in listeners with `on-background = wake`.
    var wakeListeners: [AppListener] { listeners.filter(\.wakesApp) }

    /// The open connections of the built-in wake listeners (those held for a suspended app included).
    var wakeConnections: Int { listeners.reduce(0) { $0 + ($1.wakesApp ? $1.connections.count : 0) } }

    /// A connection woke the app: the built-in wake listeners serve again (the connections they held, and
    /// what their connections send); the other listeners' connections stay unread, as after any wake-up.
    /// Returns when the connection held longest was accepted, if one was held.
    func serveWakeListeners() -> MonotonicTime? {
        let waking = wakeListeners
        let since = waking.compactMap(\.heldSince).min()
        for listener in waking { listener.setConnectionsPaused(false) }
        return since
    }

    /// What the app's sockets have done so far (`IdleRule.Use`): accepts and moves on every listener, moves on
    /// every data socket, and the accepted connections open now.
    var usage: (accepted: UInt64, moves: UInt64, open: Int) {
        var total: (accepted: UInt64, moves: UInt64, open: Int) = (0, 0, 0)
        for listener in listeners {
            let usage = listener.usage
            total = (total.accepted &+ usage.accepted, total.moves &+ usage.moves, total.open + usage.open)
        }
        for socket in dataSockets { total.moves &+= socket.moves }
        return total
    }

    /// Tells every service which app it belongs to, and every listener and data socket who owns it.
    func attach(to app: App) {
        for service in services { service.didAttach(to: app) }
        for listener in listeners { listener.owner = app }
        for listener in handedListeners { listener.owner = app }
        for socket in dataSockets { socket.owner = app }
    }

    /// A data socket began or ended its wait for the reply to its quiet command: a background task holds
    /// `app` awake meanwhile; when the background time runs out the socket gives the wait up.
    func quietWait(of socket: String, began: Bool, app: App) {
        if began {
            guard quietWaits[socket] == nil else { return }
            let id = app.beginBackgroundTask(name: "quiet \(socket)") { [weak self] in
                self?.dataSockets.first { $0.name == socket }?.quietWaitExpired()
            }
            if id != BackgroundTaskRegistry.invalid { quietWaits[socket] = id }
        } else if let id = quietWaits.removeValue(forKey: socket) {
            app.endBackgroundTask(id)
        }
    }

    /// Adds a data socket opened through the Swift API; it follows the app from its current state.
    func add(_ socket: DataSocket, app: App) {
        socket.owner = app
        dataSockets.append(socket)
        switch app.state {
        case .inactive, .active: socket.appForeground()
        case .background: socket.appLaunchedInBackground()
        case .suspended:
            socket.appLaunchedInBackground()
            socket.appSuspended()
        case .notRunning: break
        }
    }

    /// Performs a built-in policy step that concerns sockets; `launchingInBackground`: the step belongs to
    /// a launch straight into the background.
    func perform(_ step: PolicyStep, launchingInBackground: Bool) {
        switch step {
        case .openListeners:
            // A launch into the background opens only what listens there (`on-background = wake`); a process
            // app's program binds its own listeners as it starts.
            let opening = launchingInBackground ? wakeListeners : listeners
            // From the background after a wake-up (no resume-app step): the connections read again too.
            for listener in opening { listener.setConnectionsPaused(false) }
            // Listening is what the transition waits for; accepting starts after its reply, or before any hook
            // or program runs (`startAccepting(after:on:)`).
            stopPreparing()
            for listener in opening { listener.open(accepting: false) }
            awaitingAccept = !opening.isEmpty
            if !launchingInBackground { for listener in handedListeners { listener.open() } }
        case .closeListeners:
            // A listener with `on-background = wake` goes on listening, and one opened but not accepting yet
            // (a launch into the background) starts accepting after the reply all the same.
            if wakeListeners.isEmpty { stopStarting() }
            for listener in listeners where !listener.wakesApp { listener.close() }
            // A process app's listener with `on-background = wake` goes on listening.
            for listener in handedListeners where !listener.wakesApp { listener.close() }
        case .startProgram:
            break
        case .closeConnections:
            for listener in listeners { listener.applyConnectionPolicy() }
        case .resumeApp:
            for listener in listeners { listener.setConnectionsPaused(false) }
        case .connectDataSockets:
            for socket in dataSockets {
                if launchingInBackground { socket.appLaunchedInBackground() }
                else { socket.appForeground() }
            }
        case .applyDataSocketPolicy:
            for socket in dataSockets { socket.appEnteredBackground() }
        case .closeDataSockets:
            for socket in dataSockets { socket.appTerminating() }
        }
    }

    /// The app is suspended: no reads on its sockets (the kernel keeps what peers send), VoIP sockets
    /// excepted.
    func suspend() {
        for listener in listeners { listener.setConnectionsPaused(true) }
        for socket in dataSockets { socket.appSuspended() }
    }

    /// The suspended app runs in the background for a moment: only what woke it runs, so
    /// accepted connections and plain data sockets stay unread until the foreground.
    func wake() {
        for socket in dataSockets { socket.appWokeInBackground() }
    }

    /// Socket resource reclaim (the app is suspended): every non-VoIP data socket becomes defunct and
    /// every accepted connection is reset in place. Returns the sockets reclaimed and the connections reset.
    func reclaim() -> (sockets: [String], connections: Int) {
        let sockets = dataSockets.filter { $0.reclaim() }.map(\.name)
        let connections = listeners.reduce(0) { $0 + $1.reclaimConnections() }
        return (sockets, connections)
    }

    /// Prepares the closed listeners' sockets for their reopen on `foreground` (`AppListener.prepareReopen`),
    /// `preparedPerTurn` listeners a loop turn, so that a request arriving meanwhile waits for one slice at
    /// most. The first slice waits `prepareDelay` after the background transition's reply.
    ///
    /// Why wait: the reply wakes its reader (netlifectl, a script), which the kernel may place on the
    /// daemon's CPU; work started at once then holds that CPU for the scheduler's wake-up granularity, and
    /// on 2 cores 1 in 5 `background` replies reached the client 3 ms late (measured with 1,000 listeners).
    func prepareReopen(on loop: EventLoop) {
        stopPreparing()
        guard !listeners.isEmpty else { return }
        prepareSlice(from: 0, on: loop, after: Self.prepareDelay)
    }

    private func prepareSlice(from start: Int, on loop: EventLoop, after delay: Duration = .zero) {
        preparing = loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            let end = min(start + Self.preparedPerTurn, listeners.count)
            for listener in listeners[start..<end] { listener.prepareReopen() }
            if end < listeners.count { prepareSlice(from: end, on: loop) } else { preparing = nil }
        }
    }

    private func stopPreparing() {
        preparing?.cancel()
        preparing = nil
    }

    private func stopStarting() {
        starting?.cancel()
        starting = nil
        awaitingAccept = false
    }

    /// Registers the listeners that `.openListeners` left listening with the loop (`AppListener.startAccepting`):
    /// at once when `delay` is nil (a hook or the program is about to run, and may connect to its own port),
    /// or `delay` from now (after a transition's reply, for the reason `prepareReopen(on:)` waits: the client
    /// that was just answered runs first). Connections the kernel completed meanwhile wait in the backlog.
    func startAccepting(after delay: Duration? = nil, on loop: EventLoop) {
        guard awaitingAccept else { return }
        guard let delay else { return acceptNow() }
        starting?.cancel()
        starting = loop.schedule(after: delay) { [weak self] in self?.acceptNow() }
    }

    private func acceptNow() {
        stopStarting()
        for listener in listeners { listener.startAccepting() }
    }

    /// Closes every listener, every connection and every data socket (`mode` says how).
    func closeAll(_ mode: Connection.CloseMode) {
        stopPreparing()
        stopStarting()
        for listener in listeners {
            listener.close()
            listener.discardPreparedSocket()
            listener.closeConnections(mode)
        }
        for listener in handedListeners { listener.release() }
        for socket in dataSockets { socket.appStopped() }
    }

    /// The memory the app's sockets hold: buffers and kernel queues of every connection.
    var heldBytes: Int {
        listeners.reduce(0) { $0 + $1.heldBytes } + dataSockets.reduce(0) { $0 + $1.heldBytes }
    }

    /// What `status` shows of the listeners.
    var listenerStatus: [ListenerStatus] { listeners.map(\.status) + handedListeners.map(\.status) }
    /// What `status` shows of the data sockets.
    var dataSocketStatus: [DataSocketStatus] { dataSockets.map(\.status) }
}
