// The access log's line: the combined log format, with what a peer sent escaped as nginx escapes it.

import NetLife
@testable import NetLifeServices
import Testing

@Suite(.timeLimit(.minutes(1))) struct AccessLogTests {
    @Test func aLineIsInTheCombinedLogFormat() {
        let head = HTTPRequestHead(method: "GET", target: "/a.bin?x=1", minorVersion: 1,
                                   headers: [HTTPHeader(name: "referer", value: "http://example.com/"),
                                             HTTPHeader(name: "user-agent", value: "curl/7.88.1")])
        // 2026-12-03 14:05:09 UTC
        #expect(AccessLogLine.format(host: "127.0.0.1", time: 1_796_306_709, request: head, status: 206, bodyBytes: 100)
                == #"127.0.0.1 - - [03/Dec/2026:14:05:09 +0000] "GET /a.bin?x=1 HTTP/1.1" 206 100 "http://example.com/" "curl/7.88.1""#)
        let bare = HTTPRequestHead(method: "HEAD", target: "/", minorVersion: 0)
        #expect(AccessLogLine.format(host: "::1", time: 0, request: bare, status: 200, bodyBytes: 0)
                == #"::1 - - [01/Jan/1970:00:00:00 +0000] "HEAD / HTTP/1.0" 200 0 "-" "-""#)
        #expect(AccessLogLine.format(host: "10.0.0.1", time: 0, request: nil, status: 400, bodyBytes: 150).contains(#"] "-" 400 150 "-" "-""#))
    }

    @Test func quotesBackslashesControlAndHighBytesAreEscapedAsNginxDoes() {
        #expect(AccessLogLine.escaped("a\"b\\c") == #"a\x22b\x5Cc"#)
        #expect(AccessLogLine.escaped("x\ny\tz\u{7F}") == #"x\x0Ay\x09z\x7F"#)
        #expect(AccessLogLine.escaped("é") == #"\xC3\xA9"#)
        let forged = HTTPRequestHead(method: "GET", target: "/", headers: [HTTPHeader(name: "user-agent", value: "ua\" 200 0 \"x")])
        let line = AccessLogLine.format(host: "h", time: 0, request: forged, status: 404, bodyBytes: 1)
        #expect(line.hasSuffix(#""ua\x22 200 0 \x22x""#), "a quote cannot end the field: \(line)")
    }

    @Test func theKeyIsAPathInAnExistingDirectoryJournalOrNo() throws {
        #expect(try AccessLogDestination.parse("no") == nil)
        #expect(try AccessLogDestination.parse("journal") == .journal)
        #expect(try AccessLogDestination.parse("/tmp/access.log") == .file("/tmp/access.log"))
        #expect(throws: ServiceOptionError.self) { try AccessLogDestination.parse("access.log") }
        #expect(throws: ServiceOptionError.self) { try AccessLogDestination.parse("/no/such/directory/access.log") }
        #expect(throws: ServiceOptionError.self) { try AccessLogDestination.parse("/tmp/") }
    }
}
