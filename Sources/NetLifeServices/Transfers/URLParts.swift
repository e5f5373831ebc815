// The URLs the transfers fetch and send to, read by libcurl's URL API (curl_url): the same parser, the same
// normalization and the same relative resolution (RFC 3986 section 5.2) as the transfer that then runs on
// libcurl, so that what `transfers` shows, what a record says and what goes on the wire never disagree.
// Nothing here resolves or connects.

internal import CCurl

/// An absolute URL of a scheme the transfers know, as libcurl reads it: scheme and host lowercased, the
/// default port filled in, dot segments removed, the fragment dropped.
public struct URLParts: Equatable, Sendable, CustomStringConvertible {
    /// The schemes of transfers.
    public enum Scheme: String, Equatable, Sendable, CaseIterable {
        case http
        /// HTTP over TLS (HTTP/1.1 or HTTP/2, as ALPN settles).
        case https
        case ftp
        /// FTP over implicit TLS (port 990). Explicit TLS (AUTH TLS) is `ftp` with `--ssl-reqd`.
        case ftps

        /// Whether it is one of the FTP schemes.
        public var isFTP: Bool { self == .ftp || self == .ftps }
        /// Whether it is one of the HTTP schemes.
        public var isHTTP: Bool { !isFTP }
    }

    /// The most bytes of a URL or of a reference to resolve: a URL ends up in a request line and a record.
    public static let maxLength = 8192

    public let scheme: Scheme
    /// The host as the URL writes it: a name, a dotted IPv4 address or a bracketed IPv6 address.
    public let host: String
    /// The port, 1 to 65535: the scheme's default when the URL names none.
    public let port: Int
    /// The path, starting with `/`, without dot segments, percent-encoding as written.
    public let path: String
    /// The query without its `?`; nil when there is none.
    public let query: String?
    /// The user name of `user:password@`, if any.
    public let user: String?
    /// Whether the URL carries a password.
    public let hasPassword: Bool
    /// The whole URL, credentials included: what the transfer asks for, and what the journal keeps.
    public let text: String
    /// The URL with its password replaced by `***`: what `transfers`, logs and records show.
    public let description: String

    /// Parses an absolute URL: `http`, `https`, `ftp` or `ftps`, a host, at most `maxLength` bytes, ASCII
    /// only, no control character or space (libcurl's rules otherwise, which follow RFC 3986 as browsers and
    /// curl read it).
    public init(parsing text: String) throws(URLPartsError) {
        try self.init(text, relativeTo: nil)
    }

    /// The URL a reference (a Location field's value) names when read relative to this one: an absolute URL
    /// as it is, `//host/p` with this scheme, `/p` on this host, `?q` with this path, `p` next to this path's
    /// last segment. Credentials stay only on the same scheme, host and port: a redirect to another server
    /// never carries them.
    public func resolving(_ reference: String) throws(URLPartsError) -> URLParts {
        // libcurl keeps the base's user and password for a reference without an authority (same server);
        // an absolute reference or `//host` brings its own, or none.
        try URLParts(reference, relativeTo: text)
    }

    /// Whether the URL names a user or a password.
    public var hasCredentials: Bool { user != nil || hasPassword }

    /// Whether `other` is on the same scheme, host and port: the server credentials were meant for.
    public func sameServer(as other: URLParts) -> Bool {
        scheme == other.scheme && host == other.host && port == other.port
    }

    /// The URL without its user name and password.
    public var withoutCredentials: URLParts {
        guard hasCredentials, let plain = try? URLParts(text, relativeTo: nil, dropCredentials: true) else { return self }
        return plain
    }

    public static func == (left: URLParts, right: URLParts) -> Bool { left.description == right.description }

    private init(_ text: String, relativeTo base: String?, dropCredentials: Bool = false) throws(URLPartsError) {
        guard text.utf8.count <= Self.maxLength else { throw URLPartsError("URL longer than \(Self.maxLength) bytes") }
        guard !text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            throw URLPartsError("a space or a control character in \"\(Self.shown(text))\"")
        }
        // libcurl keeps such bytes as they are; a URL names the file a daemon writes into, and goes into
        // request lines and records: it must be written percent-encoded.
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else {
            throw URLPartsError("a byte that is not ASCII in \"\(Self.shown(text))\" (write it percent-encoded)")
        }
        guard let handle = curl_url() else { throw URLPartsError("out of memory") }
        defer { curl_url_cleanup(handle) }
        if let base {
            try Self.check(curl_url_set(handle, CURLUPART_URL, base, 0), base)
        }
        try Self.check(curl_url_set(handle, CURLUPART_URL, text, 0), text)
        _ = curl_url_set(handle, CURLUPART_FRAGMENT, nil, 0)
        if dropCredentials {
            _ = curl_url_set(handle, CURLUPART_USER, nil, 0)
            _ = curl_url_set(handle, CURLUPART_PASSWORD, nil, 0)
        }
        let schemeName = Self.part(handle, CURLUPART_SCHEME) ?? ""
        guard let scheme = Scheme(rawValue: schemeName) else {
            throw URLPartsError("unsupported scheme \"\(Self.shown(schemeName))\" (http, https, ftp and ftps)")
        }
        guard let written = Self.part(handle, CURLUPART_HOST), !written.isEmpty else { throw URLPartsError("no host in \"\(Self.shown(text))\"") }
        // libcurl decodes a percent-encoded host ("example.org%80" names the host "example.org" and a byte
        // 0x80) and would write that byte out raw, and keeps a lone "%" ("h%e"), which it encodes again each
        // time the URL is written and read; a host name is ASCII (IDNA's xn-- form for others), without "%"
        // (an IPv6 zone is apart from the host).
        guard written.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "%") }) else {
            throw URLPartsError("a host that is not ASCII in \"\(Self.shown(text))\" (percent-encoded bytes in the host; write an international name in its xn-- form)")
        }
        // Host names and IPv6 hex digits are case-blind; libcurl keeps the case it was given.
        let host = HTTPSyntax.lowercased(written)
        if host != written { try Self.check(curl_url_set(handle, CURLUPART_HOST, host, 0), text) }
        guard let portText = Self.part(handle, CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)), let port = Int(portText), (1...65535).contains(port) else {
            throw URLPartsError("no valid port in \"\(Self.shown(text))\"")
        }
        guard let whole = Self.part(handle, CURLUPART_URL) else { throw URLPartsError("cannot write out \"\(Self.shown(text))\"") }
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = Self.part(handle, CURLUPART_PATH) ?? "/"
        query = Self.part(handle, CURLUPART_QUERY)
        user = Self.part(handle, CURLUPART_USER)
        hasPassword = Self.part(handle, CURLUPART_PASSWORD) != nil
        self.text = whole
        if hasPassword {
            _ = curl_url_set(handle, CURLUPART_PASSWORD, "***", 0)
            description = Self.part(handle, CURLUPART_URL) ?? whole
        } else {
            description = whole
        }
    }

    private static func check(_ code: CURLUcode, _ text: String) throws(URLPartsError) {
        guard code != CURLUE_OK else { return }
        throw URLPartsError("\(String(cString: curl_url_strerror(code))): \"\(shown(text))\"")
    }

    private static func part(_ handle: OpaquePointer, _ which: CURLUPart, flags: UInt32 = 0) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, which, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }

    /// At most 256 bytes of a text, for an error message.
    private static func shown(_ text: String) -> String { String(decoding: text.utf8.prefix(256), as: UTF8.self) }
}

/// Why a text is not a URL the transfers take.
public struct URLPartsError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What is wrong with it.
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
