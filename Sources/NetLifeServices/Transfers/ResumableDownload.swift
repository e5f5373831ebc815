// The resumable downloader's rules as a pure state machine (docs/http.md): the shell that owns the
// socket, the files and the timers tells it what happened (started, a response head, body bytes written,
// the body ended, the connection failed, the app paused it, a digest computed) and performs the actions it
// returns, in order. The partial file is `PATH.part`; its record (`DownloadRecord`, in `PATH.part.meta`)
// says which representation the bytes belong to and how many of them are safely on disk, so that a
// download stopped by an expired background task, a suspension, a reclaim or a killed daemon resumes with
// `Range: bytes=N-` and `If-Range`, and never appends bytes of one representation to those of another.

/// A validator that lets a download resume: a strong entity tag, or a Last-Modified date that is strong.
public enum DownloadValidator: Equatable, Sendable {
    /// A strong entity tag with its quotes (`"1a-400"`).
    case etag(String)
    /// A Last-Modified HTTP-date as the server sent it.
    case lastModified(String)

    /// The value of an If-Range field for it: the tag or the date, exactly as the server sent it.
    public var ifRangeValue: String {
        switch self {
        case .etag(let tag): return tag
        case .lastModified(let date): return date
        }
    }
}

/// One request the shell sends: on a new connection to the URL's host and port, closed after the response.
public struct HTTPClientRequest: Equatable, Sendable {
    /// `GET` or `HEAD`.
    public var method: String
    /// Where it goes.
    public var url: URLParts
    /// The header fields beyond those libcurl adds itself (Host or :authority, User-Agent).
    public var headers: [HTTPHeader]

    /// A request with these parts.
    public init(method: String, url: URLParts, headers: [HTTPHeader]) {
        self.method = method
        self.url = url
        self.headers = headers
    }

    /// The value of the field named `name` (compared without case); nil if absent.
    public func value(of name: String) -> String? {
        let name = HTTPSyntax.lowercased(name)
        return headers.first { HTTPSyntax.lowercased($0.name) == name }?.value
    }
}

/// The state of one download and the decisions of its transfer. A value: `mutating` events in, actions out.
///
/// Rules:
/// - Start or resume: with a record whose validator is strong and bytes on disk, `GET` with `Range: bytes=N-`
///   and `If-Range: VALIDATOR`; otherwise a plain `GET` from 0 (the part truncated first). A part that the
///   record says is complete (its total reached) is not fetched again: it goes to verification.
/// - 200: the body is the whole representation. The part is truncated to 0 and a new record (validator,
///   total from Content-Length, digest) is written before the first byte is appended, so that a crash can
///   never leave new bytes behind an old record.
/// - 206: appended only when its Content-Range starts exactly at N, its total (when both are known) equals
///   the record's, a Content-Length agrees with the range, and any ETag or Last-Modified it carries equals
///   the record's validator (a server that ignores If-Range would otherwise splice two representations);
///   with a total of `*`, the range must end before the recorded total.
///   Anything else is rejected: the connection closes, the part is truncated to 0 and a plain GET restarts.
///   A 206 that stops before the total is followed by a request for the rest.
/// - 416: `HEAD` (no Range): a 200 with the record's validator and a Content-Length equal to the bytes on disk
///   (and to the recorded total, when there is one) means the part is complete; anything else restarts
///   from 0.
/// - 3xx with a Location (not 304): followed with the same request, absolute or relative, at most
///   `maxRedirects` times per start, to http only. The record keeps the URL asked for: a temporary redirect
///   is followed again on resume.
/// - Other 4xx and 5xx: `failed("server answered 404 Not Found")`; part and record are kept. Any other
///   status, a 206 to a request without Range and a 416 to one without are failures too (a broken server).
/// - Finished: the length must equal the total (a 200 without one, chunked or until close, defines it
///   when it ends; an empty body is a finished one); with a digest, the shell computes the part's and the
///   machine compares; then the part is renamed into place (the shell checks the part's length on disk
///   against the total first, and pauses instead on a mismatch) and the record removed.
public struct ResumableDownload: Sendable {
    /// Where a download is, as `transfers` shows it.
    public typealias State = TransferState

    /// What the shell does, in the order given.
    public enum Action: Equatable, Sendable {
        /// Send the request (libcurl: a new connection, HTTP/1.1 or HTTP/2 as ALPN settles, TLS for https) and
        /// call `responseHead` with the final head. A connection that cannot be made or breaks:
        /// `connectionFailed`.
        case sendRequest(HTTPClientRequest)
        /// Append the body to the part, calling `bodyBytes(n)` after each write and `bodyEnded()` when the
        /// response is complete as its framing delimits it (libcurl decodes chunked and HTTP/2 framing).
        case appendBody(HTTPBodyFraming)
        /// Close the connection; read nothing more from it.
        case closeConnection
        /// Cut the part to this many bytes (creating it empty when it does not exist).
        case truncatePart(to: Int)
        /// fsync the part, then write `encoded()` to a temporary file, fsync it, rename it over the record
        /// file and fsync the directory: the record never vouches for bytes that are not on disk.
        case writeRecord(DownloadRecord)
        /// Compute the digest of the whole part with this algorithm and call `digestComputed`.
        case computeDigest(DigestAlgorithm)
        /// fsync the part, rename it to the output path, fsync the directory.
        case renameIntoPlace
        /// Delete the record file.
        case removeRecord
        /// The state changed: show it (`transfers`, logs).
        case report(State)
    }

    /// The most redirects followed from one start.
    public static let maxRedirects = 5
    /// How many bytes are appended between two records by default: a crash loses at most this much work,
    /// and the fsync it costs is paid once per MiB rather than once per read.
    public static let defaultRecordInterval = 1 << 20

    private enum Phase: Equatable, Sendable {
        case stopped
        /// A request is out; `rangeFrom` is the offset it asked for.
        case awaitingHead(method: String, rangeFrom: Int?)
        /// A body is being appended; it ends at `end` when known, and is the whole representation or not.
        case receivingBody(end: Int?, whole: Bool)
        case verifying(ContentDigest)
        /// The part is complete and checked; the shell renames it and says so (`renamed()`).
        case renaming
    }

    /// The URL asked for.
    public let url: URLParts
    /// Where the last request went (after redirects).
    public private(set) var currentURL: URLParts
    /// Where the download is.
    public private(set) var state: State = .idle
    /// The bytes in the part: after the shell performs the returned actions, the part's size.
    public var bytesDone: Int { ledger.bytesDone }
    /// What the next `writeRecord` will say (its offset is updated when it is written).
    public var record: DownloadRecord { ledger.record }
    private var ledger: PartLedger
    private var phase = Phase.stopped
    private var redirects = 0

    /// A download of `url`. `existing` is the record read from the record file (nil when there is none or it
    /// did not decode); `partSize` the size of the part on disk (0 when there is none). A record of another
    /// URL is ignored. When the record and the part disagree the smaller wins: a part shorter than the
    /// record lost bytes the record counted (its prefix is still good); bytes past the record's offset were
    /// written after the last record and are not vouched for (they may not have reached the disk whole), so
    /// the part is cut back to it. `recordInterval`: bytes appended between records.
    public init(url: URLParts, existing: DownloadRecord?, partSize: Int, recordInterval: Int = defaultRecordInterval) {
        self.url = url
        currentURL = url
        ledger = PartLedger(url: url, existing: existing, partSize: partSize, recordInterval: recordInterval)
    }

    /// The total length when known.
    public var total: Int? { record.total }

    // MARK: Events

    /// Begins or resumes the transfer (idle, paused or failed); nothing while running or done.
    public mutating func start() -> [Action] {
        switch state {
        case .running, .done: return []
        case .idle, .paused, .failed: break
        }
        state = .running
        redirects = 0
        currentURL = url
        var actions: [Action] = [.report(.running)]
        guard url.scheme.isHTTP else { return actions + stop(.failed("\(url.scheme.rawValue) is not an HTTP URL")) }
        if let total = record.total, total > 0, bytesDone == total {
            if ledger.needsCut { actions.append(.truncatePart(to: bytesDone)) }
            ledger.needsCut = false
            return actions + finish()
        }
        if bytesDone > 0 && record.validator != nil {
            if ledger.needsCut { actions.append(.truncatePart(to: bytesDone)) }
            ledger.needsCut = false
            return actions + send("GET", rangeFrom: bytesDone)
        }
        if bytesDone > 0 || ledger.needsCut { actions.append(.truncatePart(to: 0)) }
        ledger.needsCut = false
        forgetPart()
        return actions + send("GET", rangeFrom: nil)
    }

    /// The head of the response to the request sent.
    public mutating func responseHead(_ head: HTTPResponseHead) -> [Action] {
        guard state == .running, case .awaitingHead(let method, let rangeFrom) = phase else { return [] }
        if (300...399).contains(head.status) && head.status != 304 { return redirect(head, method: method, rangeFrom: rangeFrom) }
        let framing: HTTPBodyFraming
        do {
            framing = try head.bodyFraming(requestMethod: method)
        } catch {
            return stop(.paused("bad response: \(error.message)"))
        }
        if method == "HEAD" { return revalidated(head) }
        switch head.status {
        case 200:
            return wholeBody(head, framing: framing)
        case 206:
            guard let rangeFrom else { return stop(.failed("server answered 206 to a request without Range")) }
            return partialBody(head, framing: framing, from: rangeFrom)
        case 416 where rangeFrom != nil:
            return [.closeConnection] + send("HEAD", rangeFrom: nil)
        case 400...599:
            return stop(.failed("server answered \(Self.statusText(head))"))
        default:
            return stop(.failed("unexpected status \(Self.statusText(head))"))
        }
    }

    /// The shell appended `count` more bytes of the body to the part. The record is written again each time
    /// `recordInterval` bytes have been appended since the last one.
    public mutating func bodyBytes(_ count: Int) -> [Action] {
        guard count >= 0, state == .running, case .receivingBody(let end, _) = phase else { return [] }
        switch ledger.append(count, end: end) {
        case .kept(let recordDue):
            return recordDue ? [writeRecord()] : []
        case .pastEnd:
            // The shell wrote past what the server announced: cut those bytes off again.
            phase = .stopped
            return [.closeConnection, .truncatePart(to: bytesDone), writeRecord()]
                + stop(.failed("server sent more than the \(bytesDone) bytes it announced"))
        }
    }

    /// The body is complete as its framing delimits it.
    public mutating func bodyEnded() -> [Action] {
        guard state == .running, case .receivingBody(let end, let whole) = phase else { return [] }
        if let end, bytesDone < end {
            return stop(.paused("the response ended after \(bytesDone) of \(end) bytes"))
        }
        if whole, let total = record.total, bytesDone < total {
            return stop(.paused("the response ended after \(bytesDone) of \(total) bytes"))
        }
        let actions: [Action] = [.closeConnection]
        phase = .stopped
        if let total = record.total {
            if bytesDone == total { return actions + finish() }
            return actions + send("GET", rangeFrom: bytesDone)
        }
        if whole {
            ledger.record.total = bytesDone
            return actions + finish()
        }
        // A 206 without a total: ask for what follows; a 416 and a HEAD will tell whether that was all.
        return actions + send("GET", rangeFrom: bytesDone)
    }

    /// The connection could not be made, or broke before the response was complete (a head the parser
    /// rejects included): paused, to resume later.
    public mutating func connectionFailed(_ reason: String) -> [Action] {
        switch phase {
        case .awaitingHead, .receivingBody: return stop(.paused(reason))
        case .stopped, .verifying, .renaming: return []
        }
    }

    /// The request ended for a reason a retry at once would not fix (a certificate that does not verify):
    /// failed, part and record kept.
    public mutating func requestFailed(_ reason: String) -> [Action] {
        switch phase {
        case .awaitingHead, .receivingBody: return stop(.failed(reason))
        case .stopped, .verifying, .renaming: return []
        }
    }

    /// Stops a running transfer, keeping its part and record: the background task expired, the app is
    /// suspended or reclaimed, the daemon is stopping.
    public mutating func pause(_ reason: String) -> [Action] {
        guard state == .running else { return [] }
        return stop(.paused(reason))
    }

    /// The digest the shell computed of the whole part, with the algorithm `computeDigest` named.
    public mutating func digestComputed(_ digest: ContentDigest) -> [Action] {
        guard state == .running, case .verifying(let expected) = phase else { return [] }
        // A digest of another algorithm than asked (a shell's bug) cannot vouch for the file: a mismatch.
        guard digest == expected else {
            // The bytes are not the representation the server described: nothing of them can be reused.
            forgetPart()
            return [.truncatePart(to: 0), writeRecord()]
                + stop(.failed("the file's \(expected.algorithm.rawValue) digest does not match the server's"))
        }
        return complete()
    }

    // MARK: Steps

    private mutating func send(_ method: String, rangeFrom: Int?) -> [Action] {
        // libcurl adds Host (or :authority) and User-Agent.
        var headers = [
            // Without it a server may choose any content coding, and ranges would count compressed bytes.
            HTTPHeader(name: "Accept-Encoding", value: "identity"),
        ]
        if let rangeFrom, let validator = record.validator {
            headers.append(HTTPHeader(name: "Range", value: "bytes=\(rangeFrom)-"))
            headers.append(HTTPHeader(name: "If-Range", value: validator.ifRangeValue))
        }
        phase = .awaitingHead(method: method, rangeFrom: rangeFrom)
        return [.sendRequest(HTTPClientRequest(method: method, url: currentURL, headers: headers))]
    }

    private mutating func redirect(_ head: HTTPResponseHead, method: String, rangeFrom: Int?) -> [Action] {
        guard redirects < Self.maxRedirects else { return stop(.failed("more than \(Self.maxRedirects) redirects")) }
        guard let location = head.value(of: "location") else {
            return stop(.failed("server answered \(Self.statusText(head)) without a Location"))
        }
        let target: URLParts
        do {
            target = try currentURL.resolving(location)
        } catch {
            return stop(.failed("redirect to an invalid Location: \(error.message)"))
        }
        guard target.scheme.isHTTP else { return stop(.failed("redirect to \(target), which is not an HTTP URL")) }
        redirects += 1
        currentURL = target
        return [.closeConnection] + send(method, rangeFrom: rangeFrom)
    }

    private mutating func wholeBody(_ head: HTTPResponseHead, framing: HTTPBodyFraming) -> [Action] {
        ledger.startOver(DownloadRecord(url: url, validator: Self.resumableValidator(head), total: framing.length,
                                        offset: 0, digest: Self.announcedDigest(head)))
        phase = .receivingBody(end: framing.length, whole: true)
        return [.truncatePart(to: 0), writeRecord(), .appendBody(framing)]
    }

    private mutating func partialBody(_ head: HTTPResponseHead, framing: HTTPBodyFraming, from offset: Int) -> [Action] {
        guard let range = head.contentRange, range.first == offset,
              record.total == nil || range.total == nil || record.total == range.total,
              record.total.map({ range.last < $0 }) ?? true,
              framing.length == nil || framing.length == range.count,
              Self.agrees(head, with: record.validator) else {
            return restart()
        }
        var actions: [Action] = []
        if record.total == nil, let total = range.total {
            ledger.record.total = total
            actions.append(writeRecord())
        }
        phase = .receivingBody(end: range.last + 1, whole: false)
        return actions + [.appendBody(framing)]
    }

    /// The answer to the HEAD sent after a 416.
    private mutating func revalidated(_ head: HTTPResponseHead) -> [Action] {
        // A length that contradicts the recorded total says the server's answers do not fit together (the
        // file changed under an unchanged validator, or the server lies): the part cannot be trusted.
        guard head.status == 200, let validator = record.validator, Self.strongValidator(head) == validator,
              bytesDone > 0, head.contentLength == bytesDone, record.total.map({ $0 == bytesDone }) ?? true else {
            return restart()
        }
        ledger.record.total = bytesDone
        // A HEAD's Repr-Digest describes the representation a 200 would carry: the one on disk.
        if let digest = Self.announcedDigest(head) { ledger.record.digest = digest }
        return [.closeConnection] + finish()
    }

    /// Drops the part and asks for the whole representation.
    private mutating func restart() -> [Action] {
        forgetPart()
        return [.closeConnection, .truncatePart(to: 0)] + send("GET", rangeFrom: nil)
    }

    /// The part holds the whole representation: verify it, or rename it into place.
    private mutating func finish() -> [Action] {
        guard let digest = record.digest else { return complete() }
        phase = .verifying(digest)
        // Written first, so that a pause during a long digest resumes at the digest, not at a download.
        return [writeRecord(), .computeDigest(digest.algorithm)]
    }

    private mutating func complete() -> [Action] {
        // Only a part of the entity's length is ever renamed into place; every path here has checked it, and
        // this keeps a later change from breaking that unseen.
        guard let total = record.total, bytesDone == total else { return restart() }
        phase = .renaming
        return [.renameIntoPlace]
    }

    /// The shell renamed the part into place: done. (A rename that failed is a `pause`: the record still
    /// says the part is complete, and the next start renames it without fetching anything.)
    public mutating func renamed() -> [Action] {
        guard state == .running, phase == .renaming else { return [] }
        phase = .stopped
        state = .done
        return [.removeRecord, .report(.done)]
    }

    /// Ends the run in `state` (paused or failed), closing a connection that is open.
    private mutating func stop(_ newState: State) -> [Action] {
        var actions: [Action] = []
        switch phase {
        case .awaitingHead, .receivingBody:
            actions.append(.closeConnection)
        case .stopped, .verifying, .renaming:
            break
        }
        if case .paused = newState { actions.append(writeRecord()) }
        phase = .stopped
        state = newState
        return actions + [.report(newState)]
    }

    private mutating func forgetPart() {
        ledger.startOver(DownloadRecord(url: url))
    }

    private mutating func writeRecord() -> Action {
        .writeRecord(ledger.written())
    }

    // MARK: Reading heads

    private static func statusText(_ head: HTTPResponseHead) -> String {
        head.reason.isEmpty ? "\(head.status)" : "\(head.status) \(head.reason)"
    }

    /// The validator a resume can rely on: a strong one, from a server that says `Accept-Ranges: bytes`.
    static func resumableValidator(_ head: HTTPResponseHead) -> DownloadValidator? {
        let units = HTTPSyntax.listElements(head.values(of: "accept-ranges")).map(HTTPSyntax.lowercased)
        return units.contains("bytes") ? strongValidator(head) : nil
    }

    /// The head's strong validator (RFC 9110 sections 8.8 and 13.1.5). An ETag that is strong. With any
    /// other ETag (weak or malformed), none: a client that has an entity tag must not send a date in
    /// If-Range. Without an ETag, a Last-Modified date that is strong: valid, and at least one second
    /// before the Date of the response when there is one (a file changed twice within a second keeps its
    /// date).
    static func strongValidator(_ head: HTTPResponseHead) -> DownloadValidator? {
        if let etag = head.value(of: "etag") { return DownloadRecord.isStrongETag(etag) ? .etag(etag) : nil }
        guard let date = head.value(of: "last-modified"), let modified = HTTPRanges.parseHTTPDate(date) else { return nil }
        if let sent = head.value(of: "date").flatMap(HTTPRanges.parseHTTPDate), sent < modified + 1 { return nil }
        return .lastModified(date)
    }

    /// Whether the validators a 206 carries (it need not carry any) are the record's.
    private static func agrees(_ head: HTTPResponseHead, with validator: DownloadValidator?) -> Bool {
        switch validator {
        case .etag(let tag): return head.value(of: "etag").map { $0 == tag } ?? true
        case .lastModified(let date): return head.value(of: "last-modified").map { $0 == date } ?? true
        case nil: return false
        }
    }

    /// The digest of the whole representation a 200 (or a HEAD's 200) announces: a `sha-256` member of
    /// Repr-Digest, else a Content-MD5. One that does not decode to the algorithm's length is ignored, as
    /// an absent one: it could not protect anything.
    static func announcedDigest(_ head: HTTPResponseHead) -> ContentDigest? {
        for member in HTTPSyntax.listElements(head.values(of: "repr-digest")) {
            let parts = member.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, HTTPSyntax.lowercased(String(parts[0])) == "sha-256" else { continue }
            let value = parts[1].prefix { $0 != ";" }
            guard value.count >= 2, value.hasPrefix(":"), value.hasSuffix(":"),
                  let bytes = Base64.decode(value.dropFirst().dropLast()), bytes.count == 32 else { continue }
            return .sha256(bytes)
        }
        if let md5 = head.value(of: "content-md5"), let bytes = Base64.decode(Substring(md5)), bytes.count == 16 {
            return .md5(bytes)
        }
        return nil
    }
}

/// Standard base64 (RFC 4648 section 4) decoding, padding optional.
enum Base64 {
    static func decode(_ text: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer = 0
        var bits = 0
        var padding = 0
        for char in text.utf8 {
            let value: Int
            switch char {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = Int(char - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = Int(char - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = Int(char - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            default: return nil
            }
            guard padding == 0 else { return nil }
            buffer = (buffer << 6 | value) & 0xFFFFFF
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8((buffer >> bits) & 0xFF))
            }
        }
        // Leftover bits must be zero padding bits, and `=` only completes the last group.
        guard bits < 6, buffer & ((1 << bits) - 1) == 0, padding <= 2, padding == 0 || (bits + 6 * padding) % 8 == 0 else { return nil }
        return bytes
    }
}

/// What a download keeps next to its part (`PATH.part.meta`): which representation the part's bytes belong
/// to, and how many of them are safely on disk.
///
/// The file is text, one `key=value` per line after a version line, written whole and replaced atomically:
/// ```
/// netlife-download 1
/// url=http://example.org/big.iso
/// etag="1a2b-400"                  (or last-modified=Sun, 06 Nov 1994 08:49:37 GMT; or neither)
/// total=1073741824                 (absent when unknown)
/// offset=1048576
/// sha-256=HEX                      (or md5=HEX; absent without a digest)
/// ```
/// In values `\` is written `\\`, LF `\n` and CR `\r`, so that any value stays on its line.
public struct DownloadRecord: Equatable, Sendable {
    /// The first line of every record; another version is not read.
    public static let versionLine = "netlife-download 1"
    /// The most bytes a record file may have: `decode` refuses larger texts without reading them.
    public static let maxEncodedBytes = 16384

    /// The URL asked for (not where redirects led).
    public var url: URLParts
    /// The validator of the representation the part holds; nil when the server gave none a resume can rely
    /// on (no strong validator, or no `Accept-Ranges: bytes`): such a download starts over from 0.
    public var validator: DownloadValidator?
    /// The representation's length when known.
    public var total: Int?
    /// How many bytes of the part are on disk and belong to that representation.
    public var offset: Int
    /// The digest of the whole representation, when the server announced one.
    public var digest: ContentDigest?

    /// A record with these values.
    public init(url: URLParts, validator: DownloadValidator? = nil, total: Int? = nil, offset: Int = 0, digest: ContentDigest? = nil) {
        self.url = url
        self.validator = validator
        self.total = total
        self.offset = offset
        self.digest = digest
    }

    /// The record's keys, each spelled once for writing and reading (a digest's key is its algorithm's name).
    enum Key: String, CaseIterable {
        case url, etag, lastModified = "last-modified", total, offset
        case sha256 = "sha-256", md5

        init(_ algorithm: DigestAlgorithm) {
            switch algorithm {
            case .sha256: self = .sha256
            case .md5: self = .md5
            }
        }
    }

    /// The text of the record file, ending in a newline.
    public func encoded() -> String {
        var lines = [Self.versionLine]
        func add(_ key: Key, _ value: String) { lines.append(key.rawValue + "=" + value) }
        add(.url, RecordText.escaped(url.description))
        switch validator {
        case .etag(let tag): add(.etag, RecordText.escaped(tag))
        case .lastModified(let date): add(.lastModified, RecordText.escaped(date))
        case nil: break
        }
        if let total { add(.total, String(total)) }
        add(.offset, String(offset))
        if let digest { add(Key(digest.algorithm), Self.hex(digest.bytes)) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The record in `text`; nil for anything that is not exactly a record `encoded()` could have written
    /// (another version, an unknown or repeated key, a bad escape, a URL, number, tag, date or digest that
    /// does not read, an offset past the total, more than `maxEncodedBytes`). A nil record means starting
    /// over, which is always safe.
    public static func decode(_ text: String) -> DownloadRecord? {
        guard text.utf8.count <= maxEncodedBytes else { return nil }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        guard lines.first == Substring(versionLine) else { return nil }
        var fields: [Key: String] = [:]
        for line in lines.dropFirst() {
            guard let equals = line.firstIndex(of: "="), let value = RecordText.unescaped(line[line.index(after: equals)...]),
                  let key = Key(rawValue: String(line[..<equals])), fields.updateValue(value, forKey: key) == nil else { return nil }
        }
        guard let urlText = fields[.url], let url = try? URLParts(parsing: urlText),
              let offsetText = fields[.offset], let offset = HTTPSyntax.decimal(offsetText.utf8) else { return nil }
        var record = DownloadRecord(url: url, offset: offset)
        if let totalText = fields[.total] {
            guard let total = HTTPSyntax.decimal(totalText.utf8), offset <= total else { return nil }
            record.total = total
        }
        switch (fields[.etag], fields[.lastModified]) {
        case (let tag?, nil):
            guard isStrongETag(tag) else { return nil }
            record.validator = .etag(tag)
        case (nil, let date?):
            guard HTTPRanges.parseHTTPDate(date) != nil else { return nil }
            record.validator = .lastModified(date)
        case (nil, nil):
            break
        case (_?, _?):
            return nil
        }
        switch (fields[.sha256], fields[.md5]) {
        case (let text?, nil):
            guard let bytes = bytes(hex: text), bytes.count == 32 else { return nil }
            record.digest = .sha256(bytes)
        case (nil, let text?):
            guard let bytes = bytes(hex: text), bytes.count == 16 else { return nil }
            record.digest = .md5(bytes)
        case (nil, nil):
            break
        case (_?, _?):
            return nil
        }
        return record
    }

    /// Whether `text` is one strong entity tag: `"` then visible ASCII but `"` then `"` (RFC 9110 section
    /// 8.8.3; obs-text is refused, as it would not survive the trip through a String unchanged).
    public static func isStrongETag(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") else { return false }
        return bytes.dropFirst().dropLast().allSatisfy { $0 == 0x21 || ($0 >= 0x23 && $0 <= 0x7E) }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] }, as: UTF8.self)
    }

    private static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = HTTPSyntax.hexValue(digits[index]), let low = HTTPSyntax.hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
