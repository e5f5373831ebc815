// The answer of the http service to a GET or HEAD of a regular file, decided from values alone: the request
// head, the file's size, modification time and inode, and the time now. It gives the status, the header
// fields in the order they are sent and which bytes of the file form the body; the shell opens the file,
// writes `serialize(_:keepAlive:minorVersion:)` and sends the body range from the file.
//
// Order of evaluation is RFC 9110 section 13.2.2: If-Match (or If-Unmodified-Since) failing gives 412,
// If-None-Match (or If-Modified-Since) matching gives 304, then Range under If-Range gives 206 or 416.
// Multipart/byteranges is not implemented: ranges that do not coalesce into one are answered with the whole
// file (200), as nginx answers with `max_ranges 1`.


/// The status, header fields and body range of the answer to a file request.
public struct HTTPFileResponse: Equatable, Sendable {
    /// 200, 206, 304, 405, 412 or 416.
    public var status: Int
    /// The header fields in the order they are sent, names as they are sent (`Content-Length`). The shell adds
    /// nothing but the Connection field `serialize` writes.
    public var headers: [HTTPHeader]
    /// The bytes of the file to send; nil for HEAD, 304, 405, 412, 416 and an empty file.
    public var body: ByteRange?

    /// A response with these parts.
    public init(status: Int, headers: [HTTPHeader], body: ByteRange?) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first field named `name` (compared without case); nil if absent.
    public func value(of name: String) -> String? {
        let name = HTTPSyntax.lowercased(name)
        return headers.first { HTTPSyntax.lowercased($0.name) == name }?.value
    }
}

/// Decides the answer to a GET or HEAD of a file.
public enum HTTPFileResponder {
    /// The Server field's value.
    public static let serverName = "netlifed"

    /// The answer to a GET or HEAD of a regular file. `now` is the Date field's time. `maxRanges`: ranges
    /// allowed per request (0 turns ranges off, and Accept-Ranges says `none`; more ranges than this, or more
    /// than one that do not coalesce, since multipart is not implemented, give 200 with the whole file).
    ///
    /// - Any other method gets 405 with `Allow: GET, HEAD` and no body.
    /// - Last-Modified is the file's time in seconds, or `now` if that is later (RFC 9110 section 8.8.2.1).
    /// - If-Match (strong comparison, `*` matches) failing, or else If-Unmodified-Since earlier than
    ///   Last-Modified, gives 412. If-None-Match (weak comparison, `*` matches) matching, or else
    ///   If-Modified-Since not earlier than Last-Modified, gives 304 with Date, Server, Last-Modified and ETag.
    ///   Dates that are not HTTP-dates are ignored.
    /// - Range applies to GET only (RFC 9110 section 14.2: range handling is defined for GET alone): a HEAD
    ///   gets the 200 headers whatever its Range. If-Range without Range is ignored; with it, the range applies
    ///   only when If-Range is the current strong ETag or exactly the Last-Modified date, else 200.
    /// - 206 carries `Content-Range: bytes a-b/size` and the range's length; 416 carries
    ///   `Content-Range: bytes */size`, Content-Length 0, and the validators (a resuming client re-validates).
    public static func respond(to head: HTTPRequestHead, file: FileInfo, contentType: String, maxRanges: Int, now: Int64) -> HTTPFileResponse {
        var file = file
        file.size = max(0, file.size)   // never negative from fstat; clamped rather than trusted
        let common = [HTTPHeader(name: "Date", value: HTTPRanges.httpDate(now)), HTTPHeader(name: "Server", value: serverName)]
        let isHead = head.method == "HEAD"
        guard isHead || head.method == "GET" else {
            return HTTPFileResponse(status: 405, headers: common + [HTTPHeader(name: "Allow", value: "GET, HEAD"),
                                                                     HTTPHeader(name: "Content-Length", value: "0")], body: nil)
        }
        let lastModified = min(file.modifiedSeconds, now)
        let etag = HTTPRanges.etag(inode: file.inode, size: file.size, modifiedSeconds: file.modifiedSeconds,
                                   modifiedNanoseconds: file.modifiedNanoseconds)
        let validators = [HTTPHeader(name: "Last-Modified", value: HTTPRanges.httpDate(lastModified)),
                          HTTPHeader(name: "ETag", value: etag)]
        let acceptRanges = HTTPHeader(name: "Accept-Ranges", value: maxRanges > 0 ? "bytes" : "none")

        if preconditionFails(head, etag: etag, lastModified: lastModified) {
            return HTTPFileResponse(status: 412, headers: common + [HTTPHeader(name: "Content-Length", value: "0")], body: nil)
        }
        if notModified(head, etag: etag, lastModified: lastModified) {
            return HTTPFileResponse(status: 304, headers: common + validators, body: nil)
        }

        let type = HTTPHeader(name: "Content-Type", value: contentType)
        var range: ByteRange?
        if !isHead, maxRanges > 0, let rangeValue = head.value(of: "range"),
           head.value(of: "if-range").map({ HTTPRanges.ifRangeMatches($0, etag: etag, lastModified: lastModified) }) ?? true {
            switch HTTPRanges.parse(rangeValue, length: file.size, maxRanges: maxRanges) {
            case .whole:
                break
            case .unsatisfiable:
                return HTTPFileResponse(status: 416, headers: common + [
                    HTTPHeader(name: "Content-Range", value: "bytes */\(file.size)"),
                    HTTPHeader(name: "Content-Length", value: "0"),
                ] + validators + [acceptRanges], body: nil)
            case .ranges(let ranges):
                let merged = HTTPRanges.coalesce(ranges)
                if merged.count == 1 { range = merged[0] }
            }
        }
        if let range {
            return HTTPFileResponse(status: 206, headers: common + [
                type,
                HTTPHeader(name: "Content-Length", value: String(range.count)),
                HTTPHeader(name: "Content-Range", value: "bytes \(range.first)-\(range.last)/\(file.size)"),
            ] + validators + [acceptRanges], body: range)
        }
        let whole = file.size > 0 && !isHead ? ByteRange(first: 0, last: file.size - 1) : nil
        return HTTPFileResponse(status: 200, headers: common + [type, HTTPHeader(name: "Content-Length", value: String(file.size))]
                                    + validators + [acceptRanges], body: whole)
    }

    /// Whether If-Match, or else If-Unmodified-Since, fails (RFC 9110 sections 13.1.1 and 13.1.4).
    private static func preconditionFails(_ head: HTTPRequestHead, etag: String, lastModified: Int64) -> Bool {
        if let ifMatch = head.value(of: "if-match") {
            return !HTTPRanges.entityTagListMatches(ifMatch, etag: etag, weak: false)
        }
        if let value = head.value(of: "if-unmodified-since"), let date = HTTPRanges.parseHTTPDate(value) {
            return lastModified > date
        }
        return false
    }

    /// Whether If-None-Match, or else If-Modified-Since, says the client's copy is current (RFC 9110 sections
    /// 13.1.2 and 13.1.3).
    private static func notModified(_ head: HTTPRequestHead, etag: String, lastModified: Int64) -> Bool {
        if let ifNoneMatch = head.value(of: "if-none-match") {
            return HTTPRanges.entityTagListMatches(ifNoneMatch, etag: etag, weak: true)
        }
        if let value = head.value(of: "if-modified-since"), let date = HTTPRanges.parseHTTPDate(value) {
            return lastModified <= date
        }
        return false
    }

    // MARK: Writing

    /// The status line, header fields, Connection field and empty line of `response`, ready to send. The status
    /// line says HTTP/1.1 (RFC 9110 section 2.5: a server sends its own version). `keepAlive` false adds
    /// `Connection: close`; true to an HTTP/1.0 client (`minorVersion` 0) adds `Connection: keep-alive`.
    public static func serialize(_ response: HTTPFileResponse, keepAlive: Bool, minorVersion: Int) -> String {
        var text = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
        for header in response.headers { text += "\(header.name): \(header.value)\r\n" }
        if !keepAlive {
            text += "Connection: close\r\n"
        } else if minorVersion == 0 {
            text += "Connection: keep-alive\r\n"
        }
        return text + "\r\n"
    }

    /// The reason phrase of a status code (RFC 9110 section 15); `Unknown` for one not listed.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 104: "Upload Resumption Supported"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 206: "Partial Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Unknown"
        }
    }

    /// The head and small HTML body of an error answer (400, 403, 404, 405, 408, 411, 413, 414, 431, 500, 501,
    /// 503, 505), with `Connection: close`; nil for any other status. For a HEAD the shell sends the head alone.
    public static func errorResponse(status: Int, now: Int64) -> (head: String, body: String)? {
        guard [400, 403, 404, 405, 408, 411, 413, 414, 431, 500, 501, 503, 505].contains(status) else { return nil }
        let title = "\(status) \(reasonPhrase(status))"
        let body = "<html><head><title>\(title)</title></head><body><h1>\(title)</h1><hr><p>\(serverName)</p></body></html>\n"
        var headers = [
            HTTPHeader(name: "Date", value: HTTPRanges.httpDate(now)),
            HTTPHeader(name: "Server", value: serverName),
            HTTPHeader(name: "Content-Type", value: "text/html; charset=utf-8"),
            HTTPHeader(name: "Content-Length", value: String(body.utf8.count)),
        ]
        if status == 405 { headers.append(HTTPHeader(name: "Allow", value: "GET, HEAD")) }
        let head = serialize(HTTPFileResponse(status: status, headers: headers, body: nil), keepAlive: false, minorVersion: 1)
        return (head, body)
    }

    // MARK: Content types

    private static let contentTypes: [String: String] = [
        "html": "text/html; charset=utf-8", "htm": "text/html; charset=utf-8",
        "txt": "text/plain; charset=utf-8", "md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8",
        "css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8", "mjs": "text/javascript; charset=utf-8",
        "json": "application/json", "xml": "application/xml", "wasm": "application/wasm",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "svg": "image/svg+xml",
        "webp": "image/webp", "ico": "image/x-icon",
        "mp3": "audio/mpeg", "ogg": "audio/ogg", "mp4": "video/mp4", "webm": "video/webm",
        "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "xz": "application/x-xz", "bz2": "application/x-bzip2", "zst": "application/zstd", "tar": "application/x-tar",
        "iso": "application/x-iso9660-image", "deb": "application/vnd.debian.binary-package",
        "bin": "application/octet-stream",
    ]

    /// The Content-Type for a file, from the extension of the path's last segment (without case: `A.PNG` is
    /// `image/png`); `application/octet-stream` for any other (`.tar.gz` is `application/gzip`).
    public static func contentType(forPath path: String) -> String {
        let name = path.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "application/octet-stream" }
        return contentTypes[HTTPSyntax.lowercased(String(name[name.index(after: dot)...]))] ?? "application/octet-stream"
    }
}
