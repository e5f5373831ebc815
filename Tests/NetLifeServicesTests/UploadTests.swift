// Resumable uploads without a daemon: the server's decisions (ResumableUploadServer: creation, offset
// retrieval, appends at the right and the wrong offset, completion, lengths and limits, structured fields,
// expiry), the client machine (ResumableUpload: creation, resume from HEAD, 409, 404, a changed file, the
// record) driven against the server's own core, and the Upload shell against an in-process HTTPService on a
// real loop.

@testable import NetLifeServices
import NetLife
import NetLifeEvent
import NetLifeTestSupport
@preconcurrency import Glibc
import Testing

/// The suites below, under one name (`swift test --filter UploadTests`).
@Suite(.timeLimit(.minutes(5)))
struct UploadTests {}

private let id = "0123456789abcdef0123456789abcdef"
private let now: Int64 = 1_800_000_000

private func request(_ method: String, _ target: String, _ fields: [(String, String)] = []) -> HTTPRequestHead {
    HTTPRequestHead(method: method, target: target, headers: [HTTPHeader(name: "host", value: "x")]
        + fields.map { HTTPHeader(name: $0.0.lowercased(), value: $0.1) })
}

private func patch(offset: String, complete: String = "?0", type: String = "application/partial-upload", _ more: [(String, String)] = []) -> HTTPRequestHead {
    request("PATCH", "/.netlife-upload/" + id, [("Content-Type", type), ("Upload-Offset", offset), ("Upload-Complete", complete)] + more)
}

private func resource(offset: Int = 100, length: Int? = 1000, complete: Bool = false) -> UploadResource {
    UploadResource(id: id, target: "/dir/f.bin", offset: offset, length: length, isComplete: complete, lastActivity: now - 10)
}

/// The response of a decision that answers at once.
private func response(_ decision: ResumableUploadServer.Decision) -> UploadResponse? {
    if case .respond(let response) = decision { return response }
    return nil
}

extension UploadTests {
    @Suite(.timeLimit(.minutes(5)))
    struct ServerCore {
        let server = ResumableUploadServer(limits: UploadLimits(maxSize: 10_000, maxUploads: 3, expirySeconds: 3600))

        @Test func routesRequests() {
            #expect(server.route(request("POST", "/dir/f.bin")) == .creation(target: "/dir/f.bin"))
            #expect(server.route(request("PUT", "/a%20b")) == .creation(target: "/a b"))
            #expect(server.route(request("PATCH", "/.netlife-upload/" + id)) == .resource(id: id))
            #expect(server.route(request("HEAD", "/.netlife-upload/" + id + "?x=1")) == .resource(id: id))
            #expect(server.route(request("HEAD", "/.netlife-upload/" + id.uppercased())) == .resource(id: nil))
            #expect(server.route(request("HEAD", "/.netlife-upload/" + id + "0")) == .resource(id: nil))
            #expect(server.route(request("POST", "/.netlife-upload/x")) == .resource(id: nil))
            #expect(server.route(request("GET", "/.netlife-upload")) == .resource(id: nil))
            #expect(server.route(request("GET", "/f.bin")) == .files)
            #expect(server.route(request("PATCH", "/f.bin")) == .files)
            #expect(server.route(request("OPTIONS", "*")) == .options)
            #expect(server.route(request("POST", "/a/../b")) == .files, "an escaping path is no target (404 from the file side)")
        }

        @Test func createsWithAndWithoutContent() throws {
            #expect(server.creation(request("POST", "/f", [("Upload-Complete", "?0"), ("Upload-Length", "5000")]), target: "/f",
                                    bodyLength: 0, roomForAnother: true, now: now) == .create(target: "/f", length: 5000, bodyLength: 0, completes: false))
            #expect(server.creation(request("POST", "/f", [("Upload-Complete", "?0")]), target: "/f",
                                    bodyLength: 300, roomForAnother: true, now: now) == .create(target: "/f", length: nil, bodyLength: 300, completes: false))
            // ?1: the content is the whole representation, its length the upload's.
            #expect(server.creation(request("PUT", "/f", [("Upload-Complete", "?1")]), target: "/f",
                                    bodyLength: 300, roomForAnother: true, now: now) == .create(target: "/f", length: 300, bodyLength: 300, completes: true))
            #expect(server.creation(request("PUT", "/f", [("Upload-Complete", "?1"), ("Upload-Length", "300")]), target: "/f",
                                    bodyLength: 300, roomForAnother: true, now: now) == .create(target: "/f", length: 300, bodyLength: 300, completes: true))
            // Parameters on an Item are allowed (and ignored).
            #expect(server.creation(request("POST", "/f", [("Upload-Complete", "?0;x=1"), ("Upload-Length", " 7 ")]), target: "/f",
                                    bodyLength: 0, roomForAnother: true, now: now) == .create(target: "/f", length: 7, bodyLength: 0, completes: false))
        }

        @Test func refusesBadCreations() throws {
            func status(_ fields: [(String, String)], target: String = "/f", body: Int = 0, room: Bool = true) -> Int? {
                response(server.creation(request("POST", target, fields), target: target, bodyLength: body, roomForAnother: room, now: now))?.status
            }
            #expect(status([]) == 400, "no Upload-Complete: no resumable upload")
            for bad in ["1", "?2", "?", "true", "?1 ?0", "?1, ?0", "\"?1\"", "?1;X=1", "?1;"] {
                #expect(status([("Upload-Complete", bad)]) == 400, "\(bad)")
            }
            #expect(status([("Upload-Complete", "?1"), ("Upload-Length", "301")], body: 300) == 400, "lengths that differ")
            #expect(status([("Upload-Complete", "?0"), ("Upload-Length", "100")], body: 300) == 400, "content past the length")
            #expect(status([("Upload-Complete", "?0"), ("Upload-Length", "10001")]) == 413)
            #expect(status([("Upload-Complete", "?1")], body: 10_001) == 413)
            #expect(status([("Upload-Complete", "?0")], room: false) == 503)
            for target in ["/", "/dir/", "/.netlife-upload", "/.netlife-upload/x", ""] {
                #expect(status([("Upload-Complete", "?0")], target: target) == 403, "\(target)")
            }
            let tooLarge = try #require(response(server.creation(request("POST", "/f", [("Upload-Complete", "?1")]), target: "/f",
                                                                 bodyLength: 10_001, roomForAnother: true, now: now)))
            #expect(tooLarge.value(of: "Upload-Limit") == "max-size=10000")
            // An invalid Upload-Length is ignored, as the draft says: the length stays unknown.
            #expect(server.creation(request("POST", "/f", [("Upload-Complete", "?0"), ("Upload-Length", "-5")]), target: "/f",
                                    bodyLength: 0, roomForAnother: true, now: now) == .create(target: "/f", length: nil, bodyLength: 0, completes: false))
        }

        @Test func retrievesTheOffset() throws {
            let head = try #require(response(server.resourceRequest(request("HEAD", "/.netlife-upload/" + id), resource: resource(), bodyLength: 0, now: now)))
            #expect(head.status == 204)
            #expect(head.value(of: "Upload-Offset") == "100")
            #expect(head.value(of: "Upload-Complete") == "?0")
            #expect(head.value(of: "Upload-Length") == "1000")
            #expect(head.value(of: "Cache-Control") == "no-store")
            #expect(head.value(of: "Upload-Limit") == "max-size=10000, max-age=3590")
            #expect(head.body.isEmpty)
            let unknown = server.offsetRetrieval(resource(length: nil), now: now)
            #expect(unknown.value(of: "Upload-Length") == nil)
            let done = server.offsetRetrieval(resource(offset: 1000, complete: true), now: now)
            #expect(done.value(of: "Upload-Complete") == "?1")
            #expect(response(server.resourceRequest(request("GET", "/.netlife-upload/" + id), resource: resource(), bodyLength: 0, now: now))?.status == 204)
            #expect(response(server.resourceRequest(request("HEAD", "/.netlife-upload/" + id), resource: nil, bodyLength: 0, now: now))?.status == 404)
        }

        @Test func appendsAtTheOffsetOnly() throws {
            #expect(server.resourceRequest(patch(offset: "100"), resource: resource(), bodyLength: 50, now: now)
                == .append(bodyLength: 50, completes: false, length: nil))
            #expect(server.resourceRequest(patch(offset: "100", complete: "?1"), resource: resource(), bodyLength: 900, now: now)
                == .append(bodyLength: 900, completes: true, length: nil))
            // The length becomes known with ?1 (offset + content) or Upload-Length.
            #expect(server.resourceRequest(patch(offset: "100", complete: "?1"), resource: resource(length: nil), bodyLength: 30, now: now)
                == .append(bodyLength: 30, completes: true, length: 130))
            #expect(server.resourceRequest(patch(offset: "100", [("Upload-Length", "500")]), resource: resource(length: nil), bodyLength: 30, now: now)
                == .append(bodyLength: 30, completes: false, length: 500))
            for offset in ["0", "99", "101", "1000"] {
                let conflict = try #require(response(server.resourceRequest(patch(offset: offset), resource: resource(), bodyLength: 10, now: now)))
                #expect(conflict.status == 409, "\(offset)")
                #expect(conflict.value(of: "Upload-Offset") == "100")
                #expect(conflict.value(of: "Upload-Complete") == "?0")
                #expect(String(decoding: conflict.body, as: UTF8.self).contains("\"expected-offset\":100,\"provided-offset\":\(offset)"))
            }
            let headConflict = try #require(response(server.resourceRequest(
                HTTPRequestHead(method: "HEAD", target: "/", headers: patch(offset: "5").headers), resource: resource(), bodyLength: 0, now: now)))
            #expect(headConflict.status == 204, "HEAD is an offset retrieval whatever its fields")
        }

        @Test func refusesBadAppends() throws {
            func status(_ head: HTTPRequestHead, _ resource: UploadResource = resource(), body: Int = 10) -> Int? {
                response(server.resourceRequest(head, resource: resource, bodyLength: body, now: now))?.status
            }
            #expect(status(patch(offset: "100", type: "application/octet-stream")) == 415)
            #expect(status(request("PATCH", "/", [("Upload-Offset", "100"), ("Upload-Complete", "?0")])) == 415)
            #expect(status(patch(offset: "100", type: "Application/Partial-Upload ; x=1")) == nil, "media types compare without case")
            // Offsets that are no non-negative sf-integer: ignored, so missing.
            for bad in ["-1", "1.5", "abc", "", "0x10", "1234567890123456", "99999999999999999999999", "100, 100", "+100", "1e3"] {
                #expect(status(patch(offset: bad)) == 400, "Upload-Offset: \(bad)")
            }
            #expect(status(patch(offset: "100", complete: "yes")) == 400)
            // Past a known length, or ending short of it with ?1, or lengths that differ: 400, nothing appended.
            #expect(status(patch(offset: "100"), body: 901) == 400)
            #expect(status(patch(offset: "100", complete: "?1"), body: 899) == 400)
            #expect(status(patch(offset: "100", [("Upload-Length", "999")])) == 400)
            #expect(status(patch(offset: "100"), resource(length: nil), body: 9_901) == 413)
            #expect(status(patch(offset: "100", [("Upload-Length", "20000")]), resource(length: nil)) == 413)
            // An end past Int: 413, never an overflow.
            #expect(status(patch(offset: "999999999999999"), resource(offset: 999_999_999_999_999, length: nil), body: .max) == 413)
        }

        @Test func aCompleteUploadTakesNoMore() throws {
            let complete = resource(offset: 1000, complete: true)
            let replay = try #require(response(server.resourceRequest(patch(offset: "1000", complete: "?1"), resource: complete, bodyLength: 0, now: now)))
            #expect(replay.status == 201)
            #expect(replay.value(of: "Upload-Complete") == "?1")
            #expect(response(server.resourceRequest(patch(offset: "1000", complete: "?1"), resource: complete, bodyLength: 5, now: now))?.status == 400)
            #expect(response(server.resourceRequest(patch(offset: "1000"), resource: complete, bodyLength: 0, now: now))?.status == 400)
            #expect(response(server.resourceRequest(patch(offset: "10", complete: "?1"), resource: complete, bodyLength: 0, now: now))?.status == 409)
        }

        @Test func cancelsAndRefusesOtherMethods() throws {
            guard case .cancel(let cancelled) = server.resourceRequest(request("DELETE", "/"), resource: resource(), bodyLength: 0, now: now) else {
                Issue.record("DELETE does not cancel")
                return
            }
            #expect(cancelled.status == 204)
            let other = try #require(response(server.resourceRequest(request("PUT", "/"), resource: resource(), bodyLength: 0, now: now)))
            #expect(other.status == 405)
            #expect(other.value(of: "Allow") == "HEAD, GET, PATCH, DELETE, OPTIONS")
            #expect(server.options(now: now).value(of: "Upload-Limit") == "max-size=10000, max-age=3600")
        }

        @Test func answersAfterTheBody() {
            var created = resource(offset: 300, length: 1000)
            created.lastActivity = now
            let first = server.appended(created, created: true, now: now)
            #expect(first.status == 201)
            #expect(first.value(of: "Location") == "/.netlife-upload/" + id)
            #expect(first.value(of: "Upload-Offset") == "300")
            #expect(first.value(of: "Upload-Complete") == "?0")
            #expect(server.appended(created, created: false, now: now).status == 204)
            #expect(server.appended(created, created: false, now: now).value(of: "Location") == nil)
            var done = created
            done.target = "/dir/a b#?.bin"
            #expect(server.completed(done, replaced: false, now: now).value(of: "Location") == "/dir/a%20b%23%3F.bin")
            #expect(server.completed(done, replaced: true, now: now).status == 200)
            #expect(server.interim(created, now: now).status == 104)
            #expect(server.interim(created, now: now).value(of: "Location") == "/.netlife-upload/" + id)
            #expect(server.progress(created).value(of: "Upload-Offset") == "300")
            #expect(server.progress(created).value(of: "Location") == nil)
            let failed = server.failed(created, "rename: EXDEV", now: now)
            #expect(failed.status == 500 && failed.value(of: "Upload-Complete") == "?0")
        }

        @Test func sweepsExpiredAndMakesRoom() {
            func at(_ name: String, _ age: Int64, complete: Bool = false) -> UploadResource {
                UploadResource(id: name, target: "/f", isComplete: complete, lastActivity: now - age)
            }
            let resources = [at("old", 4000), at("busy", 4000), at("done1", 100, complete: true), at("done2", 50, complete: true), at("live", 10)]
            let quiet = server.sweep(resources, busy: ["busy"], needRoom: false, now: now)
            #expect(quiet.remove == ["old"])
            #expect(quiet.remaining == 4)
            // Room for one more under max-uploads 3: the oldest complete ones go first.
            let room = server.sweep(resources, busy: ["busy"], needRoom: true, now: now)
            #expect(room.remove == ["old", "done1", "done2"])
            #expect(room.remaining == 2)
            let full = server.sweep([at("a", 1), at("b", 2), at("c", 3)], busy: [], needRoom: true, now: now)
            #expect(full.remove.isEmpty && full.remaining == 3, "unfinished uploads are never evicted")
        }
    }

    @Suite(.timeLimit(.minutes(5)))
    struct StructuredFields {
        @Test func parsesItemsAsRFC9651Says() {
            let table: [(String, StructuredFieldItem?)] = [
                ("0", .integer(0)), ("42", .integer(42)), ("-7", .integer(-7)), ("999999999999999", .integer(999_999_999_999_999)),
                ("1000000000000000", nil), ("007", .integer(7)), ("?1", .boolean(true)), ("?0", .boolean(false)),
                ("  5  ", .integer(5)), ("5;a", .integer(5)), ("5;a=1;b=?0;c=\"x\";d=tok;e=:AA==:;f=1.5", .integer(5)),
                ("5 ;a", nil), ("5; a", .integer(5)), ("5;A", nil), ("5;", nil), ("5;a=", nil),
                ("1.5", .other), ("123456789012.123", .other), ("1234567890123.1", nil), ("1.1234", nil), ("1.", nil),
                ("\"a\\\"b\"", .other), ("\"a", nil), ("\"a\\x\"", nil), ("tok/en:x", .other), ("*x", .other),
                (":YWJj:", .other), (":YW!j:", nil), ("@1659578233", .other), ("@1.5", nil), ("%\"caf%c3%a9\"", .other),
                ("%\"%ff\"", nil), ("%\"%C3%A9\"", nil), ("", nil), ("-", nil), ("?", nil), ("?2", nil), ("5 6", nil), ("5,6", nil),
                ("\t5", nil),
            ]
            for (text, expected) in table {
                #expect(StructuredFieldItem(parsing: text) == expected, "\(text.debugDescription)")
            }
            #expect(UploadFields.integer("-1") == nil)
            #expect(UploadFields.integer("12") == 12)
            #expect(UploadFields.boolean("?1") == true)
            #expect(UploadFields.boolean("1") == nil)
        }

        @Test func staysLinear() {
            #expect(StructuredFieldItem(parsing: String(repeating: "5 ", count: 20_000)) == nil)
            #expect(StructuredFieldItem(parsing: String(repeating: "\"", count: 20_001)) == nil)
            #expect(StructuredFieldItem(parsing: "5" + String(repeating: ";a=1", count: 20_000)) == .integer(5))
        }
    }

    @Suite(.timeLimit(.minutes(5)))
    struct Records {
        @Test func resourceRecordsRoundTrip() {
            for record in [UploadResourceRecord(target: "/a/b c\n\\.bin"), UploadResourceRecord(target: "/f", length: 10),
                           UploadResourceRecord(target: "/f", length: 10, completeLength: 10)] {
                #expect(UploadResourceRecord.decode(record.encoded()) == record)
            }
            for garbage in ["", "netlife-upload-resource 2\ntarget=/f\n", "netlife-upload-resource 1\n", "netlife-upload-resource 1\ntarget=/\n",
                            "netlife-upload-resource 1\ntarget=/.netlife-upload/x\n", "netlife-upload-resource 1\ntarget=/f\nlength=-1\n",
                            "netlife-upload-resource 1\ntarget=/f\ntarget=/g\n", "netlife-upload-resource 1\ntarget=/f\nx=1\n"] {
                #expect(UploadResourceRecord.decode(garbage) == nil, "\(garbage.debugDescription)")
            }
        }

        @Test func clientRecordsRoundTrip() throws {
            let record = UploadRecord(url: try URLParts(parsing: "http://127.0.0.1:8080/dir/f.bin"),
                                      resource: try URLParts(parsing: "http://127.0.0.1:8080/.netlife-upload/" + id),
                                      file: UploadFileIdentity(size: 12345, modifiedSeconds: 1_733_011_200, modifiedNanoseconds: 5, inode: 99))
            #expect(record.encoded().contains("mtime=1733011200.000000005\n"))
            #expect(UploadRecord.decode(record.encoded()) == record)
            let text = record.encoded()
            for (from, to) in [("netlife-upload 1", "netlife-upload 2"), ("size=12345", "size=-1"), ("size=12345", "size=1e3"),
                               ("mtime=1733011200.000000005", "mtime=1733011200.5"), ("inode=99", "inode=-99"), ("inode=99", "inode="),
                               ("url=http", "url=gopher"), ("resource=http", "resource=ftp:x")] {
                #expect(UploadRecord.decode(text.replacing(from, with: to)) == nil, "\(to)")
            }
            #expect(UploadRecord.decode(text.replacing("inode=99\n", with: "")) == nil, "a missing key")
            #expect(UploadRecord.decode(text + "size=1\n") == nil, "a repeated key")
        }
    }
}

// MARK: The client against the server's core

private typealias Action = ResumableUpload.Action

private let targetURL = try! URLParts(parsing: "http://192.0.2.1:8080/dir/f.bin")

private func identity(_ size: Int, mtime: Int64 = 1000, inode: UInt64 = 7) -> UploadFileIdentity {
    UploadFileIdentity(size: size, modifiedSeconds: mtime, inode: inode)
}

/// A server made of `ResumableUploadServer` and resources in memory: what the http service decides, without
/// files or sockets.
private struct CoreServer {
    var core = ResumableUploadServer()
    var resources: [String: (resource: UploadResource, bytes: [UInt8])] = [:]
    var finished: [String: [UInt8]] = [:]
    var requests: [String] = []
    private var nextID = 0

    /// Handles a request whose content is `content`, cut after `cut` bytes (the connection broke): the head
    /// of the final response, nil when the client never sees one.
    mutating func handle(_ request: HTTPClientRequest, content: [UInt8], cut: Int? = nil) -> HTTPResponseHead? {
        requests.append("\(request.method) \(request.value(of: "Upload-Offset") ?? "-")")
        // libcurl adds Content-Length for the body it is given.
        let head = HTTPRequestHead(method: request.method, target: request.url.path + (request.url.query.map { "?" + $0 } ?? ""),
                                   headers: request.headers.map { HTTPHeader(name: $0.name.lowercased(), value: $0.value) }
                                       + (request.method == "HEAD" ? [] : [HTTPHeader(name: "content-length", value: String(content.count))]))
        let length = head.contentLength ?? 0
        var resourceID: String?
        let decision: ResumableUploadServer.Decision
        switch core.route(head) {
        case .creation(let target):
            decision = core.creation(head, target: target, bodyLength: length, roomForAnother: true, now: now)
        case .resource(let id):
            resourceID = id
            decision = core.resourceRequest(head, resource: id.flatMap { resources[$0]?.resource }, bodyLength: length, now: now)
        case .options, .files:
            return HTTPResponseHead(status: 405)
        }
        var created = false
        let completes: Bool
        switch decision {
        case .respond(let response):
            return Self.head(response)
        case .cancel(let response):
            resources[resourceID ?? ""] = nil
            return Self.head(response)
        case .create(let target, let announced, _, let complete):
            nextID += 1
            let newID = String(repeating: "0", count: 31) + String(nextID, radix: 16)
            resources[newID] = (UploadResource(id: newID, target: target, length: announced, lastActivity: now), [])
            resourceID = newID
            created = true
            completes = complete
        case .append(_, let complete, let newLength):
            if let newLength, let id = resourceID { resources[id]?.resource.length = newLength }
            completes = complete
        }
        guard let id = resourceID, var entry = resources[id] else { return HTTPResponseHead(status: 500) }
        let taken = content.prefix(cut ?? content.count)
        entry.bytes += taken
        entry.resource.offset += taken.count
        resources[id] = entry
        if cut != nil { return nil }
        if completes {
            entry.resource.isComplete = true
            resources[id] = entry
            finished[entry.resource.target] = entry.bytes
            return Self.head(core.completed(entry.resource, replaced: false, now: now))
        }
        return Self.head(core.appended(entry.resource, created: created, now: now))
    }

    static func head(_ response: UploadResponse) -> HTTPResponseHead {
        HTTPResponseHead(status: response.status, reason: HTTPFileResponder.reasonPhrase(response.status),
                         headers: response.headers.map { HTTPHeader(name: $0.name.lowercased(), value: $0.value) })
    }
}

/// Performs the machine's actions against a `CoreServer`, with a file and a record in memory.
private struct ClientShell {
    var file: [UInt8]
    var fileIdentity: UploadFileIdentity
    var record: String?
    var performed: [Action] = []
    /// The next PATCH's content is cut after this many bytes.
    var cutNextPatchAt: Int?

    init(file: [UInt8]) {
        self.file = file
        fileIdentity = identity(file.count)
    }

    func reopened() -> ResumableUpload {
        ResumableUpload(url: targetURL, existing: record.flatMap(UploadRecord.decode))
    }

    mutating func run(_ actions: [Action], _ upload: inout ResumableUpload, _ server: inout CoreServer) {
        var queue = actions
        var steps = 0
        while !queue.isEmpty {
            steps += 1
            guard steps < 200 else {
                Issue.record("the machine does not settle: \(performed.suffix(10))")
                return
            }
            let action = queue.removeFirst()
            performed.append(action)
            switch action {
            case .sendRequest(let request, let body):
                var content: [UInt8] = []
                if let body {
                    #expect(body.offset >= 0 && body.offset + body.count <= file.count, "a body inside the file")
                    content = Array(file[body.offset..<(body.offset + body.count)])
                }
                let cut = request.method == "PATCH" ? cutNextPatchAt : nil
                if request.method == "PATCH" { cutNextPatchAt = nil }
                if let head = server.handle(request, content: content, cut: cut) {
                    queue += upload.responseHead(head)
                } else {
                    queue += upload.connectionFailed("the connection broke")
                }
            case .writeRecord(let value):
                #expect(UploadRecord.decode(value.encoded()) == value)
                record = value.encoded()
            case .removeRecord:
                record = nil
            case .closeConnection, .report:
                break
            }
        }
    }
}

private func content(_ count: Int, seed: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 / 241 &+ seed) }
}

private func response(_ status: Int, _ fields: [(String, String)] = []) -> HTTPResponseHead {
    HTTPResponseHead(status: status, headers: fields.map { HTTPHeader(name: $0.0.lowercased(), value: $0.1) })
}

private func sentRequest(_ actions: [Action]) -> HTTPClientRequest? {
    for case .sendRequest(let request, _) in actions { return request }
    return nil
}

extension UploadTests {
    @Suite(.timeLimit(.minutes(5)))
    struct ClientMachine {
        @Test func createsThenSendsTheWholeFile() throws {
            var upload = ResumableUpload(url: targetURL, existing: nil)
            let start = upload.start(file: identity(1000))
            let post = try #require(sentRequest(start))
            #expect(post.method == "POST" && post.url == targetURL)
            #expect(post.value(of: "Upload-Complete") == "?0")
            #expect(post.value(of: "Upload-Length") == "1000")
            #expect(post.value(of: "Content-Length") == nil && post.value(of: "Host") == nil, "libcurl's own")
            let created = upload.responseHead(response(201, [("Location", "/.netlife-upload/" + id), ("Upload-Complete", "?0")]))
            let resource = try URLParts(parsing: "http://192.0.2.1:8080/.netlife-upload/" + id)
            let record = UploadRecord(url: targetURL, resource: resource, file: identity(1000))
            #expect(created.prefix(2) == [.closeConnection, .writeRecord(record)])
            guard case .sendRequest(let patch, let body)? = created.last else {
                Issue.record("no PATCH after the creation: \(created)")
                return
            }
            #expect(patch.method == "PATCH" && patch.url == resource)
            #expect(body == UploadBody(offset: 0, count: 1000))
            #expect(patch.value(of: "Content-Type") == "application/partial-upload")
            #expect(patch.value(of: "Upload-Offset") == "0")
            #expect(patch.value(of: "Upload-Complete") == "?1")
            #expect(upload.interimHead(response(104, [("Upload-Offset", "600")])) == [.report(.running)])
            #expect(upload.bytesDone == 600)
            #expect(upload.interimHead(response(104, [("Upload-Offset", "5000")])).isEmpty, "past the file: ignored")
            #expect(upload.interimHead(response(104, [("Upload-Offset", "500")])).isEmpty, "backwards: ignored")
            #expect(upload.responseHead(response(201, [("Upload-Complete", "?1")])) == [.closeConnection, .removeRecord, .report(.done)])
            #expect(upload.state == .done && upload.bytesDone == 1000)
            #expect(upload.start(file: identity(1000)).isEmpty, "done stays done")
        }

        @Test func resumesFromTheServersOffset() throws {
            let file = content(5000)
            var server = CoreServer()
            var shell = ClientShell(file: file)
            shell.cutNextPatchAt = 1234
            var upload = ResumableUpload(url: targetURL, existing: nil)
            shell.run(upload.start(file: shell.fileIdentity), &upload, &server)
            guard case .paused = upload.state else {
                Issue.record("a cut PATCH pauses: \(upload.state)")
                return
            }
            #expect(shell.record != nil, "the record survives the pause")
            // A restarted daemon: the record is read back, HEAD asks for the offset, PATCH sends the rest.
            upload = shell.reopened()
            shell.run(upload.start(file: shell.fileIdentity), &upload, &server)
            #expect(upload.state == .done)
            #expect(server.finished["/dir/f.bin"] == file)
            #expect(server.requests == ["POST -", "PATCH 0", "HEAD -", "PATCH 1234"])
            #expect(shell.record == nil)
            guard case .sendRequest(_, let body)? = shell.performed.last(where: { if case .sendRequest = $0 { return true } else { return false } }) else { return }
            #expect(body == UploadBody(offset: 1234, count: 5000 - 1234), "only the missing bytes are sent again")
        }

        @Test func aConflictAsksForTheOffsetAgain() throws {
            var upload = ResumableUpload(url: targetURL, existing: nil)
            _ = upload.start(file: identity(1000))
            _ = upload.responseHead(response(201, [("Location", "/.netlife-upload/" + id)]))
            for _ in 1...ResumableUpload.maxConflicts {
                let again = upload.responseHead(response(409, [("Upload-Offset", "300")]))
                #expect(sentRequest(again)?.method == "HEAD")
                let patch = upload.responseHead(response(204, [("Upload-Offset", "300"), ("Upload-Complete", "?0")]))
                #expect(sentRequest(patch)?.value(of: "Upload-Offset") == "300")
                #expect(upload.bytesDone == 300)
            }
            _ = upload.responseHead(response(409))
            guard case .failed(let reason) = upload.state else {
                Issue.record("endless conflicts end: \(upload.state)")
                return
            }
            #expect(reason.contains("offset"))
        }

        @Test func aLostResourceStartsANewUpload() throws {
            let file = content(300)
            var server = CoreServer()
            var shell = ClientShell(file: file)
            // A record of a resource the server never had (expired, cancelled, another server's).
            let stale = UploadRecord(url: targetURL, resource: try URLParts(parsing: "http://192.0.2.1:8080/.netlife-upload/" + id), file: identity(300))
            shell.record = stale.encoded()
            var upload = shell.reopened()
            shell.run(upload.start(file: shell.fileIdentity), &upload, &server)
            #expect(upload.state == .done)
            #expect(server.requests == ["HEAD -", "POST -", "PATCH 0"])
            #expect(shell.performed.contains(.removeRecord))
            #expect(server.finished["/dir/f.bin"] == file)

            // 410 on a PATCH: the same.
            var fresh = ResumableUpload(url: targetURL, existing: stale)
            _ = fresh.start(file: identity(300))
            let restart = fresh.responseHead(response(204, [("Upload-Offset", "10")]))
            #expect(sentRequest(restart)?.method == "PATCH")
            let gone = fresh.responseHead(response(410))
            #expect(gone.prefix(2) == [.closeConnection, .removeRecord])
            #expect(sentRequest(gone)?.method == "POST")
        }

        @Test func aChangedFileStartsANewUpload() throws {
            let resource = try URLParts(parsing: "http://192.0.2.1:8080/.netlife-upload/" + id)
            let record = UploadRecord(url: targetURL, resource: resource, file: identity(1000))
            for changed in [identity(1001), identity(1000, mtime: 1001), identity(1000, inode: 8)] {
                var upload = ResumableUpload(url: targetURL, existing: record)
                let actions = upload.start(file: changed)
                #expect(actions.contains(.removeRecord))
                #expect(sentRequest(actions)?.method == "POST", "\(changed)")
                #expect(upload.total == changed.size)
            }
            // The same file resumes; a record of another URL is not this upload's.
            var same = ResumableUpload(url: targetURL, existing: record)
            #expect(sentRequest(same.start(file: identity(1000)))?.method == "HEAD")
            var other = ResumableUpload(url: try URLParts(parsing: "http://192.0.2.1:8080/other"), existing: record)
            #expect(sentRequest(other.start(file: identity(1000)))?.method == "POST")
            // Changed while running (found before its bytes are sent): a new upload of the file as it is now.
            #expect(sentRequest(same.fileChanged(identity(5)))?.method == "POST")
            #expect(same.total == 5)
            _ = same.responseHead(response(201, [("Location", "/.netlife-upload/" + id)]))
            #expect(same.fileChanged(nil).last == .report(.failed("the file cannot be read")))
            // No file at the start: failed, and start() tries again.
            var missing = ResumableUpload(url: targetURL, existing: nil)
            #expect(missing.start(file: nil).last == .report(.failed("the file cannot be read")))
            #expect(sentRequest(missing.start(file: identity(3)))?.method == "POST")
        }

        @Test func theServersStateDecidesTheResume() throws {
            let resource = try URLParts(parsing: "http://192.0.2.1:8080/.netlife-upload/" + id)
            let record = UploadRecord(url: targetURL, resource: resource, file: identity(1000))
            func afterHead(_ fields: [(String, String)], status: Int = 204) -> (ResumableUpload, [Action]) {
                var upload = ResumableUpload(url: targetURL, existing: record)
                _ = upload.start(file: identity(1000))
                let actions = upload.responseHead(response(status, fields))
                return (upload, actions)
            }
            // Complete at the file's size: the final response was lost; done.
            let (done, doneActions) = afterHead([("Upload-Offset", "1000"), ("Upload-Complete", "?1")])
            #expect(done.state == .done && doneActions.contains(.removeRecord))
            // Not this file's bytes: a new upload.
            for fields in [[("Upload-Offset", "1001")], [("Upload-Offset", "10"), ("Upload-Length", "999")],
                           [("Upload-Offset", "10"), ("Upload-Complete", "?1")]] {
                #expect(sentRequest(afterHead(fields).1)?.method == "POST", "\(fields)")
            }
            // All bytes there but not complete: an empty PATCH completes it.
            let (_, empty) = afterHead([("Upload-Offset", "1000"), ("Upload-Complete", "?0")])
            #expect(empty.contains { if case .sendRequest(_, UploadBody(offset: 1000, count: 0)?) = $0 { return true } else { return false } })
            // No valid offset, a 403, a 5xx.
            #expect(afterHead([("Upload-Offset", "-1")]).0.state == .failed("the server's offset answer has no valid Upload-Offset"))
            #expect(afterHead([], status: 403).0.state == .failed("server answered 403 asking for the offset"))
            #expect(afterHead([], status: 503).0.state == .paused("server answered 503 asking for the offset"))
        }

        @Test func statusesEndTheUploadAsTheDraftSays() throws {
            func creation(_ status: Int, _ fields: [(String, String)] = []) -> TransferState {
                var upload = ResumableUpload(url: targetURL, existing: nil)
                _ = upload.start(file: identity(1000))
                _ = upload.responseHead(response(status, fields))
                return upload.state
            }
            #expect(creation(201) == .failed("the server created no upload resource (201 without a Location)"))
            #expect(creation(201, [("Location", "ftp://x/y")]) == .failed("the upload resource ftp://x/y is not http or https"))
            #expect(creation(413) == .failed("server answered 413 creating the upload: the file is larger than the server takes"))
            #expect(creation(405) == .failed("server answered 405 creating the upload"))
            #expect(creation(500) == .paused("server answered 500 creating the upload"))
            #expect(creation(201, [("Upload-Complete", "?1")]) == .failed("the server says the upload is complete before any byte was sent"))

            var upload = ResumableUpload(url: targetURL, existing: nil)
            _ = upload.start(file: identity(1000))
            _ = upload.responseHead(response(201, [("Location", "http://192.0.2.9/u/1")]))
            #expect(upload.record?.resource == (try URLParts(parsing: "http://192.0.2.9/u/1")), "an absolute Location as it is")
            #expect(upload.pause("suspended") == [.closeConnection, .report(.paused("suspended"))])
            #expect(upload.pause("again").isEmpty)
            #expect(upload.connectionFailed("late").isEmpty)
            #expect(upload.responseHead(response(201)).isEmpty, "a head after the pause is ignored")
            #expect(sentRequest(upload.start(file: identity(1000)))?.method == "HEAD")
            #expect(upload.responseHead(response(204, [("Upload-Offset", "0")])).contains(.closeConnection))
            #expect(upload.responseHead(response(500)) == [.closeConnection, .report(.paused("server answered 500 sending the file"))])

            var empty = ResumableUpload(url: targetURL, existing: nil)
            _ = empty.start(file: identity(0))
            #expect(empty.responseHead(response(201, [("Upload-Complete", "?1")])).last == .report(.done), "an empty file may complete at once")
        }
    }
}

// MARK: The shell on a real loop

/// A loop with an HTTPService (uploads into `uploads`) behind a listener on 127.0.0.1.
private final class LoopServer {
    let loop: EventLoop
    let service: HTTPService
    var listener: Listener?
    var port: UInt16 = 0

    init(root: String, uploads: String) throws {
        loop = try EventLoop()
        service = HTTPService(root: root, uploads: (uploads, UploadLimits()))
        let service = self.service
        let loop = self.loop
        listener = try Listener(loop: loop, address: .ipv4("127.0.0.1", port: 0), onAccept: { socket in
            if let connection = try? Connection(loop: loop, fd: socket.fd) { service.serve(connection) }
        }, onError: { _ in })
        port = listener?.address.port ?? 0
    }

    func run(timeout: Duration = .seconds(20), until condition: @escaping () -> Bool) -> Bool {
        runLoop(loop, timeout: timeout, until: condition)
    }

    func close() {
        listener?.close()
        _ = loop.close()
    }
}

extension UploadTests {
    @Suite(.timeLimit(.minutes(5)))
    struct Shell {
        let logger = Logger(label: "test", minimumLevel: .critical)

        @Test func uploadsAFileThroughTheHTTPService() throws {
            let scratch = TemporaryDirectory()
            defer { scratch.remove() }
            mkdir(scratch.file("root"), 0o755)
            mkdir(scratch.file("up"), 0o755)
            mkdir(scratch.file("up/dir"), 0o755)
            let bytes = content(3_000_000, seed: 3)
            scratch.write("local.bin", bytes: bytes)
            let server = try LoopServer(root: scratch.file("root"), uploads: scratch.file("up"))
            defer { server.close() }
            let url = try URLParts(parsing: "http://127.0.0.1:\(server.port)/dir/f.bin")
            let curl = try #require(CurlMulti(loop: server.loop, logger: logger))
            defer { curl.close() }
            let upload = Upload(file: scratch.file("local.bin"), url: url, recordPath: scratch.file("record"), curl: curl, loop: server.loop, logger: logger)
            #expect(upload.direction == .upload && upload.output == scratch.file("local.bin"))
            upload.start()
            #expect(server.run { upload.state != .running })
            #expect(upload.state == .done)
            #expect(upload.bytesDone == bytes.count && upload.total == bytes.count)
            #expect(scratch.readBytes("up/dir/f.bin") == bytes)
            #expect(scratch.readBytes("record") == nil, "the record is removed when done")
        }

        @Test func resumesWhereTheServerStands() throws {
            let scratch = TemporaryDirectory()
            defer { scratch.remove() }
            mkdir(scratch.file("root"), 0o755)
            mkdir(scratch.file("up"), 0o755)
            let bytes = content(500_000, seed: 5)
            scratch.write("local.bin", bytes: bytes)
            let server = try LoopServer(root: scratch.file("root"), uploads: scratch.file("up"))
            defer { server.close() }
            // The state a run cut after 123,457 bytes leaves: the server's resource with those bytes, and the
            // client's record of it.
            let store = try #require(server.service.store)
            let created = try store.create(target: "/f.bin", length: bytes.count, now: Int64(WallClock.now()))
            let resource = created.resource
            try created.part.write(all: Array(bytes.prefix(123_457)))
            let url = try URLParts(parsing: "http://127.0.0.1:\(server.port)/f.bin")
            let resourceURL = try url.resolving(ResumableUploadServer.resourcePrefix + resource.id)
            let file = try #require(Upload.identity(of: scratch.file("local.bin"), as: nil))
            scratch.write("record", bytes: Array(UploadRecord(url: url, resource: resourceURL, file: file).encoded().utf8))

            let curl = try #require(CurlMulti(loop: server.loop, logger: logger))
            defer { curl.close() }
            let upload = Upload(file: scratch.file("local.bin"), url: url, recordPath: scratch.file("record"), curl: curl, loop: server.loop, logger: logger)
            #expect(upload.bytesDone == 0)
            upload.start()
            #expect(server.run { upload.state != .running })
            #expect(upload.state == .done)
            #expect(scratch.readBytes("up/f.bin") == bytes)
            // The same resource was completed (no new one was made).
            #expect(store.load(resource.id)?.isComplete == true)
            #expect(store.list().resources.count == 1)
        }

        @Test func aFileThatCannotBeReadFails() throws {
            let scratch = TemporaryDirectory()
            defer { scratch.remove() }
            let loop = try EventLoop()
            defer { _ = loop.close() }
            let curl = try #require(CurlMulti(loop: loop, logger: logger))
            defer { curl.close() }
            let upload = Upload(file: scratch.file("missing"), url: try URLParts(parsing: "http://127.0.0.1:9/f"), recordPath: scratch.file("r"),
                                curl: curl, loop: loop, logger: logger)
            var changes = 0
            upload.onChange = { _ in changes += 1 }
            upload.start()
            #expect(upload.state == .failed("the file cannot be read"))
            #expect(changes == 2)
        }
    }
}
