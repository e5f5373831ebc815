// One app's whole lifecycle as a pure value, in the shape of swift-service-lifecycle's state machines: the
// phase (with what each phase needs) and the command queue are one value; events change it and queue the
// actions that `App`, a thin shell, performs in order. No clock, timer, socket or process is touched here:
// time comes in as `now`, and the shell arms one timer for `nextDeadline`.
//
// The shell's loop is
//
//     lifecycle.handle(event, now: .now())
//     while let action = lifecycle.nextAction(now: .now()) { perform(action) }
//
// Performing an action may send another event (a delegate ends a task, a program fails to start); the event
// changes the value at once and the same loop goes on with what it queued, so an action computed before it
// can never act on a lifecycle that has moved on. An action that may take time (a hook, a program's answer,
// a program's start) makes the machine wait: it queues nothing more until the shell sends `.stepDone`.
//
// The rules it applies are LifecycleRules (which transition a command runs), TransitionPipeline (the
// stages, their order and the watchdog) and RestartPolicy (a process app's restarts); this value decides when
// each applies, and holds what was kept in separate flags before: suspend-pending, the auto-suspend deadline,
// the wake-up and its deadline, the restart's, and retirement. Every way an app stops goes through
// `stop(_:record:)`, one teardown path.

import NetLifeEvent

/// How a command sent to an app ended.
public enum TransitionOutcome: Equatable, Sendable {
    /// The app was already in the asked-for state; nothing ran.
    case already(AppState)
    /// The command is impossible in the app's state; nothing changed.
    case refused(String)
    /// The transition ran: the app is now in this state; the stages and their durations.
    case completed(AppState, [StageReport])
    /// The watchdog killed the app during the transition.
    case killed(WatchdogTimeout)
    /// `suspend` of an app that is not suspend-eligible yet: it suspends once it is; the reason says what
    /// keeps it in background.
    case suspendPending(reason: String)
    /// The app left the daemon (a reload removed or replaced it) before the command could run.
    case cancelled(String)
}

/// Identifies the completion of a command in the shell (`App` keeps the closures; this value keeps numbers).
public typealias CommandTicket = Int

public struct AppLifecycle: Sendable {
    /// What the machine reads of the app's configuration.
    public struct Settings: Equatable, Sendable {
        public var traits: LifecycleTraits
        public var budgets: Budgets
        /// `auto-suspend`: how long a background app that may suspend waits before it does (nil: never).
        public var autoSuspend: Duration?
        /// `reclaim-on-suspend`.
        public var reclaimOnSuspend: Bool
        /// `launch = background`: a restarted program comes back in the background.
        public var relaunchInBackground: Bool
        /// A program that does not speak the lifecycle protocol cannot be told to stop polling its shut-down
        /// listeners: it is frozen as soon as it may be (not when every listener stays open in the background,
        /// `on-background = wake`: nothing of it is shut down).
        public var silentProgram: Bool
        /// `background-mode = continuous` keeps a background app from suspending.
        public var continuousMode: Bool
        /// `ready = notify`: a started program is not launched until it sends READY=1 (within the launch budget).
        public var awaitsReady: Bool
        /// `adopt = yes` on a listener: a started (and, with `ready = notify`, ready) program is not launched
        /// until netlifed has found the listeners it binds itself (within the launch budget).
        public var adoptsListeners: Bool

        public init(traits: LifecycleTraits = LifecycleTraits(), budgets: Budgets = Budgets(), autoSuspend: Duration? = nil,
                    reclaimOnSuspend: Bool = false, relaunchInBackground: Bool = false, silentProgram: Bool = false,
                    continuousMode: Bool = false, awaitsReady: Bool = false, adoptsListeners: Bool = false) {
            self.adoptsListeners = adoptsListeners
            self.traits = traits
            self.budgets = budgets
            self.autoSuspend = autoSuspend
            self.reclaimOnSuspend = reclaimOnSuspend
            self.relaunchInBackground = relaunchInBackground
            self.silentProgram = silentProgram
            self.continuousMode = continuousMode
            self.awaitsReady = awaitsReady
        }
    }

    /// Where the app is in its life, with what that phase needs.
    public enum Phase: Equatable, Sendable {
        /// Not running; a process app's program may be due for a restart at `restartAt`.
        case notRunning(restartAt: MonotonicTime?)
        /// At rest in `state` (inactive, active, background or suspended): `suspendPending` when `suspend` was
        /// asked before the app could; `autoSuspendAt` when an eligible background app suspends by itself.
        case resting(suspendPending: Bool, autoSuspendAt: MonotonicTime?)
        /// A transition's pipeline runs.
        case transition(Transition)
        /// A suspended app runs for a moment in the background (VoIP data, a keep-alive), until its handler
        /// is done or `deadline`.
        case waking(WakeReason, deadline: MonotonicTime)
        /// The app left the daemon; every command is answered `.cancelled` with the reason.
        case retired(String)

        /// The phase's name, for tests and logs.
        public var name: String {
            switch self {
            case .notRunning: return "not-running"
            case .resting: return "resting"
            case .transition: return "transition"
            case .waking: return "waking"
            case .retired: return "retired"
            }
        }
    }

    /// A running transition.
    public struct Transition: Equatable, Sendable {
        public var pipeline: TransitionPipeline
        public var cause: TerminationCause
        public var ticket: CommandTicket?
        /// The step the pipeline waits for, if it waits.
        public var waitingFor: Wait?
    }

    /// A step that may take time; the machine waits for `.stepDone` (for `.programReady`, `.programReady`).
    public enum Wait: Equatable, Sendable {
        case hook, program, startProgram
        /// The program started; with `ready = notify` the launch waits for its READY=1.
        case programReady
        /// The program started (and is ready); the launch waits for the listeners it binds itself.
        case adoptListeners
    }

    /// What happens to the app.
    public enum Event: Equatable, Sendable {
        /// A lifecycle command; `ticket` names its completion (nil: nobody waits, as for a restart).
        case command(LifecycleCommand, cause: TerminationCause, ticket: CommandTicket?)
        /// The step the machine waits for has completed (for `.startProgram`: the program runs).
        case stepDone
        /// The program sent READY=1 (it completes the start of a program with `ready = notify`).
        case programReady
        /// Every `adopt = yes` listener was found among the program's sockets.
        case listenersAdopted
        /// The shell's timer fired: a deadline may have passed.
        case clock
        /// The background tasks changed: how many are open, and whether an expiration handler runs.
        case tasksChanged(open: Int, expirationRunning: Bool)
        /// How many connections of its `on-background = wake` listeners the app serves now (a built-in service's
        /// open connections, or those a program holds or has yet to accept), as the shell counts them while the
        /// app rests in the background: auto-suspend waits until there are none. Ignored in any other state.
        case connectionsChanged(open: Int)
        /// The settings changed (a reload in place, `netlifectl mode`, a delegate or program attached).
        case settingsChanged(Settings)
        /// A suspended app is woken.
        case wake(WakeReason)
        /// The wake-up's handler is done.
        case wakeHandlerDone
        /// A process app's program ended on its own or could not start.
        case programExited(ChildExitStatus, reason: String?)
        /// The watchdog of background tasks or expiration handlers ran out.
        case watchdog(WatchdogTimeout)
        /// Memory pressure ends the app if it is suspended (with the pressure file's figures when the
        /// kernel's trigger asked).
        case memoryPressure(PressureStall?)
        /// The app leaves the daemon.
        case retire(String)
    }

    /// What the shell does, in order.
    public enum Action: Equatable, Sendable {
        /// A transition begins (the log says its stages).
        case transitionStarted(TransitionPlan)
        /// Enter the state: background time starts or stops, `watch` is told.
        case enter(from: AppState, to: AppState)
        /// A built-in step of the pipeline. `launchingInBackground`: did-finish-launching of a background launch.
        case perform(PolicyStep, launchingInBackground: Bool)
        /// Tell the Swift delegate.
        case callDelegate(LifecycleEvent)
        /// Run the stage's hook (the machine waits).
        case runHook(LifecycleEvent)
        /// Tell the program the stage, with the budget left (the machine waits).
        case deliverToProgram(LifecycleEvent, budget: Duration)
        /// Bind the listeners and start the program, once an earlier run has ended (the machine waits; the
        /// shell sends `.stepDone`, or `.programExited` if it cannot start).
        case startProgram
        /// Look for the listeners the program binds itself (`adopt = yes`) while the machine waits for them
        /// (`waitingFor == .adoptListeners`), and send `.listenersAdopted` once all are found.
        case adoptListeners
        /// A transition ended in `state` (its opened listeners start accepting, closed ones are made ready).
        case transitionEnded(AppState)
        /// Answer a command.
        case complete(CommandTicket, TransitionOutcome)
        /// Tell the app's followers.
        case report(AppEvent)
        /// Forget the background tasks (a launch starts with none).
        case removeTasks
        /// Stop the app's code: kill its hooks, defer its timers, pause its sockets, freeze its program.
        case suspend
        /// Reclaim the suspended app's sockets (`reclaim-on-suspend`).
        case reclaim
        /// Let the suspended app's code run again for a wake-up (thaw, timers, reads).
        case resumeForWake
        /// A connection on `listener` woke the app: its `on-background = wake` listeners serve again (a built-in
        /// service serves the connections accepted while the app was suspended, and reads its connections again).
        case serveWakeListeners(listener: String)
        /// Run the wake-up's handler (`on-voip-data` for VoIP data), then send `.wakeHandlerDone`.
        case startWakeHandler(WakeReason)
        /// The wake-up is over before its handler: forget it (`killHandlers`: its budget ran out).
        case endWake(killHandlers: Bool)
        /// The one teardown: kill the hooks, stop the program (`.afterFlush`: with its grace), close the
        /// sockets, drop the tasks and timers.
        case tearDown(Connection.CloseMode)
        /// A note for the log.
        case log(Logger.Level, String)
    }

    public let name: String
    public private(set) var settings: Settings
    public private(set) var phase: Phase = .notRunning(restartAt: nil)
    /// The state the app is in (it changes stage by stage during a transition).
    public private(set) var state: AppState = .notRunning
    public private(set) var lastTermination: TerminationRecord?
    public private(set) var lastStages: [StageReport] = []
    public private(set) var restartPolicy: RestartPolicy
    private var openTasks = 0
    private var expirationRunning = false
    /// Connections of `on-background = wake` listeners the app serves (`.connectionsChanged`); the connection
    /// that woke the app counts until the shell has counted.
    public private(set) var servedConnections = 0
    /// The app runs in the background because a connection woke it: the silent-program rule (frozen at once)
    /// and the end of a VoIP wake-up's handler (suspended at once) wait for auto-suspend, so that the app
    /// serves what woke it.
    public private(set) var wokenByConnection = false

    private struct Queued: Equatable, Sendable {
        var command: LifecycleCommand
        var cause: TerminationCause
        var ticket: CommandTicket?
    }
    private var queue: [Queued] = []
    private var outbox: [Action] = []
    private var outboxStart = 0

    public init(name: String, settings: Settings, restart: RestartMode = .no) {
        self.name = name
        self.settings = settings
        self.restartPolicy = RestartPolicy(mode: restart)
    }

    // MARK: Queries

    /// Whether `suspend` was asked while the app could not suspend yet (a wake-up also sets it).
    public var suspendPending: Bool {
        if case .resting(let pending, _) = phase { return pending }
        if case .waking = phase { return true }
        return false
    }

    public var isInTransition: Bool { if case .transition = phase { return true } else { return false } }

    public var retirement: String? { if case .retired(let reason) = phase { return reason } else { return nil } }

    public var commandsQueued: Int { queue.count }

    /// The step a running transition waits for, if it waits.
    public var waitingFor: Wait? { if case .transition(let transition) = phase { return transition.waitingFor } else { return nil } }

    /// Why the app may not suspend now, or nil when it may.
    public var suspendBlocker: String? {
        var waking = false
        if case .waking = phase { waking = true }
        return LifecycleRules.suspendBlocker(state: state, transitionRunning: isInTransition, openTasks: openTasks,
                                             expirationRunning: expirationRunning, continuousMode: settings.continuousMode,
                                             wakeRunning: waking)
    }

    /// Whether memory pressure can end the app now: it rests suspended.
    public var canTerminateForMemoryPressure: Bool {
        if case .resting = phase { return state == .suspended }
        return false
    }

    /// The instant the shell's timer must fire at, if any.
    public var nextDeadline: MonotonicTime? {
        switch phase {
        case .notRunning(let restartAt): return restartAt
        case .resting(_, let autoSuspendAt): return autoSuspendAt
        case .transition(let transition): return transition.pipeline.deadline
        case .waking(_, let deadline): return deadline
        case .retired: return nil
        }
    }

    // MARK: Events

    /// Applies `event`; the actions it causes come from `nextAction(now:)`.
    public mutating func handle(_ event: Event, now: MonotonicTime) {
        switch event {
        case .command(let command, let cause, let ticket):
            if let reason = retirement {
                if let ticket { send(.complete(ticket, .cancelled(reason))) }
                return
            }
            queue.append(Queued(command: command, cause: cause, ticket: ticket))
        case .stepDone:
            guard case .transition(var transition) = phase, let wait = transition.waitingFor,
                  wait != .programReady, wait != .adoptListeners else { return }
            if wait == .startProgram {
                restartPolicy.launched(now: now)
                if settings.awaitsReady {
                    transition.waitingFor = .programReady
                    phase = .transition(transition)
                    send(.log(.info, "waiting for the program's READY=1 (ready = notify)"))
                    return
                }
                if settings.adoptsListeners { return awaitAdoption(&transition) }
            }
            transition.waitingFor = nil
            phase = .transition(transition)
        case .programReady:
            guard case .transition(var transition) = phase, transition.waitingFor == .programReady else { return }
            if settings.adoptsListeners { return awaitAdoption(&transition) }
            transition.waitingFor = nil
            phase = .transition(transition)
        case .listenersAdopted:
            guard case .transition(var transition) = phase, transition.waitingFor == .adoptListeners else { return }
            transition.waitingFor = nil
            phase = .transition(transition)
        case .clock:
            deadlinesPassed(now: now)
        case .tasksChanged(let open, let running):
            openTasks = open
            expirationRunning = running
            evaluateSuspension(now: now, lastTaskEnded: open == 0)
        case .connectionsChanged(let open):
            // The count is the shell's while the app rests (or runs a wake-up) in the background; in any other
            // state it means nothing, and a stale one must not hold a later wake-up.
            guard state == .background, !isInTransition, retirement == nil, open != servedConnections else { return }
            servedConnections = open
            if open > 0, case .resting(let pending, .some) = phase { phase = .resting(suspendPending: pending, autoSuspendAt: nil) }
            evaluateSuspension(now: now)
        case .settingsChanged(let newSettings):
            settings = newSettings
            evaluateSuspension(now: now)
        case .wake(let reason):
            wake(reason, now: now)
        case .wakeHandlerDone:
            guard case .waking = phase else { return }
            // A connection that came during the wake-up is served until auto-suspend; otherwise the app is
            // suspended again at once.
            phase = .resting(suspendPending: !wokenByConnection, autoSuspendAt: nil)
            evaluateSuspension(now: now)
        case .programExited(let status, let reason):
            programExited(status, reason: reason, now: now)
        case .watchdog(let timeout):
            guard state.isRunning, retirement == nil else { return }
            kill(timeout)
        case .memoryPressure(let pressure):
            guard canTerminateForMemoryPressure else { return }
            stop(.now, record: TerminationRecord(reason: .memoryPressure(pressure)))
        case .retire(let reason):
            retire(reason)
        }
    }

    /// The next thing the shell must do, or nil when nothing is due until the next event.
    public mutating func nextAction(now: MonotonicTime) -> Action? {
        while true {
            if outboxStart < outbox.count {
                let action = outbox[outboxStart]
                outboxStart += 1
                if outboxStart == outbox.count { outbox.removeAll(keepingCapacity: true); outboxStart = 0 }
                return action
            }
            switch phase {
            case .transition(let transition):
                guard transition.waitingFor == nil else { return nil }
                advance(transition, now: now)
            case .notRunning, .resting, .waking:
                guard !queue.isEmpty else { return nil }
                start(queue.removeFirst(), now: now)
            case .retired:
                return nil
            }
        }
    }

    private mutating func send(_ action: Action) { outbox.append(action) }

    // MARK: Commands and the pipeline

    private mutating func start(_ queued: Queued, now: MonotonicTime) {
        let complete = { (outcome: TransitionOutcome) -> Action? in queued.ticket.map { .complete($0, outcome) } }
        // A terminate cancels a restart that is due.
        if case .terminate = queued.command, case .notRunning = phase { phase = .notRunning(restartAt: nil) }
        switch LifecycleRules.decide(queued.command, in: state, traits: settings.traits, suspendEligible: suspendBlocker == nil) {
        case .already(let state):
            complete(.already(state)).map { send($0) }
        case .refused(let reason):
            complete(.refused("app \(name) \(reason)")).map { send($0) }
        case .suspendNow:
            suspend(now: now)
            complete(.completed(.suspended, [])).map { send($0) }
        case .suspendWhenEligible:
            let reason = suspendBlocker ?? "it is not suspend-eligible yet"
            phase = .resting(suspendPending: true, autoSuspendAt: nil)
            send(.log(.info, "suspend pending: \(reason)"))
            complete(.suspendPending(reason: reason)).map { send($0) }
        case .run(let plan):
            if case .waking = phase { send(.endWake(killHandlers: false)) }
            leaveBackgroundRest()
            if case .launch = plan.command {
                send(.removeTasks)
                // `netlifectl launch` starts the restart rules over, as `systemctl reset-failed` does.
                if queued.ticket != nil { restartPolicy.reset() }
            }
            let pipeline = TransitionPipeline(plan: plan, budget: settings.budgets.duration(of: plan.budget), now: now)
            phase = .transition(Transition(pipeline: pipeline, cause: queued.cause, ticket: queued.ticket,
                                           waitingFor: nil))
            send(.transitionStarted(plan))
        }
    }

    /// Takes the pipeline's next action and turns it into the shell's.
    private mutating func advance(_ transition: Transition, now: MonotonicTime) {
        var transition = transition
        let action = transition.pipeline.next(now: now)
        let stage = transition.pipeline.currentStage
        switch action {
        case .enterState(let newState, _):
            phase = .transition(transition)
            enter(newState)
        case .perform(.policy(.startProgram), _):
            transition.waitingFor = .startProgram
            phase = .transition(transition)
            send(.startProgram)
        case .perform(.policy(let step), _):
            phase = .transition(transition)
            send(.perform(step, launchingInBackground: stage == .didFinishLaunching && state == .background))
        case .perform(.program, let event):
            transition.waitingFor = .program
            phase = .transition(transition)
            send(.deliverToProgram(event, budget: max(.zero, transition.pipeline.deadline - now)))
        case .perform(.delegate, let event):
            phase = .transition(transition)
            send(.callDelegate(event))
        case .perform(.hook, let event):
            transition.waitingFor = .hook
            phase = .transition(transition)
            send(.runHook(event))
        case .finished(let finalState, let stages):
            finish(transition, finalState: finalState, stages: stages, now: now)
        case .kill(let timeout):
            phase = .transition(transition)
            kill(timeout)
        }
    }

    private mutating func finish(_ transition: Transition, finalState: AppState, stages: [StageReport], now: MonotonicTime) {
        lastStages = stages
        let plan = transition.pipeline.plan
        if finalState == .notRunning {
            let reason: TerminationReason = switch plan.command {
            case .terminate: plan.stages.isEmpty ? .terminatedWhileSuspended(transition.cause) : .terminated(transition.cause)
            case .background, .launch(background: true): .exitedOnSuspend
            case .launch, .foreground, .suspend, .interruptBegin, .interruptEnd: .terminated(transition.cause)
            }
            // iOS's path for an app that exits on suspend: ... Background -> Suspended -> Not Running.
            stop(.afterFlush, record: TerminationRecord(reason: reason), through: reason == .exitedOnSuspend ? .suspended : nil,
                 outcome: nil)
        } else {
            phase = .resting(suspendPending: false, autoSuspendAt: nil)
        }
        send(.report(.transitionFinished(command: plan.command, state: state, stages: stages)))
        if let ticket = transition.ticket { send(.complete(ticket, .completed(state, stages))) }
        send(.transitionEnded(state))
        evaluateSuspension(now: now)
    }

    private mutating func enter(_ newState: AppState) {
        guard newState != state else { return }
        // iOS: will-enter-foreground runs while the app is still in the background; it is inactive for a
        // moment, then active for did-become-active.
        if state == .background, newState == .active { enter(.inactive) }
        send(.enter(from: state, to: newState))
        state = newState
    }

    // MARK: Stopping

    /// The one way an app stops: teardown, the record, not-running, and the command that waited is answered
    /// with `outcome` (by default, completed in not-running; nil: its caller answers it).
    private mutating func stop(_ mode: Connection.CloseMode, record: TerminationRecord, through: AppState? = nil,
                               outcome: TransitionOutcome? = .completed(.notRunning, [])) {
        let ticket: CommandTicket? = if case .transition(let transition) = phase { transition.ticket } else { nil }
        if mode == .now { lastStages = [] }
        send(.tearDown(mode))
        leaveBackgroundRest()
        lastTermination = record
        if let through { enter(through) }
        enter(.notRunning)
        send(.report(.stopped(record)))
        if let ticket, let outcome { send(.complete(ticket, outcome)) }
        phase = .notRunning(restartAt: nil)
    }

    /// The launch waits for the program's own listeners: the shell looks for them (`.adoptListeners`) and
    /// sends `.listenersAdopted`.
    private mutating func awaitAdoption(_ transition: inout Transition) {
        transition.waitingFor = .adoptListeners
        phase = .transition(transition)
        send(.adoptListeners)
    }

    /// The watchdog kills the app: no callback runs, the command under way is answered `.killed`.
    private mutating func kill(_ timeout: WatchdogTimeout) {
        send(.report(.watchdogKilled(timeout)))
        stop(.now, record: TerminationRecord(reason: .watchdog(timeout)), outcome: .killed(timeout))
    }

    private mutating func programExited(_ status: ChildExitStatus, reason: String?, now: MonotonicTime) {
        guard state != .notRunning, retirement == nil else { return }
        let beforeReady = waitingFor == .programReady ? " before READY=1" : ""
        let what = (reason ?? status.description) + beforeReady
        send(.log(.warning, "the program ended: \(what)"))
        let decision = restartPolicy.exited(status, expected: false, now: now)
        var text = what
        if case .giveUp(let why) = decision { text += "; \(why)" }
        stop(.now, record: TerminationRecord(reason: .programExited(text)))
        if case .relaunch(let delay) = decision {
            send(.log(.notice, "restarting the program in \(format(delay)) (restart = \(restartPolicy.mode.rawValue))"))
            phase = .notRunning(restartAt: now + delay)
        }
    }

    private mutating func retire(_ reason: String) {
        guard retirement == nil else { return }
        let ticket: CommandTicket? = if case .transition(let transition) = phase { transition.ticket } else { nil }
        send(.tearDown(.now))
        if state != .notRunning { enter(.notRunning) }
        if let ticket { send(.complete(ticket, .cancelled(reason))) }
        for queued in queue { if let ticket = queued.ticket { send(.complete(ticket, .cancelled(reason))) } }
        queue.removeAll()
        phase = .retired(reason)
    }

    // MARK: Suspension and wake-ups

    /// Suspends the app if it may and was asked to (or its last task just ended, or it runs a silent
    /// program), or arms the auto-suspend deadline.
    private mutating func evaluateSuspension(now: MonotonicTime, lastTaskEnded: Bool = false) {
        guard case .resting(let pending, let autoSuspendAt) = phase else { return }
        guard suspendBlocker == nil else {
            phase = .resting(suspendPending: pending, autoSuspendAt: nil)
            return
        }
        // An app serving connections of `on-background = wake` listeners (or woken by one) is suspended by
        // auto-suspend, once they are closed: neither a silent program nor a last task's end freezes it earlier.
        let serving = wokenByConnection || servedConnections > 0
        if pending || (!serving && (settings.silentProgram || lastTaskEnded)) {
            suspend(now: now)
        } else if let delay = settings.autoSuspend, autoSuspendAt == nil, servedConnections == 0 {
            phase = .resting(suspendPending: false, autoSuspendAt: now + delay)
        }
    }

    private mutating func suspend(now: MonotonicTime) {
        leaveBackgroundRest()
        send(.suspend)
        enter(.suspended)
        phase = .resting(suspendPending: false, autoSuspendAt: nil)
        if settings.reclaimOnSuspend { send(.reclaim) }
    }

    /// The app stops resting in the background: the connection count (the shell stops counting) and the
    /// connection wake-up are over.
    private mutating func leaveBackgroundRest() {
        servedConnections = 0
        wokenByConnection = false
    }

    private mutating func wake(_ reason: WakeReason, now: MonotonicTime) {
        if case .connection(let listener) = reason, state == .background {
            return connectionWhileRunning(on: listener, reason, now: now)
        }
        guard state == .suspended, case .resting = phase else { return }
        send(.log(.info, "woken: \(reason)"))
        send(.resumeForWake)
        enter(.background)
        send(.report(.woken(reason)))
        if case .connection(let listener) = reason {
            // Beyond iOS (`on-background = wake`): the app (its service, or its program) serves the connection
            // in the background, and is suspended again once its connections have been closed for auto-suspend
            // (no handler runs). The connection that woke it counts as served until the shell has counted, so
            // that no auto-suspend, however short, comes before the app has taken it.
            wokenByConnection = true
            servedConnections = 1
            send(.serveWakeListeners(listener: listener))
            phase = .resting(suspendPending: false, autoSuspendAt: nil)
            return evaluateSuspension(now: now)
        }
        phase = .waking(reason, deadline: now + settings.budgets.keepalive)
        send(.startWakeHandler(reason))
    }

    /// A connection on a wake listener while the app runs in the background already: during a VoIP or
    /// keep-alive wake-up, or resting after one (its listeners' connections are not read until a connection
    /// wakes the app). Its wake listeners serve it at once, and auto-suspend decides when the app sleeps again
    /// (not the end of the wake-up's handler, nor of a task, nor a `suspend` that waited for them).
    private mutating func connectionWhileRunning(on listener: String, _ reason: WakeReason, now: MonotonicTime) {
        switch phase {
        case .waking, .resting:
            send(.log(.info, "\(reason) while it runs in the background: serving it"))
            wokenByConnection = true
            servedConnections = max(servedConnections, 1)
            send(.serveWakeListeners(listener: listener))
            // A suspension that waited (for the wake-up's handler, or for tasks) yields to auto-suspend too.
            if case .resting = phase { phase = .resting(suspendPending: false, autoSuspendAt: nil) }
            evaluateSuspension(now: now)
        case .notRunning, .transition, .retired:
            break
        }
    }

    private mutating func deadlinesPassed(now: MonotonicTime) {
        guard let deadline = nextDeadline, deadline <= now else { return }
        switch phase {
        case .notRunning:
            phase = .notRunning(restartAt: nil)
            queue.append(Queued(command: .launch(background: settings.relaunchInBackground), cause: .command, ticket: nil))
        case .resting(let pending, _):
            phase = .resting(suspendPending: pending, autoSuspendAt: nil)
            if suspendBlocker == nil { suspend(now: now) }
        case .transition(var transition):
            if case .kill(var timeout) = transition.pipeline.budgetExpired(now: now) {
                // The launch ran out waiting for READY=1: the program's silence is what the record names.
                if transition.waitingFor == .programReady { timeout.stage = .programReady }
                // The launch ran out looking for a listener the program was to bind.
                if transition.waitingFor == .adoptListeners { timeout.stage = .adoptListeners }
                phase = .transition(transition)
                kill(timeout)
            }
        case .waking:
            send(.log(.warning, "the wake-up's handler took longer than keepalive-budget (\(format(settings.budgets.keepalive))); \(wokenByConnection ? "ended" : "suspending again")"))
            send(.endWake(killHandlers: true))
            phase = .resting(suspendPending: !wokenByConnection, autoSuspendAt: nil)
            evaluateSuspension(now: now)
        case .retired:
            break
        }
    }
}
