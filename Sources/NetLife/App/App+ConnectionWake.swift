// Beyond iOS: a process app's listeners with `on-background = wake` (docs/process-apps.md). They go on listening
// in the background and while the app is suspended and frozen; a connection arriving wakes the app into the
// background (AppLifecycle's `.wake(.connection)`), its program accepts and serves it, and the app is
// suspended and frozen again once the connections from those listeners have been closed for `auto-suspend`.
// An idle service then costs no CPU and answers the first connection without a cold start.
//
// The lifecycle decides; this shell follows its phase after every event (`syncConnectionWake`): while the
// app rests suspended, netlifed's copies of the listeners are watched for a waiting connection (it never
// accepts one: the program does, once thawed); while it rests in the background, the program's connections
// on those ports are counted every `pollInterval` (ServedConnectionCensus) and each change is told.

import NetLifeEvent

/// The shell's part of `on-background = wake`: what it watches and counts, and what it last told.
final class ConnectionWake {
    /// How often the program's connections are counted while the app rests in the background: a count
    /// lists /proc/PID/fd of each of its processes (tens of microseconds), so auto-suspend is late by this
    /// much at most.
    static let pollInterval = Duration.milliseconds(50)

    /// The listeners with `on-background = wake`.
    let listeners: [HandedListener]
    /// Their ports: a connection they accepted has one of them as its local port.
    var ports: Set<UInt16> { Set(listeners.compactMap(\.address.port)) }
    fileprivate var watching = false
    fileprivate var poll: EventTimer?
    /// The count last told to the lifecycle (0 when not counting: the lifecycle forgets it too).
    fileprivate var told = 0

    /// Nil when no listener has `on-background = wake`.
    init?(listeners: [HandedListener]) {
        let waking = listeners.filter(\.wakesApp)
        guard !waking.isEmpty else { return nil }
        self.listeners = waking
    }

    fileprivate func stopWatching() {
        guard watching else { return }
        watching = false
        for listener in listeners { listener.stopWatching() }
    }

    fileprivate func stopCounting() {
        poll?.cancel()
        poll = nil
        told = 0
    }
}

extension App {
    /// Watches the `on-background = wake` listeners while the app rests suspended, and counts the program's
    /// connections on them while it rests in the background (with `auto-suspend` set); stops each otherwise.
    func syncConnectionWake() {
        guard let wake = connectionWake else { return }
        var resting = false
        if case .resting = lifecycle.phase { resting = true }
        let running = program?.isRunning == true

        if resting && running && state == .suspended {
            if !wake.watching {
                wake.watching = true
                for listener in wake.listeners {
                    let name = listener.configuration.name
                    listener.watchForConnection(on: loop) { [weak self] in self?.connectionArrived(on: name) }
                }
            }
        } else {
            wake.stopWatching()
        }

        if resting && running && state == .background && configuration.autoSuspend != nil {
            if wake.poll == nil {
                wake.poll = loop.schedule(after: ConnectionWake.pollInterval) { [weak self] in self?.countServedConnections() }
            }
        } else {
            wake.stopCounting()
        }
    }

    private func connectionArrived(on listener: String) {
        guard let wake = connectionWake else { return }
        let arrived = loop.now
        // One wake-up: the other listeners' watches end with it.
        wake.stopWatching()
        let reason = WakeReason.connection(listener: listener)
        send(.wake(reason))
        // Thawed: the program accepts the waiting connection.
        if state == .background { wakeServed(reason, arrivedAt: arrived) }
    }

    private func countServedConnections() {
        guard let wake = connectionWake else { return }
        wake.poll = nil
        guard let program else { return }
        let open = program.servedConnections(ports: wake.ports)
        if open != wake.told {
            wake.told = open
            send(.connectionsChanged(open: open))
        } else {
            syncConnectionWake()
        }
    }
}
