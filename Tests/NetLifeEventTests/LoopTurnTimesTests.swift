// The loop's turn times: the buckets a turn falls in, and turns of a real loop timed from their first callback
// to their end, whatever kind of source ran (a timer, a connection, a waker), without the waits between them.

import Foundation
import NetLifeEvent
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1)))
struct LoopTurnTimesTests {
    @Test func aTurnFallsInTheFirstBucketWhoseBoundItDoesNotPass() {
        var times = LoopTurnTimes()
        times.record(nanoseconds: 0)
        times.record(nanoseconds: 100_000)
        times.record(nanoseconds: 100_001)
        times.record(nanoseconds: 5_000_000)
        times.record(nanoseconds: 5_000_001)
        times.record(nanoseconds: 2_000_000_000)
        #expect(times.count == 6)
        #expect(times.sumNanoseconds == 2_010_200_002)
        let bounds = LoopTurnTimes.boundNanoseconds
        #expect(times.bucketCounts.count == bounds.count + 1)
        #expect(times.bucketCounts[0] == 2, "0 and exactly 100 µs")
        #expect(times.bucketCounts[1] == 1, "just past 100 µs")
        #expect(times.bucketCounts[bounds.firstIndex(of: 5_000_000)!] == 1, "exactly 5 ms")
        #expect(times.bucketCounts[bounds.firstIndex(of: 10_000_000)!] == 1, "just past 5 ms")
        #expect(times.bucketCounts.last == 1, "past every bound")
        #expect(bounds == bounds.sorted() && Set(bounds).count == bounds.count)
    }

    @Test func aLongCallbackMakesALongTurnAndTheWaitsBetweenTurnsAreNotCounted() throws {
        let loop = try EventLoop()
        defer { loop.close() }
        loop.measuresTurnTimes = true
        // Three turns apart: a short timer callback, one that works for 8 ms, a waker's closure; the loop waits
        // 20 ms between them, which no turn may count.
        var fired = 0
        let waker = try Waker(loop: loop)
        let first = EventTimer(loop: loop) { fired += 1 }
        let slow = EventTimer(loop: loop) {
            fired += 1
            let end = MonotonicTime.now() + .milliseconds(8)
            while MonotonicTime.now() < end {}
            waker.wake { }
        }
        first.arm(after: .milliseconds(20))
        slow.arm(after: .milliseconds(40))
        let before = loop.turnTimes
        #expect(runLoop(loop, timeout: .seconds(2)) { fired == 2 })
        usleep(20_000)
        #expect(runLoop(loop, timeout: .milliseconds(50)) { false } == false)
        let times = loop.turnTimes
        let counted = times.count - before.count
        let pastFiveMilliseconds = LoopTurnTimes.boundNanoseconds.firstIndex(of: 5_000_000)! + 1
        let longTurns = times.bucketCounts[pastFiveMilliseconds...].reduce(0, +)
        #expect(counted >= 3, "the first timer's turn, the slow one's and the waker's: \(counted)")
        #expect(longTurns == 1, "only the slow callback's turn passed 5 ms: \(times.bucketCounts)")
        let total = Double(times.sumNanoseconds) / 1e6
        // The poller of runLoop fires every millisecond: its turns are short. The waits (over 60 ms in all)
        // are not in the sum; the slow turn (8 ms) is.
        #expect(total >= 8 && total < 40, "turns add up to \(total) ms")
        waker.close()
        first.close()
        slow.close()
    }

    @Test func aLoopThatIsNotAskedCountsNoTurn() throws {
        let loop = try EventLoop()
        defer { loop.close() }
        var fired = 0
        let timer = EventTimer(loop: loop) { fired += 1 }
        timer.arm(after: .milliseconds(5))
        #expect(runLoop(loop, timeout: .seconds(2)) { fired == 1 })
        #expect(loop.turnTimes.count == 0)
        timer.close()
    }
}
