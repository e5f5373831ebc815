// RecordPacing with a fake clock: which records go to the disk, and when.

import NetLifeEvent
@testable import NetLifeServices
import Testing

@Suite struct RecordPacingTests {
    let url: URLParts
    init() throws { url = try URLParts(parsing: "https://example.org/file.bin") }

    func at(_ milliseconds: UInt64) -> MonotonicTime { MonotonicTime(nanoseconds: 1_000_000_000 + milliseconds * 1_000_000) }
    func record(_ offset: Int, total: Int? = 10 << 20) -> DownloadRecord { DownloadRecord(url: url, total: total, offset: offset) }

    @Test func theFirstRecordGoesAtOnceAndOneThatOnlyMovesOnWaitsForTheOneInFlight() {
        var pacing = RecordPacing()
        #expect(pacing.offer(record(1 << 20), mustWrite: false, now: at(0)) == .write(record(1 << 20)))
        #expect(pacing.offer(record(2 << 20), mustWrite: false, now: at(200)) == .hold)
        #expect(pacing.offer(record(3 << 20), mustWrite: false, now: at(300)) == .hold)
        // The newest held one goes once the one in flight is written, the spacing being over.
        #expect(pacing.written(now: at(400)) == .write(record(3 << 20)))
        #expect(pacing.held == nil && pacing.inFlight == 1)
        #expect(pacing.written(now: at(450)) == .hold, "nothing is held")
    }

    @Test func recordsThatOnlyMoveOnAreSpacedThePartIsSyncedMeanwhileAndTheNewestIsWrittenWhenTheSpacingEnds() {
        var pacing = RecordPacing()
        #expect(pacing.offer(record(1 << 20), mustWrite: false, now: at(0)) == .write(record(1 << 20)))
        // Written at once (a fast file system): the next one within 100 ms is held, the part fsynced alone.
        #expect(pacing.written(now: at(2)) == .hold)
        #expect(pacing.offer(record(2 << 20), mustWrite: false, now: at(3)) == .sync(until: at(100)))
        // Never two at a time: while that fsync is in flight the next one is only held.
        #expect(pacing.offer(record(3 << 20), mustWrite: false, now: at(5)) == .hold)
        #expect(pacing.held == record(3 << 20) && pacing.inFlight == 1)
        #expect(pacing.written(now: at(6)) == .holdUntil(at(100)))
        // A timer that fires a little early (a coarse clock) is told the time again.
        #expect(pacing.wake(now: at(99)) == .holdUntil(at(100)))
        #expect(pacing.wake(now: at(100)) == .write(record(3 << 20)), "the newest held record")
        #expect(pacing.written(now: at(101)) == .hold)
        // Past the spacing one goes at once.
        #expect(pacing.offer(record(4 << 20), mustWrite: false, now: at(250)) == .write(record(4 << 20)))
    }

    @Test func aWakeWhileAnFsyncIsInFlightLeavesTheRecordToItsEnd() {
        var pacing = RecordPacing()
        #expect(pacing.offer(record(1 << 20), mustWrite: false, now: at(0)) == .write(record(1 << 20)))
        #expect(pacing.written(now: at(1)) == .hold)
        #expect(pacing.offer(record(2 << 20), mustWrite: false, now: at(90)) == .sync(until: at(100)))
        // A slow disk: the fsync outlasts the spacing.
        #expect(pacing.wake(now: at(100)) == .hold)
        #expect(pacing.written(now: at(180)) == .write(record(2 << 20)))
    }

    @Test func aRecordThatMustBeWrittenOrSaysMoreGoesAtOnceAndReplacesTheHeldOne() {
        var pacing = RecordPacing()
        #expect(pacing.offer(record(1 << 20), mustWrite: false, now: at(0)) == .write(record(1 << 20)))
        #expect(pacing.offer(record(2 << 20), mustWrite: false, now: at(10)) == .hold)
        // A stop's record: at once, even with one in flight, and it is newer than the held one.
        #expect(pacing.offer(record(2 << 20 + 5), mustWrite: true, now: at(20)) == .write(record(2 << 20 + 5)))
        #expect(pacing.held == nil && pacing.inFlight == 2)
        #expect(pacing.written(now: at(30)) == .hold)
        #expect(pacing.written(now: at(40)) == .hold)
        // A record with a new total (a 200 that restarted) is no mere progress: at once.
        #expect(pacing.offer(record(0, total: 5), mustWrite: false, now: at(50)) == .write(record(0, total: 5)))
    }

    @Test func aRecordHeldWhenTheDownloadStopsIsNotWrittenAfterIt() {
        var pacing = RecordPacing()
        #expect(pacing.offer(record(1 << 20), mustWrite: false, now: at(0)) == .write(record(1 << 20)))
        #expect(pacing.written(now: at(1)) == .hold)
        #expect(pacing.offer(record(2 << 20), mustWrite: false, now: at(10)) == .sync(until: at(100)))
        // A failure stops it (no record of its own): the held one is not written later, by the fsync's end or
        // the timer, when a cancel may have removed the files.
        pacing.stopped()
        #expect(pacing.written(now: at(20)) == .hold)
        #expect(pacing.wake(now: at(100)) == .hold)
        #expect(pacing.inFlight == 0)
    }

    @Test func nothingIsWrittenOnceThePartIsInPlace() {
        var pacing = RecordPacing()
        #expect(pacing.offer(record(1 << 20), mustWrite: false, now: at(0)) == .write(record(1 << 20)))
        #expect(pacing.offer(record(2 << 20), mustWrite: false, now: at(10)) == .hold)
        pacing.placed()
        #expect(pacing.written(now: at(500)) == .hold)
        #expect(pacing.wake(now: at(500)) == .hold)
        #expect(pacing.offer(record(3 << 20), mustWrite: true, now: at(600)) == .hold)
    }
}
