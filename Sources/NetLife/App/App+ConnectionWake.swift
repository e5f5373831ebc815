// Beyond iOS: listeners with `on-background = wake` (docs/configuration.md, docs/process-apps.md). They go on
// listening in the background and while the app is suspended; a connection arriving wakes the app into the
// background (AppLifecycle's `.wake(.connection)`), the app serves it, and it is suspended again once the
// connections from those listeners have been closed for `auto-suspend`. An idle service then costs nothing
// and answers the first connection without a cold start.
//
// The lifecycle decides; this shell follows its phase after every event (`syncConnectionWake`), for the two
// kinds of listener:
// - a built-in service's (AppListener): netlifed accepts for the suspended app and holds the connection; the
//   hold wakes the app, and `.serveWakeListeners` hands the held connections to the service. Their number is
//   known at every accept and close, and told while the app rests in the background.
// - a process app's (HandedListener): while the app rests suspended, netlifed's copies of the listeners are
//   watched for a waiting connection (it never accepts one: the program does, once thawed); while it rests in
//   the background, the connections the program holds on those ports, and those still waiting for it to
//   accept, are counted every `pollInterval` (ServedConnectionCensus) and each change is told.
// The time from the waking connection to the app serving it is recorded where every wake-up's is,
// `wakeServed(_:arrivedAt:)`, which reports it (`.wakeServed`: watch, the journal, the metrics).

import NetLifeEvent

/// The shell's part of `on-background = wake`: what it watches and counts, and what it last told.
final class ConnectionWake {
    /// How often a program's connections are counted while the app rests in the background: a count lists
    /// /proc/PID/fd of each of its processes (tens of microseconds), so auto-suspend is late by this much at
    /// most. A built-in service's connections are counted as they open and close.
    static let pollInterval = Duration.milliseconds(50)

    /// A process app's listeners with `on-background = wake`.
    let handed: [HandedListener]
    /// Whether some built-in listener has `on-background = wake`.
    let hasBuiltinListeners: Bool
    /// The handed listeners' ports: a connection they accepted has one of them as its local port.
    var ports: Set<UInt16> { Set(handed.compactMap(\.address.port)) }
    fileprivate var watching = false
    fileprivate var poll: EventTimer?
    /// The count last told to the lifecycle; nil when not counting (the lifecycle forgets it too), so that
    /// the first count after coming to rest in the background is always told.
    fileprivate var told: Int?
    /// When netlifed saw the connection that woke a process app waiting (for its wake latency).
    fileprivate var seenAt: MonotonicTime?

    /// Nil when no listener has `on-background = wake`.
    init?(sockets: AppSockets) {
        handed = sockets.handedListeners.filter(\.wakesApp)
        hasBuiltinListeners = !sockets.wakeListeners.isEmpty
        guard !handed.isEmpty || hasBuiltinListeners else { return nil }
    }

    fileprivate func stopWatching() {
        guard watching else { return }
        watching = false
        for listener in handed { listener.stopWatching() }
    }

    fileprivate func stopCounting() {
        poll?.cancel()
        poll = nil
        told = nil
    }
}

extension App {
    /// Watches a process app's wake listeners while the app rests suspended, and counts the connections on
    /// every wake listener while it rests in the background (with `auto-suspend` set); stops each otherwise.
    func syncConnectionWake() {
        guard let wake = connectionWake else { return }
        var resting = false
        if case .resting = lifecycle.phase { resting = true }
        let state = lifecycle.state
        let running = program?.isRunning == true

        if resting && running && state == .suspended && !wake.handed.isEmpty {
            if !wake.watching {
                wake.watching = true
                for listener in wake.handed {
                    let name = listener.configuration.name
                    listener.watchForConnection(on: loop) { [weak self] in self?.connectionArrived(on: name) }
                }
            }
        } else {
            wake.stopWatching()
        }

        guard resting && state == .background && configuration.autoSuspend != nil else { return wake.stopCounting() }
        if wake.handed.isEmpty {
            tellServedConnections(sockets.wakeConnections)
        } else if running && wake.poll == nil {
            // The first count at once (just after a wake-up: the program has yet to accept the connection, which
            // waits in the queue), the next ones every pollInterval.
            let delay = wake.told == nil ? Duration.zero : ConnectionWake.pollInterval
            wake.poll = loop.schedule(after: delay) { [weak self] in self?.countServedConnections() }
        }
    }

    /// A built-in wake listener held a connection for the suspended app: the app wakes for it.
    func connectionHeld(on listener: String) {
        send(.wake(.connection(listener: listener)))
    }

    /// The number of a built-in wake listener's connections changed.
    func wakeConnectionsChanged() {
        // While an action is performed the count is taken when the actions are done.
        guard !isPerforming else { return }
        syncConnectionWake()
    }

    /// `.serveWakeListeners`: a connection on `listener` woke the app, which serves it now. A built-in service
    /// takes the connections its wake listeners held (a process app's program, thawed, accepts them itself).
    func serveWakeListeners(woken listener: String) {
        let since = sockets.serveWakeListeners() ?? connectionWake?.seenAt
        connectionWake?.seenAt = nil
        if let since { wakeServed(.connection(listener: listener), arrivedAt: since) }
    }

    private func connectionArrived(on listener: String) {
        guard let wake = connectionWake else { return }
        // One wake-up: the other listeners' watches end with it.
        wake.stopWatching()
        wake.seenAt = loop.now
        send(.wake(.connection(listener: listener)))
    }

    private func countServedConnections() {
        guard let wake = connectionWake else { return }
        wake.poll = nil
        guard let program else { return }
        // A connection still in a listener's queue is one the program is about to serve (just thawed, or one
        // that came as it was about to be suspended).
        let waiting = wake.handed.filter(\.hasWaitingConnection).count
        tellServedConnections(program.servedConnections(ports: wake.ports) + waiting)
    }

    /// Tells the lifecycle `open` if it is not what it was last told; counts again (`syncConnectionWake`)
    /// otherwise.
    private func tellServedConnections(_ open: Int) {
        guard let wake = connectionWake else { return }
        if open != wake.told {
            wake.told = open
            send(.connectionsChanged(open: open))
        } else if !wake.handed.isEmpty {
            syncConnectionWake()
        }
    }
}
