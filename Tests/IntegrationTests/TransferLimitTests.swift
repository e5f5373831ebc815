// Misbehaving servers against the real netlifed's downloader and uploader (MisbehavingServer, test support):
// a server that accepts and never answers, falls silent after the head, says `150` and falls silent, or
// never says `226`, pauses the transfer after `transfer-idle-timeout` (part and record kept, the background
// task ended), and one that trickles a byte at a time pauses it after `transfer-low-speed-time`; an empty body or file is a finished, empty file; a 416 followed by a HEAD whose length
// contradicts the first answer restarts from 0 and never renames a short file as done. Each test ends with
// the daemon alive, `status` answering in milliseconds, and its descriptor and thread counts back where they
// began.

import Foundation
import Testing
import NetLifeTestSupport

/// A daemon whose transfers give up after 1 s without a byte, with the app `fetcher`.
private let limitsConfig = """
    [daemon]
    transfer-idle-timeout = 1s
    [app fetcher]
    auto-suspend = never
    """

/// The transfer of `fetcher` whose local file is `output`, from `transfers --json`.
private func transfer(_ daemon: TestDaemon, _ output: String) -> [String: Any] {
    let result = daemon.ctl("--json", "transfers", "fetcher")
    let reply = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any]
    return (reply?["transfers"] as? [[String: Any]])?.first { $0["output"] as? String == output } ?? [:]
}

/// The size of the file at `path`; -1 when there is none.
private func sizeOf(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? -1
}

/// Starts a download with `--no-wait`, waits until it is no longer running, and returns the transfer and
/// how long it ran.
private func downloadUntilStopped(_ daemon: TestDaemon, _ url: String, _ output: String,
                                  sourceLocation: SourceLocation = #_sourceLocation) -> (transfer: [String: Any], seconds: Double) {
    let started = Date()
    let result = daemon.ctl("download", "fetcher", url, "--output", output, "--no-wait")
    #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
    var found: [String: Any] = [:]
    let stopped = waitUntil(timeout: 15) {
        found = transfer(daemon, output)
        return (found["state"] as? String).map { $0 != "running" } ?? false
    }
    #expect(stopped, "the transfer stopped: \(found)\n\(daemon.log.suffix(2000))", sourceLocation: sourceLocation)
    return (found, Date().timeIntervalSince(started))
}

/// The daemon's descriptor and thread counts once it has made an outbound connection: the first one makes
/// its name resolver (one descriptor, kept for the daemon's life), so a baseline is taken after one.
private func baselineAfterOneStall(_ daemon: TestDaemon, _ url: String, _ output: String) -> ResourceBaseline {
    _ = downloadUntilStopped(daemon, url, output)
    return ResourceBaseline(daemon.probe)
}

/// Checks that a limit paused the transfer with a reason naming it, and that its background task ended.
private func expectPausedByTheIdleLimit(_ daemon: TestDaemon, _ transfer: [String: Any], seconds: Double, label: String,
                                        sourceLocation: SourceLocation = #_sourceLocation) {
    print("\(label): paused after \(String(format: "%.2f", seconds)) s: \(transfer["reason"] ?? "-")")
    #expect(transfer["state"] as? String == "paused", "\(transfer)", sourceLocation: sourceLocation)
    #expect(transfer["reason"] as? String == "no data for 1s", "\(transfer)", sourceLocation: sourceLocation)
    #expect(seconds >= 1 && seconds < 5 * slowdown, "paused after \(seconds) s", sourceLocation: sourceLocation)
    let tasks = daemon.status("fetcher")["tasks"] as? [[String: Any]]
    #expect(tasks?.isEmpty == true, "the transfer's background task ended: \(tasks ?? [])", sourceLocation: sourceLocation)
}

@Suite(.timeLimit(.minutes(2))) struct TransferLimitTests {
    @Test func anHTTPServerSilentAfterAcceptPausesTheDownload() throws {
        let server = try MisbehavingServer(http: .silentAfterAccept)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(server.port)/file.bin"
        let baseline = baselineAfterOneStall(daemon, url, out.file("first.bin"))
        let (transfer, seconds) = downloadUntilStopped(daemon, url, out.file("file.bin"))
        expectPausedByTheIdleLimit(daemon, transfer, seconds: seconds, label: "HTTP silent after accept")
        #expect(sizeOf(out.file("file.bin")) == -1, "nothing renamed into place")
        daemon.expectHealthy(comparedTo: baseline, label: "an HTTP server silent after accept")
    }

    @Test func anHTTPServerSilentAfterTheHeadPausesAndKeepsThePart() throws {
        let content = patternBytes(1_000_000, seed: 31)
        let server = try MisbehavingServer(http: .silentAfterHead, content: content, cut: 100_000)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(server.port)/file.bin"
        let baseline = baselineAfterOneStall(daemon, url, out.file("first.bin"))
        let output = out.file("file.bin")
        let (transfer, seconds) = downloadUntilStopped(daemon, url, output)
        expectPausedByTheIdleLimit(daemon, transfer, seconds: seconds, label: "HTTP silent after the head")
        #expect(transfer["bytes"] as? Int == 100_000 && transfer["total"] as? Int == 1_000_000, "\(transfer)")
        #expect(sizeOf(output + ".part") == 100_000, "the part is kept for a resume")
        #expect(out.read("file.bin.part.meta").contains("offset=100000"), "the record vouches for it")
        #expect(sizeOf(output) == -1)
        daemon.expectHealthy(comparedTo: baseline, label: "an HTTP server silent after the head")
    }

    @Test func aTrickleUnderTheLowSpeedLimitPausesTheDownload() throws {
        let server = try MisbehavingServer(http: .trickle, content: patternBytes(10_000, seed: 36))
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        // Five bytes a second never leave the transfer idle for 1 s, but stay far under 1,000 bytes/s.
        let daemon = try TestDaemon(config: limitsConfig.replacingOccurrences(
            of: "transfer-idle-timeout = 1s", with: "transfer-idle-timeout = 1s\ntransfer-low-speed-limit = 1000\ntransfer-low-speed-time = 2s"))
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(server.port)/file.bin"
        let baseline = baselineAfterOneStall(daemon, url, out.file("first.bin"))
        let (transfer, seconds) = downloadUntilStopped(daemon, url, out.file("file.bin"))
        print("HTTP trickle: paused after \(String(format: "%.2f", seconds)) s: \(transfer["reason"] ?? "-")")
        #expect(transfer["state"] as? String == "paused", "\(transfer)")
        let reason = transfer["reason"] as? String ?? ""
        #expect(reason.hasPrefix("slower than 1000 bytes/s for 2s ("), "\(transfer)")
        #expect(seconds >= 2 && seconds < 6 * slowdown, "paused after \(seconds) s")
        let bytes = transfer["bytes"] as? Int ?? 0
        #expect(bytes > 0 && bytes < 100, "some bytes arrived, slowly: \(bytes)")
        #expect(sizeOf(out.file("file.bin.part")) == bytes, "the part is kept")
        let tasks = daemon.status("fetcher")["tasks"] as? [[String: Any]]
        #expect(tasks?.isEmpty == true, "\(tasks ?? [])")
        daemon.expectHealthy(comparedTo: baseline, label: "a trickling HTTP server")
    }

    @Test func anEmptyBodyIsAFinishedEmptyFile() throws {
        let server = try MisbehavingServer(http: .emptyBody)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let output = out.file("empty.bin")
        let done = daemon.ctl("download", "fetcher", "http://127.0.0.1:\(server.port)/empty.bin", "--output", output)
        #expect(done.status == 0, "\(done)")
        #expect(done.stdout.contains("done, 0/0 bytes"), "\(done.stdout)")
        #expect(sizeOf(output) == 0, "an empty file in place")
        #expect(sizeOf(output + ".part") == -1 && sizeOf(output + ".part.meta") == -1)
        #expect(server.requests == ["GET -"], "one request, no retry: \(server.requests)")
        daemon.expectHealthy(comparedTo: nil, label: "an empty body")
    }

    @Test func a416WithAHEADThatContradictsTheRecordRestartsFromZero() throws {
        let content = patternBytes(1_000_000, seed: 32)
        let server = try MisbehavingServer(http: .lyingAfter416, content: content, cut: 300_000)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(server.port)/file.bin"
        let output = out.file("file.bin")
        // 300,000 of 1,000,000 bytes, then silence: paused with the part and a record of the total.
        let (paused, _) = downloadUntilStopped(daemon, url, output)
        #expect(paused["state"] as? String == "paused" && paused["bytes"] as? Int == 300_000, "\(paused)")
        // The resume gets 416 `bytes */300000`, and a HEAD with the same ETag says 300,000 bytes: that
        // contradicts the 1,000,000 recorded, so the download starts over and ends with the whole file.
        let done = daemon.ctl("download", "fetcher", url, "--output", output)
        #expect(done.status == 0, "\(done)")
        #expect(done.stdout.contains("done, 1000000/1000000 bytes"), "\(done.stdout)")
        #expect(sizeOf(output) == 1_000_000, "never the short part renamed as done")
        #expect(sha256(output) == sha256(server.directory.file("file.bin")))
        #expect(server.requests == ["GET -", "GET bytes=300000-", "HEAD -", "GET -"], "\(server.requests)")
        daemon.expectHealthy(comparedTo: nil, label: "a 416 and a lying HEAD")
    }

    @Test func anUploadToAServerSilentAfterAcceptPauses() throws {
        let server = try MisbehavingServer(http: .silentAfterAccept)
        defer { server.stop() }
        let files = TemporaryDirectory()
        defer { files.remove() }
        _ = FileManager.default.createFile(atPath: files.file("up.bin"), contents: Data(patternBytes(10_000, seed: 33)))
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let baseline = baselineAfterOneStall(daemon, "http://127.0.0.1:\(server.port)/warm-up", files.file("warm-up.bin"))
        let started = Date()
        #expect(daemon.ctl("upload", "fetcher", files.file("up.bin"), "http://127.0.0.1:\(server.port)/up", "--no-wait").status == 0)
        var upload: [String: Any] = [:]
        #expect(waitUntil(timeout: 15) {
            upload = transfer(daemon, files.file("up.bin"))
            return upload["state"] as? String == "paused"
        }, "\(upload)")
        expectPausedByTheIdleLimit(daemon, upload, seconds: Date().timeIntervalSince(started), label: "upload, silent server")
        daemon.expectHealthy(comparedTo: baseline, label: "an upload to a silent server")
    }
}

@Suite(.timeLimit(.minutes(2))) struct FTPTransferLimitTests {
    /// Downloads `file.bin` from a server in `mode` until the download stops; returns the transfer, how long
    /// it ran, and the daemon's baseline taken before (checked by the caller).
    private func pausedDownload(_ mode: MisbehavingServer.FTPMode, content: [UInt8] = patternBytes(50_000, seed: 34),
                                label: String, then: (TestDaemon, MisbehavingServer, String) -> Void = { _, _, _ in }) throws {
        let server = try MisbehavingServer(ftp: mode, content: content)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let output = out.file("file.bin")
        let url = "ftp://127.0.0.1:\(server.port)/file.bin"
        let baseline = baselineAfterOneStall(daemon, url, out.file("first.bin"))
        let (transfer, seconds) = downloadUntilStopped(daemon, url, output)
        expectPausedByTheIdleLimit(daemon, transfer, seconds: seconds, label: label)
        then(daemon, server, output)
        daemon.expectHealthy(comparedTo: baseline, label: label)
    }

    @Test func anFTPServerThatNeverGreetsPausesTheDownload() throws {
        try pausedDownload(.silentAfterAccept, label: "FTP silent after accept")
    }

    @Test func anFTPServerSilentAfter150PausesTheDownload() throws {
        try pausedDownload(.silentAfter150, label: "FTP silent after 150") { _, server, _ in
            // The stall came after RETR's 150 (a retry the pause raced with may have begun since: not `.last`).
            #expect(server.requests.contains("CMD RETR file.bin"), "\(server.requests)")
        }
    }

    /// libcurl would wait for the 226 holding the loop; netlifed ends the retrieval itself once the whole
    /// file (SIZE bytes) is on disk, so a server that never sends it costs nothing.
    @Test func anFTPServerThatNeverSends226StillGivesTheWholeFileAndNeverHoldsTheLoop() throws {
        let server = try MisbehavingServer(ftp: .no226, content: patternBytes(50_000, seed: 35))
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let output = out.file("file.bin")
        let started = Date()
        let done = daemon.ctl("download", "fetcher", "ftp://127.0.0.1:\(server.port)/file.bin", "--output", output)
        let seconds = Date().timeIntervalSince(started)
        #expect(done.status == 0, "\(done)\n\(daemon.log.suffix(2000))")
        #expect(sha256(output) == sha256(server.directory.file("file.bin")), "byte-exact")
        #expect(seconds < 1 * slowdown, "done in \(seconds) s: nothing waited for the 226")
        #expect(server.requests.filter { $0.hasPrefix("CMD RETR") }.count == 1, "\(server.requests)")
        daemon.expectHealthy(comparedTo: nil, label: "FTP without 226")
    }

    @Test func anEmptyFTPFileIsAFinishedEmptyFile() throws {
        let server = try MisbehavingServer(ftp: .normal, content: [])
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let output = out.file("empty.bin")
        let done = daemon.ctl("download", "fetcher", "ftp://127.0.0.1:\(server.port)/file.bin", "--output", output)
        #expect(done.status == 0, "\(done)")
        #expect(done.stdout.contains("done, 0/0 bytes"), "\(done.stdout)")
        #expect(sizeOf(output) == 0)
        #expect(sizeOf(output + ".part") == -1 && sizeOf(output + ".part.meta") == -1)
        daemon.expectHealthy(comparedTo: nil, label: "an empty FTP file")
    }

    @Test func anHTTPServerThatSwitchesProtocolsAndFallsSilentPausesTheDownload() throws {
        let server = try MisbehavingServer(http: .switchingProtocols)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let (transfer, seconds) = downloadUntilStopped(daemon, "http://127.0.0.1:\(server.port)/file.bin", out.file("file.bin"))
        #expect(transfer["state"] as? String == "paused" && transfer["reason"] as? String == "no data for 1s", "\(transfer)")
        #expect(seconds < 5 * slowdown, "stopped after \(seconds) s")
        #expect(sizeOf(out.file("file.bin")) == -1, "nothing renamed into place")
        daemon.expectHealthy(comparedTo: nil, label: "an HTTP server that switches protocols")
    }

    @Test func anFTPSizeThatIsNoSaneNumberFailsTheDownloadWithAReason() throws {
        let server = try MisbehavingServer(ftp: .hugeSize, content: patternBytes(10_000, seed: 36))
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: limitsConfig)
        defer { daemon.stop() }
        let output = out.file("file.bin")
        let result = daemon.ctl("download", "fetcher", "ftp://127.0.0.1:\(server.port)/file.bin", "--output", output)
        #expect(result.status != 0, "\(result)")
        let listed = transfer(daemon, output)
        #expect(listed["state"] as? String == "failed" || listed["state"] as? String == "paused", "\(listed)")
        #expect((listed["reason"] as? String ?? "").contains("SIZE"), "\(listed)")
        #expect(sizeOf(output) == -1, "no empty file renamed into place")
        daemon.expectHealthy(comparedTo: nil, label: "an FTP SIZE of 26 digits")
    }
}
