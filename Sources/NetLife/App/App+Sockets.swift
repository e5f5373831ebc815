// The app's sockets as the system treats them while it is suspended (docs/data-sockets.md): a wake-up for VoIP data
// or a keep-alive, socket reclaim, and memory pressure, which takes the whole app; and the data sockets a
// Swift app opens itself.

import NetLifeEvent

/// Why `reclaim` changed nothing.
public struct ReclaimRefusal: Error, Equatable, Sendable {
    public var message: String
}

extension App {
    /// Runs the suspended app in the background for a moment, as iOS wakes a VoIP app: state background
    /// (no did-become-active), timers and reads resume, `on-voip-data` runs for VoIP data; after the
    /// handler (at the latest after `keepalive-budget`) the app is suspended again, not killed.
    func wake(for reason: WakeReason) {
        let arrived = loop.now
        let wasSuspended = state == .suspended
        send(.wake(reason))
        // Its sockets read again and its timers run: the data that woke it is handled right after this.
        if wasSuspended, state != .suspended { wakeServed(reason, arrivedAt: arrived) }
    }

    /// The one place a wake-up's latency is measured: the woken app serves what woke it, which arrived at
    /// `arrivedAt` (the loop's clock): its program is thawed, its sockets are read, its handler runs. Called
    /// by each path that wakes a suspended app once the app can serve; followers get `.wakeServed`.
    public func wakeServed(_ reason: WakeReason, arrivedAt: MonotonicTime) {
        report(.wakeServed(reason, latency: max(.zero, loop.now - arrivedAt)))
    }

    /// A suspended app woken for VoIP data or a keep-alive runs in the background for a moment, as iOS wakes
    /// a VoIP app: state background (no did-become-active), timers and reads resume, `on-voip-data` runs for
    /// VoIP data; after the handler (at the latest after `keepalive-budget`) the app is suspended again, not
    /// killed.
    func startWakeHandler(_ reason: WakeReason) {
        if case .voipData = reason, let command = configuration.voipDataHook {
            // Only this run's exit ends this wake-up: a handler left running by an earlier one ends nothing.
            var run: HookRun?
            run = hooks.run(command, event: "voip-data") { [weak self] _ in
                guard let self, let run, wakeHook == run else { return }
                wakeHook = nil
                send(.wakeHandlerDone)
            }
            wakeHook = run
        }
        if wakeHook == nil {
            // The protocol handler runs right after this (same loop turn); then the wake-up is over.
            loop.schedule(after: .zero) { [weak self] in self?.send(.wakeHandlerDone) }
        }
    }

    /// Socket resource reclaim (`netlifectl reclaim`, `lock`, `reclaim-on-suspend`): every non-VoIP socket
    /// of the suspended app becomes defunct (the peer sees RST; the app's first use of it fails).
    /// Refused, changing nothing, unless the app is suspended.
    public func reclaim() -> Result<(sockets: [String], connections: Int), ReclaimRefusal> {
        guard state == .suspended else {
            return .failure(ReclaimRefusal(message: "app \(name) is \(state), not suspended: only a suspended app's sockets are reclaimed"))
        }
        var reclaimed = sockets.reclaim()
        if let program { reclaimed.connections += program.reclaimSockets() }
        logger.info("reclaimed: \(reclaimed.sockets.count) data socket(s) defunct, \(reclaimed.connections) accepted connection(s) reset")
        report(.reclaimed(sockets: reclaimed.sockets, connections: reclaimed.connections))
        return .success(reclaimed)
    }

    /// The memory the app holds: its sockets' buffers and kernel queues, and a process app's program's
    /// memory. Memory pressure ends the largest suspended app first.
    public var heldBytes: Int { sockets.heldBytes + (program?.status.memoryBytes ?? 0) }

    /// Whether the app has a VoIP socket: memory pressure ends it after the other apps, and relaunches it
    /// into the background.
    public var hasVoIPSocket: Bool { sockets.dataSockets.contains { $0.configuration.voip } }

    /// Whether memory pressure can end the app now: it is suspended, and no command is under way.
    public var canTerminateForMemoryPressure: Bool { lifecycle.canTerminateForMemoryPressure }

    /// Memory pressure (jetsam): a suspended app is terminated without any callback. `pressure` is what the
    /// kernel's pressure file said when its trigger asked for it (nil for `netlifectl memory-pressure`); the
    /// log, `status` and `watch` report it. Returns false, changing nothing, when the app is not suspended.
    @discardableResult
    public func terminateForMemoryPressure(pressure: PressureStall? = nil) -> Bool {
        guard canTerminateForMemoryPressure else { return false }
        logger.notice("terminated for memory pressure (held \(heldBytes) bytes" + (pressure.map { "; \($0.file): \($0.text)" } ?? "") + ")")
        send(.memoryPressure(pressure))
        return true
    }

    /// Opens a data socket from Swift, as a `[socket]` section does (iOS's CFStream with the VoIP
    /// service type): it connects now if the app runs, and follows its lifecycle from then on.
    @discardableResult
    public func openDataSocket(_ configuration: DataSocketConfiguration, handler: any DataSocketHandler) -> DataSocket {
        loop.assertInLoop()
        let socket = DataSocket(configuration: configuration, handler: handler, loop: loop, logger: logger)
        sockets.add(socket, app: self)
        return socket
    }
}

extension App: AppPartOwner {
    /// The one way in from the app's parts (AppPartEvent).
    func send(_ event: AppPartEvent) {
        switch event {
        case .lifecycle(.wake(let reason)): wake(for: reason)
        case .lifecycle(let event): send(event)
        case .quietWaitBegan(let socket): sockets.quietWait(of: socket, began: true, app: self)
        case .quietWaitEnded(let socket): sockets.quietWait(of: socket, began: false, app: self)
        case .connectionHeld(let listener): connectionHeld(on: listener)
        case .wakeConnectionsChanged: wakeConnectionsChanged()
        }
    }
}
