// `netlifectl watch [APP]`: the connections that follow the daemon's events. After its reply a watch
// session carries one JSON line per event (WatchEvent). A watcher never slows the daemon: a line is
// appended to its connection's output and written as the socket takes it, and a watcher whose unread lines
// pass `maxUnreadBytes` is dropped, told why in a last line.

import NetLife
import NetLifeControl
import NetLifeEvent

/// The watch sessions of a daemon and the events they are sent.
final class Watchers {
    /// The most bytes of events a watcher may leave unread before it is dropped.
    static let maxUnreadBytes = 256 * 1024

    private var sessions: [ObjectIdentifier: (session: ControlSession, app: String?)] = [:]
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger.labeled("watch")
    }

    /// How many watchers there are.
    var count: Int { sessions.count }

    /// Turns `session` into a watch of `app` (every app when nil).
    func add(_ session: ControlSession, app: String?) {
        let key = ObjectIdentifier(session)
        session.startStreaming { [weak self] in self?.sessions[key] = nil }
        sessions[key] = (session, app)
    }

    /// Routes an app's event to the watchers of that app (and of every app).
    func appEvent(_ app: App, _ event: AppEvent) {
        guard !sessions.isEmpty, let line = Self.watchEvent(app: app.name, event) else { return }
        broadcast(line, app: app.name)
    }

    /// A reload finished.
    func reloaded(added: [String], removed: [String], restarted: [String], updated: [String]) {
        guard !sessions.isEmpty else { return }
        var event = WatchEvent(kind: .reload, at: WallClock.now())
        event.added = added
        event.removed = removed
        event.restarted = restarted
        event.updated = updated
        broadcast(event, app: nil)
    }

    /// Ends every watch with `reason` (the daemon is stopping).
    func endAll(_ reason: String) {
        for (session, _) in sessions.values { end(session, reason) }
    }

    /// Sends `event` to the watchers of `app` (and of every app).
    func send(_ event: WatchEvent, app: String?) {
        guard !sessions.isEmpty else { return }
        broadcast(event, app: app)
    }

    private func broadcast(_ event: WatchEvent, app: String?) {
        let line = event.json.serializedLine
        for (session, filter) in sessions.values where filter == nil || app == nil || filter == app {
            if session.connection.output.count > Self.maxUnreadBytes {
                logger.warning("dropping a watcher that left \(session.connection.output.count) bytes unread")
                end(session, "this watcher did not read its events: more than \(Self.maxUnreadBytes / 1024) KiB were waiting")
            } else {
                session.stream(line)
            }
        }
    }

    private func end(_ session: ControlSession, _ reason: String) {
        sessions[ObjectIdentifier(session)] = nil
        var event = WatchEvent(kind: .end, at: WallClock.now())
        event.error = reason
        session.stream(event.json.serializedLine)
        session.connection.close(.afterFlush)
    }

    /// The watch line for an app event.
    static func watchEvent(app: String, _ event: AppEvent) -> WatchEvent? {
        var line = WatchEvent(kind: .state, at: WallClock.now(), app: app)
        switch event {
        case .stateChanged(let from, let to):
            line.from = from.rawValue
            line.to = to.rawValue
        case .transitionFinished(let command, let state, let stages):
            line.kind = .transition
            line.command = command.description
            line.to = state.rawValue
            line.stages = stages.map(Reply.stage)
        case .taskBegan(let id, let name):
            line.kind = .taskBegan
            line.id = id
            line.name = name
        case .taskEnded(let id):
            line.kind = .taskEnded
            line.id = id
        case .taskExpiring(let id):
            line.kind = .taskExpiring
            line.id = id
        case .watchdogKilled(let timeout):
            line.kind = .watchdog
            line.stage = timeout.stage.description
            line.budget = Reply.seconds(timeout.budget)
            line.elapsed = Reply.seconds(timeout.elapsed)
        case .stopped(let record):
            let info = Reply.termination(record)
            line.kind = .stopped
            line.reason = info.reason
            line.by = info.by
        case .listenerOpened(let name, let address, _):
            line.kind = .listenerOpened
            line.listener = name
            line.address = address.description
        case .listenerClosed(let name):
            line.kind = .listenerClosed
            line.listener = name
        case .listenerFailed(let name, let error):
            line.kind = .listenerFailed
            line.listener = name
            line.error = error
        case .socketChanged(let name, let state, let error):
            line.kind = .socket
            line.socket = name
            line.to = state.rawValue
            line.error = error
        case .socketQuietModeChanged(let name, let quiet):
            // The same `socket` event, with `from`: a watcher follows the state `status` shows.
            let (from, to) = quiet ? (DataSocketState.connected, DataSocketState.quiet) : (.quiet, .connected)
            line.kind = .socket
            line.socket = name
            line.from = from.rawValue
            line.to = to.rawValue
        case .woken(let reason):
            line.kind = .woken
            switch reason {
            case .voipData(let socket):
                line.reason = "voip-data"
                line.socket = socket
            case .keepalive(let socket):
                line.reason = "keepalive"
                line.socket = socket
            case .voipReconnect(let socket):
                line.reason = "voip-reconnect"
                line.socket = socket
            case .connection(let listener):
                line.reason = "connection"
                line.listener = listener
            }
        case .reclaimed(let sockets, let connections):
            line.kind = .reclaimed
            line.sockets = sockets
            line.id = UInt64(connections)
        case .programNotified(let notification):
            line.kind = .notify
            line.message = notification.rawValue
        }
        return line
    }
}
