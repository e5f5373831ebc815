// The URLs the downloader fetches, taken apart (RFC 3986): `http://host[:port]/path?query`, and `ftp://` in
// the same shape for a later client. The host is a numeric IPv4 address, a bracketed IPv6 address or a name
// that the shell resolves; nothing here resolves or connects. A relative Location of a redirect is resolved
// against the URL it came from (RFC 3986 section 5.2). Everything that is not this grammar is an error with
// a message, never a guess: a URL names the file a daemon writes into.

/// A URL of a scheme the downloader knows, taken apart and normalized: the scheme and a name host
/// lowercased, the default port filled in, dot segments removed, the fragment dropped.
public struct URLParts: Equatable, Sendable, CustomStringConvertible {
    /// The schemes the parser accepts.
    public enum Scheme: String, Equatable, Sendable {
        /// Plain HTTP/1.1 (no TLS: `https` is refused).
        case http
        /// FTP, parsed for a later client; the downloader does not fetch it yet.
        case ftp

        /// The port when the URL names none: 80 for http, 21 for ftp.
        public var defaultPort: Int { self == .http ? 80 : 21 }
    }

    /// Where the server is.
    public enum Host: Equatable, Sendable, CustomStringConvertible {
        /// A numeric IPv4 address: four bytes in network order.
        case ipv4([UInt8])
        /// A numeric IPv6 address: sixteen bytes in network order.
        case ipv6([UInt8])
        /// A host name for the shell to resolve, lowercased (`example.org`).
        case name(String)

        /// The host as a URL and a Host field show it: `192.0.2.1`, `[2001:db8::1]` (RFC 5952 form),
        /// `example.org`.
        public var description: String {
            switch self {
            case .ipv4(let bytes): return bytes.map { String($0) }.joined(separator: ".")
            case .ipv6(let bytes): return "[" + URLParts.ipv6Text(bytes) + "]"
            case .name(let name): return name
            }
        }

        /// The host as a resolver takes it: without the brackets of an IPv6 address.
        public var connectName: String {
            switch self {
            case .ipv6(let bytes): return URLParts.ipv6Text(bytes)
            case .ipv4, .name: return description
            }
        }
    }

    /// The most bytes of a URL or of a reference to resolve: a URL ends up in a request line and a record.
    public static let maxLength = 8192

    /// The scheme.
    public var scheme: Scheme
    /// The host.
    public var host: Host
    /// The port, 1 to 65535.
    public var port: Int
    /// The path, starting with `/`, percent-encoding as written, without dot segments.
    public var path: String
    /// The query without its `?`; nil when there is no `?`.
    public var query: String?

    /// A URL with these parts, taken as they are.
    public init(scheme: Scheme, host: Host, port: Int? = nil, path: String = "/", query: String? = nil) {
        self.scheme = scheme
        self.host = host
        self.port = port ?? scheme.defaultPort
        self.path = path
        self.query = query
    }

    /// The request-target of an HTTP request: the path and the query (`/a/b?x=1`).
    public var target: String { query.map { path + "?" + $0 } ?? path }

    /// The host and, when it is not the default, the port: the value of a Host field.
    public var authority: String { port == scheme.defaultPort ? host.description : "\(host):\(port)" }

    /// The URL written out (`http://example.org:8080/a?b`); it parses to an equal value.
    public var description: String { "\(scheme.rawValue)://\(authority)\(target)" }

    /// Parses an absolute URL.
    ///
    /// - The scheme is `http` or `ftp` (any case); any other, `https` included, is an error.
    /// - `//` and a host follow. User names and passwords (`user@host`) are refused: they would end up in
    ///   logs and in the download's record.
    /// - A host of digits and dots, or whose last label is a number, must be a dotted-quad IPv4 address with
    ///   no leading zeros (`127.1` and `010.0.0.1` mean different things to different resolvers). A
    ///   bracketed host is an IPv6 address (no zone, no IPvFuture). A name is labels of letters, digits, `-`
    ///   and `_`, 1 to 63 bytes each, at most 253 in all, with an optional final dot; non-ASCII names must
    ///   be written in their punycode (`xn--`) form.
    /// - The port is 1 to 65535; `host:` with no digits is the default port.
    /// - Path and query hold only what RFC 3986 allows unencoded and valid `%HH` escapes; a space, a
    ///   backslash, a control or a non-ASCII byte is an error. An empty path is `/`.
    /// - At most `maxLength` bytes.
    public init(parsing text: String) throws(URLPartsError) {
        let bytes = try Self.checkedBytes(text)
        guard let colon = Self.schemeEnd(bytes) else { throw URLPartsError("no scheme in \"\(Self.shown(text))\"") }
        let schemeName = HTTPSyntax.lowercased(String(decoding: bytes[..<colon], as: UTF8.self))
        guard let scheme = Scheme(rawValue: schemeName) else {
            throw URLPartsError("unsupported scheme \"\(schemeName)\" (only http and ftp)")
        }
        let rest = bytes[(colon + 1)...]
        guard rest.starts(with: "//".utf8) else { throw URLPartsError("no //host after \(schemeName):") }
        let afterSlashes = rest.dropFirst(2)
        let authorityEnd = afterSlashes.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? afterSlashes.endIndex
        let (host, port) = try Self.parseAuthority(afterSlashes[..<authorityEnd])
        let (path, query) = try Self.parsePathAndQuery(afterSlashes[authorityEnd...])
        self.init(scheme: scheme, host: host, port: port ?? scheme.defaultPort,
                  path: Self.removeDotSegments(path.isEmpty ? "/" : path), query: query)
    }

    /// The URL a reference (a Location field's value) names when read relative to this one (RFC 3986
    /// section 5.2.2): an absolute URL as it is, `//host/p` with this scheme, `/p` on this host, `?q` with
    /// this path, `p` next to this path's last segment, an empty reference this URL. Fragments are dropped.
    public func resolving(_ reference: String) throws(URLPartsError) -> URLParts {
        let bytes = try Self.checkedBytes(reference)
        if Self.schemeEnd(bytes) != nil { return try URLParts(parsing: reference) }
        if bytes.starts(with: "//".utf8) { return try URLParts(parsing: scheme.rawValue + ":" + reference) }
        let withoutFragment = bytes.prefix { $0 != UInt8(ascii: "#") }
        let (referencePath, referenceQuery) = try Self.parsePathAndQuery(withoutFragment)
        var resolved = self
        if referencePath.isEmpty {
            resolved.query = referenceQuery ?? query
        } else if referencePath.hasPrefix("/") {
            resolved.path = Self.removeDotSegments(referencePath)
            resolved.query = referenceQuery
        } else {
            let directory = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(path[...$0]) } ?? "/"
            resolved.path = Self.removeDotSegments(directory + referencePath)
            resolved.query = referenceQuery
        }
        return resolved
    }

    // MARK: Parts

    /// The bytes of a URL or reference: at most `maxLength`, visible ASCII only.
    private static func checkedBytes(_ text: String) throws(URLPartsError) -> [UInt8] {
        let bytes = Array(text.utf8.prefix(maxLength + 1))
        guard bytes.count <= maxLength else { throw URLPartsError("URL longer than \(maxLength) bytes") }
        if let bad = bytes.first(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            let what = bad == 0x20 ? "a space" : bad > 0x7F ? "a non-ASCII byte (percent-encode it)" : "a control character"
            throw URLPartsError("\(what) in \"\(shown(text))\"")
        }
        return bytes
    }

    /// The index of the colon that ends a scheme (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`) at the
    /// start of `bytes`; nil when there is none (a relative reference).
    private static func schemeEnd(_ bytes: [UInt8]) -> Int? {
        guard let first = bytes.first, isAlpha(first) else { return nil }
        for (index, byte) in bytes.enumerated().dropFirst() {
            if byte == UInt8(ascii: ":") { return index }
            guard isAlpha(byte) || HTTPSyntax.isDigit(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: ".") else { return nil }
        }
        return nil
    }

    private static func parseAuthority(_ bytes: ArraySlice<UInt8>) throws(URLPartsError) -> (Host, Int?) {
        if bytes.contains(UInt8(ascii: "@")) {
            throw URLPartsError("user names and passwords in URLs are not accepted")
        }
        let hostBytes: ArraySlice<UInt8>
        let portBytes: ArraySlice<UInt8>?
        let host: Host
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { throw URLPartsError("an IPv6 address without ]") }
            hostBytes = bytes[(bytes.startIndex + 1)..<close]
            let after = bytes[(close + 1)...]
            guard after.isEmpty || after.first == UInt8(ascii: ":") else {
                throw URLPartsError("\"\(HTTPSyntax.shown(after))\" after an IPv6 address")
            }
            portBytes = after.isEmpty ? nil : after.dropFirst()
            guard let address = parseIPv6(hostBytes) else {
                throw URLPartsError("invalid IPv6 address \"\(HTTPSyntax.shown(hostBytes))\"")
            }
            host = .ipv6(address)
        } else {
            let colon = bytes.firstIndex(of: UInt8(ascii: ":"))
            hostBytes = bytes[..<(colon ?? bytes.endIndex)]
            portBytes = colon.map { bytes[($0 + 1)...] }
            host = try parseHost(hostBytes)
        }
        guard let portBytes, !portBytes.isEmpty else { return (host, nil) }
        guard let port = HTTPSyntax.decimal(portBytes), (1...65535).contains(port) else {
            throw URLPartsError("invalid port \"\(HTTPSyntax.shown(portBytes))\" (1 to 65535)")
        }
        return (host, port)
    }

    /// A host that is not bracketed: an IPv4 address or a name.
    private static func parseHost(_ bytes: ArraySlice<UInt8>) throws(URLPartsError) -> Host {
        guard !bytes.isEmpty else { throw URLPartsError("no host") }
        guard bytes.count <= 254 else { throw URLPartsError("host name longer than 253 bytes") }
        var labels = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        if labels.count > 1, labels.last?.isEmpty == true { labels.removeLast() }
        if let last = labels.last, !last.isEmpty, last.allSatisfy(HTTPSyntax.isDigit) {
            guard let address = parseIPv4(bytes) else {
                throw URLPartsError("invalid IPv4 address \"\(HTTPSyntax.shown(bytes))\" (four numbers 0 to 255, no leading zeros)")
            }
            return .ipv4(address)
        }
        for label in labels {
            guard (1...63).contains(label.count),
                  label.allSatisfy({ isAlpha($0) || HTTPSyntax.isDigit($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }) else {
                throw URLPartsError("invalid host name \"\(HTTPSyntax.shown(bytes))\"")
            }
        }
        return .name(HTTPSyntax.lowercased(HTTPSyntax.string(bytes)))
    }

    /// Four decimal numbers 0 to 255 separated by dots, without leading zeros.
    static func parseIPv4(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var address: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.first != UInt8(ascii: "0") || part.count == 1,
                  let value = HTTPSyntax.decimal(part), value <= 255 else { return nil }
            address.append(UInt8(value))
        }
        return address
    }

    /// An IPv6 address (RFC 4291 section 2.2): eight groups of 1 to 4 hex digits, one `::` standing for one
    /// or more zero groups, the last 32 bits optionally as an IPv4 address.
    static func parseIPv6(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        guard bytes.count <= 45 else { return nil }
        let text = Array(bytes)
        var doubleColon: Int?
        for index in text.indices.dropLast() where text[index] == UInt8(ascii: ":") && text[index + 1] == UInt8(ascii: ":") {
            guard doubleColon == nil else { return nil }
            doubleColon = index
        }
        func groups(_ part: ArraySlice<UInt8>, ipv4Allowed: Bool) -> [UInt8]? {
            guard !part.isEmpty else { return [] }
            var result: [UInt8] = []
            let pieces = part.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if ipv4Allowed && index == pieces.count - 1 && piece.contains(UInt8(ascii: ".")) {
                    guard let address = parseIPv4(piece) else { return nil }
                    result += address
                    continue
                }
                guard (1...4).contains(piece.count) else { return nil }
                var value = 0
                for byte in piece {
                    guard let digit = HTTPSyntax.hexValue(byte) else { return nil }
                    value = value << 4 | Int(digit)
                }
                result += [UInt8(value >> 8), UInt8(value & 0xFF)]
            }
            return result
        }
        guard let doubleColon else {
            guard let all = groups(text[...], ipv4Allowed: true), all.count == 16 else { return nil }
            return all
        }
        guard let head = groups(text[..<doubleColon], ipv4Allowed: false),
              let tail = groups(text[(doubleColon + 2)...], ipv4Allowed: true), head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }

    /// The RFC 5952 text of an IPv6 address: lowercase hex without leading zeros, the longest run of two or
    /// more zero groups (the first of equal runs) as `::`.
    static func ipv6Text(_ bytes: [UInt8]) -> String {
        guard bytes.count == 16 else { return "invalid" }
        let groups = stride(from: 0, to: 16, by: 2).map { Int(bytes[$0]) << 8 | Int(bytes[$0 + 1]) }
        var best = (start: -1, length: 0)
        var index = 0
        while index < 8 {
            var end = index
            while end < 8 && groups[end] == 0 { end += 1 }
            if end - index > best.length { best = (index, end - index) }
            index = max(end, index + 1)
        }
        func hex(_ range: Range<Int>) -> String { groups[range].map { String($0, radix: 16) }.joined(separator: ":") }
        guard best.length >= 2 else { return hex(0..<8) }
        return hex(0..<best.start) + "::" + hex((best.start + best.length)..<8)
    }

    /// The path (empty, or starting with `/` in an absolute URL) and the query of `bytes`, which run from
    /// after the authority (or the start of a relative reference) to the end; a fragment is dropped.
    private static func parsePathAndQuery(_ bytes: ArraySlice<UInt8>) throws(URLPartsError) -> (String, String?) {
        let withoutFragment = bytes.prefix { $0 != UInt8(ascii: "#") }
        let questionMark = withoutFragment.firstIndex(of: UInt8(ascii: "?"))
        let path = withoutFragment[..<(questionMark ?? withoutFragment.endIndex)]
        let query = questionMark.map { withoutFragment[($0 + 1)...] }
        try checkComponent(path, allowing: "/", what: "path")
        if let query { try checkComponent(query, allowing: "/?", what: "query") }
        return (HTTPSyntax.string(path), query.map(HTTPSyntax.string))
    }

    /// Checks that `bytes` hold only pchars (RFC 3986 section 3.3), `extra` and valid percent escapes.
    private static func checkComponent(_ bytes: ArraySlice<UInt8>, allowing extra: String, what: String) throws(URLPartsError) {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.endIndex, HTTPSyntax.hexValue(bytes[index + 1]) != nil,
                      HTTPSyntax.hexValue(bytes[index + 2]) != nil else {
                    throw URLPartsError("invalid percent escape in the \(what) \"\(HTTPSyntax.shown(bytes))\"")
                }
                index += 3
                continue
            }
            guard isAlpha(byte) || HTTPSyntax.isDigit(byte) || "-._~!$&'()*+,;=:@".utf8.contains(byte) || extra.utf8.contains(byte) else {
                throw URLPartsError("\"\(String(UnicodeScalar(byte)))\" in the \(what) \"\(HTTPSyntax.shown(bytes))\" (percent-encode it)")
            }
            index += 1
        }
    }

    /// An absolute path without `.` and `..` segments (RFC 3986 section 5.2.4); `..` never climbs above `/`.
    static func removeDotSegments(_ path: String) -> String {
        var output: [Substring] = []
        let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            let isLast = index == segments.count - 1
            if segment == "." || segment == ".." {
                if segment == "..", !output.isEmpty { output.removeLast() }
                if isLast { output.append("") }
            } else {
                output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }

    private static func isAlpha(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    private static func shown(_ text: String) -> String { HTTPSyntax.shown(ArraySlice(text.utf8)) }
}

/// Why a text is not a URL the downloader can fetch.
public struct URLPartsError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong, for the user.
    public var message: String

    /// An error with this message.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}
