// The resumable downloader's pure core: the response head parser and body framing (every split, 1xx heads,
// limits, errors), the chunked decoder (every split, overflow, limits), URLs (parsing, IPv6 text, RFC 3986's
// resolution examples), the record file (round trips, garbage), and the state machine driven through every
// resume rule by a fake shell against a fake server, both in memory.

@testable import NetLifeServices
import Testing

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The suites below, under one name (`swift test --filter DownloadTests`).
@Suite(.timeLimit(.minutes(5)))
struct DownloadTests {}

// MARK: - Response heads (libcurl reads them off the wire; these are the rules applied to their fields)

extension DownloadTests {
    @Suite(.timeLimit(.minutes(5)))
    struct ResponseHeads {
        @Test func framesTheBodyAsRFC9112Says() {
            func framing(_ status: Int, _ fields: [(String, String)], method: String = "GET", minor: Int = 1) -> Result<HTTPBodyFraming, HTTPResponseError> {
                let head = HTTPResponseHead(status: status, minorVersion: minor, headers: fields.map { HTTPHeader(name: $0.0, value: $0.1) })
                return Result { () throws(HTTPResponseError) in try head.bodyFraming(requestMethod: method) }
            }
            let cases: [(Result<HTTPBodyFraming, HTTPResponseError>, HTTPBodyFraming?)] = [
                (framing(200, [("content-length", "5")]), .length(5)),
                (framing(200, [("content-length", "5")], method: "HEAD"), HTTPBodyFraming.none),
                (framing(204, []), HTTPBodyFraming.none),
                (framing(304, [("content-length", "5")]), HTTPBodyFraming.none),
                (framing(200, [("transfer-encoding", "chunked")]), .chunked),
                (framing(200, [("transfer-encoding", "Chunked"), ("content-length", "5")]), .chunked),
                (framing(200, [("transfer-encoding", "gzip, chunked")]), nil),
                (framing(200, [("transfer-encoding", "gzip")]), nil),
                (framing(200, [("transfer-encoding", "chunked")], minor: 0), nil),
                (framing(200, [("content-length", "5, 5"), ("content-length", "5")]), .length(5)),
                (framing(200, [("content-length", "5, 6")]), nil),
                (framing(200, [("content-length", "-1")]), nil),
                (framing(200, [("content-length", "99999999999999999999")]), nil),
                (framing(200, []), .untilClose),
                (framing(206, [("content-range", "bytes 0-1/2")]), .untilClose),
            ]
            for (index, (result, expected)) in cases.enumerated() {
                switch result {
                case .success(let framing): #expect(framing == expected, "case \(index)")
                case .failure(let error): #expect(expected == nil, "case \(index): \(error)")
                }
            }
        }

        @Test func readsContentRange() {
            let cases: [(String, ContentRange?)] = [
                ("bytes 0-499/1234", ContentRange(first: 0, last: 499, total: 1234)),
                ("BYTES 5-5/6", ContentRange(first: 5, last: 5, total: 6)),
                ("bytes 100-199/*", ContentRange(first: 100, last: 199, total: nil)),
                ("bytes */1234", nil),
                ("bytes 5-4/10", nil),
                ("bytes 5-10/10", nil),
                ("bytes=0-1/2", nil),
                ("bytes 0-1", nil),
                ("bytes -1-2/3", nil),
                ("bytes 0-99999999999999999999/*", nil),
                // Found by writing the fuzz target: a last of Int.max made `count` and `last + 1` overflow.
                ("bytes 0-9223372036854775807/*", nil),
                ("bytes 100-9223372036854775807/*", nil),
                ("bytes 0-9223372036854775806/*", ContentRange(first: 0, last: 9223372036854775806, total: nil)),
                ("items 0-1/2", nil),
                ("bytes 0 - 1/2", nil),
            ]
            for (text, expected) in cases {
                #expect(ContentRange(parsing: text) == expected, "\(text)")
            }
            #expect(ContentRange(first: 10, last: 19, total: nil).count == 10)
        }
    }
}

// MARK: - URLs (libcurl's URL API; what the transfers rely on)

private func url(_ text: String) throws -> URLParts { try URLParts(parsing: text) }

private func urlError(_ text: String) -> String? {
    do {
        _ = try URLParts(parsing: text)
        return nil
    } catch {
        return error.message
    }
}

extension DownloadTests {
    @Suite(.timeLimit(.minutes(5)))
    struct URLs {
        @Test func normalizesAsCurlDoes() throws {
            let cases: [(String, String, URLParts.Scheme, String, Int, String)] = [
                ("http://example.org", "http://example.org/", .http, "example.org", 80, "/"),
                ("HTTP://Example.ORG:8080/a/b?x=1#frag", "http://example.org:8080/a/b?x=1", .http, "example.org", 8080, "/a/b"),
                ("https://192.0.2.1/f", "https://192.0.2.1/f", .https, "192.0.2.1", 443, "/f"),
                ("http://[2001:DB8::1]:81/x", "http://[2001:db8::1]:81/x", .http, "[2001:db8::1]", 81, "/x"),
                ("ftp://ftp.example.org/pub/f.tar", "ftp://ftp.example.org/pub/f.tar", .ftp, "ftp.example.org", 21, "/pub/f.tar"),
                ("ftps://h/f", "ftps://h/f", .ftps, "h", 990, "/f"),
                ("http://h/a/./b/../c/", "http://h/a/c/", .http, "h", 80, "/a/c/"),
            ]
            for (text, written, scheme, host, port, path) in cases {
                let parts = try url(text)
                #expect(parts.description == written && parts.text == written, "\(text): \(parts.description)")
                #expect(parts.scheme == scheme && parts.host == host && parts.port == port && parts.path == path, "\(text): \(parts.host) \(parts.port) \(parts.path)")
                #expect(try url(parts.description) == parts, "\(text) written out parses to itself")
            }
        }

        @Test func refusesWhatIsNoTransferURL() throws {
            for text in ["", "example.org/f", "gopher://h/", "file:///etc/passwd", "http://", "http://h:99999/", "http://h/a b",
                         "http://h/\u{7}", "http://h/" + String(repeating: "a", count: URLParts.maxLength)] {
                #expect(urlError(text) != nil, "\(text.prefix(40))")
            }
            #expect(urlError("gopher://h/")?.contains("unsupported scheme") == true)
            // Found by fuzz-download: libcurl keeps raw non-ASCII bytes; they must come percent-encoded.
            #expect(urlError("http://example.org/files/\u{9E}e.iso")?.contains("not ASCII") == true)
            #expect(try url("http://example.org/files/%C3%A9.iso").path == "/files/%C3%A9.iso")
            // Found by fuzz-download too: libcurl decodes a percent-encoded host and writes the byte out raw.
            #expect(urlError("http://example.org%8080/f.iso")?.contains("host that is not ASCII") == true)
            #expect(urlError("http://caf%C3%A9.example/f.iso")?.contains("host that is not ASCII") == true)
            #expect(urlError("http://u@h%e/")?.contains("host that is not ASCII") == true, "a lone % would be encoded again each time")
            #expect((try? url("http://a/b").resolving("//h%80/f")) == nil, "a reference's host is checked the same way")
            #expect(try url("http://ex%61mple.org/f").host == "example.org", "a host decoded to ASCII is the name it spells")
        }

        @Test func hidesThePasswordButKeepsItForTheRequest() throws {
            let parts = try url("https://ann:secret@h.example/f")
            #expect(parts.user == "ann" && parts.hasPassword)
            #expect(parts.text == "https://ann:secret@h.example/f")
            #expect(parts.description == "https://ann:***@h.example/f")
            #expect(!parts.description.contains("secret"))
            #expect(parts.withoutCredentials.text == "https://h.example/f")
        }

        /// Credentials go with a redirect on the same server only.
        @Test func aRedirectToAnotherServerCarriesNoCredentials() throws {
            let base = try url("https://ann:secret@a.example/dir/f")
            #expect(try base.resolving("g").text == "https://ann:secret@a.example/dir/g")
            #expect(try base.resolving("/g").text == "https://ann:secret@a.example/g")
            #expect(try base.resolving("//b.example/g").hasCredentials == false)
            #expect(try base.resolving("https://b.example/g").hasCredentials == false)
            #expect(try base.resolving("http://a.example/g").hasCredentials == false)
        }

        /// RFC 3986 section 5.4's examples, with libcurl's normalizations: an empty path is `/`.
        @Test func resolvesReferencesAsRFC3986Does() throws {
            let base = try url("http://a/b/c/d;p?q")
            let cases: [(String, String)] = [
                ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"), ("/g", "http://a/g"),
                ("//g", "http://g/"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"),
                ("g#s", "http://a/b/c/g"), ("g?y#s", "http://a/b/c/g?y"), (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"),
                (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"),
                ("../", "http://a/b/"), ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../", "http://a/"),
                ("../../g", "http://a/g"), ("/./g", "http://a/g"),
                ("/../g", "http://a/g"), ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."),
                ("..g", "http://a/b/c/..g"), ("./../g", "http://a/b/g"), ("g/./h", "http://a/b/c/g/h"),
                ("g/../h", "http://a/b/c/h"), ("g;x=1/./y", "http://a/b/c/g;x=1/y"), ("g;x=1/../y", "http://a/b/c/y"),
                ("http://other:8080/x?y", "http://other:8080/x?y"), ("https://a/", "https://a/"),
            ]
            for (reference, expected) in cases {
                #expect(try base.resolving(reference).description == expected, "\(reference)")
            }
            #expect(throws: URLPartsError.self) { try base.resolving("g:h") }
            #expect(throws: URLPartsError.self) { try base.resolving("a b") }
        }
    }
}

// MARK: - Records

private let someURL = try! URLParts(parsing: "http://example.org:8080/files/big%20one.iso?v=1")

extension DownloadTests {
    @Suite(.timeLimit(.minutes(5)))
    struct Records {
        @Test func roundTrips() throws {
            let records = [
                DownloadRecord(url: someURL),
                DownloadRecord(url: someURL, validator: .etag("\"1a2b-400\""), total: 1024, offset: 512, digest: .sha256(Array(0..<32))),
                DownloadRecord(url: someURL, validator: .etag("\"back\\slash\""), total: nil, offset: 7, digest: .md5(Array(100..<116))),
                DownloadRecord(url: someURL, validator: .lastModified("Sun, 06 Nov 1994 08:49:37 GMT"), total: 0, offset: 0),
                DownloadRecord(url: try URLParts(parsing: "http://[::1]/"), total: Int.max, offset: Int.max),
            ]
            for record in records {
                let text = record.encoded()
                #expect(DownloadRecord.decode(text) == record, "\(text)")
                #expect(text.hasPrefix("netlife-download 1\n") && text.hasSuffix("\n"))
            }
            #expect(records[1].encoded() == """
                netlife-download 1
                url=http://example.org:8080/files/big%20one.iso?v=1
                etag="1a2b-400"
                total=1024
                offset=512
                sha-256=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f

                """)
            #expect(records[2].encoded().contains("etag=\"back\\\\slash\"\n"))
        }

        @Test func decodesGarbageToNil() {
            let good = DownloadRecord(url: someURL, validator: .etag("\"e\""), total: 10, offset: 5).encoded()
            #expect(DownloadRecord.decode(good) != nil)
            let head = "netlife-download 1\nurl=http://h/\n"
            let cases = [
                "", "\n", "netlife-download 2\nurl=http://h/\noffset=0\n", "netlife-download 1", head, "netlife-download 1\noffset=0\n",
                good.replacingFirst("offset=5", with: "offset=-5"), good.replacingFirst("offset=5", with: "offset=11"),
                good.replacingFirst("offset=5", with: "offset=5x"), good.replacingFirst("offset=5", with: "offset="),
                good.replacingFirst("total=10", with: "total=99999999999999999999"), good + "offset=5\n", good + "colour=blue\n",
                good + "no equals sign\n", good.replacingFirst("url=http://", with: "url=gopher://"),
                good.replacingFirst("url=http://example.org:8080", with: "url=http://example.org:0"),
                good.replacingFirst("etag=\"e\"", with: "etag=W/\"e\""), good.replacingFirst("etag=\"e\"", with: "etag=e"),
                good.replacingFirst("etag=\"e\"", with: "etag=\"e\\q\""), good.replacingFirst("etag=\"e\"", with: "etag=\"e\\"),
                good + "last-modified=Sun, 06 Nov 1994 08:49:37 GMT\n", head + "offset=0\nlast-modified=yesterday\n",
                head + "offset=0\nsha-256=00\n", head + "offset=0\nmd5=" + String(repeating: "0", count: 31) + "\n",
                head + "offset=0\nmd5=" + String(repeating: "g", count: 32) + "\n",
                head + "offset=0\nsha-256=" + String(repeating: "0", count: 64) + "\nmd5=" + String(repeating: "0", count: 32) + "\n",
                good.replacingFirst("\n", with: "\r\n"), good + "\n\n", "\u{0}\u{1}\u{2}",
                head + "offset=0\n" + String(repeating: "#", count: DownloadRecord.maxEncodedBytes),
            ]
            for text in cases {
                #expect(DownloadRecord.decode(text) == nil, "\(text.prefix(200).debugDescription)")
            }
        }

        @Test func survivesRandomMutations() {
            // Deterministic pseudo-random edits of a good record: decode never traps, and what it accepts
            // encodes back to text that decodes to the same record.
            let good = Array(DownloadRecord(url: someURL, validator: .etag("\"a\\b\""), total: 1000, offset: 999,
                                            digest: .md5(Array(0..<16))).encoded().utf8)
            var state: UInt64 = 0x9E37_79B9_7F4A_7C15
            func next() -> Int {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return Int(truncatingIfNeeded: state >> 33)
            }
            var accepted = 0
            for _ in 0..<3000 {
                var text = good
                for _ in 0..<(1 + next() % 3) {
                    let position = next() % text.count
                    switch next() % 3 {
                    case 0: text[position] = UInt8(truncatingIfNeeded: next())
                    case 1: text.remove(at: position)
                    default: text.insert(Array("=\\\n0\"".utf8)[next() % 5], at: position)
                    }
                }
                if let record = DownloadRecord.decode(String(decoding: text, as: UTF8.self)) {
                    accepted += 1
                    #expect(DownloadRecord.decode(record.encoded()) == record)
                }
            }
            #expect(accepted > 0 && accepted < 3000)
        }
    }
}

private extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        replacing(target, with: replacement, maxReplacements: 1)
    }
}

// MARK: - The state machine, against a fake server through a fake shell

private typealias Action = ResumableDownload.Action

/// Deterministic bytes: different seeds give different contents.
private func content(_ count: Int, seed: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 / 251 &+ seed) }
}

/// A stand-in for SHA-256 and MD5 (the shell computes real ones): a different content gives different bytes.
private func fakeDigest(_ data: [UInt8], _ algorithm: DigestAlgorithm) -> ContentDigest {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in data { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    let bytes = (0..<(algorithm == .sha256 ? 32 : 16)).map { UInt8(truncatingIfNeeded: (hash &* UInt64($0 * 2 + 1)) >> 29) }
    return algorithm == .sha256 ? .sha256(bytes) : .md5(bytes)
}

private func base64(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var text: [UInt8] = []
    for start in stride(from: 0, to: bytes.count, by: 3) {
        let group = Array(bytes[start..<min(start + 3, bytes.count)])
        let value = group.enumerated().reduce(0) { $0 | Int($1.element) << (16 - 8 * $1.offset) }
        for index in 0..<4 {
            text.append(index <= group.count ? alphabet[(value >> (18 - 6 * index)) & 63] : UInt8(ascii: "="))
        }
    }
    return String(decoding: text, as: UTF8.self)
}

/// A server with one representation, answering as the http service and nginx do, with switches for the
/// servers the rules defend against.
private struct FakeServer {
    enum Framing { case length, chunked, close }

    var content: [UInt8]
    var etag: String? = "\"v1\""
    var lastModified: String?
    var date: String?
    var acceptRanges = true
    var honorsRanges = true
    var honorsIfRange = true
    /// A 206 carries at most this many bytes.
    var rangeCap: Int?
    var framing = Framing.length
    var informational = false
    var extraFields: [String] = []
    /// Request targets answered with a 302 to the Location given.
    var redirects: [String: String] = [:]
    /// An answer to every request, instead of the representation.
    var fixedStatus: String?
    private(set) var requests: [HTTPClientRequest] = []

    init(content: [UInt8]) { self.content = content }

    /// The final head and the body as libcurl hands them over (1xx heads and framing are libcurl's).
    mutating func respond(to request: HTTPClientRequest) -> (head: HTTPResponseHead, body: [UInt8]) {
        requests.append(request)
        if let location = redirects[request.url.path + (request.url.query.map { "?" + $0 } ?? "")] {
            return (head("302 Found", ["Location: \(location)", "Content-Length: 0"]), [])
        }
        if let fixedStatus { return (head(fixedStatus, ["Content-Length: 3"]), bytes("err")) }
        var fields = extraFields
        if let etag { fields.append("ETag: \(etag)") }
        if let lastModified { fields.append("Last-Modified: \(lastModified)") }
        if let date { fields.append("Date: \(date)") }
        if acceptRanges { fields.append("Accept-Ranges: bytes") }
        var status = "200 OK"
        var body = content[...]
        if honorsRanges, let range = request.value(of: "range"), range.hasPrefix("bytes="), range.hasSuffix("-"),
           let from = Int(range.dropFirst(6).dropLast()) {
            let ifRange = request.value(of: "if-range")
            if ifRange == nil || !honorsIfRange || ifRange == etag || (etag == nil && ifRange == lastModified) {
                if from >= content.count {
                    status = "416 Range Not Satisfiable"
                    fields.append("Content-Range: bytes */\(content.count)")
                    body = []
                } else {
                    let end = min(content.count, from + (rangeCap ?? content.count))
                    status = "206 Partial Content"
                    fields.append("Content-Range: bytes \(from)-\(end - 1)/\(content.count)")
                    body = content[from..<end]
                }
            }
        }
        if request.method == "HEAD" {
            fields.append("Content-Length: \(body.count)")
            body = []
        } else {
            switch framing {
            case .length: fields.append("Content-Length: \(body.count)")
            case .chunked: fields.append("Transfer-Encoding: chunked")
            case .close: break
            }
        }
        return (head(status, fields), Array(body))
    }

    /// A head from a status (`206 Partial Content`) and `Name: value` fields.
    private func head(_ status: String, _ fields: [String]) -> HTTPResponseHead {
        let code = status.split(separator: " ", maxSplits: 1)
        return HTTPResponseHead(status: Int(code[0]) ?? 0, reason: code.count > 1 ? String(code[1]) : "", headers: fields.map { field in
            let parts = field.split(separator: ":", maxSplits: 1)
            return HTTPHeader(name: HTTPSyntax.lowercased(String(parts[0])), value: String(parts[1].drop { $0 == " " }))
        })
    }
}

/// Performs actions as the real shell will, on files and a connection kept in memory, and checks the
/// machine's promises on the way: one connection at a time, no cut past the part's end, no record that
/// vouches for more bytes than the part holds, every record readable back.
private struct FakeShell {
    var part: [UInt8] = []
    var recordFile: String?
    var output: [UInt8]?
    var performed: [Action] = []
    /// Body bytes are written in pieces of this size.
    var pieceSize = 7
    /// Once the part holds this many bytes, the app pauses the download (and the next run does not).
    var pauseAt: Int?
    /// Once the part holds this many bytes, the daemon dies: nothing more happens.
    var crashAt: Int?
    private var response: [UInt8]?
    private var crashed = false

    /// The download a restarted daemon makes from the files.
    func reopened(_ url: URLParts, recordInterval: Int = ResumableDownload.defaultRecordInterval) -> ResumableDownload {
        ResumableDownload(url: url, existing: recordFile.flatMap(DownloadRecord.decode), partSize: part.count, recordInterval: recordInterval)
    }

    /// Performs `actions` and everything they lead to (after a crash, as the restarted daemon).
    mutating func run(_ actions: [Action], _ download: inout ResumableDownload, _ server: inout FakeServer) {
        if crashed {
            crashed = false
            response = nil
        }
        var queue = actions
        while !queue.isEmpty && !crashed {
            queue += perform(queue.removeFirst(), &download, &server)
        }
    }

    private mutating func perform(_ action: Action, _ download: inout ResumableDownload, _ server: inout FakeServer) -> [Action] {
        performed.append(action)
        switch action {
        case .sendRequest(let request):
            #expect(response == nil, "a request while a connection is open")
            let (head, body) = server.respond(to: request)
            response = body
            return download.responseHead(head)
        case .appendBody(let framing):
            let input = response ?? []
            var body: [UInt8]
            var complete = true
            switch framing {
            case .none: body = []
            case .length(let count):
                body = Array(input.prefix(count))
                complete = body.count == count
            case .chunked, .untilClose: body = input
            }
            var offset = 0
            while offset < body.count {
                var count = min(pieceSize, body.count - offset)
                if let limit = crashAt ?? pauseAt { count = min(count, max(0, limit - part.count)) }
                if count > 0 {
                    part += body[offset..<(offset + count)]
                    offset += count
                    let events = download.bodyBytes(count)
                    events.forEach { _ = perform($0, &download, &server) }
                    if events.contains(.closeConnection) { return [] }
                }
                if let crashAt, part.count >= crashAt {
                    crashed = true
                    return []
                }
                if let pauseAt, part.count >= pauseAt {
                    self.pauseAt = nil
                    return download.pause("background task expired")
                }
            }
            return complete ? download.bodyEnded() : download.connectionFailed("connection reset")
        case .closeConnection:
            response = nil
        case .truncatePart(let size):
            #expect(size <= part.count, "a cut to \(size) of a part of \(part.count) bytes")
            part = Array(part.prefix(size))
        case .writeRecord(let record):
            #expect(record.offset <= part.count, "a record of \(record.offset) bytes for a part of \(part.count)")
            #expect(DownloadRecord.decode(record.encoded()) == record)
            recordFile = record.encoded()
        case .computeDigest(let algorithm):
            return download.digestComputed(fakeDigest(part, algorithm))
        case .renameIntoPlace:
            output = part
            part = []
            return download.renamed()
        case .removeRecord:
            recordFile = nil
        case .report:
            break
        }
        return []
    }

    /// The record on disk.
    var record: DownloadRecord? { recordFile.flatMap(DownloadRecord.decode) }
}

private let fileURL = try! URLParts(parsing: "http://example.org/files/a.iso")

/// The fields every request carries.
private func baseHeaders() -> [HTTPHeader] {
    [HTTPHeader(name: "Accept-Encoding", value: "identity")]
}

private func get(_ url: URLParts = fileURL, from offset: Int? = nil, ifRange: String = "\"v1\"") -> Action {
    var headers = baseHeaders()
    if let offset {
        headers += [HTTPHeader(name: "Range", value: "bytes=\(offset)-"), HTTPHeader(name: "If-Range", value: ifRange)]
    }
    return .sendRequest(HTTPClientRequest(method: "GET", url: url, headers: headers))
}

private func response(_ status: Int, _ fields: [(String, String)]) -> HTTPResponseHead {
    HTTPResponseHead(status: status, headers: fields.map { HTTPHeader(name: HTTPSyntax.lowercased($0.0), value: $0.1) })
}

/// A download paused at `offset` of `total` bytes of the representation tagged `"v1"`, started again.
private func resumedAt(_ offset: Int, total: Int? = 1000, validator: DownloadValidator = .etag("\"v1\"")) -> (ResumableDownload, [Action]) {
    let record = DownloadRecord(url: fileURL, validator: validator, total: total, offset: offset)
    var download = ResumableDownload(url: fileURL, existing: record, partSize: offset)
    let actions = download.start()
    return (download, actions)
}

extension DownloadTests {
    @Suite(.timeLimit(.minutes(5)))
    struct Machine {
        @Test func aFreshDownloadIsDoneAndRenamedIntoPlace() {
            let data = content(1000)
            for framing in [FakeServer.Framing.length, .chunked, .close] {
                var server = FakeServer(content: data)
                server.framing = framing
                server.informational = framing == .chunked
                var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
                var shell = FakeShell()
                shell.run(download.start(), &download, &server)
                #expect(shell.output == data && shell.recordFile == nil && download.state == .done, "\(framing)")
                #expect(download.bytesDone == 1000 && download.total == 1000)
                let bodyFraming: HTTPBodyFraming = framing == .length ? .length(1000) : framing == .chunked ? .chunked : .untilClose
                let firstRecord = DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: framing == .length ? 1000 : nil)
                #expect(shell.performed == [
                    .report(.running), get(), .truncatePart(to: 0), .writeRecord(firstRecord), .appendBody(bodyFraming),
                    .closeConnection, .renameIntoPlace, .removeRecord, .report(.done),
                ], "\(framing)")
            }
            // libcurl adds Host and User-Agent; identity keeps ranges counting the representation's bytes.
            guard case .sendRequest(let request) = get() else { return }
            #expect(request.method == "GET" && request.headers == [HTTPHeader(name: "Accept-Encoding", value: "identity")])
        }

        @Test func pausedDownloadsResumeWithRangeAndIfRange() {
            let data = content(1000)
            var server = FakeServer(content: data)
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0, recordInterval: 100)
            var shell = FakeShell()
            shell.pauseAt = 350
            shell.run(download.start(), &download, &server)
            #expect(download.state == .paused("background task expired") && download.bytesDone == 350)
            #expect(shell.part == Array(data.prefix(350)))
            #expect(shell.record == DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 1000, offset: 350))
            // Records every 100 bytes appended, and one at the pause.
            let offsets = shell.performed.compactMap { action -> Int? in
                if case .writeRecord(let record) = action { return record.offset }
                return nil
            }
            #expect(offsets == [0, 105, 210, 315, 350])
            #expect(shell.performed.suffix(3) == [.closeConnection, .writeRecord(shell.record!), .report(.paused("background task expired"))])

            // The next foreground: a new value from the files, as after a daemon restart.
            download = shell.reopened(fileURL)
            #expect(download.state == .idle && download.bytesDone == 350 && download.total == 1000)
            shell.performed = []
            shell.run(download.start(), &download, &server)
            #expect(server.requests.last?.value(of: "Range") == "bytes=350-")
            #expect(server.requests.last?.value(of: "If-Range") == "\"v1\"")
            #expect(shell.performed.prefix(3) == [.report(.running), get(from: 350), .appendBody(.length(650))])
            #expect(shell.output == data && download.state == .done && shell.recordFile == nil)
        }

        @Test func withoutAnETagTheLastModifiedDateIsTheValidator() {
            let data = content(800)
            var server = FakeServer(content: data)
            server.etag = nil
            server.lastModified = "Sun, 29 Nov 2026 10:00:00 GMT"
            server.date = "Mon, 30 Nov 2026 10:00:00 GMT"
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            var shell = FakeShell()
            shell.pauseAt = 500
            shell.run(download.start(), &download, &server)
            #expect(shell.record?.validator == .lastModified("Sun, 29 Nov 2026 10:00:00 GMT"))
            download = shell.reopened(fileURL)
            shell.run(download.start(), &download, &server)
            #expect(server.requests.last?.value(of: "Range") == "bytes=500-")
            #expect(server.requests.last?.value(of: "If-Range") == "Sun, 29 Nov 2026 10:00:00 GMT")
            #expect(shell.output == data && download.state == .done)
        }

        /// What the server says that makes a resume impossible: each restarts from 0 with no Range.
        @Test func withoutAStrongValidatorOrRangesTheDownloadStartsOver() {
            let cases: [(String, (inout FakeServer) -> Void)] = [
                ("weak ETag", { $0.etag = "W/\"v1\"" }),
                ("weak ETag and Last-Modified", { $0.etag = "W/\"v1\""; $0.lastModified = "Sun, 29 Nov 2026 10:00:00 GMT" }),
                ("malformed ETag", { $0.etag = "v1" }),
                ("two ETags", { $0.extraFields = ["ETag: \"v0\""] }),
                ("no validator", { $0.etag = nil }),
                ("Last-Modified in the Date's second", {
                    $0.etag = nil
                    $0.lastModified = "Sun, 29 Nov 2026 10:00:00 GMT"
                    $0.date = "Sun, 29 Nov 2026 10:00:00 GMT"
                }),
                ("invalid Last-Modified", { $0.etag = nil; $0.lastModified = "yesterday" }),
                ("no Accept-Ranges", { $0.acceptRanges = false }),
                ("Accept-Ranges: none", { $0.acceptRanges = false; $0.extraFields = ["Accept-Ranges: none"] }),
            ]
            let data = content(600)
            for (name, configure) in cases {
                var server = FakeServer(content: data)
                configure(&server)
                var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
                var shell = FakeShell()
                shell.pauseAt = 200
                shell.run(download.start(), &download, &server)
                #expect(shell.record?.validator == nil && shell.record?.offset == 200, "\(name)")
                download = shell.reopened(fileURL)
                shell.performed = []
                shell.run(download.start(), &download, &server)
                #expect(server.requests.count == 2 && server.requests[1].value(of: "Range") == nil, "\(name)")
                #expect(server.requests[1].value(of: "If-Range") == nil, "\(name)")
                #expect(shell.performed.prefix(3) == [.report(.running), .truncatePart(to: 0), get()], "\(name)")
                #expect(shell.output == data && download.state == .done, "\(name)")
            }
        }

        @Test func aChangedEntityStartsOverWithoutCorruption() {
            let first = content(1000, seed: 1)
            let second = content(900, seed: 2)
            for honorsIfRange in [true, false] {
                var server = FakeServer(content: first)
                var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
                var shell = FakeShell()
                shell.pauseAt = 400
                shell.run(download.start(), &download, &server)
                // The file changes on the server between the two halves.
                server.content = second
                server.etag = "\"v2\""
                server.honorsIfRange = honorsIfRange
                download = shell.reopened(fileURL)
                shell.performed = []
                shell.run(download.start(), &download, &server)
                #expect(shell.output == second && download.state == .done, "honorsIfRange \(honorsIfRange)")
                #expect(server.requests[1].value(of: "If-Range") == "\"v1\"")
                let newRecord = DownloadRecord(url: fileURL, validator: .etag("\"v2\""), total: 900)
                if honorsIfRange {
                    // 200: the part is cut before the first byte of the new entity is appended.
                    #expect(shell.performed.prefix(5) == [.report(.running), get(from: 400), .truncatePart(to: 0),
                                                          .writeRecord(newRecord), .appendBody(.length(900))])
                } else {
                    // A server that ignores If-Range answers 206 with the new ETag: rejected.
                    #expect(shell.performed.prefix(7) == [.report(.running), get(from: 400), .closeConnection, .truncatePart(to: 0), get(),
                                                          .truncatePart(to: 0), .writeRecord(newRecord)])
                    #expect(server.requests.count == 3)
                }
            }
        }

        @Test func a206AppendsOnlyAtTheOffsetAndTotalRecorded() {
            let restart: [Action] = [.closeConnection, .truncatePart(to: 0), get()]
            let cases: [(String, [(String, String)], DownloadValidator)] = [
                ("wrong offset", [("Content-Range", "bytes 50-999/1000")], .etag("\"v1\"")),
                ("later offset", [("Content-Range", "bytes 101-999/1000")], .etag("\"v1\"")),
                ("other total", [("Content-Range", "bytes 100-1099/1100")], .etag("\"v1\"")),
                ("past the total", [("Content-Range", "bytes 100-1000/*")], .etag("\"v1\"")),
                ("no Content-Range", [("Content-Type", "multipart/byteranges; boundary=x")], .etag("\"v1\"")),
                ("unsatisfied form", [("Content-Range", "bytes */1000")], .etag("\"v1\"")),
                ("length disagrees", [("Content-Range", "bytes 100-999/1000"), ("Content-Length", "800")], .etag("\"v1\"")),
                ("other ETag", [("Content-Range", "bytes 100-999/1000"), ("ETag", "\"v2\"")], .etag("\"v1\"")),
                ("other date", [("Content-Range", "bytes 100-999/1000"), ("Last-Modified", "Mon, 30 Nov 2026 10:00:00 GMT")],
                 .lastModified("Sun, 29 Nov 2026 10:00:00 GMT")),
            ]
            for (name, fields, validator) in cases {
                var (download, _) = resumedAt(100, validator: validator)
                #expect(download.responseHead(response(206, fields)) == restart, "\(name)")
                #expect(download.bytesDone == 0 && download.total == nil && download.state == .running, "\(name)")
            }
            // At the offset, with the same total and validator: appended.
            var (download, actions) = resumedAt(100)
            #expect(actions == [.report(.running), get(from: 100)])
            let good = response(206, [("Content-Range", "bytes 100-999/1000"), ("Content-Length", "900"), ("ETag", "\"v1\"")])
            #expect(download.responseHead(good) == [.appendBody(.length(900))])
            // A record without a total learns it from the 206.
            (download, _) = resumedAt(100, total: nil)
            let learned = DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 1000, offset: 100)
            #expect(download.responseHead(response(206, [("Content-Range", "bytes 100-999/1000")])) == [.writeRecord(learned), .appendBody(.untilClose)])
            // A total of `*` does not contradict the record.
            (download, _) = resumedAt(100)
            #expect(download.responseHead(response(206, [("Content-Range", "bytes 100-199/*")])) == [.appendBody(.untilClose)])
        }

        @Test func a200OnResumeCutsThePartFirst() {
            let data = content(700)
            var server = FakeServer(content: data)
            server.honorsRanges = false
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            var shell = FakeShell()
            shell.pauseAt = 300
            shell.run(download.start(), &download, &server)
            download = shell.reopened(fileURL)
            shell.performed = []
            shell.run(download.start(), &download, &server)
            #expect(server.requests[1].value(of: "Range") == "bytes=300-")
            #expect(shell.performed.prefix(4) == [.report(.running), get(from: 300), .truncatePart(to: 0),
                                                  .writeRecord(DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 700))])
            #expect(shell.output == data && download.state == .done)
        }

        @Test func a416IsRevalidatedWithHEAD() {
            // A chunked first response gives no total: a part paused at the very end asks for more and gets 416.
            let data = content(500)
            var server = FakeServer(content: data)
            server.framing = .chunked
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            var shell = FakeShell()
            shell.pauseAt = 500
            shell.run(download.start(), &download, &server)
            #expect(shell.record == DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: nil, offset: 500))
            download = shell.reopened(fileURL)
            shell.run(download.start(), &download, &server)
            #expect(server.requests.map(\.method) == ["GET", "GET", "HEAD"])
            #expect(server.requests[2].value(of: "Range") == nil && server.requests[2].value(of: "If-Range") == nil)
            #expect(shell.output == data && download.state == .done)

            // The HEAD decides, as values.
            let head = HTTPClientRequest(method: "HEAD", url: fileURL, headers: baseHeaders())
            let complete: [Action] = [.closeConnection, .renameIntoPlace]
            let restart: [Action] = [.closeConnection, .truncatePart(to: 0), get()]
            let heads: [(HTTPResponseHead, [Action])] = [
                (response(200, [("ETag", "\"v1\""), ("Content-Length", "500")]), complete),
                (response(200, [("ETag", "\"v2\""), ("Content-Length", "500")]), restart),
                (response(200, [("ETag", "\"v1\""), ("Content-Length", "501")]), restart),
                (response(200, [("ETag", "\"v1\"")]), restart),
                (response(200, [("Content-Length", "500")]), restart),
                (response(405, [("Content-Length", "500"), ("ETag", "\"v1\"")]), restart),
                // A HEAD's Repr-Digest describes the whole representation: it is checked.
                (response(200, [("ETag", "\"v1\""), ("Content-Length", "500"), ("Repr-Digest", "sha-256=:\(base64(Array(0..<32))):")]),
                 [.closeConnection, .writeRecord(DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 500, offset: 500,
                                                                digest: .sha256(Array(0..<32)))), .computeDigest(.sha256)]),
            ]
            for (index, (answer, expected)) in heads.enumerated() {
                var (download, _) = resumedAt(500, total: nil)
                #expect(download.responseHead(response(416, [("Content-Range", "bytes */500")])) == [.closeConnection, .sendRequest(head)])
                #expect(download.responseHead(answer) == expected, "case \(index)")
            }
        }

        @Test func a416WhoseHEADContradictsTheRecordedTotalRestartsFromZero() {
            // 300,000 of 1,000,000 bytes on disk; the server says 416, then a HEAD with the same ETag and a
            // length of 300,000: the answers contradict the record, and the short part must not become done.
            var (download, _) = resumedAt(300_000, total: 1_000_000)
            let head = HTTPClientRequest(method: "HEAD", url: fileURL, headers: baseHeaders())
            #expect(download.responseHead(response(416, [("Content-Range", "bytes */300000")])) == [.closeConnection, .sendRequest(head)])
            let lying = response(200, [("ETag", "\"v1\""), ("Content-Length", "300000")])
            #expect(download.responseHead(lying) == [.closeConnection, .truncatePart(to: 0), get()])
            #expect(download.state == .running && download.bytesDone == 0 && download.total == nil)
            // Through the fake shell: the server now holds 300,000 bytes under the same tag; the restart fetches
            // them whole and only that file, of its own length, goes into place.
            let data = content(300_000)
            var server = FakeServer(content: data)
            var shell = FakeShell()
            shell.part = content(300_000, seed: 9)
            shell.recordFile = DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 1_000_000, offset: 300_000).encoded()
            shell.pieceSize = 65536
            download = shell.reopened(fileURL)
            shell.run(download.start(), &download, &server)
            #expect(server.requests.map(\.method) == ["GET", "HEAD", "GET"])
            #expect(shell.output == data && download.state == .done)
        }

        @Test func anEmptyBodyIsAFinishedFile() {
            var server = FakeServer(content: [])
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            var shell = FakeShell()
            shell.run(download.start(), &download, &server)
            #expect(shell.performed.contains(.appendBody(.length(0))))
            #expect(shell.output == [] && download.state == .done && download.total == 0)
            #expect(shell.recordFile == nil)
        }

        @Test func redirectsAreFollowedFiveTimesToHTTPAndHTTPSOnly() {
            let data = content(300)
            var server = FakeServer(content: data)
            server.redirects = ["/files/a.iso": "../b/c", "/b/c": "/d?x=1", "/d?x=1": "//mirror.example.org:8080/e",
                                "/e": "http://mirror.example.org:8080/f", "/f": "g"]
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            var shell = FakeShell()
            shell.pauseAt = 100
            shell.run(download.start(), &download, &server)
            #expect(server.requests.map(\.url.description) == [
                "http://example.org/files/a.iso", "http://example.org/b/c", "http://example.org/d?x=1",
                "http://mirror.example.org:8080/e", "http://mirror.example.org:8080/f", "http://mirror.example.org:8080/g",
            ])
            #expect(download.currentURL.description == "http://mirror.example.org:8080/g")
            // The record keeps the URL asked for; a resume follows the redirects again, with its Range.
            #expect(shell.record?.url == fileURL && shell.record?.offset == 100)
            download = shell.reopened(fileURL)
            shell.run(download.start(), &download, &server)
            #expect(server.requests.count == 12 && server.requests.suffix(6).allSatisfy { $0.value(of: "Range") == "bytes=100-" })
            #expect(shell.output == data && download.state == .done)

            // A sixth redirect is one too many.
            server.redirects["/g"] = "/h"
            download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            shell = FakeShell()
            shell.run(download.start(), &download, &server)
            #expect(download.state == .failed("more than 5 redirects") && shell.output == nil)
            #expect(shell.performed.suffix(2) == [.closeConnection, .report(.failed("more than 5 redirects"))])

            let failures: [([(String, String)], String)] = [
                ([("Location", "gopher://example.org/x")], "redirect to an invalid Location: unsupported scheme \"gopher\" (http, https, ftp and ftps)"),
                ([("Location", "ftp://example.org/x")], "redirect to ftp://example.org/x, which is not an HTTP URL"),
                ([("Location", "/a b")], "redirect to an invalid Location: a space or a control character in \"/a b\""),
                ([], "server answered 301 without a Location"),
            ]
            for (fields, reason) in failures {
                var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
                _ = download.start()
                #expect(download.responseHead(response(301, fields)) == [.closeConnection, .report(.failed(reason))])
                #expect(download.state == .failed(reason))
            }
        }

        @Test func clientAndServerErrorsFailAndKeepThePart() {
            let cases: [(String, String)] = [
                ("404 Not Found", "server answered 404 Not Found"),
                ("403 Forbidden", "server answered 403 Forbidden"),
                ("503 Service Unavailable", "server answered 503 Service Unavailable"),
                ("204 No Content", "unexpected status 204 No Content"),
                ("304 Not Modified", "unexpected status 304 Not Modified"),
            ]
            for (status, reason) in cases {
                var server = FakeServer(content: content(10))
                server.fixedStatus = status
                let record = DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 1000, offset: 100)
                var download = ResumableDownload(url: fileURL, existing: record, partSize: 100)
                var shell = FakeShell()
                shell.part = content(100)
                shell.recordFile = record.encoded()
                shell.run(download.start(), &download, &server)
                #expect(download.state == .failed(reason), "\(status)")
                #expect(shell.performed == [.report(.running), get(from: 100), .closeConnection, .report(.failed(reason))])
                #expect(shell.part == content(100) && shell.record == record)
                // A failed download can be started again.
                server.fixedStatus = nil
                server.content = content(1000)
                shell.run(download.start(), &download, &server)
                #expect(download.state == .done && shell.output == content(1000), "\(status)")
            }
            // Answers a broken server gives.
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            _ = download.start()
            #expect(download.responseHead(response(206, [("Content-Range", "bytes 0-9/10")])) == [.closeConnection, .report(.failed("server answered 206 to a request without Range"))])
            download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            _ = download.start()
            #expect(download.responseHead(response(416, [])) == [.closeConnection, .report(.failed("server answered 416"))])
        }

        @Test func digestsAreVerifiedBeforeTheRename() {
            let data = content(640)
            let right = fakeDigest(data, .sha256).bytes
            let wrong = fakeDigest(content(640, seed: 9), .sha256).bytes
            let rightMD5 = fakeDigest(data, .md5).bytes
            let cases: [(String, [String], DigestAlgorithm?, Bool)] = [
                ("sha-256", ["Repr-Digest: sha-256=:\(base64(right)):"], .sha256, true),
                ("sha-256 among others", ["Repr-Digest: sha-512=:AAAA:, sha-256=:\(base64(right)):;p=1"], .sha256, true),
                ("wrong sha-256", ["Repr-Digest: sha-256=:\(base64(wrong)):"], .sha256, false),
                ("md5", ["Content-MD5: \(base64(rightMD5))"], .md5, true),
                ("sha-256 over md5", ["Content-MD5: \(base64(fakeDigest([], .md5).bytes))", "Repr-Digest: sha-256=:\(base64(right)):"], .sha256, true),
                ("unknown algorithm", ["Repr-Digest: sha-512=:\(base64(right)):"], nil, true),
                ("malformed sha-256", ["Repr-Digest: sha-256=\(base64(right))"], nil, true),
                ("short sha-256", ["Repr-Digest: sha-256=:\(base64(rightMD5)):"], nil, true),
                ("bad base64", ["Content-MD5: !!!"], nil, true),
            ]
            for (name, fields, algorithm, matches) in cases {
                var server = FakeServer(content: data)
                server.extraFields = fields
                var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
                var shell = FakeShell()
                shell.run(download.start(), &download, &server)
                let computed = shell.performed.first { if case .computeDigest = $0 { return true } else { return false } }
                #expect(computed == algorithm.map { Action.computeDigest($0) }, "\(name)")
                if matches {
                    #expect(download.state == .done && shell.output == data, "\(name)")
                } else {
                    let reason = "the file's sha-256 digest does not match the server's"
                    #expect(download.state == .failed(reason) && shell.output == nil, "\(name)")
                    #expect(shell.performed.suffix(3) == [.truncatePart(to: 0), .writeRecord(DownloadRecord(url: fileURL)), .report(.failed(reason))])
                    #expect(shell.part.isEmpty)
                }
            }
        }

        @Test func theFirstResponsesDigestIsCarriedAcrossAResume() {
            let data = content(900)
            let right = "Repr-Digest: sha-256=:\(base64(fakeDigest(data, .sha256).bytes)):"
            let other = "Repr-Digest: sha-256=:\(base64(fakeDigest(content(5), .sha256).bytes)):"
            // The 206s carry a digest that does not match: only the 200's counts.
            var server = FakeServer(content: data)
            server.extraFields = [right]
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            var shell = FakeShell()
            shell.pauseAt = 450
            shell.run(download.start(), &download, &server)
            #expect(shell.record?.digest == fakeDigest(data, .sha256))
            server.extraFields = [other]
            download = shell.reopened(fileURL)
            shell.run(download.start(), &download, &server)
            #expect(download.state == .done && shell.output == data)
            // Without a digest in the record, a 206's digest is not used either.
            server.extraFields = []
            download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            shell = FakeShell()
            shell.pauseAt = 450
            shell.run(download.start(), &download, &server)
            server.extraFields = [other]
            download = shell.reopened(fileURL)
            shell.run(download.start(), &download, &server)
            #expect(!shell.performed.contains(.computeDigest(.sha256)))
            #expect(download.state == .done && shell.output == data)
        }

        @Test func aKilledDaemonResumesFromWhatTheRecordVouchesFor() throws {
            let data = content(1000)
            var server = FakeServer(content: data)
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0, recordInterval: 100)
            var shell = FakeShell()
            shell.crashAt = 250
            shell.run(download.start(), &download, &server)
            // The last record was written at 210; the 40 bytes after it are not vouched for.
            #expect(shell.part.count == 250 && shell.record?.offset == 210)
            download = shell.reopened(fileURL, recordInterval: 100)
            #expect(download.bytesDone == 210)
            shell.crashAt = nil
            shell.performed = []
            shell.run(download.start(), &download, &server)
            #expect(shell.performed.prefix(3) == [.report(.running), .truncatePart(to: 210), get(from: 210)])
            #expect(shell.output == data && download.state == .done)

            // A part shorter than its record lost bytes: its prefix is good.
            let record = DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 1000, offset: 500)
            download = ResumableDownload(url: fileURL, existing: record, partSize: 300)
            #expect(download.bytesDone == 300)
            #expect(download.start() == [.report(.running), get(from: 300)])
            // A record of another URL is not this download's: the part is cut and fetched again.
            let other = DownloadRecord(url: try URLParts(parsing: "http://example.org/other"), validator: .etag("\"v1\""), offset: 300)
            download = ResumableDownload(url: fileURL, existing: other, partSize: 300)
            #expect(download.bytesDone == 0)
            #expect(download.start() == [.report(.running), .truncatePart(to: 0), get()])
        }

        @Test func aCompletePartIsVerifiedAndRenamedWithoutARequest() {
            let record = DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 1000, offset: 1000)
            var download = ResumableDownload(url: fileURL, existing: record, partSize: 1000)
            #expect(download.start() == [.report(.running), .renameIntoPlace])
            // A pause during a digest resumes at the digest.
            var withDigest = record
            withDigest.digest = .md5(Array(repeating: 1, count: 16))
            download = ResumableDownload(url: fileURL, existing: withDigest, partSize: 1200)
            #expect(download.start() == [.report(.running), .truncatePart(to: 1000), .writeRecord(withDigest), .computeDigest(.md5)])
            #expect(download.connectionFailed("late") == [])
            #expect(download.pause("suspended") == [.writeRecord(withDigest), .report(.paused("suspended"))])
            #expect(download.start() == [.report(.running), .writeRecord(withDigest), .computeDigest(.md5)])
            #expect(download.digestComputed(.md5(Array(repeating: 1, count: 16))) == [.renameIntoPlace])
            // A rename that fails pauses (the shell's file error); the record still vouches for the whole
            // part, so the next start renames it without a request.
            #expect(download.pause("rename: Permission denied") == [.writeRecord(withDigest), .report(.paused("rename: Permission denied"))])
            #expect(download.state == .paused("rename: Permission denied"))
            #expect(download.start() == [.report(.running), .writeRecord(withDigest), .computeDigest(.md5)])
        }

        @Test func rangesThatStopShortAreFollowedByTheRest() {
            let data = content(1000)
            var server = FakeServer(content: data)
            server.rangeCap = 300
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            var shell = FakeShell()
            shell.pauseAt = 100
            shell.run(download.start(), &download, &server)
            download = shell.reopened(fileURL)
            shell.run(download.start(), &download, &server)
            #expect(server.requests.compactMap { $0.value(of: "Range") } == ["bytes=100-", "bytes=400-", "bytes=700-"])
            #expect(shell.output == data && download.state == .done)
        }

        @Test func brokenConnectionsPause() {
            var (download, _) = resumedAt(100)
            let record = DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 1000, offset: 100)
            #expect(download.connectionFailed("connection refused") == [.closeConnection, .writeRecord(record), .report(.paused("connection refused"))])
            #expect(download.state == .paused("connection refused"))
            // A body that ends before its Content-Range does, read until close.
            _ = download.start()
            #expect(download.responseHead(response(206, [("Content-Range", "bytes 100-999/1000")])) == [.appendBody(.untilClose)])
            #expect(download.bodyBytes(50) == [])
            var partial = record
            partial.offset = 150
            #expect(download.bodyEnded() == [.closeConnection, .writeRecord(partial), .report(.paused("the response ended after 150 of 1000 bytes"))])
            // A head with framing the client cannot read.
            _ = download.start()
            let gzip = response(206, [("Content-Range", "bytes 150-999/1000"), ("Transfer-Encoding", "gzip")])
            #expect(download.responseHead(gzip) == [.closeConnection, .writeRecord(partial),
                                                    .report(.paused("bad response: unsupported Transfer-Encoding \"gzip\""))])
        }

        @Test func moreBytesThanAnnouncedAreCutOff() {
            var (download, _) = resumedAt(100)
            _ = download.responseHead(response(206, [("Content-Range", "bytes 100-199/1000")]))
            #expect(download.bodyBytes(60) == [])
            let record = DownloadRecord(url: fileURL, validator: .etag("\"v1\""), total: 1000, offset: 200)
            #expect(download.bodyBytes(60) == [.closeConnection, .truncatePart(to: 200), .writeRecord(record),
                                               .report(.failed("server sent more than the 200 bytes it announced"))])
            #expect(download.bytesDone == 200)
        }

        @Test func eventsOutOfPlaceChangeNothing() throws {
            var download = ResumableDownload(url: fileURL, existing: nil, partSize: 0)
            #expect(download.pause("x") == [] && download.bodyBytes(5) == [] && download.bodyEnded() == [])
            #expect(download.connectionFailed("x") == [] && download.responseHead(response(200, [])) == [])
            #expect(download.digestComputed(.md5([])) == [])
            #expect(download.state == .idle && download.bytesDone == 0)
            _ = download.start()
            #expect(download.start() == [] && download.bodyBytes(5) == [] && download.bodyEnded() == [])
            _ = download.responseHead(response(200, [("Content-Length", "0")]))
            #expect(download.responseHead(response(200, [])) == [])
            #expect(download.bodyEnded() == [.closeConnection, .renameIntoPlace])
            #expect(download.state == .running, "done only once the shell has renamed the part")
            #expect(download.renamed() == [.removeRecord, .report(.done)])
            #expect(download.renamed() == [] && download.start() == [] && download.pause("x") == [] && download.state == .done)
            // An ftp URL parses, but is not fetched yet.
            download = ResumableDownload(url: try URLParts(parsing: "ftp://h/f"), existing: nil, partSize: 0)
            #expect(download.start() == [.report(.running), .report(.failed("ftp is not an HTTP URL"))])
        }
    }
}

@Suite(.timeLimit(.minutes(5))) struct DigestTests {
    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    @Test func sha256MatchesTheStandardsVectors() {
        let vectors: [(String, String)] = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        ]
        for (text, expected) in vectors {
            var digest = SHA256Digest()
            digest.update(Array(text.utf8))
            #expect(hex(digest.finish()) == expected, "\(text)")
        }
        // A million 'a', fed in uneven pieces.
        var digest = SHA256Digest()
        var left = 1_000_000
        var piece = 1
        while left > 0 {
            let count = min(left, piece)
            digest.update([UInt8](repeating: 0x61, count: count))
            left -= count
            piece = piece * 3 % 1000 + 1
        }
        #expect(hex(digest.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func md5MatchesRFC1321sVectors() {
        let vectors: [(String, String)] = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a"),
        ]
        for (text, expected) in vectors {
            var digest = MD5Digest()
            digest.update(Array(text.utf8))
            #expect(hex(digest.finish()) == expected, "\(text)")
        }
    }
}
