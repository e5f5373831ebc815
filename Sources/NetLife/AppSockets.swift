// The sockets of one app: its listeners and the connections accepted on them (and, as the spec grows, its
// data sockets). The app's pipeline asks for the built-in policy steps that concern sockets; suspension
// pauses every socket's reads, and a teardown closes them all. One place, so that each policy is applied to
// every kind of socket the same way.

import NetLifeEvent

/// The listeners (and accepted connections) of one app.
final class AppSockets {
    private let listeners: [AppListener]
    /// Told when a listener opens, closes or fails to open.
    var onEvent: ((AppEvent) -> Void)? {
        didSet { for listener in listeners { listener.onEvent = onEvent } }
    }

    init(listeners: [AppListener]) {
        self.listeners = listeners
    }

    /// Tells every service which app it belongs to.
    func attachServices(to app: App) {
        for listener in listeners { listener.service.didAttach(to: app) }
    }

    /// Performs a built-in policy step that concerns sockets.
    func perform(_ step: PolicyStep) {
        switch step {
        case .openListeners:
            for listener in listeners { listener.open() }
        case .closeListeners:
            for listener in listeners { listener.close() }
        case .closeConnections:
            for listener in listeners { listener.applyConnectionPolicy() }
        case .resumeApp:
            setPaused(false)
        }
    }

    /// Stops (or restarts) reading every socket: while the app is suspended the kernel buffers what peers send.
    func setPaused(_ paused: Bool) {
        for listener in listeners { listener.setConnectionsPaused(paused) }
    }

    /// Closes every listener and every connection (`mode` says how).
    func closeAll(_ mode: Connection.CloseMode) {
        for listener in listeners {
            listener.close()
            listener.closeConnections(mode)
        }
    }

    /// What `status` shows of the listeners.
    var listenerStatus: [ListenerStatus] { listeners.map(\.status) }
}
