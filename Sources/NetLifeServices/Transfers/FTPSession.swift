// The FTP downloader's pure core, no I/O (SPEC section 7, client; RFC 959, RFC 2428 EPSV, RFC 3659 SIZE,
// MDTM and REST): `FTPReplyParser` cuts the control connection's bytes into replies, and
// `FTPDownloadSession` is the state machine of one passive-mode download that the shell (FTPDownload) drives
// with replies and data-connection events, performing the actions it returns in order. The part file and
// its record are those of the HTTP downloader (`PATH.part`, `DownloadRecord` in `PATH.part.meta`), with the
// MDTM time as the validator and SIZE as the total, so that a paused download resumes with `REST N` only
// when the server's file is provably the one whose first N bytes are on disk.

import NetLife

/// One FTP reply: its three-digit code and its text.
public struct FTPReply: Equatable, Sendable {
    /// The code, 100 to 599.
    public var code: Int
    /// The text after the code: one line, or the lines of a multi-line reply joined with `\n` (the first
    /// and last without their `123-` and `123 ` prefixes, the others as the server sent them).
    public var text: String

    /// A reply with this code and text.
    public init(code: Int, text: String) {
        self.code = code
        self.text = text
    }

    /// The code and the start of the first line, printable and bounded, for a status line or a log.
    public var shown: String {
        let firstLine = text.utf8.prefix { $0 != UInt8(ascii: "\n") }
        return firstLine.isEmpty ? "\(code)" : "\(code) \(HTTPSyntax.shown(ArraySlice(firstLine)))"
    }
}

/// Why the control connection's bytes are not FTP replies. The connection cannot go on after one.
public struct FTPReplyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong, for a log or a status line.
    public var message: String

    /// An error with this message.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

/// Cuts the bytes an FTP server sends on the control connection into `FTPReply`s (RFC 959 section 4.2).
///
/// Rules:
/// - A line ends in LF; a CR just before it is dropped (CRLF or bare LF). A CR elsewhere is text.
/// - A reply starts with a line `DDD text`, `DDD` alone, or `DDD-text` (D digits, 100 to 599); any other
///   first line is an error. Empty lines between replies are skipped.
/// - `DDD-text` opens a multi-line reply that ends at the first line `DDD text` or `DDD` with the same
///   code; the lines in between are text, whatever they hold.
/// - Limits: a line holds at most `maxLineBytes` bytes; a reply at most `maxReplyBytes` of text in at most
///   `maxReplyLines` lines. Past them, an error: nothing grows without bound.
/// - Each byte is looked at a bounded number of times: linear in the input however it is split into feeds.
/// - After an error every later `feed` throws the same error.
public struct FTPReplyParser: Sendable {
    /// The most bytes of one line, without its CRLF.
    public static let maxLineBytes = 8192
    /// The most bytes of text of one reply (its lines, without the line ends).
    public static let maxReplyBytes = 65536
    /// The most lines of one reply.
    public static let maxReplyLines = 1000

    private var line: [UInt8] = []
    /// The reply being read when it has more than one line: its code, its lines so far and their bytes.
    private var open: (code: Int, lines: [String], bytes: Int)?
    private var failure: FTPReplyError?

    /// A parser at the start of a control connection.
    public init() {}

    /// How many bytes are held for the line being read (at most `maxLineBytes` + 1, its CR).
    public var bufferedLineBytes: Int { line.count }

    /// How many bytes of text are held for the multi-line reply being read (at most `maxReplyBytes`).
    public var bufferedReplyBytes: Int { open?.bytes ?? 0 }

    /// Feeds received bytes; returns every reply they complete. Partial input is kept (bounded).
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(FTPReplyError) -> [FTPReply] {
        var replies: [FTPReply] = []
        try feed(bytes, into: &replies)
        return replies
    }

    /// Feeds received bytes and appends every reply they complete to `replies`, in order; when the bytes hold
    /// an error, the replies before it are appended before the error is thrown.
    public mutating func feed(_ bytes: some Sequence<UInt8>, into replies: inout [FTPReply]) throws(FTPReplyError) {
        if let failure { throw failure }
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                let error = endOfLine(into: &replies)
                line.removeAll(keepingCapacity: true)
                if let error { return try fail(error) }
                continue
            }
            // One byte past the limit is allowed only as the CR of a CRLF; the LF decides.
            guard line.count < Self.maxLineBytes || (line.count == Self.maxLineBytes && byte == UInt8(ascii: "\r")) else {
                return try fail(FTPReplyError("reply line over \(Self.maxLineBytes) bytes"))
            }
            line.append(byte)
        }
    }

    private mutating func fail(_ error: FTPReplyError) throws(FTPReplyError) {
        failure = error
        line = []
        open = nil
        throw error
    }

    private mutating func endOfLine(into replies: inout [FTPReply]) -> FTPReplyError? {
        let code = Self.code(line[...])
        let separator = line.count > 3 ? line[3] : nil
        guard var multi = open else {
            if line.isEmpty { return nil }
            guard let code, separator == nil || separator == UInt8(ascii: " ") || separator == UInt8(ascii: "-") else {
                return FTPReplyError("not an FTP reply: \"\(HTTPSyntax.shown(line[...]))\"")
            }
            let text = Self.string(line.dropFirst(4))
            if separator == UInt8(ascii: "-") {
                open = (code, [text], text.utf8.count)
            } else {
                replies.append(FTPReply(code: code, text: text))
            }
            return nil
        }
        open = nil   // so that `multi` holds the only reference and its lines grow in place
        let ends = code == multi.code && (separator == nil || separator == UInt8(ascii: " "))
        let text = ends ? Self.string(line.dropFirst(4)) : Self.string(line[...])
        multi.lines.append(text)
        multi.bytes += text.utf8.count
        guard multi.lines.count <= Self.maxReplyLines else { return FTPReplyError("reply of over \(Self.maxReplyLines) lines") }
        guard multi.bytes <= Self.maxReplyBytes else { return FTPReplyError("reply of over \(Self.maxReplyBytes) bytes") }
        if ends {
            replies.append(FTPReply(code: multi.code, text: multi.lines.joined(separator: "\n")))
        } else {
            open = multi
        }
        return nil
    }

    /// The code a line starts with: three digits, 100 to 599.
    private static func code(_ line: ArraySlice<UInt8>) -> Int? {
        guard line.count >= 3, let code = ASCIIDigits.value(line.prefix(3)), (100...599).contains(code) else { return nil }
        return code
    }

    private static func string(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }
}

/// The state of one FTP download and the decisions of its transfer. A value: `mutating` events in, actions
/// out.
///
/// The conversation: greeting 220, `USER anonymous` (230, or 331 and `PASS netlife@`), `TYPE I`, `SIZE` (213
/// gives the total; another answer leaves it unknown), `MDTM` (213 gives the validator; another answer leaves
/// none), then the decision, `EPSV` (229 `(|||port|)`) or, when it is refused, `PASV` (227), the data
/// connection, `RETR` (125/150, the data until the server closes the data connection, 226/250: both ends must
/// be seen, in either order), the length checked against SIZE, the rename, `QUIT`.
///
/// Rules:
/// - Resume: with `REST N` only when the part holds N > 0 bytes vouched for by a record whose validator (the
///   MDTM time) and total (the SIZE) equal what the server says now. A server that gives no MDTM gives no
///   validator, and the download starts over from 0 even when SIZE matches: a file rewritten with the same
///   length would otherwise be spliced from two versions (the HTTP rule: no strong validator, no resume).
///   A part that already holds all SIZE bytes of that file is renamed into place without a RETR.
/// - `REST N` answered 350: RETR continues at N. Any other answer: start over (the part truncated to 0).
/// - Starting over: the part is truncated to 0 and a new record (validator, total, offset 0) is written
///   before the first byte is appended, so that a crash never leaves new bytes behind an old record.
/// - The data connection goes to the control connection's peer at the port that 229 or 227 names; the
///   address in a 227 is ignored (as curl does), so that a server cannot point it anywhere else.
/// - More bytes than SIZE: the part is cut to 0 and the download fails. Fewer when the transfer ends: paused
///   (the part and record are kept; a resume continues with REST if the file is unchanged).
/// - 421 anywhere (the server is closing), or a 4xx where the conversation cannot go on: paused with the
///   server's text. A 5xx where it cannot go on (550 to RETR, 530 to the login): failed with the text.
/// - Pausing (the app's background time ran out, it was suspended, the daemon stops) closes both connections
///   and writes the record; the part stays.
public struct FTPDownloadSession: Sendable {
    /// Where a download is, as `transfers` shows it.
    public typealias State = TransferState

    /// What the shell does, in the order given.
    public enum Action: Equatable, Sendable {
        /// Connect the control connection to the URL's host and port, feed what it brings to an
        /// `FTPReplyParser` and each reply to `reply`; a connection that cannot be made, breaks, closes or
        /// brings bytes that are no reply: `controlFailed`.
        case connectControl
        /// Write the command and CRLF on the control connection.
        case sendCommand(String)
        /// Connect the data connection to the control connection's peer address, at this port:
        /// `dataConnected` or `dataFailed`.
        case connectData(port: Int)
        /// Append what the data connection brings to the part, calling `dataBytes(n)` after each write, and
        /// `dataEnded` when the server closes it (`dataFailed` when it breaks).
        case receiveData
        /// Close the data connection; append nothing more from it.
        case closeData
        /// Close the control connection after writing what is queued on it.
        case closeControl
        /// Cut the part to this many bytes (creating it empty when it does not exist).
        case truncatePart(to: Int)
        /// fsync the part, then replace the record file with `encoded()` atomically.
        case writeRecord(DownloadRecord)
        /// fsync the part, rename it to the output path, fsync the directory; then `renamed`, or
        /// `fileFailed` if it could not be done.
        case renameIntoPlace
        /// Delete the record file.
        case removeRecord
        /// The state changed: show it (`transfers`, logs).
        case report(State)
    }

    /// The user name of an anonymous login (RFC 1635), and the password it sends.
    public static let anonymousUser = "anonymous"
    public static let anonymousPassword = "netlife@"

    private enum Phase: Equatable, Sendable {
        case stopped
        case greeting, user, password, binaryType, size, modificationTime, restart
        case extendedPassive, passive
        case connectingData
        /// RETR is out: whether the data connection has ended, and whether the final reply has come.
        case retrieving(dataEnded: Bool, replied: Bool)
        /// The part is complete and being renamed into place; `renamed` or `fileFailed` follows.
        case renaming
    }

    /// The URL asked for.
    public let url: URLParts
    /// Where the download is.
    public private(set) var state: State = .idle
    /// The bytes in the part: after the shell performs the returned actions, the part's size.
    public private(set) var bytesDone: Int
    /// What the next `writeRecord` will say (its offset is updated when it is written).
    public private(set) var record: DownloadRecord
    /// The path as the commands name it, or why the URL names no file.
    private let path: Result<String, FTPPathError>
    private let recordInterval: Int
    private var recordedOffset: Int
    private var partNeedsTruncation: Bool
    private var phase = Phase.stopped
    /// What SIZE and MDTM said in this run.
    private var announcedTotal: Int?
    private var announcedValidator: DownloadValidator?

    /// A download of `url`. `existing` is the record read from the record file (nil when there is none or it
    /// did not decode); `partSize` the size of the part on disk (0 when there is none). As in
    /// `ResumableDownload`: a record of another URL is ignored, and the smaller of the record's offset and
    /// the part's size wins. `recordInterval`: bytes appended between records.
    public init(url: URLParts, existing: DownloadRecord?, partSize: Int,
                recordInterval: Int = ResumableDownload.defaultRecordInterval) {
        self.url = url
        path = Self.commandPath(url)
        self.recordInterval = max(1, recordInterval)
        (record, partNeedsTruncation) = DownloadRecord.resumePoint(existing: existing, url: url, partSize: partSize)
        bytesDone = record.offset
        recordedOffset = record.offset
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
        var actions: [Action] = [.report(.running)]
        if case .failure(let error) = path { return actions + stop(.failed(error.message)) }
        if partNeedsTruncation { actions.append(.truncatePart(to: bytesDone)) }
        partNeedsTruncation = false
        announcedTotal = nil
        announcedValidator = nil
        phase = .greeting
        return actions + [.connectControl]
    }

    /// A reply on the control connection.
    public mutating func reply(_ reply: FTPReply) -> [Action] {
        guard state == .running, phase != .stopped, case .success(let path) = path else { return [] }
        if reply.code == 421 && phase != .restart { return stop(.paused("the server is closing: \(reply.shown)")) }
        switch phase {
        case .greeting:
            if (100...199).contains(reply.code) { return [] }   // 120: ready in a while; 220 follows
            guard reply.code == 220 else { return refused(reply, "greeting") }
            return send(.user, "USER \(Self.anonymousUser)")
        case .user, .password:
            switch reply.code {
            case 331 where phase == .user: return send(.password, "PASS \(Self.anonymousPassword)")
            case 230, 202: return send(.binaryType, "TYPE I")
            default: return refused(reply, "anonymous login")
            }
        case .binaryType:
            guard (200...299).contains(reply.code) else { return refused(reply, "TYPE I") }
            return send(.size, "SIZE \(path)")
        case .size:
            if (400...499).contains(reply.code) { return refused(reply, "SIZE") }
            announcedTotal = reply.code == 213 ? Self.decimal(reply.text) : nil
            return send(.modificationTime, "MDTM \(path)")
        case .modificationTime:
            if (400...499).contains(reply.code) { return refused(reply, "MDTM") }
            announcedValidator = reply.code == 213 ? Self.modificationTime(reply.text) : nil
            return decide()
        case .restart:
            return reply.code == 350 ? send(.extendedPassive, "EPSV") : startOver()
        case .extendedPassive:
            guard reply.code == 229, let port = Self.extendedPassivePort(reply.text) else { return send(.passive, "PASV") }
            phase = .connectingData
            return [.connectData(port: port)]
        case .passive:
            guard reply.code == 227, let port = Self.passivePort(reply.text) else { return refused(reply, "passive mode (EPSV and PASV)") }
            phase = .connectingData
            return [.connectData(port: port)]
        case .connectingData:
            return refused(reply, "an unasked reply")
        case .retrieving(let dataEnded, let replied):
            if (100...199).contains(reply.code) && !replied { return [] }
            guard reply.code == 226 || reply.code == 250, !replied else { return refused(reply, "RETR") }
            phase = .retrieving(dataEnded: dataEnded, replied: true)
            return dataEnded ? transferred() : []
        case .stopped, .renaming:
            return []
        }
    }

    /// The control connection could not be made, broke, closed, or brought bytes that are no reply: paused.
    public mutating func controlFailed(_ reason: String) -> [Action] {
        guard state == .running, phase != .stopped, phase != .renaming else { return [] }
        return stop(.paused(reason))
    }

    /// The data connection is up: RETR goes out.
    public mutating func dataConnected() -> [Action] {
        guard state == .running, phase == .connectingData, case .success(let path) = path else { return [] }
        phase = .retrieving(dataEnded: false, replied: false)
        return [.receiveData, .sendCommand("RETR \(path)")]
    }

    /// The data connection could not be made or broke before the server closed it: paused.
    public mutating func dataFailed(_ reason: String) -> [Action] {
        switch phase {
        case .connectingData, .retrieving(dataEnded: false, _): return stop(.paused(reason))
        default: return []
        }
    }

    /// The shell appended `count` more bytes from the data connection to the part. The record is written
    /// again each time `recordInterval` bytes have been appended since the last one.
    public mutating func dataBytes(_ count: Int) -> [Action] {
        guard count >= 0, state == .running, case .retrieving(dataEnded: false, _) = phase else { return [] }
        let (sum, overflow) = bytesDone.addingReportingOverflow(count)
        if let total = record.total, overflow || sum > total {
            // The file grew while it was sent, or SIZE lied: nothing of the part can be trusted.
            forgetPart()
            return [.closeData, .truncatePart(to: 0), writeRecord()]
                + stop(.failed("the server sent more than the \(total) bytes SIZE announced"))
        }
        bytesDone = overflow ? .max : sum
        return bytesDone - recordedOffset >= recordInterval ? [writeRecord()] : []
    }

    /// The server closed the data connection: the file's bytes are all there once the final reply is in.
    public mutating func dataEnded() -> [Action] {
        guard state == .running, case .retrieving(dataEnded: false, let replied) = phase else { return [] }
        phase = .retrieving(dataEnded: true, replied: replied)
        return [.closeData] + (replied ? transferred() : [])
    }

    /// Stops a running transfer, keeping its part and record: the background task expired, the app is
    /// suspended or reclaimed, the daemon is stopping. Nothing while the complete part is being renamed.
    public mutating func pause(_ reason: String) -> [Action] {
        guard state == .running, phase != .renaming else { return [] }
        return stop(.paused(reason))
    }

    /// The part is in place under the output name: done.
    public mutating func renamed() -> [Action] {
        guard state == .running, phase == .renaming else { return [] }
        phase = .stopped
        state = .done
        return [.removeRecord, .report(.done)]
    }

    /// The shell could not write, sync or rename the part or the record: paused, to try again later (a part
    /// that could not be renamed is complete: its record says so, and the next start renames it).
    public mutating func fileFailed(_ reason: String) -> [Action] {
        guard state == .running else { return [] }
        return stop(.paused(reason))
    }

    // MARK: Steps

    private mutating func send(_ next: Phase, _ command: String) -> [Action] {
        phase = next
        return [.sendCommand(command)]
    }

    /// After SIZE and MDTM: resume, rename a complete part, or start over.
    private mutating func decide() -> [Action] {
        if bytesDone > 0, let validator = announcedValidator, record.validator == validator, record.total == announcedTotal {
            guard let total = announcedTotal else { return send(.restart, "REST \(bytesDone)") }
            if bytesDone == total { return complete() }
            if bytesDone < total { return send(.restart, "REST \(bytesDone)") }
        }
        return startOver()
    }

    /// Drops the part and asks for the whole file.
    private mutating func startOver() -> [Action] {
        record = DownloadRecord(url: url, validator: announcedValidator, total: announcedTotal)
        bytesDone = 0
        return [.truncatePart(to: 0), writeRecord()] + send(.extendedPassive, "EPSV")
    }

    /// Both the data connection's end and the final reply are in: check the length.
    private mutating func transferred() -> [Action] {
        if let total = record.total, bytesDone < total {
            return stop(.paused("the transfer ended after \(bytesDone) of \(total) bytes"))
        }
        record.total = bytesDone
        return complete()
    }

    private mutating func complete() -> [Action] {
        phase = .renaming
        return [.sendCommand("QUIT"), .closeControl, .renameIntoPlace]
    }

    /// A reply that ends the conversation: 4xx pauses, anything else fails, with the server's text.
    private mutating func refused(_ reply: FTPReply, _ what: String) -> [Action] {
        let reason = "\(what): the server answered \(reply.shown)"
        return stop((400...499).contains(reply.code) ? .paused(reason) : .failed(reason))
    }

    /// Ends the run in `state` (paused or failed), closing the connections that are open.
    private mutating func stop(_ newState: State) -> [Action] {
        var actions: [Action] = []
        switch phase {
        case .connectingData, .retrieving: actions += [.closeData, .closeControl]
        case .stopped, .renaming: break
        default: actions.append(.closeControl)
        }
        if case .paused = newState { actions.append(writeRecord()) }
        phase = .stopped
        state = newState
        return actions + [.report(newState)]
    }

    private mutating func forgetPart() {
        record = DownloadRecord(url: url)
        bytesDone = 0
    }

    private mutating func writeRecord() -> Action {
        record.offset = bytesDone
        recordedOffset = bytesDone
        return .writeRecord(record)
    }
}

/// Why an `ftp://` URL names no file this client can fetch.
public struct FTPPathError: Error, Equatable, Sendable {
    /// What is wrong, for the user.
    public var message: String
}

// MARK: - Reading replies and URLs

extension FTPDownloadSession {
    /// The path the commands name (`SIZE`, `MDTM`, `RETR`): the URL's path without its first `/` (relative
    /// to the login directory, as RFC 1738 reads an FTP URL, in one command instead of a CWD per segment),
    /// percent-decoded. Refused: a query, no file name, a path ending in `/` (a directory), bytes that are not
    /// UTF-8, and CR, LF or NUL, which would end the command early and smuggle in another.
    static func commandPath(_ url: URLParts) -> Result<String, FTPPathError> {
        guard url.query == nil else { return .failure(FTPPathError(message: "an ftp:// URL with a query is not supported")) }
        var decoded: [UInt8] = []
        var bytes = Array(url.path.utf8.dropFirst())[...]
        while let byte = bytes.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                decoded.append(byte)
                continue
            }
            guard bytes.count >= 2, let high = HTTPSyntax.hexValue(bytes[bytes.startIndex]),
                  let low = HTTPSyntax.hexValue(bytes[bytes.startIndex + 1]) else {
                return .failure(FTPPathError(message: "invalid percent escape in the path"))
            }
            decoded.append(high << 4 | low)
            bytes = bytes.dropFirst(2)
        }
        guard !decoded.isEmpty, decoded.last != UInt8(ascii: "/") else {
            return .failure(FTPPathError(message: "the URL names a directory, not a file"))
        }
        guard !decoded.contains(where: { $0 == 0 || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }),
              let path = String(validating: decoded, as: UTF8.self) else {
            return .failure(FTPPathError(message: "the path holds a CR, LF, NUL or bytes that are not UTF-8"))
        }
        return .success(path)
    }

    /// The number a 213 reply to SIZE gives (spaces around it allowed); nil for anything else.
    static func decimal(_ text: String) -> Int? {
        ASCIIDigits.value(trimmed(text))
    }

    /// The validator an MDTM reply's time gives (RFC 3659 section 2.3: `YYYYMMDDHHMMSS[.F...]`, UTC): the
    /// time as an HTTP-date, so that the record reads it as it reads HTTP's Last-Modified. A fraction of a
    /// second is dropped (the record holds whole seconds): a file rewritten within the same second, with
    /// the same length, is not told apart, as with HTTP's dates. Nil for anything that is not a valid time.
    static func modificationTime(_ text: String) -> DownloadValidator? {
        let bytes = trimmed(text)
        guard bytes.count >= 14, bytes.prefix(14).allSatisfy(ASCIIDigits.isDigit) else { return nil }
        let fraction = bytes.dropFirst(14)
        guard fraction.isEmpty || (fraction.first == UInt8(ascii: ".") && fraction.count >= 2 && fraction.count <= 10
                                   && fraction.dropFirst().allSatisfy(ASCIIDigits.isDigit)) else { return nil }
        func field(_ offset: Int, _ length: Int) -> Int64 {
            Int64(ASCIIDigits.value(bytes.dropFirst(offset).prefix(length)) ?? -1)
        }
        let (year, month, day) = (field(0, 4), field(4, 2), field(6, 2))
        let (hour, minute, second) = (field(8, 2), field(10, 2), field(12, 2))
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays: [Int64] = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard year >= 1, (1...12).contains(month), day >= 1, day <= monthDays[Int(month) - 1],
              hour <= 23, minute <= 59, second <= 60 else { return nil }
        let seconds = HTTPRanges.daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
        return .lastModified(HTTPRanges.httpDate(seconds))
    }

    /// The port of a 229 reply (RFC 2428 section 3): `(<d><d><d>PORT<d>)`, `<d>` one printable character
    /// (usually `|`), the port 1 to 65535.
    static func extendedPassivePort(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard let open = bytes.firstIndex(of: UInt8(ascii: "(")), bytes.count - open >= 7 else { return nil }
        let delimiter = bytes[open + 1]
        guard delimiter > 0x20, delimiter < 0x7F, !ASCIIDigits.isDigit(delimiter),
              bytes[open + 2] == delimiter, bytes[open + 3] == delimiter else { return nil }
        let digits = bytes[(open + 4)...].prefix { ASCIIDigits.isDigit($0) }
        let end = open + 4 + digits.count
        guard digits.count <= 5, end + 1 < bytes.count, bytes[end] == delimiter, bytes[end + 1] == UInt8(ascii: ")"),
              let port = ASCIIDigits.value(digits), (1...65535).contains(port) else { return nil }
        return port
    }

    /// The port of a 227 reply (RFC 959 section 4.1.2; `h1,h2,h3,h4,p1,p2`, usually in parentheses, found
    /// as the first run of six numbers 0 to 255 joined by commas): p1 * 256 + p2, 1 to 65535. The address
    /// h1..h4 is ignored: the data connection goes where the control connection goes.
    static func passivePort(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            guard ASCIIDigits.isDigit(bytes[index]), index == 0 || !ASCIIDigits.isDigit(bytes[index - 1]) else {
                index += 1
                continue
            }
            // Six numbers from here, or the scan goes on after this run of digits.
            var numbers: [Int] = []
            var cursor = index
            while numbers.count < 6 {
                let digits = bytes[cursor...].prefix { ASCIIDigits.isDigit($0) }
                guard (1...3).contains(digits.count), let value = ASCIIDigits.value(digits), value <= 255 else { break }
                numbers.append(value)
                cursor += digits.count
                if numbers.count < 6 {
                    guard cursor < bytes.count, bytes[cursor] == UInt8(ascii: ",") else { break }
                    cursor += 1
                }
            }
            if numbers.count == 6 {
                let port = numbers[4] * 256 + numbers[5]
                return port >= 1 ? port : nil
            }
            index += 1
        }
        return nil
    }

    /// `text` without the spaces around it, as bytes.
    private static func trimmed(_ text: String) -> ArraySlice<UInt8> {
        var bytes = Array(text.utf8)[...]
        while bytes.first == UInt8(ascii: " ") { bytes = bytes.dropFirst() }
        while bytes.last == UInt8(ascii: " ") { bytes = bytes.dropLast() }
        return bytes
    }
}
