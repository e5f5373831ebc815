// Every transition of the lifecycle (docs/design.md) and every refused one, as pure decisions.

import NetLife
import Testing

private let plain = LifecycleTraits()

private func plan(_ command: LifecycleCommand, _ state: AppState, _ traits: LifecycleTraits = plain,
                  eligible: Bool = true) -> TransitionPlan? {
    if case .run(let plan) = LifecycleRules.decide(command, in: state, traits: traits, suspendEligible: eligible) { return plan }
    return nil
}

private func stages(_ plan: TransitionPlan?) -> [String] {
    plan?.stages.map { "\($0.event)@\($0.state)" } ?? []
}

@Suite struct LifecycleRulesTests {
    @Test func launchIntoTheForegroundRunsDidFinishLaunchingThenDidBecomeActive() {
        let launch = plan(.launch(background: false), .notRunning)
        #expect(stages(launch) == ["did-finish-launching@inactive", "did-become-active@active"])
        #expect(launch?.finalState == .active)
        #expect(launch?.budget == .launch)
        #expect(launch?.stages[0].steps == [.policy(.openListeners), .policy(.connectDataSockets)])
    }

    @Test func launchIntoTheBackgroundNeverOpensListeners() {
        let launch = plan(.launch(background: true), .notRunning)
        #expect(stages(launch) == ["did-finish-launching@background", "did-enter-background@background"])
        #expect(launch?.finalState == .background)
        #expect(launch?.stages.flatMap(\.steps).contains(.policy(.openListeners)) == false)
    }

    @Test func launchIntoTheBackgroundOpensTheListenersThatListenThere() {
        // `on-background = wake` on a built-in service's listener: it listens in the background too, so that a
        // connection wakes the suspended app; the shell opens those listeners alone.
        let launch = plan(.launch(background: true), .notRunning, LifecycleTraits(listensInBackground: true))
        #expect(stages(launch) == ["did-finish-launching@background", "did-enter-background@background"])
        #expect(launch?.stages[0].steps == [.policy(.openListeners), .policy(.connectDataSockets)])
        #expect(launch?.stages[1].steps == [.policy(.closeListeners), .policy(.closeConnections), .policy(.applyDataSocketPolicy)])
        // Every other transition is the same as without such a listener.
        for (command, state) in [(LifecycleCommand.launch(background: false), AppState.notRunning), (.background, .active),
                                 (.foreground, .background), (.foreground, .suspended), (.terminate, .active)] {
            #expect(plan(command, state, LifecycleTraits(listensInBackground: true)) == plan(command, state), "\(command) from \(state)")
        }
    }

    @Test func backgroundClosesListenersFirstInDidEnterBackground() {
        let background = plan(.background, .active)
        #expect(stages(background) == ["will-resign-active@inactive", "did-enter-background@background"])
        #expect(background?.finalState == .background)
        #expect(background?.budget == .background)
        #expect(background?.stages[1].steps.first == .policy(.closeListeners))
        #expect(background?.stages[1].steps == [.policy(.closeListeners), .policy(.closeConnections), .policy(.applyDataSocketPolicy)])
    }

    @Test func foregroundFromBackgroundReopensListeners() {
        let foreground = plan(.foreground, .background)
        #expect(stages(foreground) == ["will-enter-foreground@background", "did-become-active@active"])
        #expect(foreground?.stages[0].steps == [.policy(.openListeners), .policy(.connectDataSockets)])
        #expect(foreground?.budget == .foreground)
    }

    @Test func foregroundFromSuspendedResumesTheAppBeforeReopening() {
        let foreground = plan(.foreground, .suspended)
        #expect(stages(foreground) == ["will-enter-foreground@background", "did-become-active@active"])
        #expect(foreground?.stages[0].steps == [.policy(.resumeApp), .policy(.openListeners), .policy(.connectDataSockets)])
    }

    @Test func terminateRunsWillTerminateExceptFromSuspended() {
        for state in [AppState.active, .background] {
            let terminate = plan(.terminate, state)
            #expect(stages(terminate) == ["will-terminate@\(state)"])
            #expect(terminate?.finalState == .notRunning)
            #expect(terminate?.budget == .terminate)
            #expect(terminate?.stages.first?.steps == [.policy(.closeListeners), .policy(.closeDataSockets)])
        }
        let jetsam = plan(.terminate, .suspended)
        #expect(jetsam?.stages == [])
        #expect(jetsam?.finalState == .notRunning)
    }

    @Test func exitsOnSuspendTerminatesOnBackground() {
        let traits = LifecycleTraits(exitsOnSuspend: true)
        let background = plan(.background, .active, traits)
        #expect(stages(background) == ["will-resign-active@inactive", "did-enter-background@background"], "no callback after: it is suspended, then ends")
        #expect(background?.finalState == .notRunning)
        // Such an app never runs in the background, so it is never launched there.
        guard case .refused(let why) = LifecycleRules.decide(.launch(background: true), in: .notRunning, traits: traits) else {
            Issue.record("launch --background of an app that exits on suspend was not refused")
            return
        }
        #expect(why == "exits-on-suspend = yes: it never runs in the background (launch it without --background)")
        // The reason names the key the app has.
        var noMultitasking = traits
        noMultitasking.exitsOnSuspendKey = "multitasking = no"
        guard case .refused(let named) = LifecycleRules.decide(.launch(background: true), in: .notRunning, traits: noMultitasking) else {
            Issue.record("launch --background of an app without multitasking was not refused")
            return
        }
        #expect(named.hasPrefix("multitasking = no: "))
        var configuration = AppConfiguration(name: "a")
        configuration.multitasking = false
        #expect(configuration.traits(hasDelegate: false).exitsOnSuspendKey == "multitasking = no")
        configuration.exitsOnSuspend = true
        #expect(configuration.traits(hasDelegate: false).exitsOnSuspendKey == "exits-on-suspend = yes")
    }

    @Test func delegateAndHookStepsFollowThePolicySteps() {
        let traits = LifecycleTraits(hasDelegate: true, hooks: [.didEnterBackground])
        let background = plan(.background, .active, traits)
        #expect(background?.stages[0].steps == [.delegate])
        #expect(background?.stages[1].steps == [.policy(.closeListeners), .policy(.closeConnections), .policy(.applyDataSocketPolicy), .delegate, .hook])
    }

    @Test(arguments: [
        (LifecycleCommand.launch(background: false), AppState.active),
        (.launch(background: true), .background),
        (.launch(background: false), .suspended),
        (.foreground, .active),
        (.background, .background),
        (.background, .suspended),
        (.suspend, .suspended),
        (.terminate, .notRunning),
        (.interruptBegin, .inactive),
    ])
    func askingForTheCurrentStateIsAlready(command: LifecycleCommand, state: AppState) {
        #expect(LifecycleRules.decide(command, in: state, traits: plain) == .already(state))
    }

    @Test(arguments: [
        (LifecycleCommand.foreground, AppState.notRunning),
        (.background, .notRunning),
        (.suspend, .notRunning),
        (.suspend, .active),
        (.suspend, .inactive),
        (.foreground, .inactive),
        (.interruptBegin, .notRunning),
        (.interruptBegin, .background),
        (.interruptBegin, .suspended),
        (.interruptEnd, .active),
        (.interruptEnd, .background),
        (.interruptEnd, .notRunning),
    ])
    func impossibleCommandsAreRefused(command: LifecycleCommand, state: AppState) {
        guard case .refused(let message) = LifecycleRules.decide(command, in: state, traits: plain) else {
            Issue.record("\(command) in \(state) was not refused")
            return
        }
        #expect(!message.isEmpty)
    }

    @Test func anInterruptionResignsActiveAndRestsInactiveWithItsListenersUntilItEnds() {
        let begin = plan(.interruptBegin, .active, LifecycleTraits(hooks: [.willResignActive]))
        #expect(stages(begin) == ["will-resign-active@inactive"])
        #expect(begin?.finalState == .inactive)
        #expect(begin?.budget == .background)
        #expect(begin?.stages[0].steps == [.hook], "no listener is closed: an alert does not stop the app")
        let end = plan(.interruptEnd, .inactive)
        #expect(stages(end) == ["did-become-active@active"])
        #expect(end?.finalState == .active)
        // Leaving for the background from the interruption: it has resigned active already.
        let background = plan(.background, .inactive)
        #expect(stages(background) == ["did-enter-background@background"])
        #expect(background?.stages[0].steps == [.policy(.closeListeners), .policy(.closeConnections), .policy(.applyDataSocketPolicy)])
        #expect(stages(plan(.background, .inactive, LifecycleTraits(exitsOnSuspend: true))) == ["did-enter-background@background"])
        #expect(plan(.background, .inactive, LifecycleTraits(exitsOnSuspend: true))?.finalState == .notRunning)
        #expect(stages(plan(.terminate, .inactive)) == ["will-terminate@inactive"])
    }

    @Test func suspendIsImmediateWhenEligibleAndPendingOtherwise() {
        #expect(LifecycleRules.decide(.suspend, in: .background, traits: plain, suspendEligible: true) == .suspendNow)
        #expect(LifecycleRules.decide(.suspend, in: .background, traits: plain, suspendEligible: false) == .suspendWhenEligible)
    }

    @Test func suspendEligibilityNeedsBackgroundNoTransitionNoTaskNoExpirationNoContinuousMode() {
        func blocker(_ state: AppState = .background, transition: Bool = false, tasks: Int = 0, expiring: Bool = false,
                     continuous: Bool = false) -> String? {
            LifecycleRules.suspendBlocker(state: state, transitionRunning: transition, openTasks: tasks,
                                          expirationRunning: expiring, continuousMode: continuous)
        }
        #expect(blocker() == nil)
        #expect(blocker(.active) == "it is active, not in background")
        #expect(blocker(transition: true) == "a transition is running")
        #expect(blocker(tasks: 2) == "2 background tasks are open")
        #expect(blocker(expiring: true) == "an expiration handler is running", "even after its task has ended")
        #expect(blocker(tasks: 1, continuous: true)?.hasPrefix("its background mode is continuous") == true,
                "the mode is named, not the tasks")
    }
}
