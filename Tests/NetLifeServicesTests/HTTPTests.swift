// The http service's pure core: the request head parser (splits at every byte, pipelining, every error
// status, the limits, linear work), the Range field against nginx's cases, validators and dates, and the
// responder's decisions (200, 206, 304, 412, 416, HEAD, If-Range, max-ranges), all as values.

@testable import NetLifeServices
import Testing

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

private func r(_ first: Int, _ last: Int) -> ByteRange { ByteRange(first: first, last: last) }

/// What curl 7.88 sends to resume a download with `curl -C -`.
private let curlResume = "GET /files/a%20b.iso?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nRange: bytes=1000-\r\n"
    + "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n"

private let curlResumeHead = HTTPRequestHead(method: "GET", target: "/files/a%20b.iso?x=1", minorVersion: 1, headers: [
    HTTPHeader(name: "host", value: "127.0.0.1:8080"),
    HTTPHeader(name: "range", value: "bytes=1000-"),
    HTTPHeader(name: "user-agent", value: "curl/7.88.1"),
    HTTPHeader(name: "accept", value: "*/*"),
])

/// Parses `input` in one call; the head and bytes consumed, nil if it needs more.
private func parseOnce(_ input: [UInt8]) throws(HTTPParseError) -> (head: HTTPRequestHead, consumed: Int)? {
    var parser = HTTPRequestParser()
    return try parser.parse(input)
}

/// The status of the error parsing `text` throws; nil if it throws none.
private func errorStatus(_ text: String) -> Int? {
    do {
        _ = try parseOnce(bytes(text))
        return nil
    } catch {
        return error.status
    }
}

/// A collection of bytes without contiguous storage.
private struct Scattered: Collection {
    let storage: [UInt8]
    var startIndex: Int { 0 }
    var endIndex: Int { storage.count }
    func index(after index: Int) -> Int { index + 1 }
    subscript(position: Int) -> UInt8 { storage[position] }
}

/// The suites below, under one name (`swift test --filter HTTPTests`).
@Suite(.timeLimit(.minutes(5)))
struct HTTPTests {}

extension HTTPTests {
    @Suite(.timeLimit(.minutes(5)))
    struct RequestParser {
        @Test func parsesCurlsResumeRequest() throws {
            let input = bytes(curlResume)
            let parsed = try #require(try parseOnce(input))
            #expect(parsed.head == curlResumeHead)
            #expect(parsed.consumed == input.count)
            #expect(parsed.head.value(of: "Range") == "bytes=1000-")
            #expect(parsed.head.path == "/files/a b.iso")
            #expect(parsed.head.keepAlive)
            #expect(parsed.head.contentLength == nil)
            #expect(!parsed.head.isChunked)
        }

        @Test func everySplitGivesTheSameHead() throws {
            let input = bytes(curlResume)
            for split in 0..<input.count {
                var parser = HTTPRequestParser()
                #expect(try parser.parse(input[..<split]) == nil, "split at \(split)")
                let parsed = try parser.parse(input)
                #expect(parsed?.head == curlResumeHead && parsed?.consumed == input.count, "split at \(split)")
            }
            // One byte more at each call, as a slow peer sends them.
            var parser = HTTPRequestParser()
            for end in 0..<input.count {
                #expect(try parser.parse(input[..<end]) == nil, "after \(end) bytes")
            }
            let parsed = try parser.parse(input)
            #expect(parsed?.head == curlResumeHead && parsed?.consumed == input.count)
        }

        @Test func readsAnyCollectionTheSame() throws {
            let input = bytes(curlResume + "GET / HTTP/1.1\r\n")
            let expected = try parseOnce(input)
            #expect(expected?.consumed == curlResume.utf8.count)
            var parser = HTTPRequestParser()
            let scattered = try parser.parse(Scattered(storage: input))
            #expect(scattered?.head == expected?.head && scattered?.consumed == expected?.consumed)
            let raw = try input.withUnsafeBytes { buffer throws(HTTPParseError) in
                var parser = HTTPRequestParser()
                return try parser.parse(buffer)
            }
            #expect(raw?.head == expected?.head && raw?.consumed == expected?.consumed)
            // In pieces, without contiguous storage.
            parser = HTTPRequestParser()
            for end in stride(from: 0, to: curlResume.utf8.count, by: 7) {
                #expect(try parser.parse(Scattered(storage: Array(input[..<end]))) == nil)
            }
            #expect(try parser.parse(Scattered(storage: input))?.head == curlResumeHead)
        }

        @Test func pipelinedRequestsAreConsumedExactly() throws {
            let first = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
            let second = "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n"
            let third = "HEAD /c HTTP/1.0\r\n\r\n"
            let input = bytes(first + second + "hello" + third)
            var parser = HTTPRequestParser()
            let one = try #require(try parser.parse(input))
            #expect(one.head.target == "/a" && one.consumed == first.utf8.count)
            let rest = input[one.consumed...]
            let two = try #require(try parser.parse(rest))
            #expect(two.head.method == "POST" && two.consumed == second.utf8.count && two.head.contentLength == 5)
            let afterBody = rest.dropFirst(two.consumed + 5)
            let three = try #require(try parser.parse(afterBody))
            #expect(three.head.method == "HEAD" && three.head.minorVersion == 0 && three.consumed == third.utf8.count)
            #expect(!three.head.keepAlive)
            #expect(try parser.parse(afterBody.dropFirst(three.consumed)) == nil)
        }

        @Test func acceptsBareLFAndEmptyLinesBeforeTheRequest() throws {
            let input = bytes("\r\n\n\r\nGET / HTTP/1.1\nHost: x\n\nGET")
            let parsed = try #require(try parseOnce(input))
            #expect(parsed.head.target == "/" && parsed.head.value(of: "host") == "x")
            #expect(parsed.consumed == input.count - 3)
            // A CR alone is no line end.
            #expect(errorStatus("GET / HTTP/1.1\rHost: x\r\n\r\n") == 400)
        }

        @Test func trimsValuesAndLowercasesNames() throws {
            let parsed = try #require(try parseOnce(bytes("GET / HTTP/1.1\r\nHOST:x\r\nX-Thing: \t a  b \t\r\nEmpty:\r\nX-Thing: c\r\n\r\n")))
            #expect(parsed.head.headers == [
                HTTPHeader(name: "host", value: "x"), HTTPHeader(name: "x-thing", value: "a  b"),
                HTTPHeader(name: "empty", value: ""), HTTPHeader(name: "x-thing", value: "c"),
            ])
            #expect(parsed.head.values(of: "X-THING") == ["a  b", "c"])
            #expect(parsed.head.value(of: "x-thing") == "a  b, c")
            #expect(parsed.head.value(of: "absent") == nil)
        }

        @Test func answersEachErrorWithItsStatus() {
            let host = "Host: h\r\n"
            let cases: [(String, Int)] = [
                ("GET /\r\n\r\n", 400),                                     // HTTP/0.9: no version
                ("GET / HTTP/2.0\r\n\r\n", 505),
                ("GET / HTTP/0.9\r\n\r\n", 505),
                ("GET / HTTP/3.0\r\n\r\n", 505),
                ("GET / http/1.1\r\n\(host)\r\n", 400),
                ("GET / HTTP/1.10\r\n\(host)\r\n", 400),
                ("GET / HTTP/11\r\n\(host)\r\n", 400),
                ("GET  / HTTP/1.1\r\n\(host)\r\n", 400),                    // two spaces
                ("GET / HTTP/1.1 \r\n\(host)\r\n", 400),
                ("GET /a b HTTP/1.1\r\n\(host)\r\n", 400),
                ("G(T / HTTP/1.1\r\n\(host)\r\n", 400),                     // not a token
                ("GET /\u{7f} HTTP/1.1\r\n\(host)\r\n", 400),
                ("GET /caf\u{e9} HTTP/1.1\r\n\(host)\r\n", 400),            // not ASCII
                ("GET / HTTP/1.1\r\n\(host)X-A: 1\r\n  folded\r\n\r\n", 400), // obs-fold
                ("GET / HTTP/1.1\r\n \(host)\r\n", 400),                    // whitespace before the first field
                ("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400),                // space before the colon
                ("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", 400),
                ("GET / HTTP/1.1\r\n\(host)X(A): 1\r\n\r\n", 400),          // not a token
                ("GET / HTTP/1.1\r\n\(host): 1\r\n\r\n", 400),              // empty name
                ("GET / HTTP/1.1\r\n\(host)No colon\r\n\r\n", 400),
                ("GET / HTTP/1.1\r\n\(host)X-A: a\u{1}b\r\n\r\n", 400),     // control character
                ("GET / HTTP/1.1\r\n\(host)X-A: a\rb\r\n\r\n", 400),
                ("GET / HTTP/1.1\r\n\(host)X-A: a\u{7f}\r\n\r\n", 400),
                ("GET / HTTP/1.1\r\n\r\n", 400),                            // no Host
                ("GET / HTTP/1.1\r\n\(host)\(host)\r\n", 400),
                ("GET / HTTP/1.0\r\n\(host)\(host)\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Content-Length: -5\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Content-Length: +5\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Content-Length: 5x\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Content-Length:\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Content-Length: 5, 6\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Content-Length: 99999999999999999999\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Transfer-Encoding: gzip\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked, chunked\r\n\r\n", 400),
                ("POST / HTTP/1.1\r\n\(host)Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
                ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ]
            for (input, status) in cases {
                #expect(errorStatus(input) == status, "\(input.debugDescription)")
            }
        }

        @Test func acceptsWhatTheRFCAllows() throws {
            let cases: [(String, (HTTPRequestHead) -> Bool)] = [
                ("GET / HTTP/1.0\r\n\r\n", { $0.minorVersion == 0 }),                 // HTTP/1.0 needs no Host
                ("GET / HTTP/1.2\r\nHost: h\r\n\r\n", { $0.minorVersion == 1 }),     // a higher minor version is 1.1
                ("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", { $0.target == "*" && $0.path == nil }),
                ("GET http://h/x HTTP/1.1\r\nHost: h\r\n\r\n", { $0.target == "http://h/x" && $0.path == "/x" }),
                ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n", { $0.contentLength == 7 }),
                ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\n", { $0.contentLength == 5 }),
                ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n", { $0.isChunked && $0.contentLength == nil }),
                ("GET / HTTP/1.1\r\nHost: h\r\nX-Utf8: caf\u{e9}\r\n\r\n", { $0.value(of: "x-utf8") == "caf\u{e9}" }),
                ("get / HTTP/1.1\r\nHost: h\r\n\r\n", { $0.method == "get" }),        // methods are case-sensitive
            ]
            for (input, check) in cases {
                let parsed = try #require(try parseOnce(bytes(input)), "\(input.debugDescription)")
                #expect(check(parsed.head), "\(input.debugDescription)")
            }
        }

        /// RFC 9112 section 3.2.2: a server must accept absolute-form; its authority overrides Host.
        @Test func absoluteFormTargetsGiveTheirPathAndAuthority() throws {
            let accepted: [(String, String, String)] = [
                ("http://example.com/a?b", "/a?b", "example.com"),
                ("https://example.com:8443", "/", "example.com:8443"),
                ("HtTp://127.0.0.1:80/x", "/x", "127.0.0.1:80"),
                ("http://[::1]:8080/x", "/x", "[::1]:8080"),
                ("http://h:/x", "/x", "h:"),        // RFC 3986 allows an empty port
                ("http://a.b-c_d~%41/x", "/x", "a.b-c_d~%41"),
            ]
            for (target, originForm, authority) in accepted {
                let parsed = try #require(try parseOnce(bytes("GET \(target) HTTP/1.1\r\nHost: other\r\n\r\n")), "\(target)")
                #expect(parsed.head.target == target)
                #expect(parsed.head.originForm == originForm, "\(target)")
                #expect(parsed.head.authority == authority, "\(target): the authority, not Host")
            }
            let origin = try #require(try parseOnce(bytes("GET /x HTTP/1.1\r\nHost: other\r\n\r\n")))
            #expect(origin.head.authority == "other" && origin.head.originForm == "/x")
            for target in ["http:///x", "http://", "http://user@h/x", "http://user:pw@h/x", "http://h:x/", "http://h:99999/",
                           "http://h:1:2/", "ftp://h/x", "mailto:a@b", "http:/x", "http:x", "https:", "http://h/x#f",
                           "http://[::1/x", "http://[]/x", "http://[zz]/x", "http://[::1]x/", "http://h\"/x", "http://h<>/x"] {
                #expect(errorStatus("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n") == 400, "\(target)")
            }
            // Absolute-form does not lift RFC 9112 section 3.2's Host requirement for HTTP/1.1.
            #expect(errorStatus("GET http://h/x HTTP/1.1\r\n\r\n") == 400)
            #expect(try parseOnce(bytes("GET http://h/x HTTP/1.0\r\n\r\n"))?.head.authority == "h")
        }

        /// After an error in the fields, the request line's method is still known (a HEAD's error page then
        /// has no body); before the request line, there is none.
        @Test func theMethodIsKnownOnceTheRequestLineIsRead() {
            var parser = HTTPRequestParser()
            #expect(throws: HTTPParseError.self) { try parser.parse(bytes("HEAD / HTTP/1.1\r\nBad Field: x\r\n\r\n")) }
            #expect(parser.requestMethod == "HEAD")
            var fresh = HTTPRequestParser()
            #expect(fresh.requestMethod == nil)
            #expect(throws: HTTPParseError.self) { try fresh.parse(bytes("HEAD / HTTP/2.0\r\n")) }
            #expect(fresh.requestMethod == nil)
        }

        @Test func keepAliveFollowsTheVersionAndConnection() {
            func head(_ minor: Int, _ connection: String?) -> HTTPRequestHead {
                HTTPRequestHead(method: "GET", target: "/", minorVersion: minor,
                                headers: connection.map { [HTTPHeader(name: "connection", value: $0)] } ?? [])
            }
            #expect(head(1, nil).keepAlive)
            #expect(!head(1, "close").keepAlive)
            #expect(!head(1, "Upgrade, CLOSE").keepAlive)
            #expect(head(1, "keep-alive").keepAlive)
            #expect(!head(0, nil).keepAlive)
            #expect(head(0, "Keep-Alive").keepAlive)
            #expect(!head(0, "keep-alive, close").keepAlive)
        }

        @Test func decodesPathsAndRefusesEscapes() {
            let cases: [(String, String?)] = [
                ("/", "/"),
                ("/a%20b?x=1", "/a b"),
                ("/a/b/c.txt", "/a/b/c.txt"),
                ("/%e2%82%ac", "/\u{20ac}"),
                ("/%E2%82%AC", "/\u{20ac}"),
                ("/a?../..", "/a"),                 // the query is dropped before looking at segments
                ("/a//b", "/a//b"),
                ("/..a/b..", "/..a/b.."),
                ("/.well-known/x", "/.well-known/x"),
                ("/..", nil),
                ("/a/../b", nil),
                ("/a/./b", nil),
                ("/a/.", nil),
                ("/%2e%2e/etc/passwd", nil),
                ("/a/..%2fb", nil),                 // an encoded slash decodes into a ".." segment
                ("/a%2F..%2Fb", nil),
                ("/a%00b", nil),
                ("/%ff", nil),                      // not UTF-8
                ("/%zz", nil),
                ("/%4", nil),
                ("/a%", nil),
                ("*", nil),
                ("http://h/a", "/a"),                // absolute-form: the path is taken from it
                ("https://h:8080/a%20b?x", "/a b"),
                ("HTTP://h", "/"),
                ("http://h?q", "/"),
                ("http://h/../etc/passwd", nil),
                ("ftp://h/a", nil),
                ("h:443", nil),                     // authority-form (CONNECT)
                ("a/b", nil),
            ]
            for (target, path) in cases {
                #expect(HTTPRequestHead(method: "GET", target: target).path == path, "\(target)")
            }
        }

        @Test func theHeadIsLimitedTo8KiB() throws {
            let start = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: "
            let padding = HTTPRequestParser.maxHeadBytes - start.utf8.count - 4
            let exact = bytes(start + String(repeating: "a", count: padding) + "\r\n\r\n")
            #expect(exact.count == HTTPRequestParser.maxHeadBytes)
            #expect(try parseOnce(exact)?.consumed == exact.count)
            let over = bytes(start + String(repeating: "a", count: padding + 1) + "\r\n\r\n")
            #expect(errorStatus(String(decoding: over, as: UTF8.self)) == 431)
            // The error comes as soon as the limit is reached, whatever follows.
            #expect(errorStatus(String(decoding: over[..<HTTPRequestParser.maxHeadBytes], as: UTF8.self)) == 431)
            #expect(try parseOnce(Array(over[..<(HTTPRequestParser.maxHeadBytes - 1)])) == nil)

            let longTarget = "GET /" + String(repeating: "a", count: HTTPRequestParser.maxHeadBytes) + " HTTP/1.1\r\n"
            #expect(errorStatus(longTarget) == 414)
            #expect(errorStatus(String(repeating: "\r\n", count: HTTPRequestParser.maxHeadBytes)) == 400)
            // Leading empty lines count toward the limit.
            let leading = String(repeating: "\r\n", count: HTTPRequestParser.maxHeadBytes / 2 - 10)
            #expect(errorStatus(leading + "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n") == 431)
            #expect(try parseOnce(bytes(leading + "GET / HTTP/1.0\r\n\r\n")) != nil)
        }

        @Test func atMost100Fields() throws {
            let fields = (1..<HTTPRequestParser.maxHeaders).map { "X-\($0): v\r\n" }.joined()
            let hundred = "GET / HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n"
            #expect(try parseOnce(bytes(hundred))?.head.headers.count == HTTPRequestParser.maxHeaders)
            #expect(errorStatus("GET / HTTP/1.1\r\nHost: h\r\n" + fields + "X-Last: v\r\n\r\n") == 431)
        }

        @Test func anErrorSticksUntilReset() throws {
            var parser = HTTPRequestParser()
            #expect(throws: HTTPParseError.self) { try parser.parse(bytes("GET / HTTP/2.0\r\n")) }
            do {
                _ = try parser.parse(bytes("GET / HTTP/2.0\r\nHost: h\r\n\r\n"))
                Issue.record("no error after an error")
            } catch {
                #expect(error.status == 505)
            }
            parser.reset()
            #expect(try parser.parse(bytes("GET / HTTP/1.0\r\n\r\n"))?.head.minorVersion == 0)
        }

        @Test func scansEachByteOnceWhateverTheSplit() throws {
            // Close to 8 KiB of fields, one byte more at each call: the scan moves forward one byte per call.
            let fields = (0..<95).map { "X-Field-\($0): " + String(repeating: "v", count: 70) + "\r\n" }.joined()
            let input = bytes("GET / HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n")
            #expect(input.count > 7900)
            var parser = HTTPRequestParser()
            for end in 0..<input.count {
                #expect(try parser.parse(input[..<end]) == nil)
                #expect(parser.scanned == end, "after \(end) bytes")
                if parser.scanned != end { return }
            }
            #expect(try parser.parse(input)?.consumed == input.count)
            // Each byte scanned once and looked at once more in its line, for all those calls together.
            #expect(parser.workDone <= 2 * input.count)
            #expect(parser.workDone >= input.count)

            // One call over the same input does the same work.
            var whole = HTTPRequestParser()
            #expect(try whole.parse(input)?.consumed == input.count)
            #expect(whole.workDone == parser.workDone)
        }

        @Test func aRequestLineOfALargeHeadParsesInLinearWork() throws {
            var parser = HTTPRequestParser()
            let target = "/" + String(repeating: "b", count: HTTPRequestParser.maxHeadBytes - 40)
            let input = bytes("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n")
            for end in 0..<input.count { #expect(try parser.parse(input[..<end]) == nil) }
            #expect(try parser.parse(input)?.head.target == target)
            // A line is looked at once when it ends, not at every call while it grows.
            #expect(parser.workDone <= 2 * input.count)
            // The head returned, the parser starts over.
            #expect(parser.scanned == 0)
        }
    }
}

// MARK: Ranges

extension HTTPTests {
    @Suite(.timeLimit(.minutes(5)))
    struct Ranges {
        /// nginx's t/range.t file (1000 bytes) and the corners around it.
        @Test func resolvesRangesLikeTheTable() {
            let cases: [(String, Int, RangeRequest)] = [
                ("bytes=0-8", 1000, .ranges([r(0, 8)])),
                ("bytes=-10", 1000, .ranges([r(990, 999)])),
                ("bytes=990-", 1000, .ranges([r(990, 999)])),
                ("bytes=990-1990", 1000, .ranges([r(990, 999)])),                   // last past the end: clipped
                ("bytes=0-9, -10, 10-19", 1000, .ranges([r(0, 9), r(990, 999), r(10, 19)])),
                ("bytes=0-9, -10, 100000-, 10-19", 1000, .ranges([r(0, 9), r(990, 999), r(10, 19)])),
                ("bytes=100000-", 1000, .unsatisfiable),
                ("bytes=0-0", 1000, .ranges([r(0, 0)])),
                ("bytes=-1", 1000, .ranges([r(999, 999)])),
                ("bytes=5-", 1000, .ranges([r(5, 999)])),
                ("bytes=-0", 1000, .unsatisfiable),
                ("bytes=999-999", 1000, .ranges([r(999, 999)])),
                ("bytes=1000-1000", 1000, .unsatisfiable),                          // first at the end
                ("bytes=1000-", 1000, .unsatisfiable),
                ("bytes=-2000", 1000, .ranges([r(0, 999)])),                        // a suffix longer than the file
                ("bytes=5-3", 1000, .whole),                                        // reversed: invalid, ignored
                ("bytes=0-1,5-3", 1000, .whole),
                ("bytes=0-4,3-9", 1000, .ranges([r(0, 4), r(3, 9)])),               // overlapping, kept as asked
                ("bytes=0-999,0-999", 1000, .whole),                                // more bytes than the file
                ("bytes=0-600,400-999", 1000, .whole),
                (" bytes=1-2", 1000, .whole),
                ("bytes= 1 - 2 ,\t3-4\t", 1000, .ranges([r(1, 2), r(3, 4)])),      // whitespace around everything
                ("BYTES=1-2", 1000, .ranges([r(1, 2)])),                            // the unit without case
                ("bytes=,1-2,,", 1000, .ranges([r(1, 2)])),                         // empty list elements
                ("items=0-1", 1000, .whole),                                        // another unit
                ("bytes 0-1", 1000, .whole),
                ("bytes=", 1000, .whole),
                ("bytes=,", 1000, .whole),
                ("bytes=-", 1000, .whole),
                ("bytes=a-b", 1000, .whole),
                ("bytes=1-2-3", 1000, .whole),
                ("bytes=1-2;3-4", 1000, .whole),
                ("bytes=--1", 1000, .whole),
                ("bytes=+1-2", 1000, .whole),
                ("bytes=0x10-", 1000, .whole),
                ("bytes=0-1, x", 1000, .whole),
                ("bytes=99999999999999999999-", 1000, .unsatisfiable),             // overflow, as nginx
                ("bytes=0-99999999999999999999", 1000, .unsatisfiable),
                ("bytes=-99999999999999999999", 1000, .unsatisfiable),
                ("bytes=0-1,-99999999999999999999", 1000, .unsatisfiable),
                ("bytes=9223372036854775807-", 1000, .unsatisfiable),              // Int.max fits: past the end
                ("bytes=0-9223372036854775807", 1000, .ranges([r(0, 999)])),
                ("bytes=99999999999999999999-5", 1000, .whole),                   // reversed wins over overflow
                ("bytes=0-0", 0, .unsatisfiable),                                   // an empty file satisfies nothing
                ("bytes=-1", 0, .unsatisfiable),
                ("bytes=0-", 0, .unsatisfiable),
                ("bytes=x", 0, .whole),
                ("bytes=0-", 1, .ranges([r(0, 0)])),
                ("bytes=-5", 3, .ranges([r(0, 2)])),
            ]
            for (header, length, expected) in cases {
                #expect(HTTPRanges.parse(header, length: length) == expected, "\(header.debugDescription) of \(length)")
            }
        }

        @Test func moreRangesThanAllowedGiveTheWholeFile() {
            #expect(HTTPRanges.parse("bytes=0-0,2-2", length: 10, maxRanges: 2) == .ranges([r(0, 0), r(2, 2)]))
            #expect(HTTPRanges.parse("bytes=0-0,2-2,4-4", length: 10, maxRanges: 2) == .whole)
            #expect(HTTPRanges.parse("bytes=0-0", length: 10, maxRanges: 0) == .whole)
            // Unsatisfiable ranges do not count.
            #expect(HTTPRanges.parse("bytes=0-0,20-,30-", length: 10, maxRanges: 1) == .ranges([r(0, 0)]))
            // Many small ranges: bounded memory, linear time.
            let many = "bytes=" + (0..<2000).map { "\($0)-\($0)" }.joined(separator: ",")
            #expect(HTTPRanges.parse(many, length: 10_000, maxRanges: 1) == .whole)
            if case .ranges(let ranges) = HTTPRanges.parse(many, length: 10_000) {
                #expect(ranges.count == 2000)
            } else {
                Issue.record("2000 disjoint ranges within the file are ranges")
            }
        }

        @Test func coalescesOverlappingAndAdjacentRanges() {
            #expect(HTTPRanges.coalesce([r(0, 4), r(5, 9), r(3, 6)]) == [r(0, 9)])
            #expect(HTTPRanges.coalesce([r(10, 19), r(0, 8)]) == [r(0, 8), r(10, 19)])
            #expect(HTTPRanges.coalesce([r(0, 9), r(2, 3)]) == [r(0, 9)])
            #expect(HTTPRanges.coalesce([]) == [])
        }

        @Test func etagsAreStableAndChangeWithTheFile() {
            let tag = HTTPRanges.etag(inode: 0x1a2b, size: 0x400, modifiedSeconds: 0x5f5e_1000, modifiedNanoseconds: 0x1dcd_6500)
            #expect(tag == "\"1a2b-400-5f5e1000.1dcd6500\"")
            #expect(tag == HTTPRanges.etag(inode: 0x1a2b, size: 0x400, modifiedSeconds: 0x5f5e_1000, modifiedNanoseconds: 0x1dcd_6500))
            let changed = [
                HTTPRanges.etag(inode: 0x1a2c, size: 0x400, modifiedSeconds: 0x5f5e_1000, modifiedNanoseconds: 0x1dcd_6500),
                HTTPRanges.etag(inode: 0x1a2b, size: 0x401, modifiedSeconds: 0x5f5e_1000, modifiedNanoseconds: 0x1dcd_6500),
                HTTPRanges.etag(inode: 0x1a2b, size: 0x400, modifiedSeconds: 0x5f5e_1001, modifiedNanoseconds: 0x1dcd_6500),
                HTTPRanges.etag(inode: 0x1a2b, size: 0x400, modifiedSeconds: 0x5f5e_1000, modifiedNanoseconds: 0x1dcd_6501),
            ]
            #expect(Set(changed + [tag]).count == 5)
            // Odd values never trap and stay a quoted token.
            let odd = HTTPRanges.etag(inode: .max, size: 0, modifiedSeconds: -1, modifiedNanoseconds: 0)
            #expect(odd == "\"ffffffffffffffff-0-ffffffffffffffff.0\"")
        }

        @Test func formatsAndParsesHTTPDates() {
            let cases: [(Int64, String)] = [
                (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
                (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
                (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),             // a leap year divisible by 400
                (951_868_799, "Tue, 29 Feb 2000 23:59:59 GMT"),
                (1_709_164_800, "Thu, 29 Feb 2024 00:00:00 GMT"),
                (1_700_000_000, "Tue, 14 Nov 2023 22:13:20 GMT"),
                (2_147_483_647, "Tue, 19 Jan 2038 03:14:07 GMT"),
                (2_147_483_648, "Tue, 19 Jan 2038 03:14:08 GMT"),           // past 32-bit time_t
                (4_102_444_800, "Fri, 01 Jan 2100 00:00:00 GMT"),
                (4_107_542_400, "Mon, 01 Mar 2100 00:00:00 GMT"),           // 2100 is no leap year
                (-1, "Wed, 31 Dec 1969 23:59:59 GMT"),
                (-2_208_988_800, "Mon, 01 Jan 1900 00:00:00 GMT"),
                (253_402_300_799, "Fri, 31 Dec 9999 23:59:59 GMT"),
                (-62_135_596_800, "Mon, 01 Jan 0001 00:00:00 GMT"),
            ]
            for (seconds, text) in cases {
                #expect(HTTPRanges.httpDate(seconds) == text)
                #expect(HTTPRanges.parseHTTPDate(text) == seconds, "\(text)")
            }
            // Outside the years 1 to 9999: the nearest date the format shows.
            #expect(HTTPRanges.httpDate(.max) == "Fri, 31 Dec 9999 23:59:59 GMT")
            #expect(HTTPRanges.httpDate(.min) == "Mon, 01 Jan 0001 00:00:00 GMT")
            // A date every week and an hour for 1200 years round-trips (the extra hour walks through the day).
            var seconds: Int64 = -2_208_988_800
            while seconds < 35_000_000_000 {
                if HTTPRanges.parseHTTPDate(HTTPRanges.httpDate(seconds)) != seconds {
                    Issue.record("\(seconds) gives \(HTTPRanges.httpDate(seconds))")
                    return
                }
                seconds += 7 * 86_400 + 3_607
            }
        }

        @Test func parsesTheObsoleteDateForms() {
            #expect(HTTPRanges.parseHTTPDate("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
            #expect(HTTPRanges.parseHTTPDate("Sun Nov  6 08:49:37 1994") == 784_111_777)
            #expect(HTTPRanges.parseHTTPDate("Tue Feb 29 00:00:00 2000") == 951_782_400)
            #expect(HTTPRanges.parseHTTPDate("Thursday, 01-Jan-70 00:00:00 GMT") == 0)
            #expect(HTTPRanges.parseHTTPDate("Friday, 01-Jan-38 00:00:00 GMT") == 2_145_916_800)
            #expect(HTTPRanges.parseHTTPDate("Thu, 01 Jan 1970 00:00:60 GMT") == 60)   // a leap second
            let invalid = [
                "", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 gmt",
                "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT",
                "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 30 Feb 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT",
                "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
                "Sun, 06 Nov 1994 08:49:61 GMT", "Sun, 06 Nov 1994 08:49:37 GMT ", "Sun,06 Nov 1994 08:49:37 GMT",
                "Sun, 06 Nov 0000 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "Sunday, 06-Nov-1994 08:49:37 GMT",
                "Sun, 06 Nov 1994 8:49:37 GMT", "784111777",
            ]
            for text in invalid {
                #expect(HTTPRanges.parseHTTPDate(text) == nil, "\(text.debugDescription)")
            }
        }

        @Test func ifRangeComparesStronglyOrByExactDate() {
            let etag = "\"1a-400-5f5e1000.0\""
            let date: Int64 = 1_600_000_000
            #expect(HTTPRanges.ifRangeMatches(etag, etag: etag, lastModified: date))
            #expect(!HTTPRanges.ifRangeMatches("W/" + etag, etag: etag, lastModified: date))    // weak never matches
            #expect(!HTTPRanges.ifRangeMatches("\"1a-400-5f5e0fff.0\"", etag: etag, lastModified: date))   // an old tag
            #expect(!HTTPRanges.ifRangeMatches(etag + ", " + etag, etag: etag, lastModified: date))
            #expect(HTTPRanges.ifRangeMatches(HTTPRanges.httpDate(date), etag: etag, lastModified: date))
            #expect(!HTTPRanges.ifRangeMatches(HTTPRanges.httpDate(date + 1), etag: etag, lastModified: date))
            #expect(!HTTPRanges.ifRangeMatches(HTTPRanges.httpDate(date - 1), etag: etag, lastModified: date))
            #expect(!HTTPRanges.ifRangeMatches("yesterday", etag: etag, lastModified: date))
            #expect(!HTTPRanges.ifRangeMatches("", etag: etag, lastModified: date))
        }

        @Test func entityTagListsCompareWeaklyOrStrongly() {
            let etag = "\"a-1-2.3\""
            #expect(HTTPRanges.entityTagListMatches(etag, etag: etag, weak: true))
            #expect(HTTPRanges.entityTagListMatches("W/\"a-1-2.3\"", etag: etag, weak: true))
            #expect(!HTTPRanges.entityTagListMatches("W/\"a-1-2.3\"", etag: etag, weak: false))
            #expect(HTTPRanges.entityTagListMatches("\"x\", \"a-1-2.3\"", etag: etag, weak: false))
            #expect(HTTPRanges.entityTagListMatches(" * ", etag: etag, weak: false))
            #expect(HTTPRanges.entityTagListMatches("\"x,y\",\"a-1-2.3\"", etag: etag, weak: true))   // a comma in a tag
            #expect(!HTTPRanges.entityTagListMatches("\"x\", \"y\"", etag: etag, weak: true))
            #expect(!HTTPRanges.entityTagListMatches("\"a-1-2.3\" garbage", etag: etag, weak: true))
            #expect(!HTTPRanges.entityTagListMatches("a-1-2.3", etag: etag, weak: true))
            #expect(!HTTPRanges.entityTagListMatches("*, \"a-1-2.3\"", etag: etag, weak: true))
            #expect(!HTTPRanges.entityTagListMatches("\"a-1-2.3", etag: etag, weak: true))
        }
    }
}

// MARK: The responder

extension HTTPTests {
    @Suite(.timeLimit(.minutes(5)))
    struct FileResponder {
        static let now: Int64 = 1_700_000_000
        static let file = FileInfo(size: 1000, modifiedSeconds: 1_600_000_000, modifiedNanoseconds: 123_456_789, inode: 42)
        static let etag = HTTPRanges.etag(inode: 42, size: 1000, modifiedSeconds: 1_600_000_000, modifiedNanoseconds: 123_456_789)
        static let lastModified = "Sun, 13 Sep 2020 12:26:40 GMT"

        private func request(_ method: String = "GET", _ fields: [(String, String)] = []) -> HTTPRequestHead {
            HTTPRequestHead(method: method, target: "/f.bin", minorVersion: 1,
                            headers: [HTTPHeader(name: "host", value: "h")] + fields.map { HTTPHeader(name: $0.0, value: $0.1) })
        }

        private func respond(_ head: HTTPRequestHead, file: FileInfo = file, maxRanges: Int = 1) -> HTTPFileResponse {
            HTTPFileResponder.respond(to: head, file: file, contentType: "application/octet-stream", maxRanges: maxRanges, now: Self.now)
        }

        @Test func servesTheWholeFileWithItsValidators() {
            let response = respond(request())
            #expect(HTTPRanges.httpDate(Self.file.modifiedSeconds) == Self.lastModified)
            #expect(response == HTTPFileResponse(status: 200, headers: [
                HTTPHeader(name: "Date", value: "Tue, 14 Nov 2023 22:13:20 GMT"),
                HTTPHeader(name: "Server", value: "netlifed"),
                HTTPHeader(name: "Content-Type", value: "application/octet-stream"),
                HTTPHeader(name: "Content-Length", value: "1000"),
                HTTPHeader(name: "Last-Modified", value: Self.lastModified),
                HTTPHeader(name: "ETag", value: Self.etag),
                HTTPHeader(name: "Accept-Ranges", value: "bytes"),
            ], body: ByteRange(first: 0, last: 999)))
        }

        @Test func headGetsTheHeadersOfGetWithoutABody() {
            let get = respond(request())
            let head = respond(request("HEAD"))
            #expect(head.status == 200 && head.headers == get.headers && head.body == nil)
            // Range is defined for GET only: a HEAD with one gets the 200 headers.
            let ranged = respond(request("HEAD", [("range", "bytes=0-9")]))
            #expect(ranged.status == 200 && ranged.headers == get.headers && ranged.body == nil)
        }

        @Test func servesARangeAs206() {
            let response = respond(request("GET", [("range", "bytes=100-199")]))
            #expect(response.status == 206)
            #expect(response.body == ByteRange(first: 100, last: 199))
            #expect(response.value(of: "content-length") == "100")
            #expect(response.value(of: "Content-Range") == "bytes 100-199/1000")
            #expect(response.value(of: "ETag") == Self.etag)
            #expect(response.value(of: "Last-Modified") == Self.lastModified)
            #expect(response.headers.map(\.name) == ["Date", "Server", "Content-Type", "Content-Length", "Content-Range",
                                                     "Last-Modified", "ETag", "Accept-Ranges"])
        }

        @Test func resumesAsCurlAndWgetAsk() {
            // curl -C - and wget -c send `Range: bytes=N-` for the N bytes they have.
            for have in [1, 500, 999] {
                let response = respond(request("GET", [("range", "bytes=\(have)-")]))
                #expect(response.status == 206 && response.body == ByteRange(first: have, last: 999))
                #expect(response.value(of: "Content-Range") == "bytes \(have)-999/1000")
            }
            // The whole file already there: 416 with the length, which wget takes as "fully retrieved".
            let done = respond(request("GET", [("range", "bytes=1000-")]))
            #expect(done.status == 416)
        }

        @Test func unsatisfiableRangesGet416WithTheLength() {
            let response = respond(request("GET", [("range", "bytes=5000-6000")]))
            #expect(response.status == 416 && response.body == nil)
            #expect(response.value(of: "Content-Range") == "bytes */1000")
            #expect(response.value(of: "Content-Length") == "0")
            #expect(response.value(of: "ETag") == Self.etag)
            // An empty file satisfies no range; without one it is a 200 of nothing.
            let empty = FileInfo(size: 0, modifiedSeconds: 1_600_000_000, inode: 7)
            let emptyRange = respond(request("GET", [("range", "bytes=0-")]), file: empty)
            #expect(emptyRange.status == 416 && emptyRange.value(of: "Content-Range") == "bytes */0")
            let emptyWhole = respond(request(), file: empty)
            #expect(emptyWhole.status == 200 && emptyWhole.body == nil && emptyWhole.value(of: "Content-Length") == "0")
        }

        @Test func ifRangeDecidesBetweenRangeAndWholeFile() {
            let cases: [(String, Int)] = [
                (Self.etag, 206),                                       // the current strong tag
                ("W/" + Self.etag, 200),                                // weak never matches
                (HTTPRanges.etag(inode: 42, size: 1000, modifiedSeconds: 1_600_000_000, modifiedNanoseconds: 0), 200),  // old
                (Self.lastModified, 206),                               // the exact Last-Modified date
                (HTTPRanges.httpDate(Self.file.modifiedSeconds - 1), 200),
                (HTTPRanges.httpDate(Self.file.modifiedSeconds + 1), 200),
                ("garbage", 200),
            ]
            for (ifRange, status) in cases {
                let response = respond(request("GET", [("range", "bytes=10-19"), ("if-range", ifRange)]))
                #expect(response.status == status, "If-Range: \(ifRange)")
                if status == 200 { #expect(response.body == ByteRange(first: 0, last: 999)) }
            }
            // A mismatch turns even an unsatisfiable range into the whole file.
            #expect(respond(request("GET", [("range", "bytes=5000-"), ("if-range", "\"old\"")])).status == 200)
            // If-Range without Range is ignored.
            #expect(respond(request("GET", [("if-range", "\"old\"")])).status == 200)
        }

        @Test func conditionalGetsAnswer304() {
            let cases: [([(String, String)], Int)] = [
                ([("if-none-match", Self.etag)], 304),
                ([("if-none-match", "W/" + Self.etag)], 304),                   // weak comparison
                ([("if-none-match", "\"x\", " + Self.etag)], 304),
                ([("if-none-match", "*")], 304),
                ([("if-none-match", "\"x\"")], 200),
                ([("if-modified-since", Self.lastModified)], 304),
                ([("if-modified-since", HTTPRanges.httpDate(Self.now))], 304),
                ([("if-modified-since", HTTPRanges.httpDate(Self.file.modifiedSeconds - 1))], 200),
                ([("if-modified-since", "not a date")], 200),
                // If-None-Match wins over If-Modified-Since, both ways.
                ([("if-none-match", "\"x\""), ("if-modified-since", Self.lastModified)], 200),
                ([("if-none-match", Self.etag), ("if-modified-since", HTTPRanges.httpDate(0))], 304),
            ]
            for (fields, status) in cases {
                let response = respond(request("GET", fields))
                #expect(response.status == status, "\(fields)")
                if status == 304 {
                    #expect(response.body == nil)
                    #expect(response.headers.map(\.name) == ["Date", "Server", "Last-Modified", "ETag"])
                    #expect(response.value(of: "etag") == Self.etag)
                }
            }
            #expect(respond(request("HEAD", [("if-none-match", Self.etag)])).status == 304)
            // A 304 comes before any Range.
            #expect(respond(request("GET", [("if-none-match", Self.etag), ("range", "bytes=0-0")])).status == 304)
        }

        @Test func failedPreconditionsAnswer412() {
            let cases: [([(String, String)], Int)] = [
                ([("if-match", Self.etag)], 200),
                ([("if-match", "*")], 200),
                ([("if-match", "\"x\"")], 412),
                ([("if-match", "W/" + Self.etag)], 412),                       // strong comparison
                ([("if-unmodified-since", Self.lastModified)], 200),
                ([("if-unmodified-since", HTTPRanges.httpDate(Self.file.modifiedSeconds - 1))], 412),
                ([("if-unmodified-since", "not a date")], 200),
                ([("if-match", Self.etag), ("if-unmodified-since", HTTPRanges.httpDate(0))], 200),  // If-Match wins
                ([("if-match", "\"x\""), ("if-none-match", Self.etag)], 412),  // 412 before 304
            ]
            for (fields, status) in cases {
                let response = respond(request("GET", fields))
                #expect(response.status == status, "\(fields)")
                if status == 412 { #expect(response.body == nil && response.value(of: "Content-Length") == "0") }
            }
        }

        @Test func maxRangesLimitsAndTurnsOffRanges() {
            let two = [("range", "bytes=0-9,20-29")]
            #expect(respond(request("GET", two), maxRanges: 1).status == 200)
            // Allowed, but multipart is not implemented: the whole file.
            let disjoint = respond(request("GET", two), maxRanges: 2)
            #expect(disjoint.status == 200 && disjoint.body == ByteRange(first: 0, last: 999))
            // Ranges that coalesce into one are one range.
            let adjacent = respond(request("GET", [("range", "bytes=0-9,10-19,5-12")]), maxRanges: 3)
            #expect(adjacent.status == 206 && adjacent.body == ByteRange(first: 0, last: 19))
            #expect(adjacent.value(of: "Content-Range") == "bytes 0-19/1000")
            // 0 turns ranges off, and says so.
            let off = respond(request("GET", [("range", "bytes=0-9")]), maxRanges: 0)
            #expect(off.status == 200 && off.value(of: "Accept-Ranges") == "none")
            #expect(respond(request("GET", [("range", "bytes=5000-")]), maxRanges: 0).status == 200)
            #expect(respond(request("GET", [("range", "bytes=0-9")]), maxRanges: 1).status == 206)
        }

        @Test func lastModifiedIsNeverInTheFuture() {
            let future = FileInfo(size: 10, modifiedSeconds: Self.now + 3600, inode: 1)
            let response = respond(request(), file: future)
            #expect(response.value(of: "Last-Modified") == HTTPRanges.httpDate(Self.now))
            #expect(response.value(of: "Date") == HTTPRanges.httpDate(Self.now))
        }

        @Test func otherMethodsGet405() {
            let response = respond(request("POST"))
            #expect(response.status == 405 && response.body == nil)
            #expect(response.value(of: "Allow") == "GET, HEAD")
            #expect(respond(request("get")).status == 405)   // methods are case-sensitive
        }

        @Test func serializesTheHead() {
            let response = HTTPFileResponse(status: 206, headers: [HTTPHeader(name: "Content-Length", value: "1"),
                                                                   HTTPHeader(name: "Content-Range", value: "bytes 0-0/5")],
                                            body: ByteRange(first: 0, last: 0))
            #expect(HTTPFileResponder.serialize(response, keepAlive: true, minorVersion: 1)
                == "HTTP/1.1 206 Partial Content\r\nContent-Length: 1\r\nContent-Range: bytes 0-0/5\r\n\r\n")
            #expect(HTTPFileResponder.serialize(response, keepAlive: false, minorVersion: 1)
                == "HTTP/1.1 206 Partial Content\r\nContent-Length: 1\r\nContent-Range: bytes 0-0/5\r\nConnection: close\r\n\r\n")
            #expect(HTTPFileResponder.serialize(response, keepAlive: true, minorVersion: 0)
                == "HTTP/1.1 206 Partial Content\r\nContent-Length: 1\r\nContent-Range: bytes 0-0/5\r\nConnection: keep-alive\r\n\r\n")
            let notModified = HTTPFileResponse(status: 304, headers: [], body: nil)
            #expect(HTTPFileResponder.serialize(notModified, keepAlive: false, minorVersion: 0) == "HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n")
            #expect(HTTPFileResponder.reasonPhrase(416) == "Range Not Satisfiable")
            #expect(HTTPFileResponder.reasonPhrase(431) == "Request Header Fields Too Large")
        }

        @Test func errorPagesCloseTheConnection() throws {
            for status in [400, 404, 405, 414, 431, 501, 505] {
                let page = try #require(HTTPFileResponder.errorResponse(status: status, now: Self.now))
                #expect(page.head.hasPrefix("HTTP/1.1 \(status) \(HTTPFileResponder.reasonPhrase(status))\r\n"))
                #expect(page.head.hasSuffix("Connection: close\r\n\r\n"))
                #expect(page.head.contains("\r\nContent-Length: \(page.body.utf8.count)\r\n"))
                #expect(page.head.contains("\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\n"))
                #expect(page.body.contains("\(status) \(HTTPFileResponder.reasonPhrase(status))"))
                #expect(page.head.contains("\r\nAllow: GET, HEAD\r\n") == (status == 405))
            }
            #expect(HTTPFileResponder.errorResponse(status: 200, now: Self.now) == nil)
            #expect(HTTPFileResponder.errorResponse(status: 206, now: Self.now) == nil)
        }

        @Test func contentTypesComeFromTheExtension() {
            let cases: [(String, String)] = [
                ("/index.html", "text/html; charset=utf-8"), ("/a.HTM", "text/html; charset=utf-8"),
                ("/notes.txt", "text/plain; charset=utf-8"), ("/s.css", "text/css; charset=utf-8"),
                ("/app.js", "text/javascript; charset=utf-8"), ("/d.json", "application/json"),
                ("/p.png", "image/png"), ("/p.jpg", "image/jpeg"), ("/p.JPEG", "image/jpeg"), ("/p.gif", "image/gif"),
                ("/p.svg", "image/svg+xml"), ("/doc.pdf", "application/pdf"), ("/a.zip", "application/zip"),
                ("/a.tar.gz", "application/gzip"), ("/a.tar", "application/x-tar"),
                ("/debian.iso", "application/x-iso9660-image"), ("/fw.bin", "application/octet-stream"),
                ("/noext", "application/octet-stream"), ("/.hidden", "application/octet-stream"),
                ("/dir.html/file", "application/octet-stream"), ("/x.unknown", "application/octet-stream"),
                ("/trailing.", "application/octet-stream"), ("", "application/octet-stream"),
            ]
            for (path, type) in cases {
                #expect(HTTPFileResponder.contentType(forPath: path) == type, "\(path)")
            }
        }
    }
}
