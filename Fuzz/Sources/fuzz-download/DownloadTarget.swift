// Fuzz target: what the resumable downloader makes of a server's answers. libcurl reads the bytes off the
// wire (HTTP/1.1 and HTTP/2 heads, chunked bodies) and hands over a status and header fields; the input here
// is read as such an answer, a URL and a record, the way a hostile server and a damaged disk would give them:
// its first line as a URL (written out, it parses to an equal URL; resolving itself gives itself), the second
// as a status, the lines up to an empty one as `name: value` fields (as libcurl hands them: names lowercased,
// values trimmed), the lines after it as references to resolve (each Location too). The head's framing and
// Content-Range must make sense; the head drives a ResumableDownload (with a record and body sizes from a hash
// of the input) whose actions must keep its promises; and the whole input read as a record decodes to a
// record that encodes to itself.

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDownload(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var random = SplitMix(hashing: input)
    let text = String(decoding: input, as: UTF8.self)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { String($0.prefix { $0 != "\r" }) }

    let head = lines.count > 1 ? readHead(lines.dropFirst()) : nil
    if let head {
        checkHead(head)
        checkMachine(head, random: &random)
    }
    for line in lines.prefix(64) { checkContentRange(line) }
    let references = Array(lines.dropFirst().drop { !$0.isEmpty }.prefix(64))
    let url = checkURLs(lines[0], references + (head?.values(of: "location") ?? []))
    checkRecords(text, url: url, head: head, random: &random)
    return 0
}

// MARK: Heads

/// A status line (`206 Partial Content`) and fields up to an empty line, as libcurl hands a head over.
private func readHead(_ lines: ArraySlice<String>) -> HTTPResponseHead? {
    guard let statusLine = lines.first else { return nil }
    let parts = statusLine.split(separator: " ", maxSplits: 1)
    guard let first = parts.first, let status = Int(first), (200...599).contains(status) else { return nil }
    var headers: [HTTPHeader] = []
    for line in lines.dropFirst().prefix(while: { !$0.isEmpty }).prefix(100) {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let name = String(line[..<colon]).lowercased()
        let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
        headers.append(HTTPHeader(name: name, value: String(value)))
    }
    return HTTPResponseHead(status: status, reason: parts.count > 1 ? String(parts[1]) : "", headers: headers)
}

private func checkHead(_ head: HTTPResponseHead) {
    func fail(_ what: String) -> Never { fatalError("\(head): \(what)") }
    if let length = head.contentLength, length < 0 { fail("Content-Length \(length)") }
    for method in ["GET", "HEAD"] {
        let framing: HTTPBodyFraming
        do {
            framing = try head.bodyFraming(requestMethod: method)
        } catch {
            guard method == "GET" else { fail("framing after HEAD: \(error)") }
            continue
        }
        if let length = framing.length, length < 0 { fail("a body of \(length) bytes after \(method)") }
        if method == "HEAD" || head.status == 204 || head.status == 304 {
            guard framing == .none else { fail("\(framing) after \(method)") }
        }
        switch framing {
        case .length(let length):
            guard head.values(of: "transfer-encoding").isEmpty, length == head.contentLength else { fail("\(framing)") }
        case .chunked:
            guard !head.values(of: "transfer-encoding").isEmpty else { fail("chunked without Transfer-Encoding") }
        case .untilClose:
            guard head.values(of: "transfer-encoding").isEmpty, head.values(of: "content-length").isEmpty else {
                fail("\(framing) with a Transfer-Encoding or Content-Length")
            }
        case .none:
            break
        }
    }

    if let range = head.contentRange {
        guard let value = head.value(of: "content-range"), ContentRange(parsing: value) == range else { fail("contentRange") }
        checkContentRange(value)
    }
    for header in head.headers { checkContentRange(header.value) }
}

/// The head as the answer to a download's first request and, when the machine asks again, to the next:
/// whatever it says, the machine never cuts past the part, never vouches for bytes it does not have, and
/// renames only a part of the entity's length.
private func checkMachine(_ head: HTTPResponseHead, random: inout SplitMix) {
    guard let url = try? URLParts(parsing: "http://example.org/f") else { fatalError("the example URL") }
    let partSize = Int(random.next() % 5000)
    let total = random.next() % 2 == 0 ? nil : partSize + Int(random.next() % 5000)
    let record = DownloadRecord(url: url, validator: random.next() % 2 == 0 ? .etag("\"v1\"") : nil, total: total, offset: partSize)
    var download = ResumableDownload(url: url, existing: record, partSize: partSize, recordInterval: 1000)
    var part = partSize
    var queue = download.start()
    var heads = 0
    var steps = 0
    while !queue.isEmpty && steps < 1000 {
        steps += 1
        switch queue.removeFirst() {
        case .sendRequest:
            guard heads < 3 else { queue += download.connectionFailed("enough"); continue }
            heads += 1
            queue += download.responseHead(head)
        case .appendBody:
            let count = Int(random.next() % 3000)
            part += count
            queue += download.bodyBytes(count)
            queue += random.next() % 4 == 0 ? download.connectionFailed("reset") : download.bodyEnded()
        case .truncatePart(let length):
            guard length <= part else { fatalError("a cut to \(length) of a part of \(part) bytes") }
            part = length
        case .writeRecord(let written):
            guard written.offset <= part else { fatalError("a record of \(written.offset) bytes for a part of \(part)") }
        case .computeDigest:
            queue += download.digestComputed(.sha256([]))
        case .renameIntoPlace:
            guard let total = download.total, total == part else { fatalError("a rename of \(part) bytes, total \(String(describing: download.total))") }
            queue += download.renamed()
        case .closeConnection, .removeRecord, .report:
            break
        }
    }
}

/// A Content-Range that parses lies in the representation, counts its bytes and, written out, parses again.
private func checkContentRange(_ text: String) {
    guard let range = ContentRange(parsing: text) else { return }
    func fail(_ what: String) -> Never { fatalError("ContentRange(parsing: \(text.debugDescription)) = \(range): \(what)") }
    guard range.first >= 0, range.first <= range.last else { fail("first and last") }
    if let total = range.total, range.last >= total { fail("last at or past total") }
    // `count` is last - first + 1: it must not overflow for a range the parser accepted.
    guard range.first > 0 || range.last < Int.max else { fail("its count, last - first + 1, does not fit an Int") }
    guard range.count >= 1 else { fail("count \(range.count)") }
    let written = "bytes \(range.first)-\(range.last)/\(range.total.map { String($0) } ?? "*")"
    guard ContentRange(parsing: written) == range else { fail("written as \(written) it parses differently") }
}

// MARK: URLs

/// The first line read as a URL, and the references resolved against it or, when it does not parse, against
/// RFC 3986's example base. Returns the URL when it parsed.
private func checkURLs(_ first: String, _ references: [String]) -> URLParts? {
    let url = try? URLParts(parsing: first)
    if let url { checkURL(url, from: first) }
    guard let base = url ?? (try? URLParts(parsing: "http://a/b/c/d;p?q")) else { fatalError("the example base") }
    for reference in references + (url == nil ? [first] : []) {
        guard let resolved = try? base.resolving(reference) else { continue }
        checkURL(resolved, from: "\(base) resolving \(reference.debugDescription)")
        if resolved.hasCredentials && !resolved.sameServer(as: base) && !reference.contains("@") {
            fatalError("\(base) resolving \(reference.debugDescription) carries credentials to another server")
        }
    }
    return url
}

private func checkURL(_ url: URLParts, from source: String) {
    func fail(_ what: String) -> Never { fatalError("\(source.debugDescription) gave \(url) (\(url.host), \(url.port), \(url.path.debugDescription)): \(what)") }
    guard (1...65535).contains(url.port) else { fail("port") }
    guard url.path.hasPrefix("/") else { fail("a path not starting with /") }
    guard url.text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), url.description.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
        fail("not visible ASCII")
    }
    if url.hasPassword && url.description.contains(":***@") == false { fail("the password shows") }
    do {
        let again = try URLParts(parsing: url.text)
        guard again == url, again.text == url.text else { fail("written as \(url.text) it parses to \(again)") }
        guard try url.resolving(url.text) == url else { fail("resolving itself") }
    } catch {
        fail("written as \(url.text) it fails: \(error)")
    }
}

// MARK: Records

/// The text as a record file: what decodes encodes to text that decodes to an equal record. A record made of
/// the URL and the head's validator, with numbers from the hash, survives the same trip.
private func checkRecords(_ text: String, url: URLParts?, head: HTTPResponseHead?, random: inout SplitMix) {
    if let record = DownloadRecord.decode(text) { checkRecord(record, from: text) }
    guard let url else { return }
    var validator: DownloadValidator?
    if let etag = head?.value(of: "etag"), DownloadRecord.isStrongETag(etag) {
        validator = .etag(etag)
    } else if let date = head?.value(of: "last-modified"), HTTPRanges.parseHTTPDate(date) != nil {
        validator = .lastModified(date)
    }
    let total = random.next() % 4 == 0 ? nil : Int(random.next() % UInt64(Int.max))
    let offset = Int(random.next() % (UInt64(total ?? Int.max - 1) + 1))
    let digest: ContentDigest? = switch random.next() % 3 {
    case 0: .sha256((0..<32).map { _ in UInt8(truncatingIfNeeded: random.next()) })
    case 1: .md5((0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) })
    default: nil
    }
    let record = DownloadRecord(url: url, validator: validator, total: total, offset: offset, digest: digest)
    guard DownloadRecord.decode(record.encoded()) == record else { fatalError("\(record) encoded as \(record.encoded().debugDescription) does not decode") }
}

private func checkRecord(_ record: DownloadRecord, from text: String) {
    func fail(_ what: String) -> Never { fatalError("\(text.debugDescription) decoded to \(record): \(what)") }
    guard record.offset >= 0, record.total.map({ record.offset <= $0 }) ?? true else { fail("offset and total") }
    if case .etag(let tag) = record.validator, !DownloadRecord.isStrongETag(tag) { fail("a weak or malformed tag") }
    let encoded = record.encoded()
    guard encoded.hasPrefix(DownloadRecord.versionLine + "\n"), encoded.hasSuffix("\n") else { fail("encoded as \(encoded.debugDescription)") }
    guard DownloadRecord.decode(encoded) == record else { fail("encoded as \(encoded.debugDescription) it decodes differently") }
}
