// The files of one download, whatever its protocol (Download for HTTP and HTTPS, FTPDownload for FTP and FTPS): the partial
// file `OUTPUT.part`, opened for appending on first need, and its record `OUTPUT.part.meta`, replaced
// atomically after the part's bytes are on disk. The shells perform their machines' file actions here and
// turn an error into a pause.
//
// Every call by name here (open, stat, rename, unlink) runs with the identity of whoever asked for the download
// (`owner`; nil: the daemon's own, for root's requests), so it can do nothing that user could not; the part,
// its record and the record's temporary file are never opened through a symbolic link (O_NOFOLLOW), and the
// part must be a regular file. Appends and fsyncs work on the open descriptor and need no identity.

@preconcurrency import Glibc
import NetLifeEvent

/// `OUTPUT.part` and `OUTPUT.part.meta`. Loop-confined, as its shell is; `close()` before letting it go.
final class PartFile {
    /// Where the finished file goes.
    let output: String
    /// The partial file.
    var path: String { output + ".part" }
    /// The record of what the partial file holds.
    var recordPath: String { output + ".part.meta" }
    /// The part, open for appending once needed.
    private var file: FileDescriptor?
    /// Which records go to the disk, and when.
    private var pacing = RecordPacing()
    /// Wakes a record held for `RecordPacing.spacing`.
    private var heldRecordTimer: EventTimer?
    /// Whose rights the files are used with (nil: the daemon's).
    let owner: FileCredentials?

    init(output: String, owner: FileCredentials? = nil) {
        self.output = output
        self.owner = owner
    }

    /// What an earlier run left: the part's size (0 when there is none) and its record (nil when there is
    /// none or it does not decode).
    func leftOver() -> (size: Int, record: DownloadRecord?) {
        let (path, recordPath) = (self.path, self.recordPath)
        let size = (try? FileCredentials.acting(as: owner) { () -> Int in
            var info = stat()
            return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG ? Int(info.st_size) : 0
        }) ?? 0
        let record = try? RegularFile.read(recordPath, limit: RecordText.maxFileBytes, followLinks: false, as: owner).get()
        return (size, record.flatMap { DownloadRecord.decode(String(decoding: $0, as: UTF8.self)) })
    }

    /// Opens the part for appending (creating it) unless it is open: not through a symbolic link, and only a
    /// regular file (opened without blocking, so a FIFO planted there is refused, not waited on).
    private func openPart() throws(SystemError) {
        if file != nil { return }
        do throws(RegularFile.Failure) {
            file = try RegularFile.open(path, .writeOnly, options: [.create, .append, .noFollow], permissions: 0o644, as: owner)
        } catch {
            throw error.systemError(path)
        }
    }

    /// Opens the part for reading (a resumed part's digest), with the owner's identity, not through a link.
    func openForReading() throws(SystemError) -> FileDescriptor {
        do throws(RegularFile.Failure) {
            return try RegularFile.open(path, .readOnly, options: .noFollow, as: owner)
        } catch {
            throw error.systemError(path)
        }
    }

    /// Cuts the part to `length` bytes (creating it empty when it does not exist).
    func truncate(to length: Int) -> SystemError? {
        SystemError.catching { () throws(SystemError) in
            try openPart()
            try file?.truncate(to: length)
        }
    }

    /// Writes `bytes` to the end of the part.
    func append(_ bytes: UnsafeRawBufferPointer) -> SystemError? {
        SystemError.catching { () throws(SystemError) in
            try openPart()
            try file?.write(all: bytes)
        }
    }

    /// The record, atomically: the part's bytes reach the disk first, then the record replaces the old one.
    func writeRecord(_ record: DownloadRecord) -> SystemError? {
        SystemError.catching { () throws(SystemError) in
            try file?.sync()
            try FileCalls.writeAtomically(recordPath, Array(record.encoded().utf8), as: owner)
        }
    }

    /// Why the part may not go into place as the finished file: nil when it holds exactly `expectedLength`
    /// bytes, the entity's length. Whatever a machine believes, a file of another length (or of a length
    /// nobody knows, a machine's bug) is refused, so that a short or long file is never shown as finished.
    func lengthMismatch(expectedLength: Int?) -> String? {
        var info = stat()
        let path = self.path
        let size = (try? FileCredentials.acting(as: owner) { lstat(path, &info) == 0 ? Int(info.st_size) : 0 }) ?? 0
        guard let expectedLength else { return "the file's length is unknown; \(size) bytes not renamed into place" }
        return size == expectedLength ? nil : "the part holds \(size) bytes, not the \(expectedLength) of the file; not renamed into place"
    }

    /// The same, off the loop (TransferDisk): the part's bytes written so far reach the disk, then the record
    /// replaces the old one; `done` on the loop.
    func writeRecord(_ record: DownloadRecord, on disk: TransferDisk, done: @escaping (SystemError?) -> Void) {
        let (recordPath, text, owner) = (self.recordPath, Array(record.encoded().utf8), self.owner)
        sync(on: disk, then: { () throws(SystemError) in try FileCalls.writeAtomically(recordPath, text, as: owner) }, done: done)
    }

    /// A record off the loop, as `writeRecord(_:on:done:)`, paced by `RecordPacing`: one that only moves the
    /// offset on waits while another is in flight and for `RecordPacing.spacing` after the last (the part is
    /// fsynced meanwhile), unless `mustWrite` (a stop's record). The record on disk then vouches for fewer
    /// bytes than the part holds, which is safe; the newest one held is written once the wait is over. A
    /// failure goes to `failed`.
    func keep(_ record: DownloadRecord, mustWrite: Bool, on disk: TransferDisk, loop: EventLoop,
              failed: @escaping (SystemError) -> Void) {
        keeping = Keeping(disk: disk, loop: loop, failed: failed)
        follow(pacing.offer(record, mustWrite: mustWrite, now: loop.now))
    }

    /// Where `keep` sends the pacing's work, and whom it tells of a failure.
    private struct Keeping {
        let disk: TransferDisk
        let loop: EventLoop
        let failed: (SystemError) -> Void
    }
    private var keeping: Keeping?

    private func follow(_ decision: RecordPacing.Decision) {
        guard let keeping else { return }
        switch decision {
        case .hold:
            break
        case .holdUntil(let time):
            wake(at: time, on: keeping.loop)
        case .sync(let time):
            wake(at: time, on: keeping.loop)
            sync(on: keeping.disk, then: {}) { [weak self] in self?.finished($0) }
        case .write(let record):
            writeRecord(record, on: keeping.disk) { [weak self] in self?.finished($0) }
        }
    }

    /// A record or an fsync of the pacing's is done.
    private func finished(_ error: SystemError?) {
        guard let keeping else { return }
        let next = pacing.written(now: keeping.loop.now)
        if let error { return keeping.failed(error) }
        follow(next)
    }

    /// Calls the pacing back at `time`, unless a call is already due.
    private func wake(at time: MonotonicTime, on loop: EventLoop) {
        if heldRecordTimer?.isArmed == true { return }
        heldRecordTimer?.close()
        heldRecordTimer = loop.schedule(after: max(.zero, time - loop.now)) { [weak self, unowned loop] in
            guard let self else { return }
            follow(pacing.wake(now: loop.now))
        }
    }

    /// Off the loop, after the work queued before it: fsyncs the part when it is open, then `more`; `done`
    /// on the loop. The part may be closed on the loop meanwhile: the fsync works on a duplicate of its
    /// descriptor, which the disk queue owns and closes.
    private func sync(on disk: TransferDisk, then more: @escaping @Sendable () throws(SystemError) -> Void,
                      done: @escaping (SystemError?) -> Void) {
        let copy: CInt
        do throws(SystemError) {
            copy = try file?.duplicate().take() ?? -1
        } catch {
            return done(error)
        }
        let path = self.path
        disk.run({ () throws(SystemError) in
            if copy >= 0 {
                let file = FileDescriptor(owning: copy, name: path)
                try file.sync()
            }
            try more()
        }, done: done)
    }

    /// fsyncs and closes the part, renames it to the output path and fsyncs the directory, off the loop,
    /// after the records queued before it; `done` on the loop.
    func renameIntoPlace(on disk: TransferDisk, done: @escaping (SystemError?) -> Void) {
        pacing.placed()
        if let error = SystemError.catching({ () throws(SystemError) in try openPart() }) { return done(error) }
        let (path, output, owner) = (self.path, self.output, self.owner)
        sync(on: disk, then: { () throws(SystemError) in
            try FileCredentials.acting(as: owner) { () throws(SystemError) in
                try FileCalls.rename(path, to: output)
                try FileCalls.syncDirectory(of: output)
            }
        }, done: done)
        close()
    }

    /// Deletes the record (and fsyncs its directory), off the loop, after the work queued before it.
    func removeRecord(on disk: TransferDisk, done: @escaping (SystemError?) -> Void) {
        let (recordPath, owner) = (self.recordPath, self.owner)
        disk.run({ () throws(SystemError) in
            try FileCredentials.acting(as: owner) { () throws(SystemError) in
                try FileCalls.remove(recordPath)
                try FileCalls.syncDirectory(of: recordPath)
            }
        }, done: done)
    }

    /// Closes the part, when the download stops; the next write opens it again. A record held back is not
    /// written any more (the stop's own is queued before). Calling it again does nothing.
    func close() {
        file = nil
        pacing.stopped()
        heldRecordTimer?.close()
        heldRecordTimer = nil
    }
}

extension DownloadRecord {
    /// Where a download resumes from, for every protocol's machine: `existing` is the record read from the
    /// record file (nil when there is none or it did not decode), `partSize` the part's size on disk (0 when
    /// there is none). A record of another URL counts for nothing. When the record and the part disagree the
    /// smaller wins: a part shorter than the record lost bytes the record counted (its prefix is still
    /// good); bytes past the record's offset were written after the last record and are not vouched for,
    /// so the part must be cut back to it. Returns the record, its offset the bytes to keep, and whether the
    /// part must be cut to that offset.
    static func resumePoint(existing: DownloadRecord?, url: URLParts, partSize: Int) -> (record: DownloadRecord, cutPart: Bool) {
        let partSize = max(0, partSize)   // never negative from stat; clamped rather than trusted
        guard var record = existing, record.url == url else { return (DownloadRecord(url: url), partSize > 0) }
        record.offset = min(record.offset, partSize)
        return (record, partSize > record.offset)
    }
}

/// What a download's part holds and what its record vouches for: the bookkeeping the HTTP and FTP machines
/// share (each keeps one). The record is written every `recordInterval` bytes appended, and never vouches
/// for more bytes than the part holds.
struct PartLedger: Sendable {
    /// What the next written record says (its offset is set when it is written).
    var record: DownloadRecord
    /// The bytes in the part, once the shell has performed the actions given.
    private(set) var bytesDone: Int
    /// Whether the part on disk holds bytes past the record's offset, to be cut before anything is appended.
    var needsCut: Bool
    private var recordedOffset: Int
    private let recordInterval: Int

    /// As `DownloadRecord.resumePoint`: what an earlier run left.
    init(url: URLParts, existing: DownloadRecord?, partSize: Int, recordInterval: Int) {
        self.recordInterval = max(1, recordInterval)
        (record, needsCut) = DownloadRecord.resumePoint(existing: existing, url: url, partSize: partSize)
        bytesDone = record.offset
        recordedOffset = record.offset
    }

    /// What `append` found.
    enum Appended: Equatable {
        /// Kept; a record is due when `recordInterval` bytes were appended since the last one.
        case kept(recordDue: Bool)
        /// Past `end`: the part counts `end` bytes, and the shell must cut the rest off.
        case pastEnd
    }

    /// `count` more bytes were appended to the part, which may not grow past `end` (when known).
    mutating func append(_ count: Int, end: Int?) -> Appended {
        let (sum, overflow) = bytesDone.addingReportingOverflow(count)
        if let end, overflow || sum > end {
            bytesDone = end
            return .pastEnd
        }
        bytesDone = overflow ? .max : sum
        return .kept(recordDue: bytesDone - recordedOffset >= recordInterval)
    }

    /// The record to write now: it vouches for the bytes in the part.
    mutating func written() -> DownloadRecord {
        record.offset = bytesDone
        recordedOffset = bytesDone
        return record
    }

    /// Nothing of the part is kept (the shell cuts it to 0); `fresh` is the record from now on.
    mutating func startOver(_ fresh: DownloadRecord) {
        record = fresh
        bytesDone = 0
    }
}

