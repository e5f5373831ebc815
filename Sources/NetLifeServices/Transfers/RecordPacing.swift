// When a download's record goes to the disk, as a pure value (the timer and the disk queue are PartFile's).
// The machine asks for a record every `recordInterval` bytes (1 MiB); each one costs an fsync of the part, a
// write, an fsync and a rename of the record, and an fsync of the directory, off the loop. Into a fast file
// system (a tmpfs) that is a thousand records per GiB, about 4.6% of the CPU of a 1 GiB https download, for
// progress that is a few milliseconds newer. So a record that only moves the offset on is written at most
// once per `spacing`; in between, the part alone is fsynced, once per record asked for and never two at a
// time, so that the disk writes the part back as steadily as before. (Spacing the fsyncs as well lets 50 MB
// and more pile up between two of them on a disk, and an append on the loop then waits for the journal:
// `status` p99 went from 3 ms to 8 to 23 ms in the https benchmark.) The newest record held is written once
// nothing is in flight and the spacing is over (the shell wakes it at the time named). A record that says
// anything else (a new validator, a digest, a stop's) is written at once. A crash loses at most the bytes of
// one interval or one spacing, whichever is more; the record never vouches for bytes the part does not hold.

import NetLifeEvent

/// What to do with the records of one part.
struct RecordPacing: Equatable {
    /// The least time between two records that only move the offset on.
    static let spacing: Duration = .milliseconds(100)

    enum Decision: Equatable {
        /// Queue this record now (the part's fsync, then the record).
        case write(DownloadRecord)
        /// Queue the part's fsync alone, and call `wake(now:)` at this time for the record held.
        case sync(until: MonotonicTime)
        /// Nothing now: what is in flight brings the held record back when it is done.
        case hold
        /// Nothing now: call `wake(now:)` at this time.
        case holdUntil(MonotonicTime)
    }

    /// Records and fsyncs queued and not yet done.
    private(set) var inFlight = 0
    private var lastQueued: DownloadRecord?
    private var lastQueuedAt: MonotonicTime?
    /// The newest record held back.
    private(set) var held: DownloadRecord?
    /// Whether the part went into place: no record is written after that.
    private(set) var isPlaced = false

    /// A record the machine asked for; `mustWrite` for one that has to reach the disk now (a stop's).
    mutating func offer(_ record: DownloadRecord, mustWrite: Bool, now: MonotonicTime) -> Decision {
        if isPlaced { return .hold }
        var onlyMoved = record
        onlyMoved.offset = lastQueued?.offset ?? record.offset
        if !mustWrite, onlyMoved == lastQueued {
            held = record
            if inFlight > 0 { return .hold }
            if let last = lastQueuedAt, now < last + Self.spacing {
                inFlight += 1
                return .sync(until: last + Self.spacing)
            }
        }
        return queue(record, now: now)
    }

    /// The record or fsync in flight is done (or failed: the shell stops the download then).
    mutating func written(now: MonotonicTime) -> Decision {
        inFlight = max(0, inFlight - 1)
        return release(now: now)
    }

    /// The time `sync(until:)` or `holdUntil` named came.
    mutating func wake(now: MonotonicTime) -> Decision {
        release(now: now)
    }

    /// The download stopped: its own last record (a pause's) is already queued, and a record held from
    /// before is not written after it (nor after a cancel has removed the files).
    mutating func stopped() {
        held = nil
    }

    /// The part goes into place: nothing held is written any more.
    mutating func placed() {
        isPlaced = true
        held = nil
    }

    private mutating func release(now: MonotonicTime) -> Decision {
        guard let next = held, !isPlaced else { return .hold }
        if inFlight > 0 { return .hold }
        if let last = lastQueuedAt, now < last + Self.spacing { return .holdUntil(last + Self.spacing) }
        return queue(next, now: now)
    }

    private mutating func queue(_ record: DownloadRecord, now: MonotonicTime) -> Decision {
        held = nil
        inFlight += 1
        lastQueued = record
        lastQueuedAt = now
        return .write(record)
    }
}
