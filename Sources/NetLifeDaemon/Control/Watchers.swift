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
        broadcast(WatchEvent(.reload(added: added, removed: removed, restarted: restarted, updated: updated), at: WallClock.now()), app: nil)
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
        session.stream(WatchEvent(.end(error: reason), at: WallClock.now()).json.serializedLine)
        session.connection.close(.afterFlush)
    }

    /// The watch line for an app event.
    static func watchEvent(app: String, _ event: AppEvent) -> WatchEvent? {
        payload(event).map { WatchEvent($0, at: WallClock.now(), app: app) }
    }

    /// The watch event's payload; nil for what `watch` does not show.
    private static func payload(_ event: AppEvent) -> WatchEvent.Payload? {
        switch event {
        case .stateChanged(let from, let to):
            return .state(from: from, to: to)
        case .transitionFinished(let command, let state, let stages):
            return .transition(command: ControlCommand(command).name, to: state, stages: stages.map(\.timing))
        case .taskBegan(let id, let name):
            return .taskBegan(id: id, name: name)
        case .taskEnded(let id):
            return .taskEnded(id: id)
        case .taskExpiring(let id):
            return .taskExpiring(id: id)
        case .watchdogKilled(let timeout):
            return .watchdog(stage: timeout.stage.description, budget: StatusTime.seconds(timeout.budget),
                             elapsed: StatusTime.seconds(timeout.elapsed))
        case .stopped(let record):
            let status = record.status
            return .stopped(reason: status.reason, by: status.by, pressure: status.pressure)
        case .listenerOpened(let name, let address, _):
            return .listenerOpened(listener: name, address: address.description)
        case .listenerClosed(let name):
            return .listenerClosed(listener: name)
        case .listenerFailed(let name, let error):
            return .listenerFailed(listener: name, error: error)
        case .socketChanged(let name, let state, let error):
            return .socket(socket: name, from: nil, to: state, error: error)
        case .socketQuietModeChanged(let name, let quiet):
            // The same `socket` event, with `from`: a watcher follows the state `status` shows.
            return quiet ? .socket(socket: name, from: .connected, to: .quiet, error: nil)
                         : .socket(socket: name, from: .quiet, to: .connected, error: nil)
        case .woken(let reason):
            return .woken(reason)
        case .wakeServed:
            // The `woken` event tells the wake-up; its latency is a figure of /metrics.
            return nil
        case .reclaimed(let sockets, let connections):
            return .reclaimed(sockets: sockets, connections: UInt64(connections))
        case .programNotified(let notification):
            return .notify(message: notification.rawValue)
        case .idle(let unused):
            return .idle(unused: StatusTime.seconds(unused))
        }
    }
}

extension ControlCommand {
    /// The command that asks for `command`: its wire name is what a `transition` event names.
    init(_ command: LifecycleCommand) {
        switch command {
        case .launch: self = .launch
        case .foreground: self = .foreground
        case .background: self = .background
        case .suspend: self = .suspend
        case .terminate: self = .terminate
        case .interruptBegin: self = .interruptBegin
        case .interruptEnd: self = .interruptEnd
        }
    }
}
