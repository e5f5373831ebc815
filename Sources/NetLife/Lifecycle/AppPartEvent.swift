// How the parts of an app reach it. An app is made of parts with lives of their own: its listeners, its data
// sockets and its background tasks. Each talks to its app in two ways only: an event the app acts on
// (`send`), and a report of what happened, for watchers (`report`: `watch`, the journal, the metrics). The app
// handles every event in one place (`App.send(_:)`) and hands those its lifecycle machine decides to the
// machine. (A program's callbacks are wired by the app itself: a program is a public, pluggable type.)

/// What a part of an app tells its app.
enum AppPartEvent: Equatable, Sendable {
    /// For the app's lifecycle machine: a wake-up, the background tasks' count, a watchdog's timeout.
    case lifecycle(AppLifecycle.Event)
    /// A data socket waits for its peer's reply to the quiet command: the app is held awake meanwhile (a
    /// background task named `quiet SOCKET`); when the background time runs out the wait is given up.
    case quietWaitBegan(socket: String)
    /// The wait is over (the reply came, the connection closed, the wait was given up).
    case quietWaitEnded(socket: String)
    /// A built-in `on-background = wake` listener holds a connection accepted while the app is suspended: the
    /// app is to wake for it.
    case connectionHeld(listener: String)
    /// The number of open connections of a built-in wake listener changed.
    case wakeConnectionsChanged
}

/// The app, as its parts see it.
protocol AppPartOwner: AnyObject {
    /// The one way in: an event for the app.
    func send(_ event: AppPartEvent)
    /// The one report path: something a watcher may want to see.
    func report(_ event: AppEvent)
}
