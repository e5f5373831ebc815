// The FTP downloader's rules as a pure state machine (docs/http.md), driven by its shell
// (FTPDownload) which runs each step on libcurl (FTP or FTPS; passive mode, SIZE, MDTM, REST and RETR are
// libcurl's). The part file and its record are those of the HTTP downloader (`PATH.part`, `DownloadRecord` in
// `PATH.part.meta`), with the file's modification time (MDTM, as an HTTP-date) as the validator and its size
// (SIZE) as the total, so that a paused download resumes with `REST N` only when the server's file is
// provably the one whose first N bytes are on disk.

/// The state of one FTP download and its decisions. A value: `mutating` events in, actions out.
///
/// Rules:
/// - Every start asks for the file's size and modification time first (`probe`).
/// - Bytes on disk whose record has the same size and time: a part of the whole size is complete (renamed
///   into place); a shorter one is resumed from its length (`REST`). Anything else (no record, another
///   size or time, a server that tells neither) starts over from 0: the part is cut and a new record
///   written before the first byte.
/// - A server that refuses `REST` gets the whole file asked for again, from 0.
/// - The retrieval must end at the size when there is one; shorter is a pause, longer a failure. An empty
///   file is complete without a retrieval.
/// - A connection that cannot be made or breaks pauses; a TLS failure (the certificate) or a refusal that a
///   retry does not fix (the file does not exist) fails.
public struct ResumableFTPDownload: Sendable {
    public typealias State = TransferState

    /// What the shell does, in the order given.
    public enum Action: Equatable, Sendable {
        /// Ask for the file's size and modification time (no data); call `probed`.
        case probe
        /// Retrieve the file from `offset` (REST when above 0), appending to the part: `bodyBytes` after
        /// each write, `retrieved` at the end.
        case retrieve(from: Int)
        /// Stop the request that is running.
        case closeConnection
        case truncatePart(to: Int)
        case writeRecord(DownloadRecord)
        case renameIntoPlace
        case removeRecord
        case report(State)
    }

    private enum Phase: Equatable, Sendable {
        case stopped, probing
        case retrieving(from: Int)
        case renaming
    }

    public let url: URLParts
    public private(set) var state: State = .idle
    public var bytesDone: Int { ledger.bytesDone }
    public var record: DownloadRecord { ledger.record }
    private var ledger: PartLedger
    private var phase = Phase.stopped

    /// As `ResumableDownload.init`: the record and the part's size an earlier run left.
    public init(url: URLParts, existing: DownloadRecord?, partSize: Int, recordInterval: Int = ResumableDownload.defaultRecordInterval) {
        self.url = url
        ledger = PartLedger(url: url, existing: existing, partSize: partSize, recordInterval: recordInterval)
    }

    public var total: Int? { record.total }

    // MARK: Events

    public mutating func start() -> [Action] {
        switch state {
        case .running, .done: return []
        case .idle, .paused, .failed: break
        }
        state = .running
        var actions: [Action] = [.report(.running)]
        guard url.scheme.isFTP else { return actions + stop(.failed("\(url.scheme.rawValue) is not an FTP URL")) }
        if ledger.needsCut { actions.append(.truncatePart(to: bytesDone)) }
        ledger.needsCut = false
        phase = .probing
        return actions + [.probe]
    }

    /// The server's answer to the probe: the size and the modification time (seconds since 1970, UTC), each
    /// nil when the server does not tell.
    public mutating func probed(size: Int?, modified: Int64?) -> [Action] {
        guard state == .running, phase == .probing else { return [] }
        let validator = modified.map { DownloadValidator.lastModified(HTTPRanges.httpDate($0)) }
        if bytesDone > 0, let validator, record.validator == validator, let size, record.total == size {
            if bytesDone == size { return complete() }
            if bytesDone < size { return retrieve(from: bytesDone) }
        }
        // An empty file needs no RETR: its whole is known.
        if size == 0 { return startOver(validator: validator, size: 0, retrieving: false) + complete() }
        return startOver(validator: validator, size: size)
    }

    /// The shell appended `count` bytes to the part.
    public mutating func bodyBytes(_ count: Int) -> [Action] {
        guard count >= 0, state == .running, case .retrieving = phase else { return [] }
        switch ledger.append(count, end: record.total) {
        case .kept(let recordDue):
            return recordDue ? [writeRecord()] : []
        case .pastEnd:
            phase = .stopped
            return [.closeConnection, .truncatePart(to: bytesDone), writeRecord()]
                + stop(.failed("server sent more than the \(bytesDone) bytes of the file"))
        }
    }

    /// The retrieval ended as the server says it completed.
    public mutating func retrieved() -> [Action] {
        guard state == .running, case .retrieving = phase else { return [] }
        if let total = record.total, bytesDone < total {
            return stop(.paused("the transfer ended after \(bytesDone) of \(total) bytes"))
        }
        ledger.record.total = bytesDone
        return complete()
    }

    /// The server refused to resume (REST): the whole file again.
    public mutating func restRefused() -> [Action] {
        guard state == .running, case .retrieving(let offset) = phase, offset > 0 else { return [] }
        return startOver(validator: record.validator, size: record.total)
    }

    /// The request could not be made or broke: paused, to resume later.
    public mutating func connectionFailed(_ reason: String) -> [Action] {
        guard state == .running, phase != .stopped, phase != .renaming else { return [] }
        return stop(.paused(reason))
    }

    /// The request ended for a reason a retry at once would not fix (a certificate that does not verify, a
    /// file the server does not have): failed, part and record kept.
    public mutating func requestFailed(_ reason: String) -> [Action] {
        guard state == .running, phase != .stopped, phase != .renaming else { return [] }
        return stop(.failed(reason))
    }

    public mutating func pause(_ reason: String) -> [Action] {
        guard state == .running else { return [] }
        return stop(.paused(reason))
    }

    /// The shell renamed the part into place.
    public mutating func renamed() -> [Action] {
        guard state == .running, phase == .renaming else { return [] }
        phase = .stopped
        state = .done
        return [.removeRecord, .report(.done)]
    }

    // MARK: Steps

    private mutating func retrieve(from offset: Int) -> [Action] {
        phase = .retrieving(from: offset)
        return [.retrieve(from: offset)]
    }

    private mutating func startOver(validator: DownloadValidator?, size: Int?, retrieving: Bool = true) -> [Action] {
        ledger.startOver(DownloadRecord(url: url, validator: validator, total: size))
        return [.closeConnection, .truncatePart(to: 0), writeRecord()] + (retrieving ? retrieve(from: 0) : [])
    }

    private mutating func complete() -> [Action] {
        phase = .renaming
        return [.renameIntoPlace]
    }

    private mutating func stop(_ newState: State) -> [Action] {
        var actions: [Action] = []
        if phase != .stopped && phase != .renaming { actions.append(.closeConnection) }
        if case .paused = newState { actions.append(writeRecord()) }
        phase = .stopped
        state = newState
        return actions + [.report(newState)]
    }

    private mutating func writeRecord() -> Action {
        .writeRecord(ledger.written())
    }
}
