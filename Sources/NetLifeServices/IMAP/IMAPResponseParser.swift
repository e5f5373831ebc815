// The server side of an IMAP connection (RFC 3501 section 7) cut into responses, as a pure value: the shell
// that owns the socket feeds it whatever bytes arrived and gets back every response they completed.
// It understands what a client that logs in, selects a mailbox and idles needs (tagged status, untagged
// status, EXISTS, EXPUNGE, RECENT, continuations) and passes everything else on as text.
//
// A response is one line, or several lines joined by literals: a line that ends in `{N}` (or `{N+}`, or
// `~{N}`) is followed by N bytes of data and then by the rest of the response. Literal bytes are counted down
// and dropped, never stored, so a server that announces a huge literal costs nothing but the wait. What is
// stored (the lines of one response without their CRLFs) is bounded by `maxLineLength`. Every byte is looked
// at once, plus once more for the digits of a literal's size: the work is linear in the input however it is
// split into feeds.

import NetLife   // ASCIIDigits

/// The status of a tagged response: how a command ended.
public enum IMAPStatus: String, Equatable, Sendable {
    case ok = "OK", no = "NO", bad = "BAD"
}

/// The condition of an untagged status response (`* OK ...`, `* BYE ...`).
public enum IMAPCondition: String, Equatable, Sendable {
    case ok = "OK", no = "NO", bad = "BAD", bye = "BYE", preauth = "PREAUTH"
}

/// An untagged response (`* ...`).
public enum IMAPUntagged: Equatable, Sendable {
    /// `* OK ...`, `* NO ...`, `* BAD ...`, `* BYE ...`, `* PREAUTH ...`; `text` is what follows the condition,
    /// response code included (`[UIDVALIDITY 1] UIDs valid`).
    case status(IMAPCondition, text: String)
    /// `* N EXISTS`: the mailbox holds N messages.
    case exists(Int)
    /// `* N EXPUNGE`: message N was removed (the mailbox is one message smaller).
    case expunge(Int)
    /// `* N RECENT`: N messages are new since the last session.
    case recent(Int)
    /// Anything else (`CAPABILITY ...`, `FLAGS (...)`, `1 FETCH (...)`, and `* N EXISTS` whose N does not fit
    /// an `Int`): the text after `* `, with each literal's bytes left out (its `{N}` stays).
    case other(String)
}

/// One IMAP server response (RFC 3501 section 7), as much as a client that logs in, selects and idles needs.
public enum IMAPResponse: Equatable, Sendable {
    /// `a1 OK LOGIN completed`: the end of the command tagged `a1`.
    case tagged(tag: String, status: IMAPStatus, text: String)
    /// `* ...`: data or status not tied to a command.
    case untagged(IMAPUntagged)
    /// `+ idling`: the server waits for the rest of a command (a literal, or DONE ending IDLE).
    case continuation(text: String)
}

/// Why the bytes from the server cannot be read as IMAP. The connection cannot go on after one: the client no
/// longer knows where responses begin.
public struct IMAPParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kind of error.
    public enum Code: String, Equatable, Sendable {
        /// One response's lines (literals excluded) hold more than `IMAPResponseParser.maxLineLength` bytes.
        case lineTooLong = "line-too-long"
        /// One response holds more than `IMAPResponseParser.maxLiteralsPerResponse` literals.
        case tooManyLiterals = "too-many-literals"
        /// A literal announces more bytes than an `Int` holds.
        case literalTooLarge = "literal-too-large"
        /// A line is neither untagged (`* `), a continuation (`+`) nor a tagged OK, NO or BAD.
        case malformed
    }

    /// The kind of error.
    public var code: Code
    /// What went wrong, for a log or a status line.
    public var message: String

    /// An error of this kind, with the message a user sees.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

/// Cuts the bytes an IMAP server sends into `IMAPResponse`s.
///
/// Rules, beyond RFC 3501's grammar:
/// - A line ends in CRLF or in a bare LF. A CR not followed by LF is part of the text.
/// - Any line (tagged, untagged or continuation) that ends in `{N}` or `{N+}`, N one or more digits, announces
///   a literal, as RFC 3501's own clients read it. Braces that do not hold a number (`{}`, `{x}`, `{-1}`,
///   `{ 5}`) are text, and the line ends there. A size too large for an `Int` is an error (`literalTooLarge`):
///   skipping fewer bytes than the server sends would read literal data as responses.
/// - An empty line is skipped. A line starting with `* ` is always a response: what is not understood is
///   `.other`. Any other line that is not `+...` or `TAG SP (OK / NO / BAD) [SP text]` is an error
///   (`malformed`): the client could not tell which command it ends.
/// - Text that is not UTF-8 is decoded with replacement characters.
/// - After an error every later `feed` throws the same error.
public struct IMAPResponseParser: Sendable {
    /// The most bytes one response may store: its lines without their CRLFs, literals excluded (RFC 7162
    /// advises clients to accept lines of at least 8192 bytes; a CAPABILITY or FLAGS line is well under that).
    public static let maxLineLength = 65_536
    /// The most literals one response may hold. A FETCH carries one per body section asked for (this client
    /// asks for none); more than this means a broken or hostile server.
    public static let maxLiteralsPerResponse = 1_000

    /// The stored bytes of the response being read: its lines so far, without CRLFs and literal bytes.
    private var line: [UInt8] = []
    /// Where the line being read begins in `line` (after the response's last literal).
    private var segmentStart = 0
    /// Whether the last byte was a CR, not stored yet: it is dropped if an LF follows, stored if not.
    private var pendingCR = false
    /// How many bytes of the current literal are still to be skipped.
    private var literalRemaining = 0
    /// How many literals the response being read has held.
    private var literalCount = 0
    /// The error that stopped the parser, thrown again by every later feed.
    private var failure: IMAPParseError?
    /// Work done so far, in bytes looked at (a skipped run of literal bytes counts one): linear in the input.
    internal private(set) var workDone = 0

    /// A parser at the start of a connection (the greeting comes first).
    public init() {}

    /// How many bytes are held for the response being read (at most `maxLineLength`).
    public var bufferedByteCount: Int { line.count }

    /// How many bytes of an announced literal are still to come (and to be skipped).
    public var literalBytesRemaining: Int { literalRemaining }

    /// Feeds received bytes; returns every response completed by them. Partial input is kept (bounded).
    ///
    /// The responses completed before an error in the same feed are lost; `feed(_:into:)` keeps them.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(IMAPParseError) -> [IMAPResponse] {
        var responses: [IMAPResponse] = []
        try feed(bytes, into: &responses)
        return responses
    }

    /// Feeds received bytes and appends every response they complete to `responses`, in order; when the bytes
    /// hold an error, the responses before it are appended before the error is thrown.
    public mutating func feed(_ bytes: some Sequence<UInt8>, into responses: inout [IMAPResponse]) throws(IMAPParseError) {
        if let failure { throw failure }
        // Read straight from contiguous storage; copy anything else once.
        let error = bytes.withContiguousStorageIfAvailable { buffer in
            self.consume(buffer, into: &responses)
        } ?? Array(bytes).withUnsafeBufferPointer { buffer in
            self.consume(buffer, into: &responses)
        }
        if let error {
            failure = error
            throw error
        }
    }

    private mutating func consume(_ buffer: UnsafeBufferPointer<UInt8>, into responses: inout [IMAPResponse]) -> IMAPParseError? {
        var index = 0
        while index < buffer.count {
            if literalRemaining > 0 {
                let skipped = min(literalRemaining, buffer.count - index)
                literalRemaining -= skipped
                index += skipped
                workDone += 1
                continue
            }
            let byte = buffer[index]
            index += 1
            workDone += 1
            switch byte {
            case IMAPSyntax.lf:
                pendingCR = false
                if let error = endOfLine(into: &responses) { return error }
            case IMAPSyntax.cr:
                if pendingCR, let error = store(IMAPSyntax.cr) { return error }
                pendingCR = true
            default:
                if pendingCR {
                    pendingCR = false
                    if let error = store(IMAPSyntax.cr) { return error }
                }
                if let error = store(byte) { return error }
            }
        }
        return nil
    }

    private mutating func store(_ byte: UInt8) -> IMAPParseError? {
        guard line.count < Self.maxLineLength else {
            return IMAPParseError(.lineTooLong, "response line over \(Self.maxLineLength) bytes")
        }
        line.append(byte)
        return nil
    }

    /// A line ended: either it announces a literal and the response goes on, or the response is complete.
    private mutating func endOfLine(into responses: inout [IMAPResponse]) -> IMAPParseError? {
        switch announcedLiteral() {
        case .failure(let error):
            return error
        case .success(let size?):
            literalCount += 1
            guard literalCount <= Self.maxLiteralsPerResponse else {
                return IMAPParseError(.tooManyLiterals, "response with over \(Self.maxLiteralsPerResponse) literals")
            }
            literalRemaining = size
            segmentStart = line.count
            return nil
        case .success(nil):
            let parsed = Self.parse(line[...])
            line.removeAll(keepingCapacity: true)
            segmentStart = 0
            literalCount = 0
            switch parsed {
            case .failure(let error): return error
            case .success(let response?): responses.append(response)
            case .success(nil): break
            }
            return nil
        }
    }

    /// The size of the literal the line just read announces (`{N}` or `{N+}` at its end), or nil if it does
    /// not announce one. Looks back over the size's digits only, and only within this line.
    private mutating func announcedLiteral() -> Result<Int?, IMAPParseError> {
        var end = line.count
        guard end > segmentStart, line[end - 1] == IMAPSyntax.closeBrace else { return .success(nil) }
        end -= 1
        if end > segmentStart, line[end - 1] == IMAPSyntax.plus { end -= 1 }
        var start = end
        while start > segmentStart, IMAPSyntax.isDigit(line[start - 1]) { start -= 1 }
        workDone += end - start
        guard start < end, start > segmentStart, line[start - 1] == IMAPSyntax.openBrace else { return .success(nil) }
        guard let size = IMAPSyntax.number(line[start..<end]) else {
            return .failure(IMAPParseError(.literalTooLarge, "literal of \(end - start) digits: larger than any this client can skip"))
        }
        return .success(size)
    }

    // MARK: One response

    /// The response in one complete set of stored bytes; nil for an empty line.
    static func parse(_ bytes: ArraySlice<UInt8>) -> Result<IMAPResponse?, IMAPParseError> {
        guard let first = bytes.first else { return .success(nil) }
        if first == IMAPSyntax.plus {
            var text = bytes.dropFirst()
            if text.first == IMAPSyntax.space { text = text.dropFirst() }
            return .success(.continuation(text: IMAPSyntax.string(text)))
        }
        if first == IMAPSyntax.star {
            let rest = bytes.dropFirst()
            guard rest.first == IMAPSyntax.space else { return .failure(malformed(bytes)) }
            return .success(.untagged(parseUntagged(rest.dropFirst())))
        }
        guard let tagEnd = bytes.firstIndex(of: IMAPSyntax.space), tagEnd > bytes.startIndex,
              bytes[..<tagEnd].allSatisfy(IMAPSyntax.isTagChar) else { return .failure(malformed(bytes)) }
        let (word, text) = splitWord(bytes[(tagEnd + 1)...])
        let status: IMAPStatus
        if IMAPSyntax.equalsIgnoringCase(word, "OK") {
            status = .ok
        } else if IMAPSyntax.equalsIgnoringCase(word, "NO") {
            status = .no
        } else if IMAPSyntax.equalsIgnoringCase(word, "BAD") {
            status = .bad
        } else {
            return .failure(malformed(bytes))
        }
        return .success(.tagged(tag: IMAPSyntax.string(bytes[..<tagEnd]), status: status, text: IMAPSyntax.string(text)))
    }

    private static func parseUntagged(_ bytes: ArraySlice<UInt8>) -> IMAPUntagged {
        let (word, rest) = splitWord(bytes)
        let conditions: [IMAPCondition] = [.ok, .no, .bad, .bye, .preauth]
        if let condition = conditions.first(where: { IMAPSyntax.equalsIgnoringCase(word, $0.rawValue) }) {
            return .status(condition, text: IMAPSyntax.string(rest))
        }
        // `* N KEYWORD` exactly; anything more (FETCH data) or a number too large is other data.
        if let number = IMAPSyntax.number(word), !rest.contains(IMAPSyntax.space) {
            if IMAPSyntax.equalsIgnoringCase(rest, "EXISTS") { return .exists(number) }
            if IMAPSyntax.equalsIgnoringCase(rest, "EXPUNGE") { return .expunge(number) }
            if IMAPSyntax.equalsIgnoringCase(rest, "RECENT") { return .recent(number) }
        }
        return .other(IMAPSyntax.string(bytes))
    }

    /// The bytes up to the first space, and those after it (empty without a space).
    private static func splitWord(_ bytes: ArraySlice<UInt8>) -> (word: ArraySlice<UInt8>, rest: ArraySlice<UInt8>) {
        guard let space = bytes.firstIndex(of: IMAPSyntax.space) else { return (bytes, bytes[bytes.endIndex...]) }
        return (bytes[..<space], bytes[(space + 1)...])
    }

    private static func malformed(_ bytes: ArraySlice<UInt8>) -> IMAPParseError {
        // Quote only the start: enough to recognize the line, bounded whatever the server sent.
        let shown = bytes.prefix(40).map { IMAPSyntax.isPrintable($0) ? String(UnicodeScalar($0)) : "\\x" + IMAPSyntax.hex($0) }.joined()
        return IMAPParseError(.malformed, "not an IMAP response: \"\(shown)\(bytes.count > 40 ? "..." : "")\"")
    }
}

/// The bytes and byte classes of IMAP's syntax.
enum IMAPSyntax {
    static let lf = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r"), space = UInt8(ascii: " ")
    static let plus = UInt8(ascii: "+"), star = UInt8(ascii: "*")
    static let openBrace = UInt8(ascii: "{"), closeBrace = UInt8(ascii: "}")

    static func isDigit(_ byte: UInt8) -> Bool { ASCIIDigits.isDigit(byte) }

    static func isPrintable(_ byte: UInt8) -> Bool { byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "\"") }

    /// A character of a tag (RFC 3501 `tag`): ASTRING-CHAR except `+`.
    static func isTagChar(_ byte: UInt8) -> Bool {
        guard byte > 0x20 && byte < 0x7F else { return false }
        return !"(){%*\"\\+".utf8.contains(byte)
    }

    static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
    }

    /// The value of one or more decimal digits, nil if it is empty, holds anything else, or overflows `Int`.
    static func number(_ digits: ArraySlice<UInt8>) -> Int? { ASCIIDigits.value(digits) }

    /// Whether `bytes` spell `word` (ASCII letters, compared without case).
    static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ word: String) -> Bool {
        guard bytes.count == word.utf8.count else { return false }
        return zip(bytes, word.utf8).allSatisfy { a, b in
            let upper = a >= UInt8(ascii: "a") && a <= UInt8(ascii: "z") ? a - 0x20 : a
            return upper == b
        }
    }

    static func string(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }
}
