// What the metrics endpoint answers to each kind of request (MetricsAnswer, pure): GET and HEAD of /metrics, 404
// and 405 for anything else, the parser's own statuses, and the heads and chunks it writes.

@testable import NetLifeDaemon
import NetLifeServices
import Testing

/// The answer to the request head `text`, as the endpoint reads it.
private func answer(_ text: String) -> MetricsAnswer {
    var parser = HTTPRequestParser()
    do {
        guard let (head, _) = try parser.parse(Array(text.utf8)) else { return .error(status: 0, message: "incomplete") }
        return MetricsAnswer(head)
    } catch {
        return MetricsAnswer(error)
    }
}

@Suite struct MetricsAnswerTests {
    @Test func getAndHeadOfMetricsAreServedAndAQueryIsIgnored() {
        #expect(answer("GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n") == .metrics(withBody: true, chunked: true, keepAlive: true))
        #expect(answer("GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n\r\n") == .metrics(withBody: true, chunked: true, keepAlive: true))
        #expect(answer("HEAD /metrics HTTP/1.1\r\nHost: h\r\n\r\n") == .metrics(withBody: false, chunked: true, keepAlive: true))
        #expect(answer("GET http://h:9/metrics HTTP/1.1\r\nHost: h\r\n\r\n") == .metrics(withBody: true, chunked: true, keepAlive: true))
        #expect(answer("GET /metrics HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n") == .metrics(withBody: true, chunked: true, keepAlive: false))
        #expect(answer("GET /metrics HTTP/1.0\r\n\r\n") == .metrics(withBody: true, chunked: false, keepAlive: false),
                "HTTP/1.0 reads the text until the connection closes")
        #expect(answer("GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") == .metrics(withBody: true, chunked: false, keepAlive: false))
    }

    @Test func anyOtherPathIs404AndAnyOtherMethod405() {
        #expect(answer("GET / HTTP/1.1\r\nHost: h\r\n\r\n") == .error(status: 404, message: "only /metrics is served here", keepAlive: true))
        #expect(answer("GET /metrics/x HTTP/1.1\r\nHost: h\r\n\r\n").status == 404)
        #expect(answer("GET /metricsx HTTP/1.1\r\nHost: h\r\n\r\n").status == 404)
        #expect(answer("POST /metrics HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n")
                == .error(status: 405, message: "/metrics is read with GET or HEAD", allow: "GET, HEAD", keepAlive: false),
                "a body is never read: the connection closes")
        #expect(answer("DELETE /metrics HTTP/1.1\r\nHost: h\r\n\r\n").status == 405)
        #expect(answer("GET /metrics HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n") == .metrics(withBody: true, chunked: true, keepAlive: false))
        #expect(answer("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n").status == 400)
    }

    @Test func whatTheParserRefusesKeepsItsStatusAndClosesTheConnection() {
        #expect(answer("garbage\r\n\r\n") == .error(status: 400, message: answerMessage("garbage\r\n\r\n")))
        #expect(answer("GET /metrics HTTP/2.0\r\nHost: h\r\n\r\n").status == 505)
        #expect(answer("GET /metrics HTTP/1.1\r\n\r\n").status == 400, "HTTP/1.1 needs Host")
        #expect(answer("GET /metrics HTTP/1.1\r\nHost: h\r\n" + String(repeating: "X-A: b\r\n", count: 1200) + "\r\n").status == 431)
        #expect(answer("GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\n").status == 414)
        for status in [400, 408, 414, 431, 505] {
            #expect(!MetricsAnswer.error(status: status, message: "m").keepsConnection)
        }
    }

    @Test func eachAnswerHeadSaysWhatFollows() {
        let ok = String(decoding: MetricsAnswer.metrics(withBody: true, chunked: true, keepAlive: true).bytes, as: UTF8.self)
        #expect(ok == "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n")
        let old = String(decoding: MetricsAnswer.metrics(withBody: true, chunked: false, keepAlive: false).bytes, as: UTF8.self)
        #expect(old == "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nConnection: close\r\n\r\n")
        let refused = String(decoding: MetricsAnswer.error(status: 405, message: "no", allow: "GET, HEAD").bytes, as: UTF8.self)
        #expect(refused == "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 27\r\n"
                + "Allow: GET, HEAD\r\nConnection: close\r\n\r\n405 Method Not Allowed: no\n")
        #expect(MetricsAnswer.chunk(Array("hello".utf8)) == Array("5\r\nhello\r\n".utf8))
        #expect(MetricsAnswer.chunk(Array(repeating: 0x61, count: 300)).prefix(5) == Array("12c\r\n".utf8)[...])
        #expect(MetricsAnswer.chunk([]).isEmpty, "an empty chunk would end the body")
    }
}

private func answerMessage(_ text: String) -> String {
    var parser = HTTPRequestParser()
    do { _ = try parser.parse(Array(text.utf8)) } catch { return error.message }
    return ""
}

private extension MetricsAnswer {
    var status: Int {
        if case .error(let status, _, _, _) = self { status } else { 200 }
    }
}

