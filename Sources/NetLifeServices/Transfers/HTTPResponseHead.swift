// What an HTTP/1.1 client reads from a server (RFC 9112), as pure values for the downloader's shell: the
// response head cut out of a byte stream (informational 1xx heads skipped), how the body that follows is
// framed (no body, Content-Length, chunked, or until the connection closes), a Content-Range, and an
// incremental decoder of chunked bodies. The bytes come from a server we do not trust: every function here
// is linear in its input, holds a bounded amount of it, never traps and reports what was wrong.

/// The status line and header fields of one HTTP/1.x response.
public struct HTTPResponseHead: Equatable, Sendable {
    /// The status code, 100 to 599.
    public var status: Int
    /// The reason phrase as sent (possibly empty); for messages only.
    public var reason: String
    /// The minor version of HTTP/1.x.
    public var minorVersion: Int
    /// The header fields in the order they came, names lowercased; an obsolete folded value is unfolded into
    /// one line with a space (RFC 9112 section 5.2).
    public var headers: [HTTPHeader]

    /// A head with these parts; `headers` should have lowercased names, as the parser gives them.
    public init(status: Int, reason: String = "", minorVersion: Int = 1, headers: [HTTPHeader] = []) {
        self.status = status
        self.reason = reason
        self.minorVersion = minorVersion
        self.headers = headers
    }

    /// The values of every field named `name` (compared without case), in order.
    public func values(of name: String) -> [String] {
        let name = HTTPSyntax.lowercased(name)
        return headers.filter { HTTPSyntax.lowercased($0.name) == name }.map(\.value)
    }

    /// The value of the field named `name` (compared without case); nil if absent. Several fields of that
    /// name are joined with `", "` (RFC 9110 section 5.3): for a single-valued field the result is invalid.
    public func value(of name: String) -> String? {
        let values = values(of: name)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// The Content-Length: nil when absent, or when it is not digits fitting an `Int` (several equal values
    /// are one value).
    public var contentLength: Int? {
        let values = values(of: "content-length")
        guard !values.isEmpty, case .success(let length) = HTTPSyntax.contentLength(values) else { return nil }
        return length
    }

    /// How the body after this head is delimited (RFC 9112 section 6.3) when it answers a request with
    /// `requestMethod`:
    /// - none after HEAD, and for 1xx, 204 and 304;
    /// - `chunked` when Transfer-Encoding is exactly `chunked` (it overrides a Content-Length; the client
    ///   closes the connection after every response, so no second message can be smuggled behind it). Any
    ///   other transfer coding is an error: the downloader stores bytes as sent and cannot undo gzip;
    /// - `length` from Content-Length, which must be digits (equal duplicates allowed), else an error;
    /// - otherwise the body runs until the server closes the connection.
    public func bodyFraming(requestMethod: String) throws(HTTPResponseError) -> HTTPBodyFraming {
        if requestMethod == "HEAD" || status < 200 || status == 204 || status == 304 { return .none }
        let encodings = values(of: "transfer-encoding")
        if !encodings.isEmpty {
            let codings = HTTPSyntax.listElements(encodings).map(HTTPSyntax.lowercased)
            guard codings == ["chunked"], minorVersion >= 1 else {
                throw HTTPResponseError("unsupported Transfer-Encoding \"\(HTTPSyntax.shown(ArraySlice(encodings.joined(separator: ", ").utf8)))\"")
            }
            return .chunked
        }
        let lengths = values(of: "content-length")
        guard !lengths.isEmpty else { return .untilClose }
        switch HTTPSyntax.contentLength(lengths) {
        case .success(let length): return .length(length)
        case .failure(let error): throw HTTPResponseError(error.message)
        }
    }

    /// The Content-Range of a 206 (`bytes 100-199/1000` or `bytes 100-199/*`); nil when absent or not that
    /// form (a 416's `bytes */1000` included).
    public var contentRange: ContentRange? {
        guard let value = value(of: "content-range") else { return nil }
        return ContentRange(parsing: value)
    }
}

/// The byte range a 206 carries, from its Content-Range (RFC 9110 section 14.4).
public struct ContentRange: Equatable, Sendable {
    /// The offset of the first byte sent.
    public var first: Int
    /// The offset of the last byte sent (not past it): at least `first`.
    public var last: Int
    /// The complete length of the representation; nil when the server sent `*`. Greater than `last`.
    public var total: Int?

    /// A range with these bounds.
    public init(first: Int, last: Int, total: Int?) {
        self.first = first
        self.last = last
        self.total = total
    }

    /// Reads `bytes FIRST-LAST/TOTAL` (the unit without case, TOTAL a number or `*`); nil for anything else,
    /// for LAST before FIRST, LAST at or past TOTAL, and numbers that do not fit an `Int`.
    public init?(parsing text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count > 6, HTTPSyntax.lowercased(String(decoding: bytes[0..<6], as: UTF8.self)) == "bytes " else { return nil }
        let rest = bytes[6...]
        guard let dash = rest.firstIndex(of: UInt8(ascii: "-")), let slash = rest.firstIndex(of: UInt8(ascii: "/")),
              dash < slash, let first = HTTPSyntax.decimal(rest[..<dash]),
              let last = HTTPSyntax.decimal(rest[(dash + 1)..<slash]), last >= first,
              last < Int.max else { return nil }   // so that `count` and `last + 1` can never overflow
        let totalText = rest[(slash + 1)...]
        if totalText.elementsEqual("*".utf8) {
            self.init(first: first, last: last, total: nil)
        } else {
            guard let total = HTTPSyntax.decimal(totalText), last < total else { return nil }
            self.init(first: first, last: last, total: total)
        }
    }

    /// How many bytes the range holds.
    public var count: Int { last - first + 1 }
}

/// How a response body is delimited.
public enum HTTPBodyFraming: Equatable, Sendable {
    /// No body follows the head.
    case none
    /// Exactly this many bytes follow.
    case length(Int)
    /// A chunked body follows: feed it to a `ChunkedDecoder`.
    case chunked
    /// The body is everything until the server closes the connection.
    case untilClose

    /// The body's length when the head gives it (0 for `none`).
    public var length: Int? {
        switch self {
        case .none: return 0
        case .length(let length): return length
        case .chunked, .untilClose: return nil
        }
    }
}

/// Why a server's bytes are not a response the client can read. The connection cannot go on after one.
public struct HTTPResponseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong, for a log line and for the reason a transfer paused.
    public var message: String

    /// An error with this message.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

/// Cuts the head of a response out of the bytes a server sends.
///
/// Rules, beyond RFC 9112's grammar:
/// - Lines end in CRLF or a bare LF; any other CR or control character (but tab) is an error.
/// - The status line is `HTTP/1.x SP DDD [SP reason]`; another major version, a code outside 100 to 599 or
///   anything else is an error. 1xx heads (100 Continue, 103 Early Hints) are read and dropped, except 101
///   Switching Protocols, which the client never asks for: an error.
/// - A field line is `name ":" OWS value OWS` with a token name and no whitespace before the colon. A line
///   that starts with whitespace continues the previous field's value (obsolete folding, unfolded with a
///   space as RFC 9112 section 5.2 asks of a user agent); before any field it is an error.
/// - At most `maxHeadBytes` bytes from the first byte to the end of the final head, 1xx heads included (so
///   that a server cannot keep the client reading 100 Continue forever), and at most `maxHeaders` fields in
///   one head. With `returnsInformational` (an upload reading `104` progress while it sends), each 1xx head
///   is returned like a final one and the limit applies to each head.
/// - After an error every call throws it again, until `reset()`.
public struct HTTPResponseParser: Sendable {
    /// The most bytes of the heads before a body (1xx heads, the final head, their line ends).
    public static let maxHeadBytes = 16384
    /// The most header fields of one head.
    public static let maxHeaders = 100
    /// Whether 1xx heads (but 101) are returned rather than skipped.
    public var returnsInformational = false

    /// Bytes taken since the start (or the last head returned).
    private var scanned = 0
    /// Work done so far, in bytes looked at: each byte is scanned once and looked at once more in its line.
    internal private(set) var workDone = 0
    private var line: [UInt8] = []
    private var statusLine: (status: Int, reason: String, minorVersion: Int)?
    private var headers: [HTTPHeader] = []
    private var failure: HTTPResponseError?

    /// A parser at the start of a response.
    public init() {}

    /// Reads `bytes`, the input that follows what earlier calls were given. Returns the final head and how
    /// many bytes of this call's input it took (the rest is the start of the body) once the head ends; nil
    /// when all of `bytes` was taken and more are needed. After returning a head the parser starts over.
    public mutating func consume(_ bytes: some Collection<UInt8>) throws(HTTPResponseError) -> (head: HTTPResponseHead, consumed: Int)? {
        if let failure { throw failure }
        var consumed = 0
        for byte in bytes {
            consumed += 1
            scanned += 1
            workDone += 1
            do throws(HTTPResponseError) {
                if byte == HTTPSyntax.lf {
                    if line.last == HTTPSyntax.cr { line.removeLast() }
                    workDone += line.count
                    if let head = try endOfLine() {
                        reset()
                        return (head, consumed)
                    }
                    line.removeAll(keepingCapacity: true)
                } else {
                    line.append(byte)
                }
                if scanned >= Self.maxHeadBytes {
                    throw HTTPResponseError("response head over \(Self.maxHeadBytes) bytes")
                }
            } catch {
                failure = error
                throw error
            }
        }
        return nil
    }

    /// Forgets everything read: the next bytes start a new response.
    public mutating func reset() {
        scanned = 0
        line.removeAll(keepingCapacity: true)
        statusLine = nil
        headers = []
        failure = nil
    }

    /// A line ended (held in `line`): the head when it was the empty line that ends a final head.
    private mutating func endOfLine() throws(HTTPResponseError) -> HTTPResponseHead? {
        guard let statusLine else {
            statusLine = try Self.parseStatusLine(line[...])
            return nil
        }
        if line.isEmpty {
            if statusLine.status >= 200 || returnsInformational {
                return HTTPResponseHead(status: statusLine.status, reason: statusLine.reason,
                                        minorVersion: statusLine.minorVersion, headers: headers)
            }
            // An informational head: the real one follows. Its bytes still count toward the limit.
            self.statusLine = nil
            headers = []
            return nil
        }
        if let first = line.first, HTTPSyntax.isWhitespace(first) {
            guard !headers.isEmpty else { throw HTTPResponseError("a continuation line before any header field") }
            let continuation = try Self.fieldValue(line[...], name: headers[headers.count - 1].name)
            if !continuation.isEmpty {
                headers[headers.count - 1].value += headers[headers.count - 1].value.isEmpty ? continuation : " " + continuation
            }
            return nil
        }
        guard headers.count < Self.maxHeaders else {
            throw HTTPResponseError("more than \(Self.maxHeaders) header fields")
        }
        headers.append(try Self.parseField(line[...]))
        return nil
    }

    static func parseStatusLine(_ line: ArraySlice<UInt8>) throws(HTTPResponseError) -> (status: Int, reason: String, minorVersion: Int) {
        let bytes = Array(line)
        guard bytes.count >= 12, bytes[0..<5].elementsEqual("HTTP/".utf8), HTTPSyntax.isDigit(bytes[5]),
              bytes[6] == UInt8(ascii: "."), HTTPSyntax.isDigit(bytes[7]), bytes[8] == HTTPSyntax.space,
              let status = HTTPSyntax.decimal(bytes[9..<12]), bytes.count == 12 || bytes[12] == HTTPSyntax.space else {
            throw HTTPResponseError("invalid status line \"\(HTTPSyntax.shown(line))\"")
        }
        guard bytes[5] == UInt8(ascii: "1") else {
            throw HTTPResponseError("unsupported HTTP version \(HTTPSyntax.string(bytes[0..<8]))")
        }
        guard (100...599).contains(status) else { throw HTTPResponseError("invalid status code \(status)") }
        guard status != 101 else { throw HTTPResponseError("101 Switching Protocols, which was not asked for") }
        let reason = bytes.dropFirst(13)
        guard reason.allSatisfy(isValueByte) else {
            throw HTTPResponseError("control character in the status line \"\(HTTPSyntax.shown(line))\"")
        }
        return (status, HTTPSyntax.string(reason), Int(bytes[7] - UInt8(ascii: "0")))
    }

    static func parseField(_ line: ArraySlice<UInt8>) throws(HTTPResponseError) -> HTTPHeader {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            throw HTTPResponseError("header line without a colon: \"\(HTTPSyntax.shown(line))\"")
        }
        let name = line[..<colon]
        guard !name.isEmpty, name.allSatisfy(HTTPSyntax.isTokenChar) else {
            throw HTTPResponseError("invalid header name \"\(HTTPSyntax.shown(name))\"")
        }
        let lowercased = HTTPSyntax.lowercased(HTTPSyntax.string(name))
        return HTTPHeader(name: lowercased, value: try fieldValue(line[(colon + 1)...], name: lowercased))
    }

    /// A field value without the whitespace around it; an error if it holds a control character.
    static func fieldValue(_ bytes: ArraySlice<UInt8>, name: String) throws(HTTPResponseError) -> String {
        var value = bytes
        while let first = value.first, HTTPSyntax.isWhitespace(first) { value = value.dropFirst() }
        while let last = value.last, HTTPSyntax.isWhitespace(last) { value = value.dropLast() }
        guard value.allSatisfy(isValueByte) else { throw HTTPResponseError("control character in the value of \(name)") }
        return HTTPSyntax.string(value)
    }

    static func isValueByte(_ byte: UInt8) -> Bool { byte == HTTPSyntax.tab || (byte >= 0x20 && byte != 0x7F) }
}

/// Decodes a chunked body (RFC 9112 section 7.1) as it arrives, without copying it: each call says what the
/// first bytes of the input are (body data, framing to drop, or the end of the body).
///
/// Rules: a chunk size is hex digits whose value fits an `Int` (one that does not is an error, never a
/// wrapped size); extensions after `;` are skipped; whitespace is allowed between the size and `;`; lines end
/// in CRLF or LF. A chunk-size line is at most `maxSizeLineBytes` bytes and the trailer section at most
/// `maxTrailerBytes`: trailer fields are checked for control characters and dropped. After an error every
/// call throws it again.
public struct ChunkedDecoder: Sendable {
    /// The most bytes of one chunk-size line with its extensions and line end.
    public static let maxSizeLineBytes = 4096
    /// The most bytes of the trailer section with its line ends.
    public static let maxTrailerBytes = 16384

    /// What the first bytes of the input given to `decode` are.
    public enum Step: Equatable, Sendable {
        /// The first n bytes (at least 1) are body data: keep them and drop them from the input.
        case data(Int)
        /// The first n bytes are framing: drop them. When n is the whole input, more input is needed.
        case framing(Int)
        /// The first n bytes end the body (the last chunk, trailers and the final line end): drop them; what
        /// follows them is not part of this body.
        case end(Int)
    }

    private enum Phase: Sendable {
        case size(value: Int, digits: Int)
        case sizeWhitespace(value: Int)
        case extensions(value: Int)
        case sizeCR(value: Int)
        case data(remaining: Int)
        case dataEnd(sawCR: Bool)
        case trailer(lineBytes: Int, sawCR: Bool)
        case finished
    }

    private var phase = Phase.size(value: 0, digits: 0)
    private var sizeLineBytes = 0
    private var trailerBytes = 0
    private var failure: HTTPResponseError?

    /// A decoder at the start of a chunked body.
    public init() {}

    /// Whether the whole body, with its trailers, has been read.
    public var isFinished: Bool {
        if case .finished = phase { return true }
        return false
    }

    /// What the first bytes of `bytes` (the input not yet taken) are. Framing bytes are scanned once each,
    /// data is counted and not looked at: linear in the input, whatever its splits. After the end, every call
    /// returns `.end(0)`.
    public mutating func decode(_ bytes: some Collection<UInt8>) throws(HTTPResponseError) -> Step {
        if let failure { throw failure }
        if case .data(let remaining) = phase, !bytes.isEmpty {
            let count = min(remaining, bytes.count)
            phase = remaining == count ? .dataEnd(sawCR: false) : .data(remaining: remaining - count)
            return .data(count)
        }
        if case .finished = phase { return .end(0) }
        var taken = 0
        for byte in bytes {
            taken += 1
            do throws(HTTPResponseError) {
                try advance(byte)
            } catch {
                failure = error
                throw error
            }
            switch phase {
            case .finished: return .end(taken)
            case .data: return .framing(taken)
            default: continue
            }
        }
        return .framing(taken)
    }

    private mutating func advance(_ byte: UInt8) throws(HTTPResponseError) {
        switch phase {
        case .size, .sizeWhitespace, .extensions, .sizeCR:
            sizeLineBytes += 1
            guard sizeLineBytes <= Self.maxSizeLineBytes else {
                throw HTTPResponseError("chunk-size line over \(Self.maxSizeLineBytes) bytes")
            }
        case .trailer:
            trailerBytes += 1
            guard trailerBytes <= Self.maxTrailerBytes else {
                throw HTTPResponseError("chunked trailer over \(Self.maxTrailerBytes) bytes")
            }
        case .data, .dataEnd, .finished:
            break
        }
        switch phase {
        case .size(let value, let digits):
            if let digit = HTTPSyntax.hexValue(byte) {
                let (times16, overflow1) = value.multipliedReportingOverflow(by: 16)
                let (sum, overflow2) = times16.addingReportingOverflow(Int(digit))
                guard !overflow1 && !overflow2 else { throw HTTPResponseError("chunk size past \(Int.max)") }
                phase = .size(value: sum, digits: digits + 1)
                return
            }
            guard digits > 0 else { throw HTTPResponseError("invalid chunk size: byte \(HTTPSyntax.shown([byte]))") }
            try endOfSize(byte, value: value)
        case .sizeWhitespace(let value):
            try endOfSize(byte, value: value)
        case .extensions(let value):
            if byte == HTTPSyntax.cr {
                phase = .sizeCR(value: value)
            } else if byte == HTTPSyntax.lf {
                startChunk(value)
            } else if !HTTPResponseParser.isValueByte(byte) {
                throw HTTPResponseError("control character in a chunk extension")
            }
        case .sizeCR(let value):
            guard byte == HTTPSyntax.lf else { throw HTTPResponseError("CR without LF after a chunk size") }
            startChunk(value)
        case .data:
            // `decode` hands data out without looking at it.
            break
        case .dataEnd(let sawCR):
            if byte == HTTPSyntax.cr && !sawCR {
                phase = .dataEnd(sawCR: true)
            } else if byte == HTTPSyntax.lf {
                phase = .size(value: 0, digits: 0)
                sizeLineBytes = 0
            } else {
                throw HTTPResponseError("chunk data not followed by a line end")
            }
        case .trailer(let lineBytes, let sawCR):
            if byte == HTTPSyntax.lf {
                phase = lineBytes == 0 ? .finished : .trailer(lineBytes: 0, sawCR: false)
            } else if sawCR {
                throw HTTPResponseError("CR without LF in the chunked trailer")
            } else if byte == HTTPSyntax.cr {
                phase = .trailer(lineBytes: lineBytes, sawCR: true)
            } else if HTTPResponseParser.isValueByte(byte) {
                phase = .trailer(lineBytes: lineBytes + 1, sawCR: false)
            } else {
                throw HTTPResponseError("control character in the chunked trailer")
            }
        case .finished:
            break
        }
    }

    /// A byte after the size's digits (or after whitespace following them).
    private mutating func endOfSize(_ byte: UInt8, value: Int) throws(HTTPResponseError) {
        if HTTPSyntax.isWhitespace(byte) {
            phase = .sizeWhitespace(value: value)
        } else if byte == UInt8(ascii: ";") {
            phase = .extensions(value: value)
        } else if byte == HTTPSyntax.cr {
            phase = .sizeCR(value: value)
        } else if byte == HTTPSyntax.lf {
            startChunk(value)
        } else {
            throw HTTPResponseError("invalid byte \(HTTPSyntax.shown([byte])) after a chunk size")
        }
    }

    private mutating func startChunk(_ size: Int) {
        phase = size == 0 ? .trailer(lineBytes: 0, sawCR: false) : .data(remaining: size)
    }
}
