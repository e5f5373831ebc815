// The idle-background rule as pure decisions: bytes, accepts, tasks and transfers are use; an open
// connection that moves nothing is not, unless the app says so; an idle app goes at most a tenth late.

import NetLife
import Testing

@Suite struct IdleRuleTests {
    static let zero = MonotonicTime(nanoseconds: 1_000_000_000)
    static func at(_ milliseconds: Int) -> MonotonicTime { zero + .milliseconds(milliseconds) }

    @Test func anAppNothingUsesIsIdleAfterItsTimeAndLooksEveryTenth() {
        var rule = IdleRule(after: .seconds(10), keepsConnections: false, now: Self.zero, use: .init())
        #expect(rule.restart(now: Self.zero, use: .init()) == .look(at: Self.at(1_000)))
        #expect(rule.look(now: Self.at(1_000), use: .init()) == .look(at: Self.at(2_000)))
        #expect(rule.look(now: Self.at(9_500), use: .init()) == .look(at: Self.at(10_000)), "the next look is at the deadline, not past it")
        #expect(rule.look(now: Self.at(10_000), use: .init()) == .idle(for: .seconds(10)))
    }

    @Test func movedBytesAndAcceptsAreUseAnOpenSilentConnectionIsNot() {
        var rule = IdleRule(after: .seconds(1), keepsConnections: false, now: Self.zero, use: .init())
        #expect(rule.look(now: Self.at(900), use: .init(moves: 3, openConnections: 1)) == .look(at: Self.at(1_000)))
        #expect(rule.lastUse == Self.at(900))
        #expect(rule.look(now: Self.at(1_500), use: .init(accepted: 1, moves: 3, openConnections: 2)) == .look(at: Self.at(1_600)))
        #expect(rule.lastUse == Self.at(1_500), "an accept is use")
        #expect(rule.look(now: Self.at(2_500), use: .init(accepted: 1, moves: 3, openConnections: 2)) == .idle(for: .seconds(1)),
                "two connections open and silent for a second: idle")
    }

    @Test func tasksTransfersAndWhenAskedOpenConnectionsHoldTheAppAwake() {
        for use in [IdleRule.Use(openTasks: 1), IdleRule.Use(runningTransfers: 1)] {
            var rule = IdleRule(after: .seconds(1), keepsConnections: false, now: Self.zero, use: use)
            #expect(rule.look(now: Self.at(5_000), use: use) == .look(at: Self.at(5_100)), "\(use)")
        }
        var streaming = IdleRule(after: .seconds(1), keepsConnections: true, now: Self.zero, use: .init(openConnections: 1))
        #expect(streaming.look(now: Self.at(5_000), use: .init(openConnections: 1)) == .look(at: Self.at(5_100)))
        #expect(streaming.look(now: Self.at(5_100), use: .init()) == .look(at: Self.at(5_200)))
        #expect(streaming.look(now: Self.at(5_950), use: .init()) == .look(at: Self.at(6_000)))
        #expect(streaming.look(now: Self.at(6_000), use: .init()) == .idle(for: .seconds(1)),
                "a second after the last look that saw its connection open")
    }

    @Test func theLookIntervalIsATenthBetween100msAnd10s() {
        let rule = { (after: Duration) in IdleRule(after: after, keepsConnections: false, now: Self.zero, use: .init()).interval }
        #expect(rule(.milliseconds(500)) == .milliseconds(100))
        #expect(rule(.seconds(30)) == .seconds(3))
        #expect(rule(.seconds(3600)) == .seconds(10))
    }
}

/// A process app's program: netlifed sees its CPU time and the connections it holds, not its bytes.
@Suite struct IdleRuleProgramTests {
    static let zero = IdleRuleTests.zero
    static func at(_ milliseconds: Int) -> MonotonicTime { IdleRuleTests.at(milliseconds) }

    @Test func aProgramsCPUTimeIsUseOnlyAboveItsShareOfTheTimeBetweenLooks() {
        var rule = IdleRule(after: .seconds(1), keepsConnections: false, now: Self.zero, use: .init())
        // A server's own timers: 0.2 % of the 100 ms between looks.
        #expect(rule.look(now: Self.at(100), use: .init(programCPU: .microseconds(200))) == .look(at: Self.at(200)))
        #expect(rule.lastUse == Self.zero, "the idle noise of its timers is no use")
        // A job: 1 % of the 100 ms since the last look.
        _ = rule.look(now: Self.at(200), use: .init(programCPU: .microseconds(1_200)))
        #expect(rule.lastUse == Self.at(200), "CPU time of 1 % of the interval is use")
        // A program that restarted counts from less: that is use too.
        _ = rule.look(now: Self.at(300), use: .init(programCPU: .zero))
        #expect(rule.lastUse == Self.at(300))
        #expect(rule.look(now: Self.at(1_300), use: .init(programCPU: .microseconds(500))) == .idle(for: .seconds(1)),
                "0.05 % over a second: idle")
    }

    @Test func aChangeInTheProgramsConnectionsIsUseAndOpenOnesHoldItOnlyWhenAsked() {
        var rule = IdleRule(after: .seconds(1), keepsConnections: false, now: Self.zero, use: .init())
        _ = rule.look(now: Self.at(500), use: .init(programConnections: 2))
        #expect(rule.lastUse == Self.at(500), "connections came: as an accept is")
        #expect(rule.look(now: Self.at(1_500), use: .init(programConnections: 2)) == .idle(for: .seconds(1)),
                "two connections held a second, the program idle: no use")
        var streaming = IdleRule(after: .seconds(1), keepsConnections: true, now: Self.zero, use: .init(programConnections: 1))
        #expect(streaming.look(now: Self.at(5_000), use: .init(programConnections: 1)) == .look(at: Self.at(5_100)),
                "with idle-keeps-connections an open connection of the program holds the app")
    }
}
