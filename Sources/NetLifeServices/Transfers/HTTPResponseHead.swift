// What the transfer machines read in a server's response head, as pure values: libcurl takes the head off
// the wire (HTTP/1.1 or HTTP/2) and hands over its status and fields; here is how the body is framed (no
// body, Content-Length, chunked, or until the end), and a Content-Range. The values come from a server we do
// not trust: every function here is linear in its input, never traps and reports what was wrong.

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
