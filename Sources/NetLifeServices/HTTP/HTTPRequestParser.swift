// The request head of HTTP/1.1 (RFC 9112 sections 2 to 6) cut out of a connection's input, as a pure value:
// the shell that owns the socket hands it the unread bytes and gets back a head and how many bytes it took,
// or a request for more bytes, or an error with the status to answer. No body is read here: what follows the
// head (a body of `bodyLength()` bytes, or the next pipelined request) is the shell's.
//
// The parser is strict where RFC 9112 lets a server choose (obsolete line folding, a space before a colon,
// control characters, a request without a Host, Content-Length next to Transfer-Encoding all get 400) and
// bounded: the head is at most `maxHeadBytes` bytes and `maxHeaders` fields. Each byte is scanned once and
// copied once into the line being read, however the input is split: a call with the same bytes plus more
// starts where the last one stopped.

import NetLife

/// The request line and header fields of one HTTP/1.x request.
public struct HTTPRequestHead: Equatable, Sendable {
    /// The method, a case-sensitive token (`GET`, `HEAD`).
    public var method: String
    /// The request-target as it was sent (`/a%20b?x=1`).
    public var target: String
    /// The minor version of HTTP/1.x: 0 or 1 (a request for HTTP/1.2 to 1.9 is read as HTTP/1.1, RFC 9110
    /// section 2.5).
    public var minorVersion: Int
    /// The header fields in the order they came, names lowercased.
    public var headers: [HTTPHeader]

    /// A head with these parts; `headers` should have lowercased names, as the parser gives them.
    public init(method: String, target: String, minorVersion: Int = 1, headers: [HTTPHeader] = []) {
        self.method = method
        self.target = target
        self.minorVersion = minorVersion
        self.headers = headers
    }

    /// The values of every field named `name` (compared without case), in order.
    public func values(of name: String) -> [String] {
        let name = HTTPSyntax.lowercased(name)
        return headers.filter { $0.name == name }.map(\.value)
    }

    /// The value of the field named `name` (compared without case); nil if absent. Several fields of that
    /// name are combined into one value separated by `", "`, as RFC 9110 section 5.3 combines list fields:
    /// for a field that takes a single value (If-Range, Range) the result is then invalid, and is ignored.
    public func value(of name: String) -> String? {
        let values = values(of: name)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Whether the connection stays open after the response: for HTTP/1.1 unless a Connection field says
    /// `close`; for HTTP/1.0 only when one says `keep-alive` (and none says `close`).
    public var keepAlive: Bool {
        let options = HTTPSyntax.listElements(values(of: "connection")).map(HTTPSyntax.lowercased)
        if options.contains("close") { return false }
        return minorVersion >= 1 || options.contains("keep-alive")
    }

    /// The body's length from Content-Length; nil when there is no such field (or it is invalid, which the
    /// parser rejects). Several fields, or a list, must all hold the same number.
    public var contentLength: Int? {
        let values = values(of: "content-length")
        guard !values.isEmpty, case .success(let length) = HTTPSyntax.contentLength(values) else { return nil }
        return length
    }

    /// Whether the body is chunked: a Transfer-Encoding field whose last coding is `chunked`.
    public var isChunked: Bool {
        let codings = HTTPSyntax.listElements(values(of: "transfer-encoding"))
        return codings.last.map { HTTPSyntax.lowercased($0) == "chunked" } ?? false
    }

    /// The path of an origin-form target (`/a%20b?x=1` gives `/a b`), or of an absolute-form one
    /// (`http://host:8080/a%20b?x=1` gives `/a b` too; `http://host` gives `/`): percent-decoded, query
    /// dropped. Nil when the target is neither (`*`, `host:443`), holds a bad percent escape, decodes to bytes
    /// that are not UTF-8 or that hold NUL, or has a `.` or `..` segment once decoded (`/a/%2e%2e/b`), so
    /// that a path never leaves the root it is joined to.
    public var path: String? { originForm.flatMap(HTTPSyntax.decodedPath) }

    /// The target as origin-form: the target itself when it starts with `/`; the path and query of an
    /// absolute-form target (RFC 9112 section 3.2.2), `/` when its path is empty; nil otherwise.
    public var originForm: String? {
        if target.utf8.first == UInt8(ascii: "/") { return target }
        return (try? HTTPSyntax.absoluteForm(target))?.originForm
    }

    /// The host (and port) the request is for: the authority of an absolute-form target, which overrides the
    /// Host field (RFC 9112 sections 3.2.2 and 7.2), else the Host field; nil for an HTTP/1.0 request
    /// without either.
    public var authority: String? {
        if let absolute = try? HTTPSyntax.absoluteForm(target) { return absolute.authority }
        return value(of: "host")
    }

    /// How many bytes of content follow the head (RFC 9112 section 6.3): its Content-Length, 0 without one.
    /// A chunked body is refused with 411 (Length Required): the service stores bodies as they stream to a
    /// file and needs to know where one ends before taking it; clients send Content-Length (curl does for a
    /// file). The parser has already refused every other framing error.
    public func bodyLength() throws(HTTPParseError) -> Int {
        if isChunked { throw HTTPParseError(status: 411, message: "a chunked request body (send Content-Length)") }
        return contentLength ?? 0
    }
}

/// Finds request heads at the start of a connection's unread input.
///
/// Rules, beyond RFC 9112's grammar:
/// - Lines end in CRLF or a bare LF; any other CR is a control character (400). Empty lines before the
///   request line are skipped (RFC 9112 section 2.2) but count toward `maxHeadBytes`.
/// - The request line is exactly `METHOD SP target SP HTTP/d.d`: a method that is a token, a target of
///   visible ASCII, one space each. A target that starts with a scheme and `:` is absolute-form, which a
///   server must accept (RFC 9112 section 3.2.2): `http` or `https` with `//`, a host and an optional port,
///   no userinfo and no fragment; any other is 400. `HTTP/1.x` is accepted; any other `HTTP/d.d` is 505; a line without a
///   version (HTTP/0.9) or with a malformed one is 400.
/// - A field line is `name ":" OWS value OWS`. A line that starts with whitespace (obsolete folding), a space
///   before the colon, a name that is not a token, or a control character in a value is 400.
/// - HTTP/1.1 needs exactly one Host field, HTTP/1.0 at most one (400). Content-Length must be digits (equal
///   duplicates allowed); Content-Length with Transfer-Encoding, a Transfer-Encoding not ending in `chunked`,
///   or any Transfer-Encoding in HTTP/1.0 is 400; a coding other than `chunked` is 501.
/// - The head (empty lines before it, request line, fields, the empty line that ends it) is at most
///   `maxHeadBytes` bytes: past it the error is 414 while the request line is not finished, 431 after.
/// - After an error every call throws it again, until `reset()`.
public struct HTTPRequestParser: Sendable {
    /// The most bytes of one head (request line and fields, with their line ends).
    public static let maxHeadBytes = 8192
    /// The most header fields of one head.
    public static let maxHeaders = 100

    /// How many bytes of the input have been looked at: the next call starts here.
    internal private(set) var scanned = 0
    /// Work done so far, in bytes looked at (each byte is scanned once and looked at once more in its line):
    /// at most twice the input.
    internal private(set) var workDone = 0
    /// The line being read, without its line end.
    private var line: [UInt8] = []
    /// The request line, once read.
    private var requestLine: (method: String, target: String, minorVersion: Int)?
    private var headers: [HTTPHeader] = []
    private var failure: HTTPParseError?

    /// A parser at the start of a request.
    public init() {}

    /// The method of the request line once it has been read, also after an error in what follows it (so that
    /// the error's answer to a HEAD has no body); nil before.
    public var requestMethod: String? { requestLine?.method }

    /// Looks for a complete request head at the start of `bytes` (the connection's unread input). Returns the
    /// head and how many bytes it took (what follows is a body or the next pipelined request), nil when more
    /// bytes are needed, or throws. Linear: it remembers how far it has scanned, so calling it again with the
    /// same bytes plus more does not rescan. After returning a head the parser starts over by itself: the
    /// next call's bytes begin after the head (the shell may also call `reset()`).
    ///
    /// `bytes` must start with the bytes of the previous call that returned nil; a shorter input (a caller's
    /// bug) starts the scan over rather than trapping.
    /// Contiguous collections (`Array`, `ArraySlice`, buffer pointers) are read in place; any other is copied
    /// from where the scan stopped.
    public mutating func parse(_ bytes: some Collection<UInt8>) throws(HTTPParseError) -> (head: HTTPRequestHead, consumed: Int)? {
        if let failure { throw failure }
        let count = bytes.count
        if count < scanned { reset() }
        // Past the limit the head fails anyway: never look at more than one byte beyond it.
        let fresh = bytes.dropFirst(scanned).prefix(Self.maxHeadBytes - scanned)
        let result = fresh.withContiguousStorageIfAvailable { buffer in
            Result { () throws(HTTPParseError) in try self.scan(buffer) }
        } ?? Array(fresh).withUnsafeBufferPointer { buffer in
            Result { () throws(HTTPParseError) in try self.scan(buffer) }
        }
        switch result {
        case .success(let found):
            return found
        case .failure(let error):
            failure = error
            throw error
        }
    }

    /// Forgets everything read: the next call's bytes start a new request head.
    public mutating func reset() {
        scanned = 0
        line.removeAll(keepingCapacity: true)
        requestLine = nil
        headers = []
        failure = nil
    }

    private mutating func scan(_ buffer: UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> (head: HTTPRequestHead, consumed: Int)? {
        for byte in buffer {
            scanned += 1
            workDone += 1
            if byte == HTTPSyntax.lf {
                if line.last == HTTPSyntax.cr { line.removeLast() }
                workDone += line.count
                if let head = try endOfLine() {
                    let consumed = scanned
                    reset()
                    return (head, consumed)
                }
                line.removeAll(keepingCapacity: true)
            } else {
                line.append(byte)
            }
            if scanned >= Self.maxHeadBytes { throw limitError() }
        }
        return nil
    }

    /// The error for a head that reached `maxHeadBytes` without ending.
    private func limitError() -> HTTPParseError {
        if requestLine != nil {
            return HTTPParseError(status: 431, message: "request head over \(Self.maxHeadBytes) bytes")
        }
        if line.isEmpty || line == [HTTPSyntax.cr] {
            return HTTPParseError(status: 400, message: "\(Self.maxHeadBytes) bytes of empty lines and no request")
        }
        return HTTPParseError(status: 414, message: "request line over \(Self.maxHeadBytes) bytes")
    }

    /// A line ended (held in `line`, without its line end): the head when it was the empty line ending it.
    private mutating func endOfLine() throws(HTTPParseError) -> HTTPRequestHead? {
        guard let requestLine else {
            if !line.isEmpty {
                let parsed = try Self.parseRequestLine(line[...])
                requestLine = parsed
                _ = try HTTPSyntax.absoluteForm(parsed.target)
            }
            return nil
        }
        if line.isEmpty {
            let head = HTTPRequestHead(method: requestLine.method, target: requestLine.target,
                                       minorVersion: requestLine.minorVersion, headers: headers)
            try Self.checkFraming(head)
            return head
        }
        guard headers.count < Self.maxHeaders else {
            throw HTTPParseError(status: 431, message: "more than \(Self.maxHeaders) header fields")
        }
        headers.append(try Self.parseField(line[...]))
        return nil
    }

    // MARK: Lines

    static func parseRequestLine(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> (method: String, target: String, minorVersion: Int) {
        let parts = bytes.split(separator: HTTPSyntax.space, omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            let what = parts.count < 3 ? "without an HTTP version" : "with more than two spaces"
            throw HTTPParseError(status: 400, message: "request line \(what): \"\(HTTPSyntax.shown(bytes))\"")
        }
        let minorVersion = try parseVersion(parts[2])
        guard !parts[0].isEmpty, parts[0].allSatisfy(HTTPSyntax.isTokenChar) else {
            throw HTTPParseError(status: 400, message: "invalid method \"\(HTTPSyntax.shown(parts[0]))\"")
        }
        guard !parts[1].isEmpty, parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw HTTPParseError(status: 400, message: "invalid request-target \"\(HTTPSyntax.shown(parts[1]))\"")
        }
        return (HTTPSyntax.string(parts[0]), HTTPSyntax.string(parts[1]), minorVersion)
    }

    /// The minor version of `HTTP/1.x`; 505 for another `HTTP/d.d`, 400 for anything else.
    static func parseVersion(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        let version = Array(bytes)
        guard version.count == 8, version[0..<5].elementsEqual("HTTP/".utf8), HTTPSyntax.isDigit(version[5]),
              version[6] == UInt8(ascii: "."), HTTPSyntax.isDigit(version[7]) else {
            throw HTTPParseError(status: 400, message: "invalid HTTP version \"\(HTTPSyntax.shown(bytes))\"")
        }
        guard version[5] == UInt8(ascii: "1") else {
            throw HTTPParseError(status: 505, message: "HTTP version \(HTTPSyntax.string(bytes)) not supported")
        }
        return version[7] == UInt8(ascii: "0") ? 0 : 1
    }

    static func parseField(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPHeader {
        if let first = bytes.first, HTTPSyntax.isWhitespace(first) {
            throw HTTPParseError(status: 400, message: "obsolete line folding (a field line starting with whitespace)")
        }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else {
            throw HTTPParseError(status: 400, message: "field line without a colon: \"\(HTTPSyntax.shown(bytes))\"")
        }
        let name = bytes[..<colon]
        guard !name.isEmpty else { throw HTTPParseError(status: 400, message: "field line with an empty name") }
        if let last = name.last, HTTPSyntax.isWhitespace(last) {
            throw HTTPParseError(status: 400, message: "whitespace before the colon of \"\(HTTPSyntax.shown(name))\"")
        }
        guard name.allSatisfy(HTTPSyntax.isTokenChar) else {
            throw HTTPParseError(status: 400, message: "invalid field name \"\(HTTPSyntax.shown(name))\"")
        }
        var value = bytes[(colon + 1)...]
        while let first = value.first, HTTPSyntax.isWhitespace(first) { value = value.dropFirst() }
        while let last = value.last, HTTPSyntax.isWhitespace(last) { value = value.dropLast() }
        guard value.allSatisfy({ $0 == HTTPSyntax.tab || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw HTTPParseError(status: 400, message: "control character in the value of \(HTTPSyntax.string(name))")
        }
        return HTTPHeader(name: HTTPSyntax.lowercased(HTTPSyntax.string(name)), value: HTTPSyntax.string(value))
    }

    /// Host, Content-Length and Transfer-Encoding as RFC 9112 sections 3.2 and 6 require of a request.
    static func checkFraming(_ head: HTTPRequestHead) throws(HTTPParseError) {
        let hosts = head.values(of: "host").count
        if hosts > 1 { throw HTTPParseError(status: 400, message: "more than one Host field") }
        if hosts == 0 && head.minorVersion >= 1 { throw HTTPParseError(status: 400, message: "HTTP/1.1 request without Host") }
        let lengths = head.values(of: "content-length")
        if !lengths.isEmpty, case .failure(let error) = HTTPSyntax.contentLength(lengths) { throw error }
        let encodings = head.values(of: "transfer-encoding")
        guard !encodings.isEmpty else { return }
        if !lengths.isEmpty { throw HTTPParseError(status: 400, message: "both Content-Length and Transfer-Encoding") }
        if head.minorVersion == 0 { throw HTTPParseError(status: 400, message: "Transfer-Encoding in an HTTP/1.0 request") }
        let codings = HTTPSyntax.listElements(encodings).map(HTTPSyntax.lowercased)
        guard codings.last == "chunked" else {
            throw HTTPParseError(status: 400, message: "Transfer-Encoding does not end in chunked")
        }
        if let other = codings.dropLast().first(where: { $0 != "chunked" }) {
            throw HTTPParseError(status: 501, message: "transfer coding \"\(other)\" not implemented")
        }
        if codings.count > 1 { throw HTTPParseError(status: 400, message: "chunked applied more than once") }
    }
}

