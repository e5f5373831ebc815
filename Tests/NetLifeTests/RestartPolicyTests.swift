// The restart rules of process apps on a fake clock: which exits restart in each mode, the doubling delay
// and its cap, the series started over after a long run, the start limit, expected exits, and reset.

import Glibc
import NetLife
import NetLifeEvent
import Testing

private func at(_ milliseconds: Int) -> MonotonicTime {
    MonotonicTime(nanoseconds: UInt64(milliseconds) * 1_000_000 + 1_000_000_000)
}

@Suite struct RestartPolicyTests {
    @Test func eachModeRestartsAfterItsExits() {
        let exits: [ChildExitStatus] = [.exited(0), .exited(1), .signaled(SIGKILL), .signaled(SIGSEGV), .signaled(SIGTERM),
                                        .signaled(SIGHUP), .signaled(SIGINT), .signaled(SIGPIPE)]
        #expect(exits.map { RestartPolicy.restarts(.no, after: $0) } == Array(repeating: false, count: 8))
        #expect(exits.map { RestartPolicy.restarts(.always, after: $0) } == Array(repeating: true, count: 8))
        #expect(exits.map { RestartPolicy.restarts(.onFailure, after: $0) } == [false, true, true, true, false, false, false, false])
    }

    @Test func delaysDoubleFromAHundredMillisecondsToTheCap() {
        var policy = RestartPolicy(mode: .always, startLimitBurst: 1000)
        var delays: [Duration] = []
        var now = 0
        for _ in 0..<12 {
            policy.launched(now: at(now))
            now += 50
            guard case .relaunch(let delay) = policy.exited(.exited(1), expected: false, now: at(now)) else {
                Issue.record("expected a relaunch")
                return
            }
            delays.append(delay)
            now += Int(delay.milliseconds)
        }
        #expect(delays.prefix(9) == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1600),
                                     .milliseconds(3200), .milliseconds(6400), .milliseconds(12800), .milliseconds(25600)])
        #expect(delays.suffix(3) == [.seconds(30), .seconds(30), .seconds(30)])
        #expect(policy.consecutiveRestarts == 12)
    }

    @Test func aProgramThatRanTenSecondsStartsTheSeriesOver() {
        var policy = RestartPolicy(mode: .onFailure)
        policy.launched(now: at(0))
        #expect(policy.exited(.exited(1), expected: false, now: at(10)) == .relaunch(after: .milliseconds(100)))
        policy.launched(now: at(110))
        #expect(policy.exited(.exited(1), expected: false, now: at(120)) == .relaunch(after: .milliseconds(200)))
        policy.launched(now: at(320))
        #expect(policy.exited(.signaled(SIGSEGV), expected: false, now: at(10_320)) == .relaunch(after: .milliseconds(100)))
        policy.launched(now: at(10_420))
        #expect(policy.exited(.exited(1), expected: false, now: at(20_419)) == .relaunch(after: .milliseconds(200)), "9.999 s is not enough")
    }

    /// Starts the program `count` times, each run `runFor` ms long and relaunched after a fixed 10 ms;
    /// returns the time after the last relaunch's delay.
    private func crash(_ policy: inout RestartPolicy, times count: Int, runFor: Int) -> Int {
        var now = 0
        for _ in 0..<count {
            policy.launched(now: at(now))
            now += runFor
            #expect(policy.exited(.exited(3), expected: false, now: at(now)) == .relaunch(after: .milliseconds(10)))
            now += 10
        }
        return now
    }

    @Test func fiveStartsWithinTenSecondsIsACrashLoop() {
        var policy = RestartPolicy(mode: .always, initialDelay: .milliseconds(10), maxDelay: .milliseconds(10))
        let now = crash(&policy, times: 4, runFor: 1000)
        policy.launched(now: at(now))
        guard case .giveUp(let reason) = policy.exited(.exited(3), expected: false, now: at(now + 1000)) else {
            Issue.record("expected to give up")
            return
        }
        #expect(reason.hasPrefix("started 5 times within") && !reason.contains("exit status") && reason.contains("netlifectl launch"))
        // By hand: the limit starts over.
        policy.reset()
        policy.launched(now: at(now + 2000))
        #expect(policy.exited(.exited(3), expected: false, now: at(now + 2100)) == .relaunch(after: .milliseconds(10)))
    }

    @Test func startsSpreadOverMoreThanTheIntervalAreNoCrashLoop() {
        var policy = RestartPolicy(mode: .always, initialDelay: .milliseconds(10), maxDelay: .milliseconds(10))
        _ = crash(&policy, times: 20, runFor: 2600)
        #expect(policy.recentStarts.count == 5, "only the latest starts are kept")
    }

    @Test func exitsNetlifedCausedAndModeNoNeverRestart() {
        var policy = RestartPolicy(mode: .always)
        policy.launched(now: at(0))
        #expect(policy.exited(.signaled(SIGKILL), expected: true, now: at(10)) == .none)
        #expect(policy.runningSince == nil)
        var never = RestartPolicy(mode: .no)
        never.launched(now: at(0))
        #expect(never.exited(.exited(1), expected: false, now: at(10)) == .none)
        var clean = RestartPolicy(mode: .onFailure)
        clean.launched(now: at(0))
        #expect(clean.exited(.exited(0), expected: false, now: at(10)) == .none)
        #expect(clean.consecutiveRestarts == 0)
    }

    @Test func oddParametersAreClampedAndHugeCountsDoNotOverflow() {
        let policy = RestartPolicy(mode: .always, initialDelay: .seconds(-1), maxDelay: .seconds(-5), startLimitBurst: 0)
        #expect(policy.initialDelay == .zero && policy.maxDelay == .zero && policy.startLimitBurst == 1)
        var long = RestartPolicy(mode: .always, initialDelay: .seconds(1), maxDelay: .seconds(3600), startLimitBurst: 10_000)
        for index in 0..<200 {
            long.launched(now: at(index * 4_000_000))
            _ = long.exited(.exited(1), expected: false, now: at(index * 4_000_000 + 1))
        }
        #expect(long.exited(.exited(1), expected: false, now: at(900_000_000)) == .relaunch(after: .seconds(3600)))
    }
}
