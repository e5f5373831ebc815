// Resumable uploads into the real netlifed's http service (`upload-root`), driven with curl and raw sockets:
// creation, the offset, a PATCH at a wrong offset (409, nothing changed), a PATCH cut mid-body (by a raw
// socket, and by curl killed with SIGKILL while it sends through a slow link) whose bytes are kept, the rest
// sent from the server's offset, the finished file byte-exact and visible only at completion; and what the
// service refuses.

import Foundation
import Testing
import NetLifeTestSupport

/// An app `files` whose listener `main` serves `root` and takes uploads into `uploads`.
private func uploadApp(root: String, uploads: String, lines: String = "") -> String {
    httpApp(root: root, listenerLines: "upload-root = \(uploads)\n\(lines)")
}

/// What curl saw: the final status and header fields (names lowercased), and the body.
private struct CurlResult {
    var status: Int
    var headers: [String: String]
    var body: String
}

/// Runs curl with `arguments` against `url` and reads the final response (interim 100 and 104 heads skipped).
private func curl(_ arguments: [String], _ url: String, timeout: TimeInterval = 30) -> CurlResult {
    let scratch = TemporaryDirectory()
    defer { scratch.remove() }
    let result = run(["/usr/bin/curl", "-sS", "-D", scratch.file("head"), "-o", scratch.file("body")] + arguments + [url], timeout: timeout)
    var status = 0
    var headers: [String: String] = [:]
    for line in scratch.read("head").components(separatedBy: "\r\n") {
        if line.hasPrefix("HTTP/") {
            status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
            headers = [:]
        } else if let colon = line.firstIndex(of: ":") {
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }
    if result.status != 0 { Issue.record("curl \(arguments) failed: \(result)") }
    return CurlResult(status: status, headers: headers, body: scratch.read("body"))
}

private let partialUpload = ["-H", "Content-Type: application/partial-upload"]

/// The upload side of one daemon: its URL and curl's requests.
private struct Uploads {
    let base: String

    func create(_ path: String, length: Int?) -> CurlResult {
        curl(["-X", "POST", "-H", "Upload-Complete: ?0"] + (length.map { ["-H", "Upload-Length: \($0)"] } ?? []), base + path)
    }

    func offset(_ resource: String) -> CurlResult {
        curl(["-I"], base + resource)
    }

    func patch(_ resource: String, offset: Int, complete: Bool, file: String, extra: [String] = []) -> CurlResult {
        curl(["-X", "PATCH"] + partialUpload + ["-H", "Upload-Offset: \(offset)", "-H", "Upload-Complete: \(complete ? "?1" : "?0")",
              "--data-binary", "@" + file] + extra, base + resource)
    }
}

private func write(_ path: String, _ bytes: ArraySlice<UInt8>) {
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
}

private func fileSize(_ path: String) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int
}

/// The temporary file of a resource (`/.netlife-upload/ID`) under `uploads`.
private func partPath(_ uploads: String, _ resource: String) -> String {
    uploads + "/.netlife-upload/" + (resource.split(separator: "/").last.map(String.init) ?? "") + ".part"
}

@Suite(.timeLimit(.minutes(5))) struct UploadServerTests {
    @Test func createAppendAtTheOffsetAndComplete() throws {
        let root = TemporaryDirectory()
        let uploads = TemporaryDirectory()
        defer { root.remove(); uploads.remove() }
        let content = patternBytes(300_000, seed: 11)
        write(root.file("a.bin"), content[0..<100_000])
        write(root.file("b.bin"), content[100_000...])
        write(root.file("wrong.bin"), content[0..<5000])
        let daemon = try TestDaemon(config: uploadApp(root: root.path, uploads: uploads.path))
        defer { daemon.stop() }
        let server = Uploads(base: "http://127.0.0.1:\(daemon.port(of: "files"))")

        let created = server.create("/f.bin", length: content.count)
        #expect(created.status == 201)
        #expect(created.headers["upload-complete"] == "?0")
        #expect(created.headers["upload-limit"]?.hasPrefix("max-size=1073741824") == true)
        let resource = try #require(created.headers["location"])
        #expect(resource.hasPrefix("/.netlife-upload/") && resource.count == "/.netlife-upload/".count + 32)

        let head = server.offset(resource)
        #expect(head.status == 204)
        #expect(head.headers["upload-offset"] == "0")
        #expect(head.headers["upload-complete"] == "?0")
        #expect(head.headers["upload-length"] == "300000")
        #expect(head.headers["cache-control"] == "no-store")

        let first = server.patch(resource, offset: 0, complete: false, file: root.file("a.bin"))
        #expect(first.status == 204)
        #expect(first.headers["upload-offset"] == "100000")
        let part = partPath(uploads.path, resource)
        let before = sha256(part)

        // A PATCH at a wrong offset: 409 with the server's offset, and the temporary file unchanged.
        for offset in [0, 99_999, 100_001, 300_000] {
            let conflict = server.patch(resource, offset: offset, complete: false, file: root.file("wrong.bin"))
            #expect(conflict.status == 409, "offset \(offset)")
            #expect(conflict.headers["upload-offset"] == "100000")
            #expect(conflict.headers["upload-complete"] == "?0")
            #expect(conflict.body.contains("mismatching-upload-offset"))
        }
        #expect(fileSize(part) == 100_000)
        #expect(sha256(part) == before)
        #expect(server.offset(resource).headers["upload-offset"] == "100000")
        #expect(!FileManager.default.fileExists(atPath: uploads.file("f.bin")), "nothing at the target before completion")

        let last = server.patch(resource, offset: 100_000, complete: true, file: root.file("b.bin"))
        #expect(last.status == 201)
        #expect(last.headers["upload-complete"] == "?1")
        #expect(last.headers["location"] == "/f.bin")
        write(root.file("whole.bin"), content[...])
        #expect(sha256(uploads.file("f.bin")) == sha256(root.file("whole.bin")))
        #expect(!FileManager.default.fileExists(atPath: part), "the temporary file became the target")
        let done = server.offset(resource)
        #expect(done.headers["upload-complete"] == "?1" && done.headers["upload-offset"] == "300000")

        // A second upload to the same path replaces the file atomically (200), in one request with ?1.
        let again = curl(["-X", "PUT", "-H", "Upload-Complete: ?1", "--data-binary", "@" + root.file("a.bin")], server.base + "/f.bin")
        #expect(again.status == 200)
        #expect(again.headers["upload-complete"] == "?1")
        #expect(fileSize(uploads.file("f.bin")) == 100_000)

        // DELETE cancels: the resource and its bytes are gone.
        let cancelled = try #require(server.create("/g.bin", length: nil).headers["location"])
        #expect(curl(["-X", "DELETE"], server.base + cancelled).status == 204)
        #expect(server.offset(cancelled).status == 404)
        #expect(!FileManager.default.fileExists(atPath: partPath(uploads.path, cancelled)))
        #expect(daemon.isRunning)
    }

    @Test func aPatchCutMidBodyKeepsWhatArrived() throws {
        let root = TemporaryDirectory()
        let uploads = TemporaryDirectory()
        defer { root.remove(); uploads.remove() }
        let content = patternBytes(400_000, seed: 3)
        let daemon = try TestDaemon(config: uploadApp(root: root.path, uploads: uploads.path))
        defer { daemon.stop() }
        let port = daemon.port(of: "files")
        let server = Uploads(base: "http://127.0.0.1:\(port)")
        let resource = try #require(server.create("/cut.bin", length: content.count).headers["location"])

        // A raw socket sends the head and 123,457 bytes of the body, then ends its side.
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        peer.send("PATCH \(resource) HTTP/1.1\r\nHost: x\r\nContent-Type: application/partial-upload\r\nUpload-Offset: 0\r\n"
            + "Upload-Complete: ?1\r\nContent-Length: \(content.count)\r\n\r\n")
        var sent = 0
        while sent < 123_457 {
            let count = peer.send(bytes: Array(content[sent..<min(123_457, sent + 16384)]))
            #expect(count > 0)
            if count <= 0 { break }
            sent += count
        }
        shutdown(peer.fd, Int32(SHUT_WR))
        #expect(peer.readEnd(timeout: 5) != .timedOut, "the server closes the cut request's connection")

        let head = server.offset(resource)
        #expect(head.headers["upload-offset"] == "123457", "the bytes that arrived are kept")
        #expect(head.headers["upload-complete"] == "?0")
        #expect(!FileManager.default.fileExists(atPath: uploads.file("cut.bin")), "a half upload is never visible")

        write(root.file("rest.bin"), content[123_457...])
        let last = server.patch(resource, offset: 123_457, complete: true, file: root.file("rest.bin"))
        #expect(last.status == 201)
        write(root.file("whole.bin"), content[...])
        #expect(sha256(uploads.file("cut.bin")) == sha256(root.file("whole.bin")))
    }

    @Test func curlKilledWhileSendingResumesByteExactly() throws {
        let root = TemporaryDirectory()
        let uploads = TemporaryDirectory()
        defer { root.remove(); uploads.remove() }
        let content = patternBytes(2_000_000, seed: 9)
        write(root.file("big.bin"), content[...])
        let daemon = try TestDaemon(config: uploadApp(root: root.path, uploads: uploads.path))
        defer { daemon.stop() }
        let server = Uploads(base: "http://127.0.0.1:\(daemon.port(of: "files"))")
        let resource = try #require(server.create("/big.bin", length: content.count).headers["location"])
        let part = partPath(uploads.path, resource)

        // curl sends the whole file through a slow link (200 KB/s) and is killed with SIGKILL midway.
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        sender.arguments = ["-sS", "-o", "/dev/null", "--limit-rate", "200K", "-X", "PATCH"] + partialUpload
            + ["-H", "Upload-Offset: 0", "-H", "Upload-Complete: ?1", "-T", root.file("big.bin"), server.base + resource]
        sender.standardOutput = FileHandle.nullDevice
        sender.standardError = FileHandle.nullDevice
        try sender.run()
        #expect(waitUntil(timeout: 20) { (fileSize(part) ?? 0) >= 300_000 }, "curl's bytes reach the temporary file as they come")
        kill(sender.processIdentifier, SIGKILL)
        sender.waitUntilExit()
        // The server sees the connection end and keeps what arrived.
        #expect(waitUntil(timeout: 10) {
            (daemon.status("files")["listeners"] as? [[String: Any]])?.first?["connections"] as? Int == 0
        })
        let head = server.offset(resource)
        let offset = try #require(head.headers["upload-offset"].flatMap { Int($0) })
        #expect(offset >= 300_000 && offset < content.count, "offset \(offset)")
        #expect(offset == fileSize(part))
        #expect(!FileManager.default.fileExists(atPath: uploads.file("big.bin")), "a half upload is never visible")

        write(root.file("rest.bin"), content[offset...])
        let last = server.patch(resource, offset: offset, complete: true, file: root.file("rest.bin"))
        #expect(last.status == 201)
        #expect(sha256(uploads.file("big.bin")) == sha256(root.file("big.bin")))
    }

    @Test func aStalledBodyIsCutOffAndASlowSteadyOneIsNot() throws {
        let root = TemporaryDirectory()
        let uploads = TemporaryDirectory()
        defer { root.remove(); uploads.remove() }
        let daemon = try TestDaemon(config: uploadApp(root: root.path, uploads: uploads.path, lines: "request-timeout = 500ms"))
        defer { daemon.stop() }
        let port = daemon.port(of: "files")
        let server = Uploads(base: "http://127.0.0.1:\(port)")
        let content = patternBytes(3000, seed: 5)

        // 1000 bytes, then nothing: cut off within two request timeouts, the bytes kept.
        let stalled = try #require(server.create("/stalled.bin", length: content.count).headers["location"])
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        peer.send("PATCH \(stalled) HTTP/1.1\r\nHost: x\r\nContent-Type: application/partial-upload\r\nUpload-Offset: 0\r\n"
            + "Upload-Complete: ?1\r\nContent-Length: 3000\r\n\r\n")
        #expect(peer.send(bytes: Array(content[0..<1000])) == 1000)
        let start = Date()
        let end = peer.readEnd(timeout: 5)
        let seconds = Date().timeIntervalSince(start)
        #expect(end == .endOfStream || end == .error(ECONNRESET), "\(end)")
        #expect(seconds >= 0.4 && seconds < 2 * slowdown, "cut off after \(seconds) s")
        #expect(server.offset(stalled).headers["upload-offset"] == "1000")

        // 100 bytes every 200 ms for 6 s: slow, but never 500 ms without a byte.
        let steady = try #require(server.create("/steady.bin", length: content.count).headers["location"])
        let slow = try #require(Peer.connect(port: port))
        defer { slow.close() }
        slow.send("PATCH \(steady) HTTP/1.1\r\nHost: x\r\nContent-Type: application/partial-upload\r\nUpload-Offset: 0\r\n"
            + "Upload-Complete: ?1\r\nContent-Length: 3000\r\n\r\n")
        for start in stride(from: 0, to: 3000, by: 100) {
            #expect(slow.send(bytes: Array(content[start..<(start + 100)])) == 100, "cut off at \(start)")
            usleep(200_000)
        }
        // 104 progress while it sends (at most one a second), then the final answer.
        var answer = ""
        let deadline = Date().addingTimeInterval(5)
        while !answer.contains("HTTP/1.1 201 Created"), Date() < deadline, case .bytes(let bytes) = slow.read(timeout: 1) {
            answer += String(decoding: bytes, as: UTF8.self)
        }
        #expect(answer.hasPrefix("HTTP/1.1 104 Upload Resumption Supported\r\nUpload-Offset: "), "\(answer)")
        #expect(answer.contains("HTTP/1.1 201 Created\r\n"), "\(answer)")
        #expect(waitUntil(timeout: 5) { fileSize(uploads.file("steady.bin")) == 3000 })
    }

    @Test func refusesWhatItMust() throws {
        let root = TemporaryDirectory()
        let outside = TemporaryDirectory()
        defer { root.remove(); outside.remove() }
        // Uploads go into the served root itself: the GET side must still never show the temporary data.
        try FileManager.default.createDirectory(atPath: root.file("dir"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root.file("escape"), withDestinationPath: outside.path)
        write(root.file("small.bin"), patternBytes(1000)[...])
        let daemon = try TestDaemon(config: uploadApp(root: root.path, uploads: root.path,
                                                      lines: "max-upload-size = 1K\nmax-uploads = 2\nupload-expiry = 1h"))
        defer { daemon.stop() }
        let port = daemon.port(of: "files")
        let server = Uploads(base: "http://127.0.0.1:\(port)")

        let resource = try #require(server.create("/dir/a.bin", length: 1000).headers["location"])
        #expect(server.patch(resource, offset: 0, complete: false, file: root.file("small.bin"), extra: ["-H", "Content-Type: text/plain"]).status == 415)
        #expect(server.patch(resource, offset: 0, complete: false, file: root.file("small.bin"), extra: ["-H", "Upload-Length: 999"]).status == 400)
        #expect(curl(["-X", "PATCH", "-H", "Upload-Offset: 0"] + partialUpload + ["--data-binary", "x"], server.base + resource).status == 400,
                "no Upload-Complete")
        #expect(server.patch(resource, offset: 0, complete: false, file: root.file("small.bin")).status == 204)
        #expect(curl(["-I"], server.base + "/.netlife-upload/").status == 404)
        let partName = String(partPath(root.path, resource).dropFirst(root.path.count))
        #expect(curl([], server.base + partName).status == 404, "the temporary data is never served")
        #expect(curl([], server.base + "/small.bin").status == 200)

        #expect(server.create("/big.bin", length: 1025).status == 413)
        #expect(server.create("/escape/x.bin", length: 10).status == 403, "a symlink out of the upload root")
        #expect(server.create("/missing/x.bin", length: 10).status == 404)
        #expect(server.create("/dir", length: 10).status == 409, "a directory is in the way")
        #expect(server.create("/.netlife-upload/x", length: 10).status == 404, "the staging directory is no target")
        #expect(curl(["-X", "POST", "--data-binary", "x"], server.base + "/c.bin").status == 400, "no Upload-Complete")
        #expect(curl(["-X", "POST", "-H", "Upload-Complete: ?1", "-H", "Transfer-Encoding: chunked", "--data-binary", "x"],
                     server.base + "/c.bin").status == 411)
        #expect(curl(["-X", "OPTIONS"], server.base + "/c.bin").headers["upload-limit"] == "max-size=1024, max-age=3600")

        // max-uploads 2: a second unfinished upload fits, a third does not.
        #expect(server.create("/dir/b.bin", length: 10).status == 201)
        #expect(server.create("/dir/c.bin", length: 10).status == 503)
        #expect(!FileManager.default.fileExists(atPath: outside.file("x.bin")))
        #expect(daemon.isRunning)
    }

    @Test func badOptionsAreRefusedByCheckConfig() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        for (lines, message) in [("upload-root = relative", "upload-root must be an existing directory"),
                                 ("upload-root = \(root.path)\nmax-upload-size = 1X", "max-upload-size must be"),
                                 ("upload-root = \(root.path)\nmax-upload-size = 99999999999T", "max-upload-size must be"),
                                 ("upload-root = \(root.path)\nmax-uploads = 0", "max-uploads must be"),
                                 ("upload-root = \(root.path)\nupload-expiry = 5", "upload-expiry must be"),
                                 ("max-upload-size = 1G", "max-upload-size needs upload-root")] {
            root.write("bad.conf", httpApp(root: root.path, listenerLines: lines))
            let result = run([product("netlifed"), "--check-config", root.file("bad.conf")])
            #expect(result.status == 1, "\(lines)")
            #expect(result.stderr.contains(message), "\(lines): \(result.stderr)")
        }
        // A directory this host lacks: the daemon would not start, so the check fails too (ConfigTests).
        root.write("missing.conf", httpApp(root: root.path, listenerLines: "upload-root = \(root.path)/missing"))
        let missing = run([product("netlifed"), "--check-config", root.file("missing.conf")])
        #expect(missing.status == 1 && missing.stderr.contains("service http: upload-root must be an existing directory"), "\(missing)")
        root.write("good.conf", httpApp(root: root.path, listenerLines: "upload-root = \(root.path)\nmax-upload-size = 512M\nmax-uploads = 10\nupload-expiry = 2h"))
        #expect(run([product("netlifed"), "--check-config", root.file("good.conf")]).status == 0)
    }
}
