// One listening socket of an app with its policy (TN2277 "Listening Socket"): opened when the app comes to
// the foreground, closed when it goes to the background so that the kernel refuses connections at once,
// the accepted connections kept or closed as configured, accept paused on descriptor exhaustion (as nginx
// does) or at `max-connections` (as HAProxy does), and a reopen that failed retried with back-off.
//
// Beyond iOS, a listener with `on-background = wake` stays open in the background and while the app is
// suspended. Suspended, no app code runs, so netlifed accepts for it and holds each connection (not read, not
// served) and says so (`AppPartEvent.connectionHeld`): the app is woken, and its service serves the held connections as
// soon as they are let go (`setConnectionsPaused(false)`). Accepting at once rather than leaving connections
// in the kernel's queue means none can be reset there, whatever happens to the app meanwhile.

@preconcurrency import Glibc
import NetLifeEvent

/// A listener of an app and the connections accepted on it.
final class AppListener: ConnectionTracker {
    let configuration: ListenerConfiguration
    private unowned let loop: EventLoop
    let service: any ConnectionServer
    private let logger: Logger

    /// The configured address; after the first successful open, with the port the kernel gave.
    private(set) var address: SocketAddress
    private var listener: Listener?
    /// The socket the next `open()` binds, made while the listener is closed (`prepareReopen()`).
    private var prepared: PreparedSocket?
    /// The connections accepted and not yet closed, by identity.
    private(set) var connections: [ObjectIdentifier: Connection] = [:]
    /// Connections accepted so far, and the moves of those closed since (`Connection.moves`): with the open
    /// connections' moves, what tells an app in use from an idle one (`usage`).
    private var acceptedCount: UInt64 = 0
    private var closedMoves: UInt64 = 0
    /// Why the last open failed, while the listener is not open.
    private(set) var openError: String?
    /// Whether the app wants the listener open; retries stop when it no longer does.
    private var wantsOpen = false
    private var retryTimer: EventTimer?
    private var retryDelay: Duration = .milliseconds(100)
    private var acceptPause: AcceptPause = .none
    private var resumeTimer: EventTimer?
    private var connectionsPaused = false
    /// Its app: told (`report`) when the listener opens, closes or fails to open.
    weak var owner: AppPartOwner?
    /// Connections accepted while `connectionsPaused` (a wake listener of a suspended app), in their order,
    /// each with the instant it was accepted: served when reads are let go again.
    private var held: [(connection: Connection, acceptedAt: MonotonicTime)] = []
    /// Whether it stays open in the background and while the app is suspended, where a connection wakes the
    /// app (`on-background = wake`).
    var wakesApp: Bool { configuration.onBackground == .wake }
    /// When the connection held longest was accepted, while connections are held.
    var heldSince: MonotonicTime? { held.first?.acceptedAt }
    /// The listening socket's callbacks, made once: a listener reopened on every `foreground` reuses them.
    private lazy var acceptHandler: (AcceptedSocket) -> Void = { [weak self] socket in
        guard let self else { return SocketCalls.close(socket.fd) }
        accepted(socket)
    }
    private lazy var acceptErrorHandler: (SystemError) -> Void = { [weak self] in self?.acceptFailed($0) }

    private enum AcceptPause { case none, descriptors, maxConnections }

    init(configuration: ListenerConfiguration, service: any ConnectionServer, loop: EventLoop, logger: Logger) {
        self.configuration = configuration
        self.service = service
        self.loop = loop
        self.logger = logger.labeled("\(logger.label) listener \(configuration.name)").adding(field: "NETLIFE_LISTENER", configuration.name)
        self.address = configuration.address
    }

    /// Whether the socket is bound and listening.
    var isOpen: Bool { listener != nil }

    /// What the listener's connections have done so far: accepts, and reads and sends that moved bytes (a
    /// count that only grows, so that two looks tell whether anything happened between them).
    var usage: (accepted: UInt64, moves: UInt64, open: Int) {
        var moves = closedMoves
        for connection in connections.values { moves &+= connection.moves }
        return (acceptedCount, moves, connections.count)
    }

    // MARK: Opening and closing

    /// Binds and listens on the listener's address (the same port as before, if it was open before), and
    /// accepts, or with `accepting` false only listens until `startAccepting()`: the kernel completes
    /// connections into the backlog meanwhile. On failure the error is kept for `status` and the open is
    /// retried with back-off until it succeeds or `close()` is called; a retried open accepts at once.
    /// Returns whether the listener is open now.
    @discardableResult
    func open(accepting: Bool = true) -> Bool {
        wantsOpen = true
        guard listener == nil else {
            if accepting { startAccepting() }
            return true
        }
        do {
            let listener = try Listener(loop: loop, address: address, backlog: configuration.backlog, prepared: prepared.take(),
                                        startAccepting: accepting, onAccept: acceptHandler, onError: acceptErrorHandler)
            self.listener = listener
            address = listener.address
            openError = nil
            retryDelay = .milliseconds(100)
            if atConnectionLimit { pauseAccepting(.maxConnections) }
            logger.debug("listening on \(address)")
            owner?.report(.listenerOpened(name: configuration.name, address: address, mdns: configuration.mdns))
            return true
        } catch {
            openFailed(error, doing: "listen")
            return false
        }
    }

    /// An open, or its registration with the loop (`doing` says which), failed: the error is kept for
    /// `status`, told, and the open retried with back-off.
    private func openFailed(_ error: SystemError, doing action: String) {
        openError = "\(error)"
        logger.warning("cannot \(action) on \(address): \(error); retrying in \(retryDelay)")
        owner?.report(.listenerFailed(name: configuration.name, error: "\(error)"))
        scheduleRetry()
    }

    private func scheduleRetry() {
        retryTimer?.cancel()
        retryTimer = loop.schedule(after: retryDelay) { [weak self] in
            guard let self else { return }
            retryTimer = nil
            if wantsOpen { open() }
        }
        retryDelay = min(retryDelay * 2, .seconds(5))
    }

    /// Registers an open listener with the loop (`Listener.startAccepting()`); nothing happens when it accepts
    /// already or is closed. If that fails (memory is exhausted) the socket is closed and the open retried.
    func startAccepting() {
        guard let listener, !listener.isAccepting else { return }
        do {
            try listener.startAccepting()
        } catch {
            listener.close()
            self.listener = nil
            owner?.report(.listenerClosed(name: configuration.name))
            openFailed(error, doing: "accept")
        }
    }

    /// Closes the listening socket: connect() to its port is refused from now on, and the connections still
    /// in the kernel's accept queue are reset. Accepted connections are left alone.
    func close() {
        wantsOpen = false
        retryTimer?.cancel()
        retryTimer = nil
        resumeTimer?.cancel()
        resumeTimer = nil
        acceptPause = .none
        let wasOpen = listener != nil
        listener?.close()
        listener = nil
        openError = nil
        if wasOpen { owner?.report(.listenerClosed(name: configuration.name)) }
    }

    /// Makes the socket that the next `open()` binds, so that the reopen on `foreground` costs only `bind`
    /// and `listen`. The app calls it in the background, after the transition's reply. Nothing happens
    /// when the listener is open, is a Unix socket or has one already; if it fails, `open()` makes its own.
    func prepareReopen() {
        guard listener == nil, prepared == nil else { return }
        if case .unix = address { return }
        do {
            prepared = try PreparedSocket(for: address)
        } catch {
            logger.debug("cannot prepare a socket for the reopen: \(error)")
        }
    }

    /// Closes the socket `prepareReopen()` made: the listener will not reopen (the app stops).
    func discardPreparedSocket() {
        prepared = nil
    }

    /// Closes the accepted connections if the listener's policy is `close` (on did-enter-background).
    func applyConnectionPolicy() {
        guard configuration.connections == .close else { return }
        closeConnections(.afterFlush)
    }

    /// Closes every accepted connection.
    func closeConnections(_ mode: Connection.CloseMode) {
        for connection in Array(connections.values) { connection.close(mode) }
    }

    /// Stops (or restarts) reading on every accepted connection: while the app is suspended none of its
    /// code runs, and the kernel buffers what peers send. Restarting serves the connections held meanwhile,
    /// in the order they were accepted.
    func setConnectionsPaused(_ paused: Bool) {
        // Already so: nothing to do (every foreground asks, with its listeners' thousands of connections).
        guard paused != connectionsPaused else { return }
        connectionsPaused = paused
        for connection in connections.values {
            if paused { connection.pauseReading() } else { connection.resumeReading() }
        }
        guard !paused else { return }
        let waiting = held
        held = []
        for (connection, _) in waiting where connection.state != .closed { service.serve(connection) }
    }

    /// Resets every accepted connection in place (socket reclaim of a suspended app): the peer sees RST at
    /// once; each connection fails on its first read after the app resumes. Returns how many were reset
    /// now: one already reset by an earlier reclaim (or by its peer) is not counted again.
    func reclaimConnections() -> Int {
        var count = 0
        for connection in connections.values where connection.state == .open {
            do {
                if try connection.makeDefunct() { count += 1 }
            } catch {
                logger.warning("reclaim of a connection failed: \(error); resetting it")
                connection.close(.reset)
            }
        }
        return count
    }

    /// The memory the accepted connections hold.
    var heldBytes: Int { connections.values.reduce(0) { $0 + $1.heldBytes } }

    // MARK: Accepting

    private var atConnectionLimit: Bool {
        if let limit = configuration.maxConnections { return connections.count >= limit }
        return false
    }

    private func accepted(_ socket: AcceptedSocket) {
        let connection: Connection
        do {
            connection = try Connection(loop: loop, fd: socket.fd)
        } catch {
            logger.warning("dropped a connection from \(socket.peer): \(error)")
            return
        }
        if case .unix = address {} else { SocketCalls.setNoDelay(socket.fd) }
        connections[ObjectIdentifier(connection)] = connection
        acceptedCount &+= 1
        connection.tracker = self
        if atConnectionLimit { pauseAccepting(.maxConnections) }
        if connectionsPaused {
            // Only a wake listener accepts while the app is suspended: the connection waits for the app.
            connection.pauseReading()
            held.append((connection, loop.now))
            owner?.send(.connectionHeld(listener: configuration.name))
            return
        }
        service.serve(connection)
        if wakesApp { owner?.send(.wakeConnectionsChanged) }
    }

    func connectionClosed(_ connection: Connection) {
        connections[ObjectIdentifier(connection)] = nil
        if !held.isEmpty { held.removeAll { $0.connection === connection } }
        closedMoves &+= connection.moves
        if wakesApp { owner?.send(.wakeConnectionsChanged) }
        switch acceptPause {
        case .descriptors:
            resumeAccepting()   // a descriptor is free again
        case .maxConnections where !atConnectionLimit:
            resumeAccepting()
        case .none, .maxConnections:
            break
        }
    }

    private func acceptFailed(_ error: SystemError) {
        // EMFILE and ENFILE are not retriable: the connection stays in the queue and the socket stays
        // readable, so accepting again at once would spin. Pause until a descriptor frees or a short timer
        // runs out, as nginx does.
        logger.warning("\(error); pausing accept on \(address)")
        pauseAccepting(.descriptors)
        resumeTimer?.cancel()
        resumeTimer = loop.schedule(after: .milliseconds(250)) { [weak self] in
            guard let self else { return }
            resumeTimer = nil
            if acceptPause == .descriptors { resumeAccepting() }
        }
    }

    private func pauseAccepting(_ reason: AcceptPause) {
        acceptPause = reason
        listener?.pause()
    }

    private func resumeAccepting() {
        resumeTimer?.cancel()
        resumeTimer = nil
        if atConnectionLimit {
            acceptPause = .maxConnections
            return
        }
        acceptPause = .none
        listener?.resume()
    }

    /// What `status` shows.
    var status: ListenerStatus {
        ListenerStatus(name: configuration.name, address: address.description, service: configuration.service,
                       open: isOpen, error: openError, connections: connections.count)
    }
}

/// What serves the connections a listener accepts: the listener's side of a `Service`, which knows no App.
public protocol ConnectionServer: AnyObject {
    /// A connection was accepted. The server typically becomes its `delegate`; it must not close the
    /// connection's descriptor behind its back (use `connection.close(_:)`).
    func serve(_ connection: Connection)
}
