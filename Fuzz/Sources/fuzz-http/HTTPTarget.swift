// Fuzz target: the http service's pure core. The input is what an HTTP client sends on one connection: the
// request head parser reads it whole and in pieces (sizes from a hash of the input), skipping Content-Length
// bodies as the shell does, and must find the same heads, consume the same bytes and fail the same way. Every
// head it returns holds lowercased names and values without line ends, and written out parses to the same
// head. Each head's Range (and the raw input as a Range value) is resolved against lengths from the hash:
// every range lies inside the file. Each head is answered for a file from the hash: the status,
// Content-Length, Content-Range and body range agree. Each head also goes to the resumable-upload core, as a
// creation and as a request to a resource in a state from the hash: an append happens only at the resource's
// offset and within its length and the size limit, a 409 carries the resource's offset, every answer has a
// known status. The raw input is parsed as a Structured Field Item and as both upload records: what parses
// writes out and parses back the same.

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var random = SplitMix(hashing: input)

    let (heads, error) = parseWhole(input)
    let (pieceHeads, pieceError) = parseInPieces(input, random: &random)
    guard pieceHeads.map(\.head) == heads.map(\.head), pieceHeads.map(\.consumed) == heads.map(\.consumed),
          pieceError == error else {
        fatalError("fed in pieces: \(pieceHeads) \(String(describing: pieceError)); fed whole: \(heads) \(String(describing: error))")
    }
    for (head, _) in heads {
        checkHead(head)
        if let range = head.value(of: "range") { checkRanges(range, random: &random) }
        checkResponse(head, random: &random)
        checkUpload(head, random: &random)
    }
    let text = String(decoding: input.prefix(4096), as: UTF8.self)
    checkItem(text)
    checkRecords(text)
    checkRanges(text, random: &random)
    checkRanges("bytes=" + text, random: &random)
    checkDate(text)
    _ = HTTPRanges.ifRangeMatches(text, etag: "\"1-2-3.4\"", lastModified: Int64(bitPattern: random.next()))
    _ = HTTPRanges.entityTagListMatches(text, etag: "\"1-2-3.4\"", weak: random.next() % 2 == 0)
    return 0
}

// MARK: The parser

private typealias Parsed = (head: HTTPRequestHead, consumed: Int)

/// Every head in the input, each parsed from where the last one ended, in one call each.
private func parseWhole(_ input: [UInt8]) -> ([Parsed], HTTPParseError?) {
    var parser = HTTPRequestParser()
    var heads: [Parsed] = []
    var start = 0
    while true {
        do {
            guard let parsed = try parser.parse(input[start...]) else { return (heads, nil) }
            guard parsed.consumed > 0, parsed.consumed <= input.count - start else {
                fatalError("consumed \(parsed.consumed) of \(input.count - start) bytes")
            }
            heads.append(parsed)
            start += parsed.consumed
            // The shell skips a body of known length; a chunked one ends the stream here.
            guard let next = afterBody(parsed.head, start: start, count: input.count) else { return (heads, nil) }
            start = next
        } catch {
            // An error sticks until reset.
            do {
                _ = try parser.parse(input[start...])
                fatalError("the parser read on after \(error)")
            } catch let again {
                guard again == error else { fatalError("the parser failed with \(error), then with \(again)") }
            }
            guard [400, 414, 431, 501, 505].contains(error.status) else { fatalError("error status \(error.status)") }
            return (heads, error)
        }
    }
}

/// The same, as reads would bring the bytes: the input seen so far grows by pieces, and each call gets the
/// unread part of it (the same bytes as the last call plus more, or what follows a head).
private func parseInPieces(_ input: [UInt8], random: inout SplitMix) -> ([Parsed], HTTPParseError?) {
    var parser = HTTPRequestParser()
    var heads: [Parsed] = []
    var start = 0
    var end = 0
    let longest = random.next() % 2 == 0 ? 8 : 1024
    while true {
        do {
            if let parsed = try parser.parse(input[start..<end]) {
                heads.append(parsed)
                start += parsed.consumed
                guard let next = afterBody(parsed.head, start: start, count: input.count) else { return (heads, nil) }
                start = next
                end = max(end, start)
                continue
            }
        } catch {
            return (heads, error)
        }
        if end == input.count { return (heads, nil) }
        end = min(input.count, end + 1 + Int(random.next() % UInt64(longest)))
    }
}

/// Where the next request starts after a head that ends at `start`: past its Content-Length body (or at the
/// end of the input); nil after a chunked body, which the shell refuses (411).
private func afterBody(_ head: HTTPRequestHead, start: Int, count: Int) -> Int? {
    let length: Int
    do {
        length = try head.bodyLength()
    } catch {
        guard error.status == 411, head.isChunked else { fatalError("\(head): bodyLength threw \(error)") }
        return nil
    }
    guard !head.isChunked, length == head.contentLength ?? 0, length >= 0 else { fatalError("\(head): body length \(length)") }
    return start + min(length, count - start)
}

private func checkHead(_ head: HTTPRequestHead) {
    func fail(_ what: String) -> Never { fatalError("\(head): \(what)") }
    if head.minorVersion != 0 && head.minorVersion != 1 { fail("minor version") }
    if head.method.isEmpty || head.target.isEmpty { fail("an empty method or target") }
    if head.method.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) || head.target.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
        fail("whitespace or a control character in the request line")
    }
    if head.headers.count > HTTPRequestParser.maxHeaders { fail("too many fields") }
    for header in head.headers {
        if header.name.isEmpty || header.name.utf8.contains(where: { ($0 >= 0x41 && $0 <= 0x5A) || $0 <= 0x20 || $0 >= 0x7F || $0 == 0x3A }) {
            fail("the name \(header.name.debugDescription)")
        }
        if header.value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 || $0 == 0x7F }) {
            fail("a line end or control character in \(header.value.debugDescription)")
        }
        if let first = header.value.utf8.first, first == 0x20 || first == 0x09 { fail("untrimmed value") }
        if let last = header.value.utf8.last, last == 0x20 || last == 0x09 { fail("untrimmed value") }
    }
    if let length = head.contentLength, length < 0 || !head.values(of: "transfer-encoding").isEmpty {
        fail("content length \(length) with \(head.values(of: "transfer-encoding"))")
    }
    if head.minorVersion == 1 && head.values(of: "host").count != 1 { fail("an HTTP/1.1 head without one Host") }
    _ = head.keepAlive
    _ = head.isChunked
    if let path = head.path {
        if !path.hasPrefix("/") || path.utf8.contains(0) { fail("path \(path.debugDescription)") }
        if path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) { fail("path \(path.debugDescription) escapes") }
    }

    // Written out again, the head parses to the same head (when it still fits: replacement characters of
    // bytes that were not UTF-8 take three bytes each).
    var text = "\(head.method) \(head.target) HTTP/1.\(head.minorVersion)\r\n"
    for header in head.headers { text += "\(header.name): \(header.value)\r\n" }
    text += "\r\n"
    let bytes = Array(text.utf8)
    guard bytes.count <= HTTPRequestParser.maxHeadBytes else { return }
    var parser = HTTPRequestParser()
    do {
        guard let again = try parser.parse(bytes), again.head == head, again.consumed == bytes.count else {
            fail("written out as \(text.debugDescription), it parses differently")
        }
    } catch {
        fail("written out as \(text.debugDescription), it fails: \(error)")
    }
}

// MARK: Ranges

private func checkRanges(_ header: String, random: inout SplitMix) {
    let lengths = [0, 1, Int(random.next() % 2000), Int(random.next() % UInt64(Int.max))]
    for length in lengths {
        let maxRanges = random.next() % 2 == 0 ? Int.max : Int(random.next() % 4)
        switch HTTPRanges.parse(header, length: length, maxRanges: maxRanges) {
        case .whole, .unsatisfiable:
            break
        case .ranges(let ranges):
            guard !ranges.isEmpty, ranges.count <= maxRanges else { fatalError("\(ranges.count) ranges, at most \(maxRanges)") }
            var total = 0
            for range in ranges {
                guard range.first >= 0, range.first <= range.last, range.last < length else {
                    fatalError("\(header.debugDescription) of \(length) gave \(range)")
                }
                total += range.count
            }
            guard total <= length else { fatalError("\(header.debugDescription) of \(length) asks \(total) bytes") }
            checkCoalesced(ranges)
        }
    }
}

private func checkCoalesced(_ ranges: [ByteRange]) {
    let merged = HTTPRanges.coalesce(ranges)
    for (a, b) in zip(merged, merged.dropFirst()) where b.first <= a.last + 1 {
        fatalError("\(ranges) coalesced into \(merged): \(a) and \(b) touch")
    }
    // Every byte asked is in exactly one merged range, and every merged range starts and ends at a byte asked.
    for range in ranges {
        guard merged.contains(where: { $0.first <= range.first && range.last <= $0.last }) else {
            fatalError("\(ranges) coalesced into \(merged) loses \(range)")
        }
    }
    for range in merged {
        guard ranges.contains(where: { $0.first == range.first }), ranges.contains(where: { $0.last == range.last }) else {
            fatalError("\(ranges) coalesced into \(merged) adds bytes")
        }
    }
}

// MARK: The responder

private func checkResponse(_ head: HTTPRequestHead, random: inout SplitMix) {
    let sizes = [0, 1, 1000, Int(random.next() % 100_000), Int(random.next() % UInt64(Int.max))]
    let file = FileInfo(size: sizes[Int(random.next() % UInt64(sizes.count))],
                        modifiedSeconds: Int64(random.next() % 4_000_000_000) - 100_000_000,
                        modifiedNanoseconds: Int(random.next() % 1_000_000_000), inode: random.next())
    let now = Int64(random.next() % 4_000_000_000)
    let maxRanges = Int(random.next() % 4)
    let response = HTTPFileResponder.respond(to: head, file: file, contentType: "text/plain", maxRanges: maxRanges, now: now)
    func fail(_ what: String) -> Never { fatalError("\(head) of \(file), max \(maxRanges): \(response): \(what)") }
    let isGet = head.method == "GET", isHead = head.method == "HEAD"

    guard response.value(of: "Date") == HTTPRanges.httpDate(now) else { fail("Date") }
    switch response.status {
    case 200:
        guard isGet || isHead else { fail("200 to \(head.method)") }
        guard response.value(of: "Content-Length") == String(file.size) else { fail("Content-Length") }
        let expected = isGet && file.size > 0 ? ByteRange(first: 0, last: file.size - 1) : nil
        guard response.body == expected else { fail("the body of a 200") }
        guard response.value(of: "Content-Range") == nil else { fail("Content-Range in a 200") }
    case 206:
        guard isGet, maxRanges > 0, head.value(of: "range") != nil, let body = response.body else { fail("a 206") }
        guard body.first >= 0, body.first <= body.last, body.last < file.size else { fail("a body outside the file") }
        guard response.value(of: "Content-Length") == String(body.count) else { fail("Content-Length") }
        guard response.value(of: "Content-Range") == "bytes \(body.first)-\(body.last)/\(file.size)" else { fail("Content-Range") }
    case 416:
        guard isGet, head.value(of: "range") != nil, response.body == nil else { fail("a 416") }
        guard response.value(of: "Content-Range") == "bytes */\(file.size)", response.value(of: "Content-Length") == "0" else {
            fail("the fields of a 416")
        }
    case 304, 412:
        guard isGet || isHead, response.body == nil else { fail("a \(response.status)") }
    case 405:
        guard !isGet && !isHead, response.body == nil else { fail("a 405") }
    default:
        fail("status")
    }
    if isHead && response.body != nil { fail("a body for HEAD") }

    let text = HTTPFileResponder.serialize(response, keepAlive: random.next() % 2 == 0, minorVersion: head.minorVersion)
    let lines = text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false)
    // Status line, fields, perhaps Connection, the empty line, and nothing after its LF.
    guard text.hasSuffix("\r\n\r\n"), lines.count - 2 >= response.headers.count + 1, lines.count - 2 <= response.headers.count + 2,
          lines.dropLast().allSatisfy({ $0.last == 0x0D && !$0.dropLast().contains(0x0D) }) else {
        fail("serialized as \(text.debugDescription)")
    }
    if let modified = response.value(of: "Last-Modified"), HTTPRanges.parseHTTPDate(modified) != min(file.modifiedSeconds, now) {
        fail("Last-Modified \(modified)")
    }
}

private func checkDate(_ text: String) {
    guard let seconds = HTTPRanges.parseHTTPDate(text) else { return }
    // A parsed date within the years 1 to 9999 (a leap second at the very end is past it) formats back to a
    // date that parses to the same time.
    guard seconds <= 253_402_300_799 else { return }
    guard HTTPRanges.parseHTTPDate(HTTPRanges.httpDate(seconds)) == seconds else {
        fatalError("\(text.debugDescription) is \(seconds), which formats as \(HTTPRanges.httpDate(seconds))")
    }
}

// MARK: Uploads

private func checkUpload(_ head: HTTPRequestHead, random: inout SplitMix) {
    let limits = UploadLimits(maxSize: [0, 1000, 1 << 30, Int.max][Int(random.next() % 4)], maxUploads: 1 + Int(random.next() % 3),
                              expirySeconds: Int64(random.next() % 100_000))
    let server = ResumableUploadServer(limits: limits)
    let now = Int64(random.next() % 4_000_000_000)
    let bodies = [0, 1, 1000, Int(random.next() % 100_000), Int.max, head.contentLength ?? 0]
    let bodyLength = bodies[Int(random.next() % UInt64(bodies.count))]
    func fail(_ what: String) -> Never { fatalError("\(head), body \(bodyLength), \(limits): \(what)") }
    func checkResponse(_ response: UploadResponse) {
        guard [201, 204, 400, 403, 404, 405, 409, 413, 415, 503].contains(response.status) else { fail("status \(response.status)") }
        guard response.value(of: "Date") == HTTPRanges.httpDate(now) else { fail("Date") }
        if head.method == "HEAD" && !response.body.isEmpty { fail("a body for HEAD") }
        if let length = response.value(of: "Content-Length"), head.method != "HEAD", length != String(response.body.count) { fail("Content-Length") }
    }

    switch server.route(head) {
    case .creation(let target):
        guard head.path == target, head.method == "POST" || head.method == "PUT" else { fail("routed to creation") }
        switch server.creation(head, target: target, bodyLength: bodyLength, roomForAnother: random.next() % 2 == 0, now: now) {
        case .create(let created, let length, let body, let completes):
            guard created == target, ResumableUploadServer.isTargetPath(target), body == bodyLength else { fail("created \(created)") }
            guard max(length ?? 0, body) <= limits.maxSize else { fail("past max-size") }
            if completes && length != body { fail("?1 with length \(String(describing: length))") }
            if let length, body > length { fail("content past the length") }
        case .respond(let response):
            checkResponse(response)
            if (200...299).contains(response.status) { fail("a success without a resource") }
        case .append, .cancel:
            fail("a creation that appends or cancels")
        }
    case .resource(let id):
        if let id, !ResumableUploadServer.isResourceID(id) { fail("id \(id)") }
        let offsets = [0, 1, 999, 1000, Int(random.next() % 2000), 999_999_999_999_999]
        let offset = offsets[Int(random.next() % UInt64(offsets.count))]
        let length: Int? = random.next() % 3 == 0 ? nil : max(offset, Int(random.next() % 3000))
        let resource = random.next() % 5 == 0 ? nil : UploadResource(id: id ?? "", target: "/f", offset: offset, length: length,
                                                                     isComplete: random.next() % 4 == 0, lastActivity: now - 5)
        switch server.resourceRequest(head, resource: resource, bodyLength: bodyLength, now: now) {
        case .append(let body, let completes, let newLength):
            guard let resource, head.method == "PATCH", !resource.isComplete, body == bodyLength else { fail("an append") }
            guard UploadFields.integer(head.value(of: "upload-offset")) == resource.offset else { fail("an append at another offset") }
            let (end, overflow) = resource.offset.addingReportingOverflow(body)
            guard !overflow, end <= limits.maxSize else { fail("an append past max-size") }
            if let known = newLength ?? resource.length, end > known { fail("an append past the length") }
            if completes, let known = newLength ?? resource.length, end != known { fail("a completion short of the length") }
            if let newLength, let old = resource.length, newLength != old { fail("a length changed") }
        case .respond(let response):
            checkResponse(response)
            if response.status == 409 && response.value(of: "Upload-Offset") != resource.map({ String($0.offset) }) { fail("a 409's offset") }
            if resource == nil && response.status != 404 { fail("\(response.status) for no resource") }
        case .cancel(let response):
            guard head.method == "DELETE", resource != nil, response.status == 204 else { fail("a cancel") }
        case .create:
            fail("a resource request that creates")
        }
    case .options:
        guard head.method == "OPTIONS" else { fail("routed to options") }
    case .files:
        break
    }
}

private func checkItem(_ text: String) {
    switch StructuredFieldItem(parsing: text) {
    case .integer(let value)?:
        guard abs(value) <= 999_999_999_999_999, StructuredFieldItem(parsing: String(value)) == .integer(value) else {
            fatalError("\(text.debugDescription) is the integer \(value)")
        }
    case .boolean(let flag)?:
        guard StructuredFieldItem(parsing: flag ? "?1" : "?0") == .boolean(flag) else { fatalError("\(text.debugDescription) is \(flag)") }
    case .other?, nil:
        break
    }
}

private func checkRecords(_ text: String) {
    if let record = UploadResourceRecord.decode(text), UploadResourceRecord.decode(record.encoded()) != record {
        fatalError("\(text.debugDescription) is \(record), which does not round-trip")
    }
    if let record = UploadRecord.decode(text), UploadRecord.decode(record.encoded()) != record {
        fatalError("\(text.debugDescription) is \(record), which does not round-trip")
    }
}
