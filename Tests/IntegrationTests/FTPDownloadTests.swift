// `netlifectl download` of ftp:// URLs against a real FTP server (pyftpdlib, FTPServer in test support):
// a whole file arrives byte-exact in passive mode; a download interrupted by the lifecycle resumes with
// `REST N`, N the part's size, and the server sends only the missing bytes; a file that changed in between
// (another MDTM) and a server that refuses REST both restart from 0 and end with the server's file.

import Foundation
import Testing
import NetLifeTestSupport


/// A pyftpdlib server holding `file.bin`, a netlifed with the app `fetcher` (config `fetcherConfig`), and a
/// directory for the output; `stop()` ends and removes them all.
private final class FTPFixture {
    let server: FTPServer
    let daemon: TestDaemon
    private let out = TemporaryDirectory()
    /// Where the download goes.
    var output: String { out.file("file.bin") }

    init(rate: Int, refusesREST: Bool = false, content: [UInt8], modified: Date? = nil, config: String = fetcherConfig) throws {
        do {
            server = try FTPServer(rate: rate, refusesREST: refusesREST)
        } catch {
            out.remove()
            throw error
        }
        do {
            try server.put("file.bin", content, modified: modified)
            daemon = try TestDaemon(config: config)
        } catch {
            server.stop()
            out.remove()
            throw error
        }
    }

    func stop() {
        daemon.stop()
        server.stop()
        out.remove()
    }
}

/// Starts downloading `name` from `server` into `output`, lets `atLeast` bytes arrive, sends the app to the
/// background (its time runs out and the download pauses) and waits until the server has seen the data
/// connection close. Returns the part's size.
private func startAndPause(_ daemon: TestDaemon, _ server: FTPServer, _ name: String, into output: String,
                           atLeast: Int, suspend: Bool = false) -> Int {
    #expect(daemon.ctl("download", "fetcher", server.url(name), "--output", output, "--no-wait").status == 0)
    #expect(waitUntil(timeout: 10) { fileSize(output + ".part") >= atLeast }, "\(daemon.ctl("transfers").stdout)")
    #expect(daemon.ctl("background", "fetcher").status == 0)
    if suspend {
        #expect(daemon.ctl("suspend", "fetcher").status == 0)
        #expect(waitUntil(timeout: 6) { daemon.currentState("fetcher") == "suspended" }, "suspended once the task expired")
    }
    #expect(waitUntil(timeout: 6) { daemon.ctl("transfers", "fetcher").stdout.contains("paused") })
    #expect(FileManager.default.fileExists(atPath: output + ".part.meta"), "the record is on disk")
    #expect(waitUntil(timeout: 5) { server.sent.count == 1 }, "the first data connection closed: \(server.sent)")
    return fileSize(output + ".part")
}

/// Brings the app back to the foreground and waits until the download is done, byte-exact, the server's
/// second data connection having sent `expectedSent` bytes.
private func resumeOnForeground(_ daemon: TestDaemon, _ server: FTPServer, _ name: String, into output: String,
                                expectedSent: Int, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(daemon.ctl("foreground", "fetcher").status == 0, sourceLocation: sourceLocation)
    #expect(waitUntil(timeout: 20) { daemon.ctl("transfers", "fetcher").stdout.contains("done") },
            "\(daemon.ctl("transfers").stdout)", sourceLocation: sourceLocation)
    #expect(sha256(output) == sha256(server.path(name)), "byte-exact, the server's file as it is now", sourceLocation: sourceLocation)
    // A data connection that carried nothing (libcurl opens it before a REST the server then refuses) is
    // no transfer.
    #expect(waitUntil(timeout: 5) { server.sent.filter { $0 > 0 }.count == 2 } && server.sent.last == expectedSent,
            "sent \(server.sent), expected \(expectedSent) the second time", sourceLocation: sourceLocation)
}

@Suite(.timeLimit(.minutes(2))) struct FTPDownloadTests {
    @Test func aWholeFileArrivesByteExactInPassiveMode() throws {
        let fixture = try FTPFixture(rate: 50_000_000, content: patternBytes(300_000, seed: 21), config: "[daemon]\n[app fetcher]\n")
        defer { fixture.stop() }
        let (server, daemon, output) = (fixture.server, fixture.daemon, fixture.output)
        let done = daemon.ctl("download", "fetcher", server.url("file.bin"), "--output", output)
        #expect(done.status == 0, "\(done)")
        #expect(done.stdout.contains("done, 300000/300000 bytes"), "\(done.stdout)")
        #expect(sha256(output) == sha256(server.path("file.bin")), "byte-exact")
        #expect(!FileManager.default.fileExists(atPath: output + ".part"))
        #expect(!FileManager.default.fileExists(atPath: output + ".part.meta"))
        // netlifed ends each request itself (the probe at SIZE, the retrieval once the file is whole), so no
        // QUIT is sent whose answer libcurl would wait for with the loop held.
        #expect(!server.commands.contains("QUIT"), "\(server.commands)")
        // libcurl: a probe (MDTM, SIZE; its REST 0 only asks whether REST works), then the retrieval.
        #expect(["MDTM file.bin", "SIZE file.bin", "EPSV", "RETR file.bin"].allSatisfy(server.commands.contains), "\(server.commands)")
        #expect(server.commands.filter { $0.hasPrefix("RETR") }.count == 1)
        #expect(!server.commands.contains { $0.hasPrefix("REST") && $0 != "REST 0" }, "\(server.commands)")
        #expect(server.sent == [300_000])

        // A file the server does not have: failed, with the server's answer.
        let missing = daemon.ctl("download", "fetcher", server.url("missing.bin"), "--output", output + ".missing")
        #expect(missing.status == 5, "\(missing)")
        #expect(missing.stdout.contains("failed (") && missing.stdout.contains("does not exist"), "\(missing.stdout)")
        #expect(daemon.isRunning)
    }

    @Test func aDownloadPausedByTheLifecycleResumesWithRESTAndOnlyTheMissingBytes() throws {
        let content = patternBytes(1_500_000, seed: 22)
        let fixture = try FTPFixture(rate: 200_000, content: content)
        defer { fixture.stop() }
        let (server, daemon, output) = (fixture.server, fixture.daemon, fixture.output)
        let kept = startAndPause(daemon, server, "file.bin", into: output, atLeast: 200_000, suspend: true)
        #expect(kept > 0 && kept < content.count, "part: \(kept) bytes")
        // The second session asks for the rest from where the part stopped, and gets only that.
        resumeOnForeground(daemon, server, "file.bin", into: output, expectedSent: content.count - kept)
        #expect(server.commands.contains("REST \(kept)"), "\(server.commands)")
        #expect(server.commands.filter { $0.hasPrefix("RETR") }.count == 2)
    }

    @Test func aFileThatChangedInBetweenRestartsFromZero() throws {
        let fixture = try FTPFixture(rate: 200_000, content: patternBytes(800_000, seed: 23), modified: Date(timeIntervalSince1970: 1_700_000_000))
        defer { fixture.stop() }
        let (server, daemon, output) = (fixture.server, fixture.daemon, fixture.output)
        let kept = startAndPause(daemon, server, "file.bin", into: output, atLeast: 100_000)
        #expect(kept > 0 && kept < 800_000)
        // The same length, other bytes, another modification time: only MDTM tells.
        let second = patternBytes(800_000, seed: 24)
        try server.put("file.bin", second, modified: Date(timeIntervalSince1970: 1_700_003_600))
        // The new file, whole, nothing of the old.
        resumeOnForeground(daemon, server, "file.bin", into: output, expectedSent: second.count)
        #expect(!server.commands.contains { $0.hasPrefix("REST") && $0 != "REST 0" }, "\(server.commands)")
    }

    @Test func aServerThatRefusesRESTGetsTheWholeFileAgain() throws {
        let content = patternBytes(800_000, seed: 25)
        let fixture = try FTPFixture(rate: 200_000, refusesREST: true, content: content)
        defer { fixture.stop() }
        let (server, daemon, output) = (fixture.server, fixture.daemon, fixture.output)
        let kept = startAndPause(daemon, server, "file.bin", into: output, atLeast: 100_000)
        resumeOnForeground(daemon, server, "file.bin", into: output, expectedSent: content.count)
        #expect(server.commands.contains("REST \(kept)"), "\(server.commands)")
    }
}
