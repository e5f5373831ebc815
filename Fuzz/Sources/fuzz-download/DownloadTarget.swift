// Fuzz target: the resumable downloader's parsers of untrusted bytes. The input is what a server sends on one
// connection: the response head parser reads it whole, in pieces (sizes from a hash of the input) and one
// byte at a time, and must find the same head, take the same bytes and fail the same way; an error sticks
// until `reset()`. A head holds a final status, lowercased token names and clean values, and its framing,
// Content-Length and Content-Range make sense. The bytes after the head (the whole input when there is no
// head) go to the chunked decoder, split three ways: the same body, the same bytes taken, the same end or
// error, every step within its input; a body that ends is chunked again and decodes to itself. The input is
// also read as text: its first line as a URL (written out, it parses to an equal URL) and the rest as a
// reference to resolve against it, and the whole as a download record (encoded again, it decodes to an equal
// record). How much work the head parser does is bounded by its unit tests (the counter is internal) and
// here by libFuzzer's timeout.

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDownload(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    // The choices (piece sizes, chunk sizes of a re-encoding, a record's numbers) come from a hash, so that
    // the whole input stays a server's stream and the seeds are plain transcripts.
    var random = SplitMix(hashing: input)

    let outcome = checkHeadParser(input, random: &random)
    var head: HTTPResponseHead?
    var body = input[...]
    if case .head(let found, let consumed) = outcome {
        checkHead(found, consumed: consumed)
        head = found
        body = input[consumed...]
    }
    checkChunked(body, random: &random)

    // As text: the first line, the second line and the rest after the first line end.
    let firstEnd = input.firstIndex(of: ASCII.lf) ?? input.endIndex
    let rest = input[min(input.endIndex, firstEnd + 1)...]
    let lines = [input[..<firstEnd], rest.prefix { $0 != ASCII.lf }, rest].map { String(decoding: $0, as: UTF8.self) }
    checkContentRange(lines[0])
    let url = checkURLs(lines, head: head)
    checkRecords(String(decoding: input, as: UTF8.self), url: url, head: head, random: &random)
    return 0
}

// MARK: The head parser

/// What the head parser made of a stream: the final head and the bytes it took, more needed, or an error.
private enum HeadOutcome: Equatable {
    case head(HTTPResponseHead, consumed: Int)
    case needsMore
    case failed(HTTPResponseError)
}

private func checkHeadParser(_ input: [UInt8], random: inout SplitMix) -> HeadOutcome {
    let whole = parseHead(input) { input.count }
    let longest = random.next() % 2 == 0 ? 8 : 1024
    let pieces = parseHead(input) { 1 + Int(random.next() % UInt64(longest)) }
    let bytewise = parseHead(input) { 1 }
    guard pieces == whole, bytewise == whole else {
        fatalError("the head parser fed whole: \(whole); in pieces: \(pieces); one byte at a time: \(bytewise)")
    }
    switch whole {
    case .needsMore:
        // A parser that still waits holds less than the limit: past it, it fails.
        guard input.count < HTTPResponseParser.maxHeadBytes else {
            fatalError("the head parser still waits after \(input.count) bytes")
        }
    case .head(_, let consumed):
        // After a head the parser starts over: reading on is reading a new stream.
        var parser = HTTPResponseParser()
        _ = try? parser.consume(input)
        let again = outcome { () throws(HTTPResponseError) in try parser.consume(input[consumed...]) }
        let fresh = parseHead(Array(input[consumed...])) { input.count }
        guard again == fresh else { fatalError("after a head the parser read on to \(again), a new one to \(fresh)") }
    case .failed:
        break
    }
    return whole
}

/// The head of `input` fed in pieces of `pieceSize()` bytes, with the consumed count made relative to the
/// start of the input. Checks each call's count and that an error sticks.
private func parseHead(_ input: [UInt8], pieceSize: () -> Int) -> HeadOutcome {
    var parser = HTTPResponseParser()
    var start = 0
    repeat {
        let end = min(input.count, start + pieceSize())
        let piece = input[start..<end]
        do {
            if let (head, consumed) = try parser.consume(piece) {
                guard consumed > 0, consumed <= piece.count else {
                    fatalError("the head parser took \(consumed) of the \(piece.count) bytes it was given")
                }
                return .head(head, consumed: start + consumed)
            }
        } catch {
            checkSticks(&parser, error)
            return .failed(error)
        }
        start = end
    } while start < input.count
    return .needsMore
}

/// After an error, every call throws it again, whatever it is given, until `reset()`; then the parser reads
/// a new response.
private func checkSticks(_ parser: inout HTTPResponseParser, _ error: HTTPResponseError) {
    let good = Array("HTTP/1.1 200 OK\r\n\r\n".utf8)
    for more in [[], [ASCII.lf], good] {
        let again = outcome { () throws(HTTPResponseError) in try parser.consume(more) }
        guard again == .failed(error) else { fatalError("after \(error) the head parser gave \(again)") }
    }
    parser.reset()
    let fresh = outcome { () throws(HTTPResponseError) in try parser.consume(good) }
    guard fresh == .head(HTTPResponseHead(status: 200, reason: "OK"), consumed: good.count) else {
        fatalError("after \(error) and reset() the head parser gave \(fresh)")
    }
}

private func outcome(_ consume: () throws(HTTPResponseError) -> (head: HTTPResponseHead, consumed: Int)?) -> HeadOutcome {
    do {
        guard let (head, consumed) = try consume() else { return .needsMore }
        return .head(head, consumed: consumed)
    } catch {
        return .failed(error)
    }
}

private enum ASCII {
    static let lf = UInt8(ascii: "\n"), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
}

/// A byte a value may hold: a tab, or anything from a space on but DEL.
private func isValueByte(_ byte: UInt8) -> Bool { byte == ASCII.tab || (byte >= 0x20 && byte != 0x7F) }

private func checkHead(_ head: HTTPResponseHead, consumed: Int) {
    func fail(_ what: String) -> Never { fatalError("\(head), \(consumed) bytes: \(what)") }
    // 1xx heads are skipped, 101 refused: a head returned is final.
    guard (200...599).contains(head.status) else { fail("status") }
    guard (0...9).contains(head.minorVersion) else { fail("minor version") }
    guard consumed <= HTTPResponseParser.maxHeadBytes else { fail("more than \(HTTPResponseParser.maxHeadBytes) bytes") }
    guard head.reason.utf8.allSatisfy(isValueByte) else { fail("a control character in the reason") }
    guard head.headers.count <= HTTPResponseParser.maxHeaders else { fail("\(head.headers.count) fields") }
    let tokenBytes = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz".utf8)
    for header in head.headers {
        guard !header.name.isEmpty, header.name.utf8.allSatisfy(tokenBytes.contains) else {
            fail("the name \(header.name.debugDescription) is no lowercased token")
        }
        guard header.value.utf8.allSatisfy(isValueByte) else { fail("a control character in \(header.value.debugDescription)") }
        let ends = [header.value.utf8.first, header.value.utf8.last]
        guard !ends.contains(ASCII.space), !ends.contains(ASCII.tab) else {
            fail("whitespace around \(header.value.debugDescription)")
        }
    }

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

// MARK: The chunked decoder

/// What the decoder made of a body: the data, the bytes taken, whether it ended, the error.
private struct Decoded: Equatable {
    var body: [UInt8] = []
    /// 0 after an error.
    var taken = 0
    var ended = false
    var error: HTTPResponseError?
}

private func checkChunked(_ input: ArraySlice<UInt8>, random: inout SplitMix) {
    let whole = decodeChunked(input) { input.count }
    let longest = random.next() % 2 == 0 ? 8 : 1024
    let pieces = decodeChunked(input) { 1 + Int(random.next() % UInt64(longest)) }
    let bytewise = decodeChunked(input) { 1 }
    guard pieces == whole, bytewise == whole else {
        fatalError("the chunked decoder fed whole: \(summary(whole)); in pieces: \(summary(pieces)); one byte at a time: \(summary(bytewise))")
    }
    guard whole.taken <= input.count, whole.body.count <= input.count, whole.error != nil || whole.body.count <= whole.taken else { fatalError("\(summary(whole)) of \(input.count) bytes") }
    if whole.ended { checkReencoded(whole.body, random: &random) }
}

private func summary(_ decoded: Decoded) -> String {
    "\(decoded.body.count) body bytes, \(decoded.taken) taken, \(decoded.ended ? "ended" : "not ended"), error \(String(describing: decoded.error))"
}

/// Decodes `input` in pieces of `pieceSize()` bytes as the shell would, checking every step against the
/// input it was given.
private func decodeChunked(_ input: ArraySlice<UInt8>, pieceSize: () -> Int) -> Decoded {
    var decoder = ChunkedDecoder()
    var result = Decoded()
    var start = input.startIndex
    // After framing that stops short of its input, a chunk's data begins.
    var dataExpected = false
    while start < input.endIndex {
        let end = min(input.endIndex, start + pieceSize())
        var rest = input[start..<end]
        while !rest.isEmpty {
            let step: ChunkedDecoder.Step
            do {
                step = try decoder.decode(rest)
            } catch {
                for more in [rest, rest[rest.startIndex..<rest.startIndex], input[...]] {
                    do {
                        let again = try decoder.decode(more)
                        fatalError("the chunked decoder read on to \(again) after \(error)")
                    } catch let again {
                        guard again == error else { fatalError("the chunked decoder failed with \(error), then with \(again)") }
                    }
                }
                result.error = error
                // A throwing call does not say how many of its bytes it read before the error: only the
                // bytes taken by earlier steps are known, and they depend on the split.
                result.taken = 0
                return result
            }
            func fail(_ what: String) -> Never { fatalError("\(step) for \(rest.count) bytes: \(what)") }
            let isEnd: Bool
            if case .end = step { isEnd = true } else { isEnd = false }
            guard decoder.isFinished == isEnd else { fail("isFinished \(decoder.isFinished)") }
            switch step {
            case .data(let count):
                guard count >= 1, count <= rest.count else { fail("data out of the input") }
                result.body += rest.prefix(count)
                result.taken += count
                rest = rest.dropFirst(count)
                dataExpected = false
            case .framing(let count):
                guard count >= 1, count <= rest.count, !dataExpected else { fail("framing out of the input") }
                result.taken += count
                rest = rest.dropFirst(count)
                dataExpected = !rest.isEmpty
            case .end(let count):
                guard count >= 1, count <= rest.count, !dataExpected else { fail("an end out of the input") }
                result.taken += count
                result.ended = true
                // After the end, whatever follows: the end again, taking nothing.
                for more in [rest.dropFirst(count), rest[rest.startIndex..<rest.startIndex], input[...]] {
                    let again = try? decoder.decode(more)
                    guard again == .end(0), decoder.isFinished else { fatalError("after the end the chunked decoder said \(String(describing: again))") }
                }
                return result
            }
        }
        start = end
    }
    // All taken and no end: the decoder waits for more, holding nothing.
    let waiting = try? decoder.decode(input[input.endIndex...])
    guard waiting == .framing(0), !decoder.isFinished else { fatalError("an unfinished body, then \(String(describing: waiting))") }
    return result
}

/// A decoded body, chunked again in sizes from the hash (hex in either case, leading zeros, extensions, a
/// trailer) and followed by the next response, decodes to the same body and ends where the encoding ends.
private func checkReencoded(_ body: [UInt8], random: inout SplitMix) {
    var encoded: [UInt8] = []
    var start = 0
    let longest = random.next() % 2 == 0 ? 16 : 100_000
    let uppercase = random.next() % 2 == 0
    while start < body.count {
        let end = min(body.count, start + 1 + Int(random.next() % UInt64(longest)))
        var size = String(end - start, radix: 16, uppercase: uppercase)
        if random.next() % 4 == 0 { size = "00" + size }
        if random.next() % 4 == 0 { size += " ;name=value;x=\"y z\"" }
        encoded += Array((size + "\r\n").utf8) + body[start..<end] + Array("\r\n".utf8)
        start = end
    }
    encoded += Array((random.next() % 2 == 0 ? "0\r\n\r\n" : "0;last\r\nDigest: x\r\nX-Trailer: yes\r\n\r\n").utf8)
    let length = encoded.count
    encoded += Array("HTTP/1.1 200 OK\r\n".utf8)
    let again = decodeChunked(encoded[...]) { encoded.count }
    let pieces = decodeChunked(encoded[...]) { 1 + Int(random.next() % 64) }
    guard again.error == nil, again.ended, again.taken == length, again.body == body, pieces == again else {
        fatalError("\(body.count) body bytes chunked again as \(length) bytes decode to \(summary(again)), in pieces \(summary(pieces))")
    }
}

// MARK: URLs

/// The first line of the input read as a URL, and the second line, the rest and each Location of the head
/// resolved against it or, when it does not parse, against RFC 3986's example base (the first line too).
/// Returns the URL when it parsed.
private func checkURLs(_ lines: [String], head: HTTPResponseHead?) -> URLParts? {
    let url = try? URLParts(parsing: lines[0])
    if let url { checkURL(url, from: lines[0]) }
    guard let base = url ?? (try? URLParts(parsing: "http://a/b/c/d;p?q")) else { fatalError("the example base") }
    var references = Array(lines.dropFirst())
    if url == nil { references.append(lines[0]) }
    references += head?.values(of: "location") ?? []
    for reference in references {
        guard let resolved = try? base.resolving(reference) else { continue }
        checkURL(resolved, from: "\(base) resolving \(reference.debugDescription)")
    }
    return url
}

private func checkURL(_ url: URLParts, from source: String) {
    func fail(_ what: String) -> Never { fatalError("\(source.debugDescription) gave \(url) (\(url.host), \(url.port), \(url.path.debugDescription), \(String(describing: url.query))): \(what)") }
    guard (1...65535).contains(url.port) else { fail("port") }
    guard url.path.hasPrefix("/") else { fail("a path not starting with /") }
    guard !url.path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else { fail("dot segments") }
    guard url.description.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { fail("not visible ASCII") }
    // Written out, it parses to an equal URL; resolving it, or nothing, gives the URL itself.
    do {
        let again = try URLParts(parsing: url.description)
        guard again == url else { fail("written as \(url.description) it parses to \(again)") }
        guard try url.resolving("") == url, try url.resolving(url.description) == url,
              try url.resolving("//" + url.authority + url.target) == url else { fail("resolving itself") }
    } catch {
        fail("written as \(url.description) it fails: \(error)")
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
