// The downloader against a real server of another make: Debian's nginx-light, started by the test on a
// random 127.a.b.c (port 8080, so that parallel tests never collide and no port is guessed by binding and
// closing), serving a file with its own strong ETag and byte ranges, slowed down with `limit_rate` so that
// the lifecycle can interrupt the transfer. Its access log shows what each request asked and got.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(2))) struct NginxDownloadTests {
    @Test func aDownloadFromNginxPausedByTheLifecycleResumesWithRangeAndIfRange() throws {
        let nginx = try NginxServer(rate: 1_000_000)
        defer { nginx.stop() }
        let content = patternBytes(4_000_000, seed: 11)
        _ = FileManager.default.createFile(atPath: nginx.directory.file("www/file.bin"), contents: Data(content))
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: """
            [daemon]
            [app fetcher]
            auto-suspend = never
            task-time = 1s
            expiration-lead = 500ms
            """)
        defer { daemon.stop() }
        let output = out.file("file.bin")
        #expect(daemon.ctl("download", "fetcher", "http://\(nginx.host):\(nginx.port)/file.bin", "--output", output, "--no-wait").status == 0)
        #expect(waitUntil(timeout: 5) { (Int(out.file("file.bin.part").fileSize) ?? 0) > 500_000 })
        // The background task runs out after 1 s and the download pauses; the app suspends.
        #expect(daemon.ctl("background", "fetcher").status == 0)
        #expect(daemon.ctl("suspend", "fetcher").status == 0)
        #expect(waitUntil(timeout: 5) { daemon.currentState("fetcher") == "suspended" })
        #expect(daemon.ctl("transfers", "fetcher").stdout.contains("paused"))
        let kept = Int(out.file("file.bin.part").fileSize) ?? 0
        #expect(kept > 0 && kept < content.count, "part: \(kept) bytes")
        #expect(daemon.ctl("foreground", "fetcher").status == 0)
        #expect(waitUntil(timeout: 15) { daemon.ctl("transfers", "fetcher").stdout.contains("done") }, "\(daemon.ctl("transfers").stdout)")
        #expect(sha256(output) == sha256(nginx.directory.file("www/file.bin")), "byte-exact")
        // nginx saw a plain GET, then a range request from where the part stopped, with its ETag in If-Range,
        // and sent only the rest.
        let log = nginx.accessLog
        #expect(log.count == 2, "\(log)")
        let resumed = log.last ?? ""
        #expect(resumed.contains("range=\"bytes=") && resumed.contains(" 206 "), "\(log)")
        #expect(resumed.contains("if-range=\"\\x22"), "If-Range carried nginx's strong ETag (nginx logs a quote as \\x22): \(log)")
        let offset = resumed.components(separatedBy: "range=\"bytes=").last?.split(separator: "-").first.flatMap { Int($0) } ?? -1
        let sent = resumed.split(separator: " ").last.flatMap { Int($0) } ?? -1
        #expect(offset > 0 && sent == content.count - offset, "\(resumed)")
    }
}

private extension String {
    /// The size of the file at this path, as text ("" when it does not exist).
    var fileSize: String {
        ((try? FileManager.default.attributesOfItem(atPath: self)[.size]) as? Int).map(String.init) ?? ""
    }
}
