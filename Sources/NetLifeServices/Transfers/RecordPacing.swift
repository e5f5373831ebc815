// When a download's record goes to the disk, as a pure value (the timer and the disk queue are PartFile's).
// The machine asks for a record every `recordInterval` bytes (1 MiB); each one costs an fsync of the part, a
// write, an fsync and a rename of the record, and an fsync of the directory, off the loop. On a fast link
// into a fast file system (a tmpfs, or a disk that keeps up) that is a thousand records per GiB, a few
// percent of the CPU the whole download takes, for progress that is seconds old at most. So a record that
// only moves the offset on is written when none is in flight and at least `spacing` after the last one;
// otherwise it is held, and the newest held one is written as soon as both hold again (the shell wakes it
// at `holdUntil`). A record that says anything else (a new validator, a digest, a stop) is written at once.
// A crash loses at most the bytes of one interval or one spacing, whichever is more; the record on disk
// never vouches for bytes the part does not hold, as before.

import NetLifeEvent

/// What to do with the records of one part.
struct RecordPacing: Equatable {
    /// The least time between two records that only move the offset on.
    static let spacing: Duration = .milliseconds(100)

    enum Decision: Equatable {
        /// Queue this record now.
        case write(DownloadRecord)
        /// Nothing now: a record in flight brings the held one back when it is written.
        case hold
        /// Nothing now: call `wake(at:)` at this time.
        case holdUntil(MonotonicTime)
    }

    /// Records queued and not yet written.
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
            if inFlight > 0 {
                held = record
                return .hold
            }
            if let last = lastQueuedAt, now < last + Self.spacing {
                held = record
                return .holdUntil(last + Self.spacing)
            }
        }
        return queue(record, now: now)
    }

    /// The record in flight was written (or failed: the shell stops the download then).
    mutating func written(now: MonotonicTime) -> Decision {
        inFlight = max(0, inFlight - 1)
        return release(now: now)
    }

    /// The time `holdUntil` named came.
    mutating func wake(now: MonotonicTime) -> Decision {
        release(now: now)
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
