// A data socket of an app (TN2277 "Data Socket"): an outbound connection that lives with the app's
// lifecycle. `DataSocketMachine` decides (connect, close, quiet, reclaim, reconnect with back-off); this
// class performs: the connect (OutboundConnector), the connection (Connection), the timers, and the calls
// into the protocol handler. iOS's CFStream with the VoIP service type is the model: an app author
// opens one with `App.openDataSocket(_:handler:)`; a `[socket]` section of the config does the same with a
// built-in protocol (line, imap).

import NetLifeEvent

/// How a protocol entered quiet mode.
public enum QuietEntry: Sendable, Equatable {
    /// Done: nothing to wait for.
    case entered
    /// A reply must be awaited: the socket holds a background task until the handler calls
    /// `DataSocket.quietReplyArrived()` (or the connection ends).
    case awaitingReply
}

/// The protocol spoken on a data socket. Every method runs on the loop thread, never while the app is
/// suspended (a VoIP socket's data wakes the app first).
public protocol DataSocketHandler: AnyObject {
    /// The connection is up (log in, send a greeting).
    func dataSocketDidConnect(_ socket: DataSocket)
    /// Bytes arrived in `socket.input`; consume what makes sense and leave the rest.
    func dataSocketDidRead(_ socket: DataSocket)
    /// Enter quiet mode (did-enter-background with `policy = quiet`). Must not block.
    func dataSocketEnterQuiet(_ socket: DataSocket) -> QuietEntry
    /// Leave quiet mode (will-enter-foreground).
    func dataSocketLeaveQuiet(_ socket: DataSocket)
    /// Send a keep-alive (`keepalive = DURATION`).
    func dataSocketKeepAlive(_ socket: DataSocket)
    /// The app terminates: send the protocol's goodbye (the socket closes after it is written).
    func dataSocketSayGoodbye(_ socket: DataSocket)
    /// The connection ended; `error` says why, nil for an orderly close.
    func dataSocketDidDisconnect(_ socket: DataSocket, error: String?)
    /// What `status` shows.
    var protocolStatus: DataProtocolStatus { get }
}

extension DataSocketHandler {
    public func dataSocketDidConnect(_ socket: DataSocket) {}
    public func dataSocketEnterQuiet(_ socket: DataSocket) -> QuietEntry { .entered }
    public func dataSocketLeaveQuiet(_ socket: DataSocket) {}
    public func dataSocketKeepAlive(_ socket: DataSocket) {}
    public func dataSocketSayGoodbye(_ socket: DataSocket) {}
    public func dataSocketDidDisconnect(_ socket: DataSocket, error: String?) {}
    public var protocolStatus: DataProtocolStatus { DataProtocolStatus() }
}

/// How to make a protocol handler from a `[socket]` section: its name, its own keys, a factory.
public struct DataProtocolDescriptor: Sendable {
    /// The value of `protocol =` that selects it.
    public var name: String
    /// Its own `[socket]` keys; any other unknown key is an error.
    public var optionKeys: Set<String>
    /// Makes a handler for one socket. Also called when the config is checked: cheap, no side effects
    /// beyond reading small files it names; throws for bad options.
    public var make: @Sendable (DataSocketConfiguration) throws(ServiceOptionError) -> any DataSocketHandler

    public init(name: String, optionKeys: Set<String> = [],
                make: @escaping @Sendable (DataSocketConfiguration) throws(ServiceOptionError) -> any DataSocketHandler) {
        self.name = name
        self.optionKeys = optionKeys
        self.make = make
    }
}

/// An outbound connection of an app, with its policy and its protocol.
public final class DataSocket: ConnectionDelegate {
    public let configuration: DataSocketConfiguration
    /// The protocol spoken on it.
    public let handler: any DataSocketHandler
    private var machine: DataSocketMachine
    private unowned let loop: EventLoop
    private let logger: Logger
    weak var owner: AppPartOwner?
    private var connector: OutboundConnector?
    private var connection: Connection? {
        willSet { if let connection, newValue !== connection { earlierMoves &+= connection.moves } }
    }
    /// The moves of the connections before the current one (`moves`).
    private var earlierMoves: UInt64 = 0
    private var reconnectTimer: EventTimer?
    private var keepaliveTimer: EventTimer?
    /// Armed at each connect: when it fires the connection counts as stable and the back-off starts over.
    private var stableTimer: EventTimer?
    /// Whether the app is held awake for the reply to the quiet command (`AppPartEvent.quietWaitBegan`).
    private var awaitsQuietReply = false
    /// Why the protocol gave up on the connection being closed now.
    private var protocolFailure: String?
    /// The last error (it stays after a reconnect: it is the last one, and a socket that keeps failing right
    /// after each connect, as a refused login does, shows why).
    public private(set) var lastError: String?
    /// Successful connects so far.
    public private(set) var connects = 0

    init(configuration: DataSocketConfiguration, handler: any DataSocketHandler, loop: EventLoop, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.loop = loop
        self.logger = logger.labeled("\(logger.label) socket \(configuration.name)").adding(field: "NETLIFE_SOCKET", configuration.name)
        machine = DataSocketMachine(policy: configuration.policy, voip: configuration.voip)
    }

    public var name: String { configuration.name }
    /// The state `status` shows.
    public var state: DataSocketState { machine.state }
    /// Bytes received and not yet consumed by the handler (empty while not connected).
    public var input: EventBuffer? { connection?.input }

    // MARK: For the protocol handler

    /// Queues `text` and writes it. Does nothing while not connected.
    public func send(_ text: String) {
        guard let connection, connection.state == .open else { return }
        connection.output.append(text)
        connection.flush()
    }

    /// The reply that quiet mode waited for arrived: the background task held for it ends.
    public func quietReplyArrived() {
        endQuietTask()
    }

    /// The protocol gives up on the connection (the peer broke it): it is closed, the message shown, and
    /// the socket reconnects as after any error.
    public func fail(_ message: String) {
        guard let connection else { return }
        let message = printable(message)
        logger.warning("protocol error: \(message)")
        protocolFailure = message
        connection.close(.now)
    }

    // MARK: For the app

    /// The app runs in the foreground: a launch, or will-enter-foreground.
    func appForeground() {
        perform(machine.phase == .stopped ? machine.appLaunched(background: false) : machine.appWillEnterForeground())
        armKeepalive()
    }

    /// The app was launched into the background.
    func appLaunchedInBackground() {
        perform(machine.appLaunched(background: true))
        armKeepalive()
    }

    func appEnteredBackground() { perform(machine.appEnteredBackground()) }
    func appSuspended() { perform(machine.appSuspended()) }
    func appWokeInBackground() { perform(machine.appWokeInBackground()) }

    func appTerminating() {
        perform(machine.appTerminating())
        stopKeepalive()
    }

    /// The app stopped without callbacks: everything closes now.
    func appStopped() {
        perform(machine.appStopped())
        stopKeepalive()
    }

    /// Reclaim (the app is suspended): returns whether this socket was reclaimed.
    func reclaim() -> Bool {
        guard let actions = machine.reclaim() else { return false }
        perform(actions)
        return true
    }

    /// Reads and sends that moved bytes on this socket's connections so far (`Connection.moves`), for idle
    /// detection.
    var moves: UInt64 { earlierMoves &+ (connection?.moves ?? 0) }

    /// The bytes the socket holds (buffers and kernel queues), for memory pressure.
    var heldBytes: Int { connection?.heldBytes ?? 0 }

    var status: DataSocketStatus {
        DataSocketStatus(name: name, peer: configuration.address.description, policy: configuration.policy,
                         voip: configuration.voip, state: state, error: lastError, protocolName: configuration.protocolName,
                         connects: connects, protocolStatus: handler.protocolStatus)
    }

    // MARK: Performing the machine's actions

    private func perform(_ actions: [DataSocketMachine.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: DataSocketMachine.Action) {
        switch action {
        case .connect:
            startConnect()
        case .close(let flush):
            connector?.cancel()
            connector = nil
            endQuietTask()
            stopStableTimer()
            // The machine knows: the connection is let go at once (it finishes its flush on its own), so that
            // its late close can never be taken for the next connection's.
            guard let connection else { return }
            self.connection = nil
            connection.delegate = nil
            connection.close(flush ? .afterFlush : .now)
            protocolFailure = nil
            handler.dataSocketDidDisconnect(self, error: nil)
            owner?.report(.socketChanged(name: name, state: .closed, error: nil))
        case .sayGoodbye:
            handler.dataSocketSayGoodbye(self)
        case .enterQuiet:
            let entry = handler.dataSocketEnterQuiet(self)
            owner?.report(.socketQuietModeChanged(name: name, quiet: true))
            if entry == .awaitingReply, !awaitsQuietReply {
                // A peer that never answers must not keep the app awake until the watchdog kills it: when the
                // background time runs out, the app calls `quietWaitExpired()` and the connection is given up.
                awaitsQuietReply = true
                owner?.send(.quietWaitBegan(socket: name))
            }
        case .leaveQuiet:
            endQuietTask()
            handler.dataSocketLeaveQuiet(self)
            owner?.report(.socketQuietModeChanged(name: name, quiet: false))
        case .pauseReading:
            connection?.pauseReading()
        case .resumeReading:
            connection?.resumeReading()
        case .dissolve:
            endQuietTask()
            guard let connection else { return }
            do {
                try connection.makeDefunct()
                logger.info("reclaimed: the peer was reset; the descriptor stays until the app next uses it")
                owner?.report(.socketChanged(name: name, state: .defunct, error: nil))
            } catch {
                // A Unix stream socket cannot be dissolved in place (EINVAL): it is closed instead.
                protocolFailure = "reclaimed: closed, since this socket cannot be reset in place (\(error))"
                connection.close(.reset)
            }
        case .scheduleReconnect(let delay):
            reconnectTimer?.close()
            reconnectTimer = loop.schedule(after: delay) { [weak self] in
                guard let self else { return }
                reconnectTimer = nil
                // Only a VoIP socket reconnects while its app is suspended, and the app handles it awake.
                if configuration.voip { wakeAppIfSuspended(.voipReconnect(socket: name)) }
                perform(machine.reconnectDue())
            }
        case .cancelReconnect:
            reconnectTimer?.close()
            reconnectTimer = nil
        }
    }

    private func startConnect() {
        connector?.cancel()
        logger.debug("connecting to \(configuration.address)")
        owner?.report(.socketChanged(name: name, state: .connecting, error: nil))
        connector = OutboundConnector(loop: loop, address: configuration.address) { [weak self] result in
            guard let self else {
                if case .success(let fd) = result { SocketCalls.close(fd) }
                return
            }
            connector = nil
            switch result {
            case .success(let fd):
                connectSucceeded(fd)
            case .failure(let error):
                disconnected(error: "\(error)")
            }
        }
    }

    private func connectSucceeded(_ fd: CInt) {
        let connection: Connection
        do {
            connection = try Connection(loop: loop, fd: fd)
        } catch {
            return disconnected(error: "\(error)")
        }
        if case .unix = configuration.address {} else { SocketCalls.setNoDelay(fd) }
        connection.delegate = self
        self.connection = connection
        connects += 1
        protocolFailure = nil
        stableTimer?.close()
        stableTimer = loop.schedule(after: DataSocketMachine.stableAfter) { [weak self] in
            self?.stableTimer = nil
            self?.machine.connectionStable()
        }
        if configuration.voip { wakeAppIfSuspended(.voipReconnect(socket: name)) }
        logger.info("connected to \(configuration.address)")
        let actions = machine.connected()
        owner?.report(.socketChanged(name: name, state: .connected, error: nil))
        handler.dataSocketDidConnect(self)
        perform(actions)
    }

    /// The connect failed or the connection ended.
    private func disconnected(error: String?) {
        let wasDefunct = machine.state == .defunct
        let error = error.map(printable)
        endQuietTask()
        stopStableTimer()
        if let error {
            lastError = error
            logger.warning("\(wasDefunct ? "reclaimed socket failed on first use" : "disconnected"): \(error)")
        } else {
            logger.info("closed")
        }
        perform(machine.disconnected())
        owner?.report(.socketChanged(name: name, state: .closed, error: error))
    }

    private func stopStableTimer() {
        stableTimer?.close()
        stableTimer = nil
    }

    private func endQuietTask() {
        guard awaitsQuietReply else { return }
        awaitsQuietReply = false
        owner?.send(.quietWaitEnded(socket: name))
    }

    /// The background time ran out while the app waited for the reply to the quiet command.
    func quietWaitExpired() {
        fail("no reply to the quiet command within the background time")
        endQuietTask()
    }

    /// Wakes the app for `reason` when it is suspended (this socket's machine knows: the app tells it).
    private func wakeAppIfSuspended(_ reason: WakeReason) {
        if machine.phase == .suspended { owner?.send(.lifecycle(.wake(reason))) }
    }

    // MARK: Keep-alive

    private func armKeepalive() {
        guard let interval = configuration.keepalive, keepaliveTimer == nil else { return }
        keepaliveTimer = loop.schedule(after: interval) { [weak self] in
            guard let self else { return }
            keepaliveTimer = nil
            keepaliveDue()
            armKeepalive()
        }
    }

    private func stopKeepalive() {
        keepaliveTimer?.close()
        keepaliveTimer = nil
    }

    private func keepaliveDue() {
        guard machine.state == .connected || machine.state == .quiet else { return }
        wakeAppIfSuspended(.keepalive(socket: name))
        logger.debug("keep-alive")
        handler.dataSocketKeepAlive(self)
    }

    // MARK: ConnectionDelegate

    public func connectionDidRead(_ connection: Connection) {
        // Only a VoIP socket reads while its app is suspended: the data wakes the app, then is handled.
        wakeAppIfSuspended(.voipData(socket: name))
        handler.dataSocketDidRead(self)
    }

    public func connectionDidReachEnd(_ connection: Connection) {
        connection.close(.afterFlush)
    }

    public func connectionDidClose(_ connection: Connection, error: SystemError?) {
        guard connection === self.connection else { return }
        // A VoIP socket lost while its app is suspended: the app handles the loss awake (and reconnects).
        if configuration.voip { wakeAppIfSuspended(.voipReconnect(socket: name)) }
        self.connection = nil
        let failure = protocolFailure ?? error.map { "\($0)" }
        protocolFailure = nil
        handler.dataSocketDidDisconnect(self, error: failure)
        // Closed by the machine (background, terminate): it already knows; otherwise an error or the peer.
        if machine.state == .closed && failure == nil {
            owner?.report(.socketChanged(name: name, state: .closed, error: nil))
            return
        }
        disconnected(error: failure ?? "the peer closed the connection")
    }
}

/// `text` with control characters (terminal escapes from a peer, say) shown as `\u{1B}`, for logs, `status`
/// and `watch`.
func printable(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) }) else {
        return text
    }
    var result = ""
    for scalar in text.unicodeScalars {
        if scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value) {
            result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}
