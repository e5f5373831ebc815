// `netlifectl upload` end to end: one netlifed serves `upload-root` (the resumable-upload draft), another
// uploads to it under a background task, through a relay that slows the bytes down so that the uploading
// daemon can be killed with SIGKILL mid-way. Restarted, it asks the server for the offset (HEAD) and sends
// only the rest; the server's file appears only when complete, byte-exact.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(3))) struct UploadTransferTests {
    @Test func anUploadCutByKill9OfTheSenderResumesFromTheServersOffset() throws {
        let files = TemporaryDirectory()
        let uploads = TemporaryDirectory()
        let local = TemporaryDirectory()
        let state = TemporaryDirectory()
        defer { files.remove(); uploads.remove(); local.remove(); state.remove() }
        let server = try TestDaemon(config: httpApp(root: files.path, listenerLines: "upload-root = \(uploads.path)"))
        defer { server.stop() }
        let proxy = try ThrottlingProxy(upstreamPort: server.port(of: "files"), bytesPerSecond: 2_000_000)
        defer { proxy.stop() }
        let content = patternBytes(6_000_000, seed: 21)
        _ = FileManager.default.createFile(atPath: local.file("big.bin"), contents: Data(content))
        let url = "http://127.0.0.1:\(proxy.port)/big.bin"
        let config = """
            [daemon]
            state-directory = \(state.path)
            [app sender]
            auto-suspend = never
            """
        let first = try TestDaemon(config: config, expectedEnd: .anything)
        defer { first.stop() }
        let started = first.ctl("upload", "sender", local.file("big.bin"), url, "--no-wait")
        #expect(started.status == 0, "\(started)")
        #expect(waitUntil(timeout: 10) { proxy.forwarded.reduce(0, +) > 2_000_000 }, "\(proxy.forwarded)")
        first.signal(SIGKILL)
        #expect(first.waitForExit())
        #expect(!FileManager.default.fileExists(atPath: uploads.file("big.bin")), "half an upload is never visible")
        // The relay still forwards what the kernel had buffered from the dead sender: wait until it has
        // drained, so that the server's offset is final and the comparison below is exact.
        var cut = -1
        #expect(waitUntil(timeout: 10) {
            let now = proxy.forwarded.reduce(0, +)
            defer { cut = now }
            usleep(500_000)
            return now == cut
        })
        // Restarted with the same state directory: the journal and the upload's record bring it back.
        let second = try TestDaemon(config: config)
        defer { second.stop() }
        #expect(waitUntil(timeout: 20) { second.ctl("transfers", "sender").stdout.contains("done") },
                "\(second.ctl("transfers").stdout)\n\(second.log)")
        #expect(sha256(uploads.file("big.bin")) == sha256(local.file("big.bin")), "byte-exact on the server")
        let total = proxy.forwarded.reduce(0, +)
        // Only the rest went (plus request heads), not a second copy from 0.
        #expect(cut > 2_000_000 && cut < content.count, "cut at \(cut)")
        #expect(total - cut >= content.count - cut && total - cut < content.count - cut + 10_000, "forwarded \(proxy.forwarded), cut at \(cut)")
        #expect(second.log.contains("upload of"), "\(second.log)")
        #expect(server.isRunning)
    }

    @Test func netlifectlUploadWaitsAndRefusesWhatCannotWork() throws {
        let files = TemporaryDirectory()
        let uploads = TemporaryDirectory()
        let local = TemporaryDirectory()
        defer { files.remove(); uploads.remove(); local.remove() }
        let content = patternBytes(300_000, seed: 4)
        _ = FileManager.default.createFile(atPath: local.file("a.bin"), contents: Data(content))
        let daemon = try TestDaemon(config: httpApp(root: files.path, listenerLines: "upload-root = \(uploads.path)") + "\n[app sender]\n")
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(daemon.port(of: "files"))/a.bin"
        let done = daemon.ctl("upload", "sender", local.file("a.bin"), url)
        #expect(done.status == 0, "\(done)")
        #expect(done.stdout.contains("done, 300000/300000 bytes"), "\(done.stdout)")
        #expect(sha256(uploads.file("a.bin")) == sha256(local.file("a.bin")))
        #expect(daemon.ctl("upload", "sender", local.file("missing.bin"), url).status == 1)
        #expect(daemon.ctl("upload", "sender", local.file("a.bin"), "not a url").status == 1)
        let json = daemon.ctl("--json", "transfers")
        let reply = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let transfers = reply?["transfers"] as? [[String: Any]] ?? []
        #expect(transfers.contains { $0["direction"] as? String == "upload" && $0["state"] as? String == "done" })
    }
}
