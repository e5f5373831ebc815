// A process app's program (docs/process-apps.md) as the app's shell drives it: the lifecycle says when to start
// it and when to tell it a stage; this file binds its listeners, starts it, forwards its tasks and reports
// its exit back to the lifecycle.

import NetLifeEvent

extension App {
    /// Whether a process app's program (or its cgroup) is still there: the daemon waits for it at exit.
    public var hasProgramLeft: Bool { program.map { !$0.isGone } ?? false }

    func attachProgram() {
        program?.onExit = { [weak self] status in self?.send(.programExited(status, reason: nil)) }
        program?.onNotify = { [weak self] action in self?.programNotified(action) }
        program?.onProtocolChange = { [weak self] in self?.settingsChanged() }
        program?.tasks = ProgramTasks(
            begin: { [weak self] name in self?.beginProgramTask(name: name) ?? 0 },
            end: { [weak self] id in self?.endProgramTask(id) },
            isOpen: { [weak self] id in self?.programTaskIsOpen(id) ?? false },
            endAll: { [weak self] in self?.endProgramTasks() })
        settingsChanged()
    }

    /// A launch while an earlier run of the program still ends (a terminate's grace, a cgroup still
    /// emptying) waits for it, under the launch budget, then starts the program.
    func startProgramAfterEarlierRuns() {
        guard let program else { return send(.stepDone) }
        if !program.afterEarlierRunsEnd({ [weak self] in self?.startProgram() }) { startProgram() }
    }

    /// Binds the listeners and starts the program with them; a program that cannot start ends the launch as
    /// if it had exited (the app ends not running, `lastTermination` says why).
    private func startProgram() {
        guard let program, lifecycle.waitingFor == .startProgram else { return }
        let handed = sockets.handedListeners
        // The program gets all its listeners or does not start: without one, a socket-activated server
        // would fall back to its own configuration (lighttpd binds its server.port).
        for listener in handed where !listener.open() {
            return send(.programExited(.exited(1), reason: "cannot start: listener \(listener.configuration.name): \(listener.openError ?? "not open")"))
        }
        do {
            try program.start(listeners: handed.filter { !$0.isAdopted && $0.fd >= 0 }.map { ($0.configuration.name, $0.fd) })
        } catch {
            logger.error("cannot start the program \(configuration.program?.arguments.first ?? ""): \(error)")
            return send(.programExited(.exited(127), reason: "cannot start: \(error)"))
        }
        // In the background from the start: listening stops as soon as the program holds them.
        if state == .background { for listener in handed where !listener.wakesApp { listener.close() } }
        send(.stepDone)
    }

    /// How often the program's processes are looked at for the listeners it binds itself: each look reads
    /// their /proc/PID/fd and the TCP tables (a few milliseconds), and a program binds within milliseconds
    /// of its start, so a launch waits at most this much longer than it must.
    static let adoptionPollInterval = Duration.milliseconds(25)

    /// Looks for the listeners the program binds itself (`adopt = yes`) until every one is found and the set
    /// of sockets found is the same in two looks in a row (a program that binds many SO_REUSEPORT sockets,
    /// or a master and then its workers, is still binding when the first is found); the copies are then
    /// taken and the launch goes on. Or until the launch is over (its budget ran out: the watchdog names
    /// stage `adopt-listeners`, and the log which listeners were missing).
    func lookForAdoptedListeners() {
        adoptionTimer?.close()
        adoptionTimer = nil
        guard let program, lifecycle.waitingFor == .adoptListeners else { return }
        let adopted = sockets.handedListeners.filter(\.isAdopted)
        do {
            let found = try program.findListeners(at: adopted.map(\.address))
            let allFound = adopted.allSatisfy { !(found[$0.address]?.isEmpty ?? true) }
            let seen = found.mapValues { Set($0.map(\.inode)) }
            if allFound, seen == adoptionLastLook, take(found, into: adopted, from: program) {
                adoptionLastLook = nil
                // In the background from the start: listening stops as soon as netlifed holds them.
                if state == .background { for listener in adopted where !listener.wakesApp { listener.close() } }
                else { watchAdoptedListeners() }
                return send(.listenersAdopted)
            }
            adoptionLastLook = allFound ? seen : nil
        } catch {
            logger.warning("cannot look for the program's listeners: \(error)")
        }
        adoptionTimer = loop.schedule(after: Self.adoptionPollInterval) { [weak self] in self?.lookForAdoptedListeners() }
    }

    /// How often the sockets of adopted listeners are looked at while they listen: a program may close one
    /// and bind another at any time (nginx's reload does), and a copy netlifed holds of a socket the program
    /// let go would take connects that nobody accepts.
    static let adoptedListenersWatchInterval = Duration.seconds(1)

    /// Follows the program's sockets of every listening adopted listener now (`HandedListener.follow`), and
    /// again after `adoptedListenersWatchInterval` while they listen. Also called before the listeners are
    /// shut down (background) and after they listen again (foreground), so that a transition acts on every
    /// socket of the port.
    func followAdoptedListeners() {
        let adopted = sockets.handedListeners.filter { $0.isAdopted && $0.isListening }
        guard let program, !adopted.isEmpty, let found = try? program.findListeners(at: adopted.map(\.address)) else { return }
        for listener in adopted {
            let current = found[listener.address] ?? []
            _ = listener.follow(current) { held throws(SystemError) in try program.take(held) }
            let holders = Self.holders(of: current)
            if !holders.isEmpty { listener.holdersChanged(to: holders) }
        }
    }

    /// Looks at the adopted listeners' sockets every `adoptedListenersWatchInterval` while they listen.
    func watchAdoptedListeners() {
        adoptedWatchTimer?.close()
        adoptedWatchTimer = nil
        guard sockets.handedListeners.contains(where: { $0.isAdopted && $0.isListening && !$0.wakesApp }) else { return }
        adoptedWatchTimer = loop.schedule(after: Self.adoptedListenersWatchInterval) { [weak self] in
            guard let self else { return }
            followAdoptedListeners()
            watchAdoptedListeners()
        }
    }

    /// Every process that holds one of `sockets` (a port's sockets), each once, in the order found.
    private static func holders(of sockets: [HeldListener]) -> [Int32] {
        var holders: [Int32] = []
        for held in sockets {
            for pid in held.pids where !holders.contains(pid) { holders.append(pid) }
        }
        return holders
    }

    /// Why a launch ran out waiting for the program's own listeners, for the log: those not found.
    var unadoptedListenersText: String {
        sockets.handedListeners.filter { $0.isAdopted && !$0.isListening }
            .map { "listener \($0.configuration.name) (\($0.address))" }.joined(separator: ", ")
    }

    /// Takes a copy of every socket found for each adopted listener; false (nothing kept) if one fails.
    private func take(_ found: [SocketAddress: [HeldListener]], into adopted: [HandedListener], from program: any AppProgram) -> Bool {
        var taken: [(HandedListener, [(fd: CInt, inode: UInt64)], [Int32])] = []
        for listener in adopted {
            var copies: [(fd: CInt, inode: UInt64)] = []
            for held in found[listener.address] ?? [] {
                do {
                    copies.append((try program.take(held), held.inode))
                } catch {
                    logger.warning("cannot take the program's socket at \(listener.address) from pid \(held.pid): \(error)")
                    for (_, fds, _) in taken { for copy in fds { SocketCalls.close(copy.fd) } }
                    for copy in copies { SocketCalls.close(copy.fd) }
                    return false
                }
            }
            taken.append((listener, copies, Self.holders(of: found[listener.address] ?? [])))
        }
        for (listener, copies, owners) in taken { listener.adopt(copies, owners: owners) }
        return true
    }

    /// Tells the program the stage; the lifecycle waits for its answer when it speaks the protocol.
    func deliverToProgram(_ event: LifecycleEvent, budget: Duration) {
        sockets.startAccepting(on: loop)
        guard let program, program.isRunning else { return send(.stepDone) }
        // The hint concerns the listeners shut down in the background: with `on-background = wake` on all of
        // them, none is.
        let allWake = !sockets.handedListeners.isEmpty && sockets.handedListeners.allSatisfy(\.wakesApp)
        let hint: ListenerHint? = switch event {
        case .didEnterBackground where !allWake: .stopPolling
        case .willEnterForeground where !allWake: .resumePolling
        default: nil
        }
        if !program.deliver(event, budget: budget, listeners: hint, answered: { [weak self] in self?.send(.stepDone) }) {
            send(.stepDone)
        }
    }

    /// What the program said on its NOTIFY_SOCKET: READY=1 completes a start that waits for it; a watchdog
    /// that ran out kills the app as every watchdog does.
    private func programNotified(_ action: ProgramNotifyState.Action) {
        switch action {
        case .notify(let notification):
            notifyLog.log(logger, .info, "the program says \(notification.rawValue)")
            report(.programNotified(notification))
            if notification == .ready { send(.programReady) }
        case .watchdogKill(let timeout):
            if case .programWatchdog(triggered: true) = timeout.stage {
                logger.warning("the program sent WATCHDOG=trigger")
            } else {
                logger.warning("the program sent no WATCHDOG=1 for \(format(timeout.elapsed)) (watchdog = \(format(timeout.budget)))")
            }
            send(.watchdog(timeout))
        }
    }

    /// A task the program began over the protocol: its expiration is told to the program, which must end it.
    private func beginProgramTask(name: String?) -> BackgroundTaskIdentifier {
        var id: BackgroundTaskIdentifier = 0
        let begun = beginTask(name: name, origin: .program) { [weak self] in
            guard let self else { return }
            program?.taskExpiring(id, budget: configuration.budgets.expirationGrace)
        }
        id = (try? begun.get()) ?? BackgroundTaskRegistry.invalid
        return id
    }

    private func programTaskIsOpen(_ id: BackgroundTaskIdentifier) -> Bool {
        backgroundTasks.tasks.contains { $0.id == id && $0.origin == .program }
    }

    private func endProgramTask(_ id: BackgroundTaskIdentifier) {
        if programTaskIsOpen(id) { endBackgroundTask(id) }
    }

    /// The program's channel is over: nobody is left to end its tasks.
    private func endProgramTasks() {
        for task in backgroundTasks.tasks where task.origin == .program { endBackgroundTask(task.id) }
    }
}
