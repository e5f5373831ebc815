// AppLifecycle, the pure machine behind App, driven with a fake clock: each phase meets each event (the table
// below), then the paths the table cannot show (a transition walked step by step, restarts, wake-ups).

import NetLife
import NetLifeEvent
import Testing

private func at(_ ms: UInt64) -> MonotonicTime { MonotonicTime(nanoseconds: 1_000_000_000 + ms * 1_000_000) }

/// Drives a machine as App does: an event, then every action it queued.
private struct Driver {
    var machine: AppLifecycle
    var clock: UInt64 = 0
    private var nextTicket: CommandTicket = 1

    init(_ settings: AppLifecycle.Settings = AppLifecycle.Settings(), restart: RestartMode = .no) {
        machine = AppLifecycle(name: "app", settings: settings, restart: restart)
    }

    @discardableResult
    mutating func send(_ event: AppLifecycle.Event) -> [AppLifecycle.Action] {
        machine.handle(event, now: at(clock))
        var actions: [AppLifecycle.Action] = []
        while let action = machine.nextAction(now: at(clock)) { actions.append(action) }
        return actions
    }

    @discardableResult
    mutating func command(_ command: LifecycleCommand) -> [AppLifecycle.Action] {
        defer { nextTicket += 1 }
        return send(.command(command, cause: .command, ticket: nextTicket))
    }

    /// Lets `ms` pass and tells the machine its deadline may have come.
    @discardableResult
    mutating func wait(_ ms: UInt64) -> [AppLifecycle.Action] {
        clock += ms
        return send(.clock)
    }

    /// The phase and state, as the table spells them; "(timer)" when a deadline is armed.
    var summary: String { "\(machine.phase.name) \(machine.state)\(machine.nextDeadline == nil ? "" : " (timer)")" }
}

/// The short form of an action the table compares.
private func brief(_ action: AppLifecycle.Action) -> String? {
    switch action {
    case .enter(let from, let to): return "\(from)>\(to)"
    case .complete(_, let outcome):
        switch outcome {
        case .already: return "=already"
        case .refused: return "=refused"
        case .completed(let state, _): return "=\(state)"
        case .killed: return "=killed"
        case .suspendPending: return "=pending"
        case .cancelled: return "=cancelled"
        }
    case .report(.stopped(let record)): return "stopped:\(record.reason.kind)"
    case .report(.watchdogKilled): return "watchdog"
    case .report(.woken): return "woken"
    case .report: return nil
    case .tearDown: return "teardown"
    case .suspend: return "suspend"
    case .runHook(let event): return "hook:\(event)"
    case .startProgram: return "start-program"
    case .adoptListeners: return "adopt-listeners"
    case .deliverToProgram(let event, _): return "program:\(event)"
    case .callDelegate(let event): return "delegate:\(event)"
    case .startWakeHandler: return "wake-handler"
    case .endWake(let kill): return kill ? "end-wake!" : "end-wake"
    case .reclaim: return "reclaim"
    case .serveWakeListeners: return "serve-wake"
    case .perform, .transitionStarted, .transitionEnded, .removeTasks, .resumeForWake, .log: return nil
    }
}

private let hookOnBackground = LifecycleTraits(hooks: [.didEnterBackground])
private let everyDeadline: UInt64 = 120_000

/// Each phase the machine can rest or wait in, built by commands from a fresh machine.
private let phases: [(name: String, make: @Sendable () -> Driver)] = [
    ("not-running", { Driver() }),
    ("restart-due", {
        var d = Driver(AppLifecycle.Settings(traits: LifecycleTraits(hasProgram: true)), restart: .always)
        d.command(.launch(background: false))
        d.send(.stepDone)   // the program started
        d.send(.stepDone)   // it answered did-finish-launching
        d.send(.stepDone)   // and did-become-active
        d.send(.programExited(.exited(1), reason: nil))
        return d
    }),
    ("active", { var d = Driver(); d.command(.launch(background: false)); return d }),
    ("interrupted", { var d = Driver(); d.command(.launch(background: false)); d.command(.interruptBegin); return d }),
    ("background", {
        var d = Driver(AppLifecycle.Settings(autoSuspend: .seconds(1)))
        d.command(.launch(background: false))
        d.command(.background)
        return d
    }),
    ("suspend-pending", {
        var d = Driver()
        d.command(.launch(background: false))
        d.command(.background)
        d.send(.tasksChanged(open: 1, expirationRunning: false))
        d.command(.suspend)
        return d
    }),
    ("suspended", { var d = Driver(); d.command(.launch(background: true)); d.command(.suspend); return d }),
    ("transition", {
        var d = Driver(AppLifecycle.Settings(traits: hookOnBackground))
        d.command(.launch(background: false))
        d.command(.background)
        return d
    }),
    ("waking", { var d = Driver(); d.command(.launch(background: true)); d.command(.suspend); d.send(.wake(.voipData(socket: "v"))); return d }),
    ("retired", { var d = Driver(); d.command(.launch(background: false)); d.send(.retire("removed")); return d }),
]

private let events: [(name: String, send: @Sendable (inout Driver) -> [AppLifecycle.Action])] = [
    ("foreground", { $0.command(.foreground) }),
    ("terminate", { $0.command(.terminate) }),
    ("step-done", { $0.send(.stepDone) }),
    ("deadline", { $0.wait(everyDeadline) }),
    ("last-task-ended", { $0.send(.tasksChanged(open: 0, expirationRunning: false)) }),
    ("continuous-mode", { d in
        var settings = d.machine.settings
        settings.continuousMode = true
        return d.send(.settingsChanged(settings))
    }),
    ("wake", { $0.send(.wake(.voipData(socket: "v"))) }),
    ("wake-handler-done", { $0.send(.wakeHandlerDone) }),
    ("connection-wake", { $0.send(.wake(.connection(listener: "web"))) }),
    ("connections-changed", { $0.send(.connectionsChanged(open: 2)) }),
    ("program-exited", { $0.send(.programExited(.exited(1), reason: nil)) }),
    ("task-watchdog", { $0.send(.watchdog(WatchdogTimeout(stage: .backgroundTask, budget: .seconds(1), elapsed: .seconds(2)))) }),
    ("memory-pressure", { $0.send(.memoryPressure(nil)) }),
    ("retire", { $0.send(.retire("removed")) }),
]

/// What each event does in each phase: the phase and state after it, and the actions (in brief) it caused.
private let expected: [String: String] = [
    "not-running / foreground": "not-running not-running | =refused",
    "not-running / terminate": "not-running not-running | =already",
    "not-running / step-done": "not-running not-running | ",
    "not-running / deadline": "not-running not-running | ",
    "not-running / last-task-ended": "not-running not-running | ",
    "not-running / continuous-mode": "not-running not-running | ",
    "not-running / wake": "not-running not-running | ",
    "not-running / wake-handler-done": "not-running not-running | ",
    "not-running / connection-wake": "not-running not-running | ",
    "not-running / connections-changed": "not-running not-running | ",
    "not-running / program-exited": "not-running not-running | ",
    "not-running / task-watchdog": "not-running not-running | ",
    "not-running / memory-pressure": "not-running not-running | ",
    "not-running / retire": "retired not-running | teardown",
    "restart-due / foreground": "not-running not-running (timer) | =refused",
    "restart-due / terminate": "not-running not-running | =already",
    "restart-due / step-done": "not-running not-running (timer) | ",
    "restart-due / deadline": "transition inactive (timer) | not-running>inactive start-program",
    "restart-due / last-task-ended": "not-running not-running (timer) | ",
    "restart-due / continuous-mode": "not-running not-running (timer) | ",
    "restart-due / wake": "not-running not-running (timer) | ",
    "restart-due / wake-handler-done": "not-running not-running (timer) | ",
    "restart-due / connection-wake": "not-running not-running (timer) | ",
    "restart-due / connections-changed": "not-running not-running (timer) | ",
    "restart-due / program-exited": "not-running not-running (timer) | ",
    "restart-due / task-watchdog": "not-running not-running (timer) | ",
    "restart-due / memory-pressure": "not-running not-running (timer) | ",
    "restart-due / retire": "retired not-running | teardown",
    "active / foreground": "resting active | =already",
    "active / terminate": "not-running not-running | teardown active>not-running stopped:terminated =not-running",
    "active / step-done": "resting active | ",
    "active / deadline": "resting active | ",
    "active / last-task-ended": "resting active | ",
    "active / continuous-mode": "resting active | ",
    "active / wake": "resting active | ",
    "active / wake-handler-done": "resting active | ",
    "active / connection-wake": "resting active | ",
    "active / connections-changed": "resting active | ",
    "active / program-exited": "not-running not-running | teardown active>not-running stopped:program-exited",
    "active / task-watchdog": "not-running not-running | watchdog teardown active>not-running stopped:watchdog",
    "active / memory-pressure": "resting active | ",
    "active / retire": "retired not-running | teardown active>not-running",
    "interrupted / foreground": "resting inactive | =refused",
    "interrupted / terminate": "not-running not-running | teardown inactive>not-running stopped:terminated =not-running",
    "interrupted / step-done": "resting inactive | ",
    "interrupted / deadline": "resting inactive | ",
    "interrupted / last-task-ended": "resting inactive | ",
    "interrupted / continuous-mode": "resting inactive | ",
    "interrupted / wake": "resting inactive | ",
    "interrupted / wake-handler-done": "resting inactive | ",
    "interrupted / connection-wake": "resting inactive | ",
    "interrupted / connections-changed": "resting inactive | ",
    "interrupted / program-exited": "not-running not-running | teardown inactive>not-running stopped:program-exited",
    "interrupted / task-watchdog": "not-running not-running | watchdog teardown inactive>not-running stopped:watchdog",
    "interrupted / memory-pressure": "resting inactive | ",
    "interrupted / retire": "retired not-running | teardown inactive>not-running",
    "background / foreground": "resting active | background>inactive inactive>active =active",
    "background / terminate": "not-running not-running | teardown background>not-running stopped:terminated =not-running",
    "background / step-done": "resting background (timer) | ",
    "background / deadline": "resting suspended | suspend background>suspended",
    "background / last-task-ended": "resting suspended | suspend background>suspended",
    "background / continuous-mode": "resting background | ",
    "background / wake": "resting background (timer) | ",
    "background / wake-handler-done": "resting background (timer) | ",
    "background / connection-wake": "resting background | serve-wake",
    "background / connections-changed": "resting background | ",
    "background / program-exited": "not-running not-running | teardown background>not-running stopped:program-exited",
    "background / task-watchdog": "not-running not-running | watchdog teardown background>not-running stopped:watchdog",
    "background / memory-pressure": "resting background (timer) | ",
    "background / retire": "retired not-running | teardown background>not-running",
    "suspend-pending / foreground": "resting active | background>inactive inactive>active =active",
    "suspend-pending / terminate": "not-running not-running | teardown background>not-running stopped:terminated =not-running",
    "suspend-pending / step-done": "resting background | ",
    "suspend-pending / deadline": "resting background | ",
    "suspend-pending / last-task-ended": "resting suspended | suspend background>suspended",
    "suspend-pending / continuous-mode": "resting background | ",
    "suspend-pending / wake": "resting background | ",
    "suspend-pending / wake-handler-done": "resting background | ",
    "suspend-pending / connection-wake": "resting background | serve-wake",
    "suspend-pending / connections-changed": "resting background | ",
    "suspend-pending / program-exited": "not-running not-running | teardown background>not-running stopped:program-exited",
    "suspend-pending / task-watchdog": "not-running not-running | watchdog teardown background>not-running stopped:watchdog",
    "suspend-pending / memory-pressure": "resting background | ",
    "suspend-pending / retire": "retired not-running | teardown background>not-running",
    "suspended / foreground": "resting active | suspended>background background>inactive inactive>active =active",
    "suspended / terminate": "not-running not-running | teardown suspended>not-running stopped:terminated-while-suspended =not-running",
    "suspended / step-done": "resting suspended | ",
    "suspended / deadline": "resting suspended | ",
    "suspended / last-task-ended": "resting suspended | ",
    "suspended / continuous-mode": "resting suspended | ",
    "suspended / wake": "waking background (timer) | suspended>background woken wake-handler",
    "suspended / wake-handler-done": "resting suspended | ",
    "suspended / connection-wake": "resting background | suspended>background woken serve-wake",
    "suspended / connections-changed": "resting suspended | ",
    "suspended / program-exited": "not-running not-running | teardown suspended>not-running stopped:program-exited",
    "suspended / task-watchdog": "not-running not-running | watchdog teardown suspended>not-running stopped:watchdog",
    "suspended / memory-pressure": "not-running not-running | teardown suspended>not-running stopped:memory-pressure",
    "suspended / retire": "retired not-running | teardown suspended>not-running",
    "transition / foreground": "transition background (timer) | ",
    "transition / terminate": "transition background (timer) | ",
    "transition / step-done": "resting background | =background",
    "transition / deadline": "not-running not-running | watchdog teardown background>not-running stopped:watchdog =killed",
    "transition / last-task-ended": "transition background (timer) | ",
    "transition / continuous-mode": "transition background (timer) | ",
    "transition / wake": "transition background (timer) | ",
    "transition / wake-handler-done": "transition background (timer) | ",
    "transition / connection-wake": "transition background (timer) | ",
    "transition / connections-changed": "transition background (timer) | ",
    "transition / program-exited": "not-running not-running | teardown background>not-running stopped:program-exited =not-running",
    "transition / task-watchdog": "not-running not-running | watchdog teardown background>not-running stopped:watchdog =killed",
    "transition / memory-pressure": "transition background (timer) | ",
    "transition / retire": "retired not-running | teardown background>not-running =cancelled",
    "waking / foreground": "resting active | end-wake background>inactive inactive>active =active",
    "waking / terminate": "not-running not-running | end-wake teardown background>not-running stopped:terminated =not-running",
    "waking / step-done": "waking background (timer) | ",
    "waking / deadline": "resting suspended | end-wake! suspend background>suspended",
    "waking / last-task-ended": "waking background (timer) | ",
    "waking / continuous-mode": "waking background (timer) | ",
    "waking / wake": "waking background (timer) | ",
    "waking / wake-handler-done": "resting suspended | suspend background>suspended",
    "waking / connection-wake": "waking background (timer) | serve-wake",
    "waking / connections-changed": "waking background (timer) | ",
    "waking / program-exited": "not-running not-running | teardown background>not-running stopped:program-exited",
    "waking / task-watchdog": "not-running not-running | watchdog teardown background>not-running stopped:watchdog",
    "waking / memory-pressure": "waking background (timer) | ",
    "waking / retire": "retired not-running | teardown background>not-running",
    "retired / foreground": "retired not-running | =cancelled",
    "retired / terminate": "retired not-running | =cancelled",
    "retired / step-done": "retired not-running | ",
    "retired / deadline": "retired not-running | ",
    "retired / last-task-ended": "retired not-running | ",
    "retired / continuous-mode": "retired not-running | ",
    "retired / wake": "retired not-running | ",
    "retired / wake-handler-done": "retired not-running | ",
    "retired / connection-wake": "retired not-running | ",
    "retired / connections-changed": "retired not-running | ",
    "retired / program-exited": "retired not-running | ",
    "retired / task-watchdog": "retired not-running | ",
    "retired / memory-pressure": "retired not-running | ",
    "retired / retire": "retired not-running | ",
]

@Suite struct AppLifecycleTests {
    @Test func everyPhaseMeetsEveryEvent() {
        #expect(expected.count == phases.count * events.count)
        for phase in phases {
            for event in events {
                var driver = phase.make()
                let actions = event.send(&driver).compactMap(brief).joined(separator: " ")
                let key = "\(phase.name) / \(event.name)"
                #expect("\(driver.summary) | \(actions)" == expected[key], "\(key)")
            }
        }
    }

    @Test func aTransitionWaitsForTheProgramAndTheHookAndCallsTheDelegateInBetween() {
        let traits = LifecycleTraits(hasDelegate: true, hooks: [.didFinishLaunching], hasProgram: true)
        var d = Driver(AppLifecycle.Settings(traits: traits))
        #expect(d.command(.launch(background: false)).compactMap(brief) == ["not-running>inactive", "start-program"])
        #expect(d.machine.waitingFor == .startProgram)
        #expect(d.send(.stepDone).compactMap(brief) == ["program:did-finish-launching"])
        #expect(d.send(.stepDone).compactMap(brief) == ["delegate:did-finish-launching", "hook:did-finish-launching"])
        #expect(d.machine.waitingFor == .hook)
        // A second step-done for a step nobody waits for changes nothing.
        d.clock += 5
        let last = d.send(.stepDone)
        #expect(last.compactMap(brief) == ["inactive>active", "program:did-become-active"])
        #expect(d.send(.stepDone).compactMap(brief) == ["delegate:did-become-active", "=active"])
        #expect(d.send(.stepDone).isEmpty)
        #expect(d.machine.lastStages.map(\.event) == [.didFinishLaunching, .didBecomeActive])
        #expect(d.machine.lastStages.first?.duration == .milliseconds(5))
        #expect(d.machine.restartPolicy.runningSince == at(0))
    }

    @Test func theWatchdogKillsATransitionAtItsBudgetAndNotBefore() {
        var settings = AppLifecycle.Settings(traits: hookOnBackground)
        settings.budgets.background = .seconds(5)
        var d = Driver(settings)
        d.command(.launch(background: false))
        d.command(.background)
        #expect(d.machine.nextDeadline == at(5_000))
        #expect(d.wait(4_999).isEmpty)
        let kill = d.wait(2)
        #expect(kill.contains(.report(.watchdogKilled(WatchdogTimeout(stage: .transition(.didEnterBackground), budget: .seconds(5), elapsed: .milliseconds(5_001))))))
        #expect(kill.contains(.complete(2, .killed(WatchdogTimeout(stage: .transition(.didEnterBackground), budget: .seconds(5), elapsed: .milliseconds(5_001))))))
        #expect(d.machine.lastTermination?.reason.kind.rawValue == "watchdog")
        // The hook's exit after the kill advances nothing.
        #expect(d.send(.stepDone).isEmpty)
    }

    @Test func commandsSentDuringATransitionRunInOrderAfterIt() {
        var d = Driver(AppLifecycle.Settings(traits: hookOnBackground))
        d.command(.launch(background: false))
        d.command(.background)
        #expect(d.command(.foreground).isEmpty)
        #expect(d.command(.terminate).isEmpty)
        #expect(d.machine.commandsQueued == 2)
        let rest = d.send(.stepDone).compactMap(brief)
        #expect(rest == ["=background", "background>inactive", "inactive>active", "=active",
                         "teardown", "active>not-running", "stopped:terminated", "=not-running"])
    }

    @Test func retiringAnswersTheRunningAndQueuedCommandsCancelled() {
        var d = Driver(AppLifecycle.Settings(traits: hookOnBackground))
        d.command(.launch(background: false))
        d.command(.background)
        d.command(.foreground)
        let actions = d.send(.retire("removed by reload"))
        #expect(actions.filter { if case .complete = $0 { true } else { false } } == [
            .complete(2, .cancelled("removed by reload")), .complete(3, .cancelled("removed by reload")),
        ])
        #expect(d.command(.launch(background: false)) == [.complete(4, .cancelled("removed by reload"))])
    }

    @Test func autoSuspendWaitsItsDelayAndATaskHoldsItBack() {
        var d = Driver(AppLifecycle.Settings(autoSuspend: .seconds(1)))
        d.command(.launch(background: false))
        d.clock = 100
        d.command(.background)
        #expect(d.machine.nextDeadline == at(1_100))
        d.send(.tasksChanged(open: 1, expirationRunning: false))
        #expect(d.machine.nextDeadline == nil)
        #expect(d.machine.suspendBlocker == "1 background task is open")
        // iOS suspends the app as soon as its last task ends, not after auto-suspend.
        #expect(d.send(.tasksChanged(open: 0, expirationRunning: false)).compactMap(brief) == ["suspend", "background>suspended"])
    }

    @Test func suspendPendingSuspendsWhenTheExpirationHandlerEnds() {
        var d = Driver()
        d.command(.launch(background: false))
        d.command(.background)
        d.send(.tasksChanged(open: 1, expirationRunning: false))
        #expect(d.command(.suspend) == [.log(.info, "suspend pending: 1 background task is open"), .complete(3, .suspendPending(reason: "1 background task is open"))])
        d.send(.tasksChanged(open: 1, expirationRunning: true))
        #expect(d.send(.tasksChanged(open: 1, expirationRunning: false)).isEmpty)
        #expect(d.machine.suspendPending)
        #expect(d.send(.tasksChanged(open: 0, expirationRunning: false)).compactMap(brief) == ["suspend", "background>suspended"])
        #expect(!d.machine.suspendPending)
    }

    @Test func anAppThatExitsOnSuspendPassesThroughSuspendedToNotRunning() {
        var d = Driver(AppLifecycle.Settings(traits: LifecycleTraits(exitsOnSuspend: true)))
        d.command(.launch(background: false))
        let actions = d.command(.background).compactMap(brief)
        #expect(actions == ["active>inactive", "inactive>background", "teardown", "background>suspended",
                            "suspended>not-running", "stopped:exited-on-suspend", "=not-running"])
        #expect(d.command(.launch(background: true)).compactMap(brief) == ["=refused"])
    }

    @Test func aProgramThatKeepsFailingIsRestartedWithBackOffUntilTheStartLimit() {
        var d = Driver(AppLifecycle.Settings(traits: LifecycleTraits(hasProgram: true)), restart: .onFailure)
        func runToActive(_ d: inout Driver) {
            d.send(.stepDone)
            d.send(.stepDone)
            d.send(.stepDone)
        }
        d.command(.launch(background: false))
        runToActive(&d)
        var delays: [Duration] = []
        for _ in 0..<4 {
            d.send(.programExited(.exited(1), reason: nil))
            guard let deadline = d.machine.nextDeadline else { break }
            delays.append(deadline - at(d.clock))
            d.clock = deadline.nanoseconds / 1_000_000 - 1_000
            #expect(d.send(.clock).compactMap(brief) == ["not-running>inactive", "start-program"])
            runToActive(&d)
        }
        #expect(delays == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800)])
        // The fifth start within 10 s was the last the start limit allows: the sixth is refused.
        d.send(.programExited(.exited(1), reason: nil))
        #expect(d.machine.nextDeadline == nil)
        #expect(d.machine.lastTermination?.reason.kind.rawValue == "program-exited")
        if case .programExited(let text) = d.machine.lastTermination?.reason { #expect(text.contains("status 1; ")) }
        // `netlifectl launch` starts the rules over.
        d.command(.launch(background: false))
        runToActive(&d)
        d.send(.programExited(.exited(1), reason: nil))
        #expect(d.machine.nextDeadline.map { $0 - at(d.clock) } == .milliseconds(100))
    }

    @Test func aRestartAfterABackgroundLaunchComesBackInTheBackground() {
        var d = Driver(AppLifecycle.Settings(traits: LifecycleTraits(hasProgram: true), relaunchInBackground: true), restart: .always)
        d.command(.launch(background: true))
        d.send(.stepDone)
        d.send(.stepDone)
        d.send(.stepDone)
        d.send(.programExited(.signaled(9), reason: nil))
        #expect(d.wait(100).compactMap(brief) == ["not-running>background", "start-program"])
    }

    @Test func aWakeRunsUntilItsHandlerIsDoneOrItsBudget() {
        var settings = AppLifecycle.Settings()
        settings.budgets.keepalive = .seconds(10)
        var d = Driver(settings)
        d.command(.launch(background: true))
        d.command(.suspend)
        let wake = d.send(.wake(.keepalive(socket: "k")))
        #expect(wake == [.log(.info, "woken: keep-alive of socket k"), .resumeForWake, .enter(from: .suspended, to: .background),
                         .report(.woken(.keepalive(socket: "k"))), .startWakeHandler(.keepalive(socket: "k"))])
        #expect(d.machine.nextDeadline == at(10_000))
        #expect(d.machine.suspendBlocker == "it was woken and its handler is running")
        // A task begun by the handler keeps the app awake after it; its end suspends it at once.
        d.send(.tasksChanged(open: 1, expirationRunning: false))
        #expect(d.send(.wakeHandlerDone).isEmpty)
        #expect(d.machine.state == .background)
        #expect(d.send(.tasksChanged(open: 0, expirationRunning: false)).compactMap(brief) == ["suspend", "background>suspended"])
    }

    @Test func reclaimOnSuspendReclaimsAfterEnteringSuspended() {
        var d = Driver(AppLifecycle.Settings(reclaimOnSuspend: true))
        d.command(.launch(background: true))
        #expect(d.command(.suspend) == [.suspend, .enter(from: .background, to: .suspended), .reclaim, .complete(2, .completed(.suspended, []))])
    }
}

/// `ready = notify`: a program's start is over only when it says READY=1, within the launch budget.
@Suite struct ProgramReadinessLifecycleTests {
    private static func settings() -> AppLifecycle.Settings {
        var settings = AppLifecycle.Settings(traits: LifecycleTraits(hasProgram: true), awaitsReady: true)
        settings.budgets.launch = .seconds(2)
        return settings
    }

    @Test func aLaunchWaitsForReadyAfterTheProgramStarted() {
        var d = Driver(Self.settings())
        #expect(d.command(.launch(background: false)).compactMap(brief) == ["not-running>inactive", "start-program"])
        #expect(d.send(.stepDone).compactMap(brief).isEmpty)
        #expect(d.machine.waitingFor == .programReady)
        // Only READY=1 ends the wait: a step-done does not.
        #expect(d.send(.stepDone).compactMap(brief).isEmpty)
        #expect(d.machine.waitingFor == .programReady)
        d.clock += 1_500
        #expect(d.send(.programReady).compactMap(brief) == ["program:did-finish-launching"])
        d.send(.stepDone)
        #expect(d.send(.stepDone).compactMap(brief) == ["=active"])
        #expect(d.machine.lastStages.first?.duration == .milliseconds(1_500))
    }

    @Test func noReadyWithinTheLaunchBudgetIsAWatchdogKillThatSaysSo() {
        var d = Driver(Self.settings())
        d.command(.launch(background: false))
        d.send(.stepDone)
        #expect(d.wait(1_999).isEmpty)
        #expect(d.wait(2).compactMap(brief) == ["watchdog", "teardown", "inactive>not-running", "stopped:watchdog", "=killed"])
        guard case .watchdog(let timeout) = d.machine.lastTermination?.reason else {
            Issue.record("no watchdog record: \(String(describing: d.machine.lastTermination))")
            return
        }
        #expect(timeout.stage == .programReady)
        #expect(timeout.budget == .seconds(2))
        #expect(timeout.elapsed == .milliseconds(2_001))
    }

    @Test func anExitBeforeReadySaysSo() {
        var d = Driver(Self.settings())
        d.command(.launch(background: true))
        d.send(.stepDone)
        d.send(.programExited(.exited(3), reason: nil))
        #expect(d.machine.lastTermination?.reason == .programExited("exit status 3 before READY=1"))
        #expect(d.machine.state == .notRunning)
    }

    @Test func readyOutsideTheWaitChangesNothing() {
        for phase in phases {
            var d = phase.make()
            let before = d.summary
            #expect(d.send(.programReady).compactMap(brief).isEmpty, "\(phase.name)")
            #expect(d.summary == before, "\(phase.name)")
        }
        // Without `ready = notify` the start is over once the program runs.
        var d = Driver(AppLifecycle.Settings(traits: LifecycleTraits(hasProgram: true)))
        d.command(.launch(background: false))
        #expect(d.send(.stepDone).compactMap(brief) == ["program:did-finish-launching"])
    }
}

/// `adopt = yes`: a program's start is over only once the listeners it binds itself are found, after its
/// READY=1 when it is awaited, within the launch budget.
@Suite struct ListenerAdoptionLifecycleTests {
    private static func settings(awaitsReady: Bool = false) -> AppLifecycle.Settings {
        var settings = AppLifecycle.Settings(traits: LifecycleTraits(hasProgram: true), awaitsReady: awaitsReady, adoptsListeners: true)
        settings.budgets.launch = .seconds(2)
        return settings
    }

    @Test func aLaunchWaitsForTheAdoptedListenersAfterTheProgramStarted() {
        var d = Driver(Self.settings())
        #expect(d.command(.launch(background: false)).compactMap(brief) == ["not-running>inactive", "start-program"])
        #expect(d.send(.stepDone).compactMap(brief) == ["adopt-listeners"])
        #expect(d.machine.waitingFor == .adoptListeners)
        // Neither a step-done nor READY=1 ends this wait.
        #expect(d.send(.stepDone).compactMap(brief).isEmpty)
        #expect(d.send(.programReady).compactMap(brief).isEmpty)
        #expect(d.machine.waitingFor == .adoptListeners)
        d.clock += 300
        #expect(d.send(.listenersAdopted).compactMap(brief) == ["program:did-finish-launching"])
        #expect(d.machine.waitingFor == .program)
    }

    @Test func withReadyNotifyTheListenersAreLookedForAfterReady() {
        var d = Driver(Self.settings(awaitsReady: true))
        d.command(.launch(background: false))
        #expect(d.send(.stepDone).compactMap(brief).isEmpty)
        #expect(d.machine.waitingFor == .programReady)
        #expect(d.send(.listenersAdopted).compactMap(brief).isEmpty)
        #expect(d.machine.waitingFor == .programReady)
        #expect(d.send(.programReady).compactMap(brief) == ["adopt-listeners"])
        #expect(d.send(.listenersAdopted).compactMap(brief) == ["program:did-finish-launching"])
    }

    @Test func listenersNotFoundWithinTheLaunchBudgetAreAWatchdogKillThatSaysSo() {
        var d = Driver(Self.settings())
        d.command(.launch(background: false))
        d.send(.stepDone)
        #expect(d.wait(1_999).isEmpty)
        #expect(d.wait(2).compactMap(brief) == ["watchdog", "teardown", "inactive>not-running", "stopped:watchdog", "=killed"])
        guard case .watchdog(let timeout) = d.machine.lastTermination?.reason else {
            Issue.record("no watchdog record: \(String(describing: d.machine.lastTermination))")
            return
        }
        #expect(timeout.stage == .adoptListeners)
        #expect(timeout.stage.description == "adopt-listeners")
    }

    @Test func adoptedOutsideTheWaitChangesNothing() {
        for phase in phases {
            var d = phase.make()
            let before = d.summary
            #expect(d.send(.listenersAdopted).compactMap(brief).isEmpty, "\(phase.name)")
            #expect(d.summary == before, "\(phase.name)")
        }
    }
}

/// `on-background = wake`: a connection wakes a suspended app into the background, no handler runs, its wake
/// listeners serve it, and the app is suspended again once the connections on those listeners have been closed
/// for `auto-suspend`.
@Suite struct ConnectionWakeLifecycleTests {
    private static let connection = WakeReason.connection(listener: "web")

    private static func suspended(silent: Bool = false, autoSuspend: Duration? = .milliseconds(500)) -> Driver {
        var d = Driver(AppLifecycle.Settings(autoSuspend: autoSuspend, silentProgram: silent))
        d.command(.launch(background: true))
        d.command(.suspend)
        return d
    }

    @Test func aConnectionWakesTheAppIntoTheBackgroundWithoutAHandlerAndItsListenersServeIt() {
        var d = Self.suspended()
        let actions = d.send(.wake(Self.connection))
        #expect(actions == [.log(.info, "woken: a connection on listener web"), .resumeForWake,
                            .enter(from: .suspended, to: .background), .report(.woken(Self.connection)),
                            .serveWakeListeners(listener: "web")])
        #expect(d.machine.wokenByConnection)
        // The connection that woke it counts as served until the shell counts: no auto-suspend yet.
        #expect(d.machine.servedConnections == 1)
        #expect(d.summary == "resting background")
        #expect(d.wait(10_000).isEmpty)
        // Served and closed: idle for auto-suspend, then suspended again.
        d.send(.connectionsChanged(open: 0))
        #expect(d.summary == "resting background (timer)")
        #expect(d.wait(499).compactMap(brief).isEmpty)
        #expect(d.wait(1).compactMap(brief) == ["suspend", "background>suspended"])
        #expect(!d.machine.wokenByConnection)
        // And the next connection wakes it again.
        #expect(d.send(.wake(Self.connection)).compactMap(brief) == ["suspended>background", "woken", "serve-wake"])
    }

    @Test func noAutoSuspendHoweverShortComesBeforeTheShellHasCounted() {
        // auto-suspend = 0: the app waking for a connection is not suspended before it has taken it.
        var d = Self.suspended(autoSuspend: .zero)
        d.send(.wake(Self.connection))
        #expect(d.summary == "resting background")
        #expect(d.wait(0).isEmpty)
        #expect(d.machine.state == .background)
        d.send(.connectionsChanged(open: 1))
        #expect(d.summary == "resting background")
        // Once the count says none is left, it is suspended at the next look at the clock.
        d.send(.connectionsChanged(open: 0))
        #expect(d.machine.nextDeadline == at(0))
        #expect(d.wait(0).compactMap(brief) == ["suspend", "background>suspended"])
    }

    @Test func openConnectionsKeepTheAppAwakeAndAutoSuspendCountsFromTheLastClose() {
        var d = Self.suspended()
        d.send(.wake(Self.connection))
        d.clock += 100
        d.send(.connectionsChanged(open: 2))
        #expect(d.summary == "resting background")
        #expect(d.wait(10_000).compactMap(brief).isEmpty)
        #expect(d.machine.state == .background)
        d.send(.connectionsChanged(open: 1))
        #expect(d.summary == "resting background")
        d.send(.connectionsChanged(open: 0))
        #expect(d.machine.nextDeadline == at(10_100 + 500))
        // A connection that comes before auto-suspend runs out holds it again; its close starts it over.
        d.clock += 300
        d.send(.connectionsChanged(open: 1))
        #expect(d.summary == "resting background")
        d.send(.connectionsChanged(open: 0))
        #expect(d.machine.nextDeadline == at(10_400 + 500))
        #expect(d.wait(499).compactMap(brief).isEmpty)
        #expect(d.wait(1).compactMap(brief) == ["suspend", "background>suspended"])
        // The count is the shell's while it counts: suspended, it starts from none again.
        #expect(d.machine.servedConnections == 0)
    }

    @Test func aCountToldOutsideTheBackgroundIsIgnored() {
        // Suspended (the shell does not count there): a stale count must not hold the next wake-up awake.
        var d = Self.suspended()
        #expect(d.send(.connectionsChanged(open: 3)).isEmpty)
        #expect(d.machine.servedConnections == 0)
        d.send(.wake(Self.connection))
        #expect(d.machine.servedConnections == 1)
        // Active: no auto-suspend to hold.
        var active = Driver(AppLifecycle.Settings(autoSuspend: .milliseconds(500)))
        active.command(.launch(background: false))
        #expect(active.send(.connectionsChanged(open: 3)).isEmpty)
        #expect(active.machine.servedConnections == 0)
    }

    @Test func aSilentProgramWokenByAConnectionIsNotFrozenAtOnce() {
        var d = Self.suspended(silent: true)
        #expect(d.send(.wake(Self.connection)).compactMap(brief) == ["suspended>background", "woken", "serve-wake"])
        d.send(.connectionsChanged(open: 0))
        #expect(d.summary == "resting background (timer)")
        // A task that ends does not freeze it early either: auto-suspend decides.
        d.send(.tasksChanged(open: 1, expirationRunning: false))
        #expect(d.summary == "resting background")
        #expect(d.send(.tasksChanged(open: 0, expirationRunning: false)).isEmpty)
        #expect(d.summary == "resting background (timer)")
        #expect(d.wait(500).compactMap(brief) == ["suspend", "background>suspended"])
    }

    @Test func withoutAutoSuspendTheWokenAppStaysInTheBackground() {
        var d = Self.suspended(autoSuspend: nil)
        d.send(.wake(Self.connection))
        d.send(.connectionsChanged(open: 0))
        #expect(d.summary == "resting background")
        #expect(d.wait(100_000).isEmpty)
        // `suspend` still suspends it, connections or not.
        d.send(.connectionsChanged(open: 3))
        #expect(d.command(.suspend).compactMap(brief) == ["suspend", "background>suspended", "=suspended"])
    }

    @Test func aConnectionDuringAVoIPWakeUpIsServedAndAutoSuspendFollowsTheHandler() {
        var d = Self.suspended()
        d.send(.wake(.voipData(socket: "v")))
        #expect(d.summary == "waking background (timer)")
        // The app runs already: no second wake-up, its wake listeners serve at once.
        #expect(d.send(.wake(Self.connection)) == [.log(.info, "a connection on listener web while it runs in the background: serving it"),
                                                   .serveWakeListeners(listener: "web")])
        #expect(d.machine.wokenByConnection)
        // The handler's end does not suspend it at once: the connection is served until auto-suspend.
        #expect(d.send(.wakeHandlerDone).isEmpty)
        #expect(d.summary == "resting background")
        d.send(.connectionsChanged(open: 0))
        #expect(d.wait(500).compactMap(brief) == ["suspend", "background>suspended"])
    }

    @Test func aConnectionAfterAWakeUpWhoseTaskKeepsTheAppRunningIsServed() {
        // A VoIP wake-up's handler began a task: the app rests in the background with its connections unread.
        var d = Self.suspended()
        d.send(.wake(.voipData(socket: "v")))
        d.send(.tasksChanged(open: 1, expirationRunning: false))
        d.send(.wakeHandlerDone)
        #expect(d.summary == "resting background")
        #expect(d.send(.wake(Self.connection)).compactMap(brief) == ["serve-wake"])
        // The task's end does not suspend it under the connection; auto-suspend does once it is closed.
        #expect(d.send(.tasksChanged(open: 0, expirationRunning: false)).isEmpty)
        d.send(.connectionsChanged(open: 0))
        #expect(d.wait(500).compactMap(brief) == ["suspend", "background>suspended"])
    }

    @Test func aConnectionDuringAWakeUpThatOverrunsItsBudgetIsStillServed() {
        var settings = AppLifecycle.Settings(autoSuspend: .milliseconds(500))
        settings.budgets.keepalive = .seconds(10)
        var d = Driver(settings)
        d.command(.launch(background: true))
        d.command(.suspend)
        d.send(.wake(.keepalive(socket: "k")))
        d.send(.wake(Self.connection))
        // The handler is killed at its budget, and the app is not suspended under the connection.
        #expect(d.wait(10_000).compactMap(brief) == ["end-wake!"])
        #expect(d.summary == "resting background")
        d.send(.connectionsChanged(open: 0))
        #expect(d.wait(500).compactMap(brief) == ["suspend", "background>suspended"])
    }

    @Test func aCommandEndsTheConnectionWake() {
        var d = Self.suspended(silent: true)
        d.send(.wake(Self.connection))
        d.send(.connectionsChanged(open: 1))
        #expect(d.command(.foreground).compactMap(brief) == ["background>inactive", "inactive>active", "=active"])
        #expect(!d.machine.wokenByConnection)
        #expect(d.machine.servedConnections == 0)
    }

    @Test func aConnectionToAnAppRunningInTheBackgroundIsServedWithoutAWakeUp() {
        var d = Driver(AppLifecycle.Settings(autoSuspend: .seconds(1)))
        d.command(.launch(background: true))
        #expect(d.send(.wake(Self.connection)).compactMap(brief) == ["serve-wake"], "no state change, no woken event")
        #expect(d.machine.servedConnections == 1)
        // Active, or not running: nothing at all.
        var active = Driver()
        active.command(.launch(background: false))
        #expect(active.send(.wake(Self.connection)).isEmpty)
        var notRunning = Driver()
        #expect(notRunning.send(.wake(Self.connection)).isEmpty)
    }
}
