// The idle and low-speed limits every transfer is held to, as a pure value on a fake clock: when each limit
// is hit and when it is not, how the reason reads, and how often the shell samples.

import NetLifeEvent
@testable import NetLifeServices
import Testing

/// A clock for the tests: `at(1.5)` is 1.5 s after an arbitrary origin.
private func at(_ seconds: Double) -> MonotonicTime {
    MonotonicTime(nanoseconds: 1_000_000_000_000 + UInt64(seconds * 1e9))
}

@Suite(.timeLimit(.minutes(1))) struct TransferPaceTests {
    @Test func theDefaultsAreDocumented() {
        #expect(TransferLimits.defaults == TransferLimits(idleTimeout: .seconds(60), lowSpeedLimit: 100, lowSpeedTime: .seconds(60)))
        #expect(TransferLimits.defaults.checkInterval == .seconds(1))
    }

    @Test func noByteForTheIdleTimeoutIsAStall() {
        let limits = TransferLimits(idleTimeout: .seconds(60), lowSpeedLimit: 0, lowSpeedTime: .seconds(60))
        var pace = TransferPace(limits: limits, now: at(0))
        #expect(pace.check(bytes: 0, at: at(59.9)) == nil)
        #expect(pace.check(bytes: 0, at: at(60)) == .idle(for: .seconds(60)))
        #expect(TransferStall.idle(for: .seconds(60)).description == "no data for 60s")
    }

    @Test func everyByteRestartsTheIdleClock() {
        let limits = TransferLimits(idleTimeout: .seconds(1), lowSpeedLimit: 0, lowSpeedTime: .seconds(60))
        var pace = TransferPace(limits: limits, now: at(0))
        for step in 1...100 {
            #expect(pace.check(bytes: step, at: at(Double(step) * 0.9)) == nil, "a byte every 0.9 s, step \(step)")
        }
        #expect(pace.check(bytes: 100, at: at(90.5)) == nil)
        #expect(pace.check(bytes: 100, at: at(91)) == .idle(for: .seconds(1)))
        // A count that goes down (a new connection counted afresh by a careless caller) is no progress.
        var other = TransferPace(limits: limits, bytes: 500, now: at(0))
        #expect(other.check(bytes: 10, at: at(1)) == .idle(for: .seconds(1)))
    }

    @Test func aTrickleUnderTheLowSpeedLimitIsAStall() {
        // One byte every 0.5 s never trips a 1 s idle timeout, but 2 bytes/s is under 100 bytes/s.
        let limits = TransferLimits(idleTimeout: .seconds(1), lowSpeedLimit: 100, lowSpeedTime: .seconds(4))
        var pace = TransferPace(limits: limits, now: at(0))
        var stall: TransferStall?
        var when = 0.0
        for step in 1...20 where stall == nil {
            when = Double(step) * 0.5
            stall = pace.check(bytes: step, at: at(when))
        }
        #expect(stall == .slow(bytes: 8, over: .seconds(4), limit: 100))
        #expect(when == 4)
        #expect(stall?.description == "slower than 100 bytes/s for 4s (8 bytes)")
    }

    @Test func enoughBytesEachPeriodIsNoStall() {
        let limits = TransferLimits(idleTimeout: .seconds(10), lowSpeedLimit: 1000, lowSpeedTime: .seconds(2))
        var pace = TransferPace(limits: limits, now: at(0))
        // 1,000 bytes/s exactly, in bursts of 2,000 every 2 s: each period meets the limit.
        for period in 1...50 {
            #expect(pace.check(bytes: period * 2000, at: at(Double(period) * 2)) == nil, "period \(period)")
        }
        // Then a period with half the rate: a stall at its end, not before.
        #expect(pace.check(bytes: 101_000, at: at(101)) == nil)
        #expect(pace.check(bytes: 101_000, at: at(102)) == .slow(bytes: 1000, over: .seconds(2), limit: 1000))
    }

    @Test func aLimitOfZeroTurnsTheLowSpeedCheckOff() {
        let limits = TransferLimits(idleTimeout: .seconds(5), lowSpeedLimit: 0, lowSpeedTime: .milliseconds(100))
        var pace = TransferPace(limits: limits, now: at(0))
        for step in 1...40 { #expect(pace.check(bytes: step, at: at(Double(step))) == nil) }
    }

    @Test func theSamplingIntervalFollowsTheShortestLimit() {
        #expect(TransferLimits(idleTimeout: .seconds(2), lowSpeedLimit: 0, lowSpeedTime: .seconds(60)).checkInterval == .milliseconds(500))
        #expect(TransferLimits(idleTimeout: .seconds(60), lowSpeedLimit: 1, lowSpeedTime: .seconds(1)).checkInterval == .milliseconds(250))
        #expect(TransferLimits(idleTimeout: .milliseconds(20), lowSpeedLimit: 0, lowSpeedTime: .seconds(1)).checkInterval == .milliseconds(10))
        #expect(TransferStall.format(.milliseconds(1500)) == "1500ms")
    }

    @Test func aClockBeforeTheStartIsNoStall() {
        var pace = TransferPace(limits: .defaults, now: at(10))
        #expect(pace.check(bytes: 0, at: at(5)) == nil)
    }
}
