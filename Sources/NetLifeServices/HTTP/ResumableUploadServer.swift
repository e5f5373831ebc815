// The server side of resumable uploads (IETF draft-ietf-httpbis-resumable-upload, the httpwg editor's copy
// after -12; docs/http.md) as pure decisions: a request head and the state of its upload resource in, a
// response or an action for the shell out. The shell (HTTPService) owns the files: it creates the resource,
// streams the request body into the resource's temporary file, renames the finished file into place and
// writes the resource's small record; it never decides what the protocol means.
//
// The URL space: `POST` or `PUT` to a path creates an upload whose finished file will be that path under
// `upload-root`; the upload resource is `/.netlife-upload/ID` (ID: 32 lowercase hex digits, 128 random
// bits). HEAD (or GET) on it gives the offset, PATCH appends, DELETE cancels. The temporary data lives in
// `upload-root/.netlife-upload/` (`ID.part` and `ID.meta`), a directory the GET side never serves.

import NetLife

/// The limits of the uploads a service accepts (`max-upload-size`, `max-uploads`, `upload-expiry`).
public struct UploadLimits: Equatable, Sendable {
    /// The most bytes one upload may have (`Upload-Limit: max-size`).
    public var maxSize: Int
    /// The most upload resources kept at once (unfinished ones, and finished ones kept for a late HEAD).
    public var maxUploads: Int
    /// Seconds after its last change when a resource (finished or not) is removed.
    public var expirySeconds: Int64

    /// The defaults: 1 GiB, 100 resources, 24 hours.
    public init(maxSize: Int = 1 << 30, maxUploads: Int = 100, expirySeconds: Int64 = 86_400) {
        self.maxSize = maxSize
        self.maxUploads = maxUploads
        self.expirySeconds = expirySeconds
    }
}

/// One upload resource as the server keeps it.
public struct UploadResource: Equatable, Sendable {
    /// 32 lowercase hex digits.
    public var id: String
    /// The decoded path of the finished file under the upload root (`/dir/name`).
    public var target: String
    /// The bytes received (the temporary file's size); for a complete upload, its length.
    public var offset: Int
    /// The length the client announced, once known.
    public var length: Int?
    /// Whether the upload is complete (its file renamed into place).
    public var isComplete: Bool
    /// When it last changed, in seconds since 1970: the expiry counts from here.
    public var lastActivity: Int64

    /// A resource with these values.
    public init(id: String, target: String, offset: Int = 0, length: Int? = nil, isComplete: Bool = false, lastActivity: Int64 = 0) {
        self.id = id
        self.target = target
        self.offset = offset
        self.length = length
        self.isComplete = isComplete
        self.lastActivity = lastActivity
    }
}

/// A response the shell sends as it is: status, header fields, body (empty for HEAD and 1xx).
public struct UploadResponse: Equatable, Sendable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    /// A response with these parts.
    public init(status: Int, headers: [HTTPHeader], body: [UInt8] = []) {
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

/// The server's rules for resumable uploads.
///
/// Decisions, beyond the draft's MUSTs:
/// - Creation is `POST` or `PUT` with `Upload-Complete` (`?0` or `?1`); without a valid one (the draft says
///   to ignore an invalid field) the request is no resumable upload, and plain uploads are not offered: 400.
///   The body must have a Content-Length (a chunked body got 411 before this), and may be empty.
/// - `Upload-Length`, and with `Upload-Complete: ?1` the offset plus Content-Length, give the length; two
///   that differ, or a body that would pass a known length, get 400 (problem type
///   `inconsistent-upload-length`) and change nothing. A length or a body end past `max-size` gets 413 with
///   `Upload-Limit`.
/// - PATCH needs `Content-Type: application/partial-upload` (415 otherwise), a valid `Upload-Offset` and
///   `Upload-Complete` (400 otherwise). An offset that is not the resource's gets 409 with the resource's
///   offset and `Upload-Complete: ?0`, and changes nothing.
/// - A PATCH to a complete upload at its offset with no content and `Upload-Complete: ?1` replays the final
///   response; with content it gets 400 (`inconsistent-upload-length`) and changes nothing.
/// - The finished file replaces an existing file at the target atomically (rename); the final response is
///   201 Created (200 OK when a file was replaced) with `Upload-Complete: ?1` and `Location` the target.
/// - A resource the shell does not find (never made, cancelled, expired, or its data lost) is 404.
public struct ResumableUploadServer: Sendable {
    /// The path prefix of upload resources.
    public static let resourcePrefix = "/.netlife-upload/"
    /// The directory under the upload root that holds temporary data: never served, never an upload target.
    public static let stagingDirectoryName = ".netlife-upload"

    /// The limits in force.
    public var limits: UploadLimits

    /// A server with these limits.
    public init(limits: UploadLimits = UploadLimits()) {
        self.limits = limits
    }

    /// What a request is to the upload side.
    public enum Route: Equatable, Sendable {
        /// `POST` or `PUT` to a path: creates an upload whose file goes to `target`.
        case creation(target: String)
        /// A request to the upload resource `id`; nil when the path under the prefix is no valid id (404).
        case resource(id: String?)
        /// `OPTIONS`: the limits.
        case options
        /// Not the upload side's: the file side answers (GET and HEAD of files, 405 for the rest).
        case files
    }

    /// What the shell does with a request.
    public enum Decision: Equatable, Sendable {
        /// Send this and read no body: a body the request announced is discarded or the connection closed.
        case respond(UploadResponse)
        /// Make a resource for `target` with `length` (when known), send `interim` (a 104 with its Location)
        /// when the request has content, read `bodyLength` bytes into its temporary file, then call
        /// `bodyEnded`.
        case create(target: String, length: Int?, bodyLength: Int, completes: Bool)
        /// Record `length` when it is newly known, read `bodyLength` bytes onto the end of the resource's
        /// temporary file, then call `bodyEnded`.
        case append(bodyLength: Int, completes: Bool, length: Int?)
        /// Delete the resource's files, then send this.
        case cancel(UploadResponse)
    }

    /// Which side a request belongs to. `head.path` is the decoded path (nil for `*` or an invalid target).
    public func route(_ head: HTTPRequestHead) -> Route {
        if head.method == "OPTIONS" && (head.target == "*" || head.path != nil) { return .options }
        guard let path = head.path else { return .files }
        let prefix = Self.resourcePrefix
        if path == String(prefix.dropLast()) || path.hasPrefix(prefix) {
            let id = String(path.dropFirst(prefix.count))
            return .resource(id: Self.isResourceID(id) ? id : nil)
        }
        if head.method == "POST" || head.method == "PUT" { return .creation(target: path) }
        return .files
    }

    /// Whether `text` is a resource id: exactly 32 lowercase hex digits.
    public static func isResourceID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { ASCIIDigits.isDigit($0) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f")) }
    }

    /// Whether `path` can name a finished upload: not the root, no trailing slash, not in the staging
    /// directory. (`HTTPRequestHead.path` has already refused `.`, `..`, NUL and bad escapes; the shell checks
    /// the parent directory on disk.)
    public static func isTargetPath(_ path: String) -> Bool {
        guard path.hasPrefix("/"), path.count > 1, !path.hasSuffix("/") else { return false }
        let first = path.utf8.dropFirst().split(separator: UInt8(ascii: "/"), maxSplits: 1, omittingEmptySubsequences: false).first
        return first.map { !$0.elementsEqual(stagingDirectoryName.utf8) } ?? false
    }

    // MARK: Requests

    /// The answer to `OPTIONS`: the methods and the limits (the draft asks for `Upload-Limit` there).
    public func options(now: Int64) -> UploadResponse {
        UploadResponse(status: 204, headers: common(now) + [
            HTTPHeader(name: "Allow", value: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
            HTTPHeader(name: "Upload-Limit", value: "max-size=\(limits.maxSize), max-age=\(limits.expirySeconds)"),
        ])
    }

    /// A creation request to `target`. `bodyLength` is the request's Content-Length (0 without one);
    /// `roomForAnother` whether one more resource fits under `maxUploads` (after the shell swept).
    public func creation(_ head: HTTPRequestHead, target: String, bodyLength: Int, roomForAnother: Bool, now: Int64) -> Decision {
        guard Self.isTargetPath(target) else {
            return .respond(plain(403, "uploads cannot go to \(HTTPSyntax.shown(ArraySlice(target.utf8)))", head, now))
        }
        guard let completes = UploadFields.boolean(head.value(of: "upload-complete")) else {
            return .respond(plain(400, "a resumable upload needs Upload-Complete: ?0 or ?1", head, now))
        }
        var length = UploadFields.integer(head.value(of: "upload-length"))
        if completes {
            if let announced = length, announced != bodyLength { return .respond(inconsistentLength(head, now)) }
            length = bodyLength
        } else if let announced = length, bodyLength > announced {
            return .respond(inconsistentLength(head, now))
        }
        if max(length ?? 0, bodyLength) > limits.maxSize { return .respond(tooLarge(head, now)) }
        guard roomForAnother else {
            return .respond(plain(503, "too many unfinished uploads (max-uploads \(limits.maxUploads))", head, now))
        }
        return .create(target: target, length: length, bodyLength: bodyLength, completes: completes)
    }

    /// A request to an upload resource: `resource` as the shell found it (nil when there is none).
    public func resourceRequest(_ head: HTTPRequestHead, resource: UploadResource?, bodyLength: Int, now: Int64) -> Decision {
        guard let resource else { return .respond(plain(404, "no such upload", head, now)) }
        switch head.method {
        case "HEAD", "GET":
            return .respond(offsetRetrieval(resource, now: now))
        case "PATCH":
            return append(head, resource: resource, bodyLength: bodyLength, now: now)
        case "DELETE":
            return .cancel(UploadResponse(status: 204, headers: common(now)))
        default:
            var response = plain(405, "an upload resource takes HEAD, GET, PATCH and DELETE", head, now)
            response.headers.append(HTTPHeader(name: "Allow", value: "HEAD, GET, PATCH, DELETE, OPTIONS"))
            return .respond(response)
        }
    }

    /// The offset retrieval: 204 with the state, the limits and `Cache-Control: no-store`.
    public func offsetRetrieval(_ resource: UploadResource, now: Int64) -> UploadResponse {
        var headers = common(now) + [
            HTTPHeader(name: "Upload-Offset", value: String(resource.offset)),
            HTTPHeader(name: "Upload-Complete", value: resource.isComplete ? "?1" : "?0"),
        ]
        if let length = resource.length { headers.append(HTTPHeader(name: "Upload-Length", value: String(length))) }
        headers.append(uploadLimit(resource, now: now))
        headers.append(HTTPHeader(name: "Cache-Control", value: "no-store"))
        return UploadResponse(status: 204, headers: headers)
    }

    private func append(_ head: HTTPRequestHead, resource: UploadResource, bodyLength: Int, now: Int64) -> Decision {
        guard Self.mediaType(head.value(of: "content-type")) == UploadFields.partialUploadType else {
            return .respond(plain(415, "an append needs Content-Type: \(UploadFields.partialUploadType)", head, now))
        }
        guard let offset = UploadFields.integer(head.value(of: "upload-offset")) else {
            return .respond(plain(400, "an append needs Upload-Offset: a non-negative integer", head, now))
        }
        guard let completes = UploadFields.boolean(head.value(of: "upload-complete")) else {
            return .respond(plain(400, "an append needs Upload-Complete: ?0 or ?1", head, now))
        }
        guard offset == resource.offset else { return .respond(conflict(resource, provided: offset, head, now)) }
        if resource.isComplete {
            guard bodyLength == 0, completes else { return .respond(inconsistentLength(head, now)) }
            return .respond(completed(resource, replaced: false, now: now))
        }
        var length = resource.length
        for announced in [UploadFields.integer(head.value(of: "upload-length")), completes ? offset.addingReportingOverflow(bodyLength).partialValue : nil] {
            guard let announced else { continue }
            if let known = length, known != announced { return .respond(inconsistentLength(head, now)) }
            length = announced
        }
        let (end, overflow) = offset.addingReportingOverflow(bodyLength)
        if overflow || end > limits.maxSize || (length ?? 0) > limits.maxSize { return .respond(tooLarge(head, now)) }
        if let length, end > length { return .respond(inconsistentLength(head, now)) }
        return .append(bodyLength: bodyLength, completes: completes, length: length == resource.length ? nil : length)
    }

    // MARK: After the body

    /// The 104 (Upload Resumption Supported) sent before a creation's content is read: where to resume.
    public func interim(_ resource: UploadResource, now: Int64) -> UploadResponse {
        UploadResponse(status: 104, headers: [
            HTTPHeader(name: "Location", value: Self.resourcePrefix + resource.id),
            uploadLimit(resource, now: now),
        ])
    }

    /// A 104 reporting progress while content is read (no Location, as the draft asks of an append).
    public func progress(_ resource: UploadResource) -> UploadResponse {
        UploadResponse(status: 104, headers: [HTTPHeader(name: "Upload-Offset", value: String(resource.offset))])
    }

    /// The body was read whole and the upload is not complete: 201 with the resource after a creation, 204
    /// after an append.
    public func appended(_ resource: UploadResource, created: Bool, now: Int64) -> UploadResponse {
        var headers = common(now)
        if created { headers.append(HTTPHeader(name: "Location", value: Self.resourcePrefix + resource.id)) }
        headers += [
            HTTPHeader(name: "Upload-Complete", value: "?0"),
            HTTPHeader(name: "Upload-Offset", value: String(resource.offset)),
        ]
        if let length = resource.length { headers.append(HTTPHeader(name: "Upload-Length", value: String(length))) }
        headers.append(uploadLimit(resource, now: now))
        if created { headers.append(HTTPHeader(name: "Content-Length", value: "0")) }
        return UploadResponse(status: created ? 201 : 204, headers: headers)
    }

    /// The upload is complete and its file in place: the final response.
    public func completed(_ resource: UploadResource, replaced: Bool, now: Int64) -> UploadResponse {
        UploadResponse(status: replaced ? 200 : 201, headers: common(now) + [
            HTTPHeader(name: "Location", value: resource.target.utf8.map(Self.percentEncoded).joined()),
            HTTPHeader(name: "Upload-Complete", value: "?1"),
            HTTPHeader(name: "Upload-Offset", value: String(resource.offset)),
            HTTPHeader(name: "Upload-Length", value: String(resource.offset)),
            HTTPHeader(name: "Content-Length", value: "0"),
        ])
    }

    /// The content is all there but the file could not be put in place (or written): 500, the upload not
    /// complete, so that the client can HEAD and try the completion again.
    public func failed(_ resource: UploadResource, _ reason: String, now: Int64) -> UploadResponse {
        var response = plain(500, reason, nil, now)
        response.headers.insert(HTTPHeader(name: "Upload-Complete", value: "?0"), at: 2)
        response.headers.insert(HTTPHeader(name: "Upload-Offset", value: String(resource.offset)), at: 3)
        return response
    }

    // MARK: Expiry

    /// The resources to remove: every one idle for `expirySeconds` or more, except those in `busy` (being
    /// written); then, when `needRoom` and at least `maxUploads` remain, complete ones (kept only for a late
    /// HEAD) oldest first until one more fits. Whether one more fits afterwards is
    /// `remaining < maxUploads`.
    public func sweep(_ resources: [UploadResource], busy: Set<String>, needRoom: Bool, now: Int64) -> (remove: [String], remaining: Int) {
        var remove: [String] = []
        var kept: [UploadResource] = []
        for resource in resources {
            if !busy.contains(resource.id), now - resource.lastActivity >= limits.expirySeconds {
                remove.append(resource.id)
            } else {
                kept.append(resource)
            }
        }
        if needRoom && kept.count >= limits.maxUploads {
            let complete = kept.filter { $0.isComplete && !busy.contains($0.id) }.sorted { ($0.lastActivity, $0.id) < ($1.lastActivity, $1.id) }
            let evicted = Set(complete.prefix(kept.count - limits.maxUploads + 1).map(\.id))
            remove += complete.map(\.id).filter(evicted.contains)
            kept.removeAll { evicted.contains($0.id) }
        }
        return (remove, kept.count)
    }

    // MARK: Responses

    /// An error with a one-line text body (none for HEAD): for what the shell finds on disk (404, 403 and
    /// 409 for a target, 500 for a file that cannot be made).
    public func error(_ status: Int, _ message: String, _ head: HTTPRequestHead, now: Int64) -> UploadResponse {
        plain(status, message, head, now)
    }

    private func common(_ now: Int64) -> [HTTPHeader] {
        [HTTPHeader(name: "Date", value: HTTPRanges.httpDate(now)), HTTPHeader(name: "Server", value: HTTPFileResponder.serverName)]
    }

    private func uploadLimit(_ resource: UploadResource, now: Int64) -> HTTPHeader {
        let remaining = max(0, resource.lastActivity &+ limits.expirySeconds &- now)
        return HTTPHeader(name: "Upload-Limit", value: "max-size=\(limits.maxSize), max-age=\(remaining)")
    }

    /// An error with a one-line text body (none for HEAD).
    private func plain(_ status: Int, _ message: String, _ head: HTTPRequestHead?, _ now: Int64) -> UploadResponse {
        let body = head?.method == "HEAD" ? [] : Array((message + "\n").utf8)
        return UploadResponse(status: status, headers: common(now) + [
            HTTPHeader(name: "Content-Type", value: "text/plain; charset=utf-8"),
            HTTPHeader(name: "Content-Length", value: String(message.utf8.count + 1)),
        ], body: body)
    }

    /// An error with an RFC 9457 problem body (none for HEAD).
    private func problem(_ status: Int, type: String, title: String, members: String = "", _ head: HTTPRequestHead, _ now: Int64,
                         extra: [HTTPHeader] = []) -> UploadResponse {
        let json = "{\"type\":\"https://iana.org/assignments/http-problem-types#\(type)\",\"title\":\"\(title)\"\(members)}\n"
        return UploadResponse(status: status, headers: common(now) + extra + [
            HTTPHeader(name: "Content-Type", value: "application/problem+json"),
            HTTPHeader(name: "Content-Length", value: String(json.utf8.count)),
        ], body: head.method == "HEAD" ? [] : Array(json.utf8))
    }

    private func conflict(_ resource: UploadResource, provided: Int, _ head: HTTPRequestHead, _ now: Int64) -> UploadResponse {
        problem(409, type: "mismatching-upload-offset", title: "offset from request does not match offset of resource",
                members: ",\"expected-offset\":\(resource.offset),\"provided-offset\":\(provided)", head, now, extra: [
                    HTTPHeader(name: "Upload-Offset", value: String(resource.offset)),
                    HTTPHeader(name: "Upload-Complete", value: "?0"),
                ])
    }

    private func inconsistentLength(_ head: HTTPRequestHead, _ now: Int64) -> UploadResponse {
        problem(400, type: "inconsistent-upload-length", title: "inconsistent length values for upload", head, now,
                extra: [HTTPHeader(name: "Upload-Complete", value: "?0")])
    }

    private func tooLarge(_ head: HTTPRequestHead, _ now: Int64) -> UploadResponse {
        var response = plain(413, "an upload may have at most \(limits.maxSize) bytes", head, now)
        response.headers.insert(HTTPHeader(name: "Upload-Limit", value: "max-size=\(limits.maxSize)"), at: 2)
        return response
    }

    // MARK: Fields

    /// The media type of a Content-Type value, lowercased, without parameters or whitespace.
    static func mediaType(_ value: String?) -> String? {
        guard let value else { return nil }
        let type = value.utf8.prefix { $0 != UInt8(ascii: ";") }
        return HTTPSyntax.lowercased(String(decoding: type.filter { !HTTPSyntax.isWhitespace($0) }, as: UTF8.self))
    }

    /// A path byte for a Location: RFC 3986's unreserved, sub-delims, `:`, `@` and `/` as they are, anything
    /// else `%HH`.
    private static func percentEncoded(_ byte: UInt8) -> String {
        if SFScanner.isAlpha(byte) || ASCIIDigits.isDigit(byte) || "-._~!$&'()*+,;=:@/".utf8.contains(byte) {
            return String(UnicodeScalar(byte))
        }
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
    }
}
