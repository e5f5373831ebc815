// The rules of a data socket, without sockets: each lifecycle step and socket event, and the actions the
// machine asks for.

import Testing
@testable import NetLife

@Suite(.timeLimit(.minutes(5))) struct DataSocketMachineTests {
    /// A socket launched into the foreground and connected.
    func connected(_ policy: DataSocketPolicy, voip: Bool = false) -> DataSocketMachine {
        var machine = DataSocketMachine(policy: policy, voip: voip)
        #expect(machine.appLaunched(background: false) == [.connect])
        #expect(machine.state == .connecting)
        #expect(machine.connected() == [])
        #expect(machine.state == .connected)
        return machine
    }

    @Test func closePolicyClosesOnBackgroundAndReconnectsOnForeground() {
        var machine = connected(.close)
        #expect(machine.appEnteredBackground() == [.close(flush: true)])
        #expect(machine.state == .closed)
        #expect(machine.appSuspended() == [.pauseReading])
        #expect(machine.appWillEnterForeground() == [.resumeReading, .connect])
        #expect(machine.state == .connecting)
    }

    @Test func quietPolicyEntersAndLeavesQuietMode() {
        var machine = connected(.quiet)
        #expect(machine.appEnteredBackground() == [.enterQuiet])
        #expect(machine.state == .quiet)
        #expect(machine.appWillEnterForeground() == [.leaveQuiet])
        #expect(machine.state == .connected)
    }

    @Test func quietPolicyGoesQuietWhenAConnectFinishesInTheBackground() {
        var machine = DataSocketMachine(policy: .quiet, voip: false)
        #expect(machine.appLaunched(background: true) == [.connect])
        #expect(machine.connected() == [.enterQuiet])
        #expect(machine.state == .quiet)
    }

    @Test func aBackgroundLaunchLeavesCloseSocketsForTheForeground() {
        var machine = DataSocketMachine(policy: .close, voip: false)
        #expect(machine.appLaunched(background: true) == [])
        #expect(machine.state == .closed)
        #expect(machine.appWillEnterForeground() == [.connect])
    }

    @Test func keepPolicyLeavesTheSocketAlone() {
        var machine = connected(.keep)
        #expect(machine.appEnteredBackground() == [])
        #expect(machine.state == .connected)
    }

    @Test func errorsInTheForegroundReconnectWithDoublingBackOffUpToFiveSeconds() {
        var machine = connected(.keep)
        var delays: [Duration] = []
        for _ in 0..<8 {
            guard case .scheduleReconnect(let delay)? = machine.disconnected().first else {
                Issue.record("no reconnect scheduled")
                return
            }
            delays.append(delay)
            #expect(machine.reconnectDue() == [.connect])
        }
        #expect(delays == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800),
                           .milliseconds(1600), .milliseconds(3200), .seconds(5), .seconds(5)])
        // A connect alone does not reset the back-off (a peer that accepts and closes at once, a refused
        // login): only a connection that lasted does.
        _ = machine.connected()
        #expect(machine.disconnected() == [.scheduleReconnect(.seconds(5))])
        _ = machine.reconnectDue()
        _ = machine.connected()
        machine.connectionStable()
        #expect(machine.disconnected() == [.scheduleReconnect(.milliseconds(100))])
    }

    @Test func errorsOutsideTheForegroundWaitForIt() {
        var machine = connected(.keep)
        _ = machine.appEnteredBackground()
        #expect(machine.disconnected() == [])
        #expect(machine.state == .closed)
        #expect(machine.appWillEnterForeground() == [.connect])
    }

    @Test func leavingTheForegroundCancelsAScheduledReconnect() {
        var machine = connected(.keep)
        _ = machine.disconnected()
        #expect(machine.reconnectScheduled)
        #expect(machine.appEnteredBackground() == [.cancelReconnect])
        #expect(machine.reconnectDue() == [])
    }

    @Test func suspensionPausesReadsExceptOnVoIPSocketsUntilTheForegroundThroughWakeUps() {
        var plain = connected(.keep)
        _ = plain.appEnteredBackground()
        #expect(plain.appSuspended() == [.pauseReading])
        // A wake-up runs only what woke it: a plain socket stays unread, paused once.
        #expect(plain.appWokeInBackground() == [])
        #expect(plain.readsPaused)
        #expect(plain.appSuspended() == [])
        #expect(plain.appWokeInBackground() == [])
        #expect(plain.appWillEnterForeground() == [.resumeReading])
        #expect(!plain.readsPaused)
        var voip = connected(.keep, voip: true)
        _ = voip.appEnteredBackground()
        #expect(voip.appSuspended() == [])
        #expect(voip.appWokeInBackground() == [])
    }

    @Test func reclaimMakesAPlainSocketDefunctOnlyWhileSuspended() {
        var machine = connected(.quiet)
        #expect(machine.reclaim() == nil, "not suspended: nothing reclaimed")
        _ = machine.appEnteredBackground()
        #expect(machine.reclaim() == nil)
        _ = machine.appSuspended()
        #expect(machine.reclaim() == [.dissolve])
        #expect(machine.state == .defunct)
        #expect(machine.reclaim() == nil, "a defunct socket is not reclaimed twice")
        // Foreground: reads resume, the first read fails, and the error path reconnects.
        #expect(machine.appWillEnterForeground() == [.resumeReading])
        #expect(machine.state == .defunct)
        #expect(machine.disconnected() == [.scheduleReconnect(.milliseconds(100))])
        #expect(machine.reconnectDue() == [.connect])
    }

    @Test func voipSocketsAreNeverReclaimed() {
        var machine = connected(.keep, voip: true)
        _ = machine.appEnteredBackground()
        _ = machine.appSuspended()
        #expect(machine.reclaim() == nil)
        #expect(machine.state == .connected)
    }

    @Test func aConnectUnderWayWhenTheAppSuspendsIsDroppedUntilTheForeground() {
        var machine = DataSocketMachine(policy: .quiet, voip: false)
        _ = machine.appLaunched(background: true)
        #expect(machine.appSuspended() == [.close(flush: false)], "no protocol code may run for it while suspended")
        #expect(machine.state == .closed)
        #expect(machine.connected() == [], "a late completion is ignored")
        #expect(machine.reclaim() == nil)
        #expect(machine.appWillEnterForeground() == [.connect], "closed, never paused: it just connects")
        // A VoIP socket's connect goes on, and it reads when it completes.
        var voip = DataSocketMachine(policy: .keep, voip: true)
        _ = voip.appLaunched(background: true)
        #expect(voip.appSuspended() == [])
        #expect(voip.connected() == [])
        #expect(voip.state == .connected)
    }

    @Test func aVoIPSocketReconnectsInTheBackgroundAndWhileSuspended() {
        var machine = connected(.keep, voip: true)
        _ = machine.appEnteredBackground()
        _ = machine.appSuspended()
        #expect(machine.disconnected() == [.scheduleReconnect(.milliseconds(100))])
        #expect(machine.appSuspended() == [], "suspension keeps a VoIP socket's reconnect")
        #expect(machine.reconnectDue() == [.connect])
        var plain = connected(.keep)
        _ = plain.appEnteredBackground()
        #expect(plain.disconnected() == [], "a plain socket waits for the foreground")
    }

    @Test func terminateSaysGoodbyeThenClosesAfterTheFlush() {
        var machine = connected(.quiet)
        #expect(machine.appTerminating() == [.sayGoodbye, .close(flush: true)])
        #expect(machine.state == .closed)
        #expect(machine.disconnected() == [], "no reconnect once stopped")
        var stopped = connected(.keep)
        #expect(stopped.appStopped() == [.close(flush: false)])
        #expect(stopped.appStopped() == [])
    }
}
