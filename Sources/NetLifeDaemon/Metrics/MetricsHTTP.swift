// What the metrics endpoint answers, as values: a request head (read by the http service's own parser,
// HTTPRequestParser, which is fuzzed) becomes the scrape or an error, and each answer's head is written here.
// Only `GET` and `HEAD` of `/metrics` (a query is ignored) are served: another path is 404, another method on
// `/metrics` 405 with `Allow`; a malformed or oversized head gets the parser's status (400, 414, 431, 501, 505),
// a client too slow to send one 408, and each of those closes the connection. A request with a body is served
// and the connection closed, since the body is never read. HTTP/1.1 gets the text in chunks (it is written
// while it is made, in slices) and may keep the connection; HTTP/1.0 gets it until the connection closes.

import NetLifeServices

/// The metrics endpoint's answer to one request.
enum MetricsAnswer: Equatable, Sendable {
    /// The exposition: with its text (GET) or without (HEAD); `chunked` for HTTP/1.1; `keepAlive`: the
    /// connection waits for the next request afterwards.
    case metrics(withBody: Bool, chunked: Bool, keepAlive: Bool)
    /// An error, after which the connection closes unless `keepAlive`; `allow` for 405.
    case error(status: Int, message: String, allow: String? = nil, keepAlive: Bool = false)

    /// The path served.
    static let path = "/metrics"

    /// The answer to a complete request head.
    init(_ head: HTTPRequestHead) {
        // A body would be read as the next request: the connection closes after the answer instead.
        let hasBody = head.isChunked || (head.contentLength ?? 0) > 0
        let keepAlive = head.keepAlive && !hasBody
        guard let path = head.path else {
            self = .error(status: 400, message: "the request target is not a path")
            return
        }
        guard path == Self.path else {
            self = .error(status: 404, message: "only \(Self.path) is served here", keepAlive: keepAlive)
            return
        }
        guard head.method == "GET" || head.method == "HEAD" else {
            self = .error(status: 405, message: "\(Self.path) is read with GET or HEAD", allow: "GET, HEAD", keepAlive: keepAlive)
            return
        }
        self = .metrics(withBody: head.method == "GET", chunked: head.minorVersion >= 1, keepAlive: keepAlive && head.minorVersion >= 1)
    }

    /// The answer to a head the parser refused.
    init(_ error: HTTPParseError) {
        self = .error(status: error.status, message: error.message)
    }

    /// The answer to a client that did not send a whole head in time.
    static let timedOut = MetricsAnswer.error(status: 408, message: "no complete request within the time allowed")

    /// The answer to a client beyond the endpoint's connection limit.
    static func tooManyConnections(_ limit: Int) -> MetricsAnswer {
        .error(status: 503, message: "too many connections to the metrics endpoint (at most \(limit))")
    }

    /// Whether the connection waits for another request afterwards.
    var keepsConnection: Bool {
        switch self {
        case .metrics(_, _, let keepAlive), .error(_, _, _, let keepAlive): keepAlive
        }
    }

    /// The status line and header fields, and for an error its short body (a line naming the status and why).
    var bytes: [UInt8] {
        var lines: [String]
        var body = ""
        switch self {
        case .metrics(_, let chunked, let keepAlive):
            lines = ["HTTP/1.1 200 OK", "Content-Type: \(Exposition.contentType)"]
            if chunked { lines.append("Transfer-Encoding: chunked") }
            if !keepAlive { lines.append("Connection: close") }
        case .error(let status, let message, let allow, let keepAlive):
            body = "\(status) \(Self.reason(status)): \(message)\n"
            lines = ["HTTP/1.1 \(status) \(Self.reason(status))", "Content-Type: text/plain; charset=utf-8",
                     "Content-Length: \(body.utf8.count)"]
            if let allow { lines.append("Allow: \(allow)") }
            if !keepAlive { lines.append("Connection: close") }
        }
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n" + body).utf8)
    }

    /// The reason phrase of each status the endpoint sends.
    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 411: "Length Required"
        case 414: "URI Too Long"
        case 431: "Request Header Fields Too Large"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Error"
        }
    }

    /// A chunk of an HTTP/1.1 chunked body: its length in hex, the bytes, CRLF. Empty bytes make no chunk (a
    /// zero-length chunk would end the body).
    static func chunk(_ bytes: [UInt8]) -> [UInt8] {
        guard !bytes.isEmpty else { return [] }
        return Array((String(bytes.count, radix: 16) + "\r\n").utf8) + bytes + [0x0D, 0x0A]
    }

    /// The end of a chunked body.
    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)
}
