// Idle detection as the App performs it (`idle-background`): while the app is active, a timer looks at its
// use now and then (its listeners' accepts and moved bytes, its data sockets', its open tasks and running
// transfers; a process app's program's CPU time and the connections it holds on its listeners' ports) and IdleRule says when to look again, or that nothing has used the app for long enough: then the
// app goes to the background through the ordinary pipeline, as if `netlifectl background` had asked, and
// follows the iOS path from there (tasks, auto-suspend). Off while the app is not active.

import NetLifeEvent

extension App {
    /// Starts idle detection when the app has become active, stops it when it no longer is.
    func syncIdleDetection() {
        guard let after = configuration.idleBackground, retirement == nil else { return }
        guard state == .active, !isInTransition else {
            if idle != nil {
                idle = nil
                idleTimer?.cancel()
            }
            return
        }
        guard idle == nil else { return }
        // One look at the use (a process app's costs reads of /proc).
        let use = self.use
        var rule = IdleRule(after: after, keepsConnections: configuration.idleKeepsConnections, now: loop.now, use: use)
        follow(rule.restart(now: loop.now, use: use))
        idle = rule
    }

    /// The app's use now: connections accepted and moves of bytes so far, what is open now.
    public var use: IdleRule.Use {
        let sockets = self.sockets.usage
        var use = IdleRule.Use(accepted: sockets.accepted, moves: sockets.moves, openConnections: sockets.open,
                               openTasks: backgroundTasks.tasks.count, runningTransfers: runningTransfers?() ?? 0)
        if let program {
            use.programCPU = program.activity?.cpu ?? .zero
            let ports = Set(self.sockets.handedListeners.compactMap(\.address.port))
            if !ports.isEmpty { use.programConnections = program.servedConnections(ports: ports) }
        }
        return use
    }

    /// How long the active app has gone unused, while idle detection runs.
    var unusedFor: Duration? { idle.map { loop.now - $0.lastUse } }

    private func follow(_ decision: IdleRule.Decision) {
        switch decision {
        case .look(let instant):
            if idleTimer == nil { idleTimer = EventTimer(loop: loop) { [weak self] in self?.lookForUse() } }
            idleTimer?.arm(after: max(.zero, instant - loop.now))
        case .idle(let unused):
            idle = nil
            idleTimer?.cancel()
            logger.notice("unused for \(format(unused)) (idle-background = \((configuration.idleBackground ?? unused).configText)): moving to the background")
            report(.idle(unusedFor: unused))
            perform(.background) { _ in }
        }
    }

    private func lookForUse() {
        guard var rule = idle, state == .active else { return }
        let decision = rule.look(now: loop.now, use: use)
        idle = rule
        follow(decision)
    }
}
