// The client side of resumable uploads (IETF resumable-upload draft; docs/http.md) as a pure state machine,
// the counterpart of ResumableDownload: the shell (Upload) tells it what happened (started with the file as it
// is now, a response head, an interim 104, the connection failed, the file changed, paused) and performs the
// actions it returns, in order. The record (`UploadRecord`, where the daemon chooses) keeps the upload
// resource's URL and the identity of the file it holds bytes of, so that a later run, even of a restarted
// daemon, asks the server for its offset with HEAD and sends only the rest.

/// What identifies the contents of the local file: a file whose size, modification time or inode changed is
/// another file, and its upload starts over.
public typealias UploadFileIdentity = FileInfo

/// The file bytes that follow a request's head: `count` bytes from `offset`.
public struct UploadBody: Equatable, Sendable {
    public var offset: Int
    public var count: Int

    public init(offset: Int, count: Int) {
        self.offset = offset
        self.count = count
    }
}

/// The state of one upload and the decisions of its transfer. A value: `mutating` events in, actions out.
///
/// Rules:
/// - Start without a record (or with one for another URL, or for another file: size, modification time or
///   inode changed): `POST` to the URL with `Upload-Complete: ?0`, `Upload-Length: SIZE` and no content (the
///   draft's careful creation: the resource's URL is known before a byte is sent). A 2xx with a `Location`
///   (resolved against the URL) gives the resource: the record is written, then `PATCH` from 0.
/// - Start with a record: `HEAD` on the resource. A 2xx with a valid `Upload-Offset` gives where to go on
///   from: `PATCH` from there. `Upload-Complete: ?1` at the file's size means it is done (the final response
///   was lost). An offset past the file, another `Upload-Length` or a complete upload of another size means
///   the resource is not this file's: a new upload.
/// - `PATCH` carries `Content-Type: application/partial-upload`, `Upload-Offset`, `Upload-Complete: ?1`,
///   `Upload-Length` and the rest of the file. A 2xx with `Upload-Complete: ?1` (or without the field) is
///   the final response: done, the record removed. A 104 with `Upload-Offset` moves `bytesDone` on.
/// - 409 on a PATCH: HEAD again (at most `maxConflicts` times in a row); 404 or 410 on the resource: a new
///   upload (at most `maxRestarts` times per start). 413: failed. Another 4xx or a 3xx: failed. 5xx, a
///   connection that breaks or cannot be made: paused (the record kept; `start()` resumes with HEAD).
public struct ResumableUpload: Sendable {
    /// What the shell does, in the order given.
    public enum Action: Equatable, Sendable {
        /// Send the request (libcurl), then the file's bytes `body` (when given; libcurl sets Content-Length):
        /// `interimHead` for a 1xx head, `responseHead` for the final one. A connection that cannot be
        /// made or breaks first: `connectionFailed`. Before sending a body, check that the file is still the
        /// one started with (`fileChanged` if not).
        case sendRequest(HTTPClientRequest, body: UploadBody?)
        /// Close the connection; read nothing more from it.
        case closeConnection
        /// Write `encoded()` atomically (temporary file, fsync, rename) to the record file.
        case writeRecord(UploadRecord)
        /// Delete the record file.
        case removeRecord
        /// The state changed: show it.
        case report(TransferState)
    }

    /// The most 409 answers in a row before the upload fails (the server's offset keeps moving).
    public static let maxConflicts = 5
    /// The most new uploads begun from one start (the resource keeps vanishing).
    public static let maxRestarts = 2

    private enum Phase: Equatable, Sendable {
        case stopped
        case creating
        case retrievingOffset
        case appending(from: Int)
    }

    /// Where the upload goes (the creation request's URL).
    public let url: URLParts
    /// The file as it was at the last start; nil when it could not be read.
    public private(set) var file: UploadFileIdentity?
    /// The record of the resource, once there is one.
    public private(set) var record: UploadRecord?
    public private(set) var state: TransferState = .idle
    /// Bytes the server has acknowledged (its offset).
    public private(set) var bytesDone = 0
    private var phase = Phase.stopped
    private var conflicts = 0
    private var restarts = 0

    /// An upload to `url`; `existing` is the record read from the record file (nil when none, or it did not
    /// decode). A record of another URL is ignored.
    public init(url: URLParts, existing: UploadRecord?) {
        self.url = url
        record = existing?.url == url ? existing : nil
        file = record?.file
    }

    /// The file's size, once known.
    public var total: Int? { file?.size }

    // MARK: Events

    /// Begins or resumes (idle, paused or failed) with the file as it is now (nil when it cannot be read);
    /// nothing while running or done.
    public mutating func start(file current: UploadFileIdentity?) -> [Action] {
        switch state {
        case .running, .done: return []
        case .idle, .paused, .failed: break
        }
        state = .running
        conflicts = 0
        restarts = 0
        var actions: [Action] = [.report(.running)]
        guard url.scheme.isHTTP else { return actions + stop(.failed("\(url.scheme.rawValue) uploads are not supported (http and https)")) }
        guard let current else { return actions + stop(.failed("the file cannot be read")) }
        if let record, record.file != current {
            actions.append(.removeRecord)
            self.record = nil
        }
        file = current
        guard let record else { return actions + create() }
        return actions + retrieveOffset(record)
    }

    /// Stops a running upload, keeping its record (the task expired, the app suspends, the daemon stops).
    public mutating func pause(_ reason: String) -> [Action] {
        guard state == .running else { return [] }
        return stop(.paused(reason))
    }

    /// The connection could not be made, or broke before the final response (a head the parser rejects
    /// included): paused, to resume with HEAD.
    public mutating func connectionFailed(_ reason: String) -> [Action] {
        guard state == .running, phase != .stopped else { return [] }
        return stop(.paused(reason))
    }

    /// The request ended for a reason a retry at once would not fix (a certificate that does not verify):
    /// failed, the record kept.
    public mutating func requestFailed(_ reason: String) -> [Action] {
        guard state == .running, phase != .stopped else { return [] }
        return stop(.failed(reason))
    }

    /// The file is not the one started with (found before sending its bytes): a new upload of it as it is
    /// now, or failed when it cannot be read.
    public mutating func fileChanged(_ current: UploadFileIdentity?) -> [Action] {
        guard state == .running, phase != .stopped else { return [] }
        var actions: [Action] = [.closeConnection, .removeRecord]
        record = nil
        file = current
        bytesDone = 0
        guard current != nil else { return actions + stop(.failed("the file cannot be read")) }
        phase = .stopped
        actions += create()
        return actions
    }

    /// An interim (1xx) head: a 104's `Upload-Offset` while a PATCH is sent is progress the server vouches
    /// for.
    public mutating func interimHead(_ head: HTTPResponseHead) -> [Action] {
        guard state == .running, case .appending(let from) = phase, head.status == 104,
              let offset = UploadFields.integer(head.value(of: "upload-offset")),
              offset >= from, offset <= file?.size ?? 0, offset > bytesDone else { return [] }
        bytesDone = offset
        return [.report(.running)]
    }

    /// The final head of the response to the request sent.
    public mutating func responseHead(_ head: HTTPResponseHead) -> [Action] {
        guard state == .running else { return [] }
        switch phase {
        case .stopped: return []
        case .creating: return created(head)
        case .retrievingOffset: return offsetRetrieved(head)
        case .appending: return appended(head)
        }
    }

    // MARK: Steps

    /// The fields every request carries beyond libcurl's own (Host or :authority, User-Agent, and the
    /// Content-Length of the body it is given): none yet.
    private func headers(_ target: URLParts) -> [HTTPHeader] { [] }

    private mutating func create() -> [Action] {
        guard restarts <= Self.maxRestarts else { return stop(.failed("the server lost the upload \(restarts) times")) }
        restarts += 1
        phase = .creating
        bytesDone = 0
        let request = HTTPClientRequest(method: "POST", url: url, headers: headers(url) + [
            HTTPHeader(name: "Upload-Complete", value: "?0"),
            HTTPHeader(name: "Upload-Length", value: String(file?.size ?? 0)),
        ])
        return [.sendRequest(request, body: nil)]
    }

    private mutating func retrieveOffset(_ record: UploadRecord) -> [Action] {
        phase = .retrievingOffset
        return [.sendRequest(HTTPClientRequest(method: "HEAD", url: record.resource, headers: headers(record.resource)), body: nil)]
    }

    private mutating func append(from offset: Int) -> [Action] {
        guard let record, let size = file?.size else { return stop(.failed("no upload resource")) }
        phase = .appending(from: offset)
        bytesDone = offset
        let request = HTTPClientRequest(method: "PATCH", url: record.resource, headers: headers(record.resource) + [
            HTTPHeader(name: "Content-Type", value: UploadFields.partialUploadType),
            HTTPHeader(name: "Upload-Offset", value: String(offset)),
            HTTPHeader(name: "Upload-Complete", value: "?1"),
            HTTPHeader(name: "Upload-Length", value: String(size)),
        ])
        return [.sendRequest(request, body: UploadBody(offset: offset, count: size - offset))]
    }

    /// The answer to the POST.
    private mutating func created(_ head: HTTPResponseHead) -> [Action] {
        guard (200...299).contains(head.status) else { return failedRequest(head, "creating the upload") }
        guard let file else { return stop(.failed("the file cannot be read")) }
        if UploadFields.boolean(head.value(of: "upload-complete")) == true {
            // Complete without a byte sent: right only for an empty file.
            return file.size == 0 ? finish() : stop(.failed("the server says the upload is complete before any byte was sent"))
        }
        guard let location = head.value(of: "location") else {
            return stop(.failed("the server created no upload resource (\(Self.statusText(head)) without a Location)"))
        }
        let resource: URLParts
        do {
            resource = try url.resolving(location)
        } catch {
            return stop(.failed("the upload resource's Location is invalid: \(error.message)"))
        }
        guard resource.scheme.isHTTP else { return stop(.failed("the upload resource \(resource) is not http or https")) }
        let record = UploadRecord(url: url, resource: resource, file: file)
        self.record = record
        return [.closeConnection, .writeRecord(record)] + append(from: 0)
    }

    /// The answer to the HEAD.
    private mutating func offsetRetrieved(_ head: HTTPResponseHead) -> [Action] {
        if head.status == 404 || head.status == 410 { return startOver() }
        guard (200...299).contains(head.status) else { return failedRequest(head, "asking for the offset") }
        guard let size = file?.size, let offset = UploadFields.integer(head.value(of: "upload-offset")) else {
            return stop(.failed("the server's offset answer has no valid Upload-Offset"))
        }
        let complete = UploadFields.boolean(head.value(of: "upload-complete")) ?? false
        if let length = UploadFields.integer(head.value(of: "upload-length")), length != size { return startOver() }
        if offset > size || (complete && offset != size) { return startOver() }
        if complete {
            bytesDone = offset
            return [.closeConnection] + finish()
        }
        return [.closeConnection] + append(from: offset)
    }

    /// The answer to the PATCH.
    private mutating func appended(_ head: HTTPResponseHead) -> [Action] {
        let complete = UploadFields.boolean(head.value(of: "upload-complete"))
        switch head.status {
        case 200...299 where complete != false:
            bytesDone = file?.size ?? bytesDone
            conflicts = 0
            return [.closeConnection] + finish()
        case 200...299:
            // The server took the bytes but does not call the upload complete: ask where it stands.
            return conflict("the server did not complete the upload")
        case 409:
            return conflict("the server's offset differs")
        case 404, 410:
            return startOver()
        default:
            return failedRequest(head, "sending the file")
        }
    }

    private mutating func conflict(_ reason: String) -> [Action] {
        conflicts += 1
        guard conflicts <= Self.maxConflicts, let record else { return stop(.failed("\(reason) \(conflicts) times in a row")) }
        return [.closeConnection] + retrieveOffset(record)
    }

    /// The resource is gone or not this file's: a new one.
    private mutating func startOver() -> [Action] {
        record = nil
        return [.closeConnection, .removeRecord] + create()
    }

    /// A status that ends the request: 5xx pauses (the server may recover), anything else fails.
    private mutating func failedRequest(_ head: HTTPResponseHead, _ what: String) -> [Action] {
        let text = "server answered \(Self.statusText(head)) \(what)"
        if head.status == 413 {
            return stop(.failed("\(text): the file is larger than the server takes"))
        }
        return stop((500...599).contains(head.status) ? .paused(text) : .failed(text))
    }

    private mutating func finish() -> [Action] {
        phase = .stopped
        state = .done
        record = nil
        return [.removeRecord, .report(.done)]
    }

    private mutating func stop(_ newState: TransferState) -> [Action] {
        var actions: [Action] = []
        if phase != .stopped { actions.append(.closeConnection) }
        phase = .stopped
        state = newState
        return actions + [.report(newState)]
    }

    private static func statusText(_ head: HTTPResponseHead) -> String {
        head.reason.isEmpty ? "\(head.status)" : "\(head.status) \(head.reason)"
    }
}

/// What an upload keeps between runs (the daemon chooses the file): the resource that holds the server's
/// bytes and the identity of the file they are bytes of. The offset is not kept: the server's is asked.
///
/// ```
/// netlife-upload 1
/// url=http://127.0.0.1:8080/dir/f.bin
/// resource=http://127.0.0.1:8080/.netlife-upload/0123456789abcdef0123456789abcdef
/// size=1048576
/// mtime=1733011200.123456789
/// inode=1234567
/// ```
/// Values escape `\`, LF and CR as a download record does. Written whole and replaced atomically.
public struct UploadRecord: Equatable, Sendable {
    /// The first line of every record; another version is not read.
    public static let versionLine = "netlife-upload 1"

    /// Where the upload was created.
    public var url: URLParts
    /// The upload resource (the creation's Location, resolved).
    public var resource: URLParts
    /// The file the resource holds bytes of.
    public var file: UploadFileIdentity

    /// A record with these values.
    public init(url: URLParts, resource: URLParts, file: UploadFileIdentity) {
        self.url = url
        self.resource = resource
        self.file = file
    }

    /// The text of the record file, ending in a newline.
    public func encoded() -> String {
        let nanoseconds = String(file.modifiedNanoseconds)
        return [
            Self.versionLine,
            "url=" + RecordText.escaped(url.description),
            "resource=" + RecordText.escaped(resource.description),
            "size=\(file.size)",
            "mtime=\(file.modifiedSeconds).\(String(repeating: "0", count: max(0, 9 - nanoseconds.count)) + nanoseconds)",
            "inode=\(file.inode)",
        ].joined(separator: "\n") + "\n"
    }

    /// The record in `text`; nil for anything `encoded()` could not have written (another version, a missing,
    /// unknown or repeated key, a URL or number that does not read, over 16 KiB). Nil means a new upload,
    /// which is always safe.
    public static func decode(_ text: String) -> UploadRecord? {
        let keys: Set<String> = ["url", "resource", "size", "mtime", "inode"]
        guard let fields = RecordText.fields(text, version: versionLine, keys: keys), fields.count == keys.count,
              let urlText = fields["url"], let url = try? URLParts(parsing: urlText),
              let resourceText = fields["resource"], let resource = try? URLParts(parsing: resourceText),
              let size = fields["size"].flatMap({ HTTPSyntax.decimal($0.utf8) }),
              let inodeText = fields["inode"], !inodeText.isEmpty, inodeText.utf8.allSatisfy(HTTPSyntax.isDigit),
              let inode = UInt64(inodeText), let mtime = fields["mtime"] else { return nil }
        let parts = mtime.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].utf8.count == 9, let seconds = HTTPSyntax.decimal(parts[0].utf8),
              let nanoseconds = HTTPSyntax.decimal(parts[1].utf8) else { return nil }
        return UploadRecord(url: url, resource: resource,
                            file: UploadFileIdentity(size: size, modifiedSeconds: Int64(seconds), modifiedNanoseconds: nanoseconds, inode: inode))
    }
}
