// `netlifectl download` against the real binary: a download interrupted by the lifecycle (background,
// the background time running out, suspend, reclaim) resumes on foreground with Range and If-Range and
// ends byte-exact, having fetched only the missing bytes; a file that changed in between restarts from 0.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5))) struct DownloadTests {
    @Test func aDownloadPausedByTheLifecycleResumesOnForegroundWithOnlyTheMissingBytes() throws {
        let content = patternBytes(2_000_000, seed: 5)
        let server = try StallingHTTPServer(content: content, stallAfter: 700_000)
        defer { server.stop() }
        #expect(server.port != 0, "the test server started")
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: """
            [daemon]
            [app fetcher]
            auto-suspend = never
            task-time = 2s
            expiration-lead = 500ms
            """)
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(server.port)/file.bin"
        let output = out.file("file.bin")
        let started = daemon.ctl("download", "fetcher", url, "--output", output, "--no-wait")
        #expect(started.status == 0, "\(started)")
        #expect(waitUntil(timeout: 5) { server.sent == 700_000 })
        // Background: the download goes on under its background task, which runs out after 2 s.
        #expect(daemon.ctl("background", "fetcher").status == 0)
        #expect(daemon.ctl("suspend", "fetcher").status == 0)
        #expect(waitUntil(timeout: 6) { daemon.currentState("fetcher") == "suspended" }, "suspended once the task expired")
        let paused = daemon.ctl("transfers", "fetcher")
        #expect(paused.stdout.contains("paused"), "\(paused.stdout)")
        #expect(FileManager.default.fileExists(atPath: output + ".part.meta"), "the record is on disk")
        #expect(daemon.ctl("reclaim", "fetcher").status == 0)
        // Foreground: it resumes with Range and If-Range and finishes.
        #expect(daemon.ctl("foreground", "fetcher").status == 0)
        #expect(waitUntil(timeout: 10) { daemon.ctl("transfers", "fetcher").stdout.contains("done") }, "\(daemon.ctl("transfers").stdout)")
        #expect(sha256(output) == sha256(server.directory.file("file.bin")), "byte-exact")
        #expect(server.sent == content.count, "only the missing bytes were fetched again: \(server.sent) sent for \(content.count)")
        #expect(!FileManager.default.fileExists(atPath: output + ".part"))
        #expect(!FileManager.default.fileExists(atPath: output + ".part.meta"))
    }

    @Test func theNewestProgressReachesTheRecordWhileTheServerStalls() throws {
        // Loopback brings the 3,500,000 bytes within milliseconds: the records due at 2 and 3 MiB come while
        // the first is in flight or within its 100 ms spacing, and are held; the newest must still reach the
        // disk while nothing more arrives.
        let content = patternBytes(5_000_000, seed: 9)
        let server = try StallingHTTPServer(content: content, stallAfter: 3_500_000)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: """
            [daemon]
            [app fetcher]
            auto-suspend = never
            """)
        defer { daemon.stop() }
        let output = out.file("file.bin")
        #expect(daemon.ctl("download", "fetcher", "http://127.0.0.1:\(server.port)/file.bin", "--output", output, "--no-wait").status == 0)
        #expect(waitUntil(timeout: 10) { daemon.ctl("transfers", "fetcher").stdout.contains("3500000/5000000") })
        var recorded = 0
        #expect(waitUntil(timeout: 5) {
            recorded = recordedOffset(out.read("file.bin.part.meta"))
            return recorded >= 3 << 20
        })
        #expect(recorded >= 3 << 20 && recorded <= 3_500_000, "the record's offset: \(recorded)")
    }

    @Test func aDownloadCutByKill9ResumesWhenTheDaemonStartsAgain() throws {
        let content = patternBytes(5_000_000, seed: 7)
        let server = try StallingHTTPServer(content: content, stallAfter: 2_000_000)
        defer { server.stop() }
        let out = TemporaryDirectory()
        let state = TemporaryDirectory()
        defer { out.remove(); state.remove() }
        let config = """
            [daemon]
            state-directory = \(state.path)
            [app fetcher]
            auto-suspend = never
            """
        let output = out.file("file.bin")
        let url = "http://127.0.0.1:\(server.port)/file.bin"
        let first = try TestDaemon(config: config, expectedEnd: .anything)
        defer { first.stop() }
        #expect(first.ctl("download", "fetcher", url, "--output", output, "--no-wait").status == 0)
        #expect(waitUntil(timeout: 10) { server.sent == 2_000_000 })
        // Once the 2,000,000 bytes are on disk, the record vouches for those up to its last write (one per MiB
        // appended, at most one every 100 ms). Only the first can come before the stall: a write callback brings at most 256 KiB, so it
        // is due before 1.5 MiB, and the next one would be at 2 MiB or later. Records reach the disk off the
        // loop (fsync first), so the test waits for it there.
        #expect(waitUntil(timeout: 5) { first.ctl("transfers", "fetcher").stdout.contains("2000000/5000000") })
        var recorded = 0
        #expect(waitUntil(timeout: 5) {
            recorded = recordedOffset(out.read("file.bin.part.meta"))
            return recorded >= 1 << 20
        })
        #expect(recorded >= 1 << 20 && recorded < 2_000_000, "the record's offset: \(recorded)")
        #expect(state.read("transfers.json").contains(url), "the journal lists the download")
        first.signal(SIGKILL)
        #expect(first.waitForExit())
        // A new daemon with the same state directory resumes it once the app is launched.
        let second = try TestDaemon(config: config)
        defer { second.stop() }
        #expect(waitUntil(timeout: 15) { second.ctl("transfers", "fetcher").stdout.contains("done") }, "\(second.ctl("transfers").stdout)\n\(second.log)")
        #expect(sha256(output) == sha256(server.directory.file("file.bin")), "byte-exact")
        #expect(server.sent == 2_000_000 + content.count - recorded,
                "the second request fetched only what the record did not vouch for: \(server.sent) sent")
        #expect(second.log.contains("will resume at \(recorded) bytes"), "\(second.log)")
        #expect(!state.read("transfers.json").contains(url), "finished transfers leave the journal")
    }

    @Test func aFileThatChangedInBetweenRestartsFromZeroWithoutCorruption() throws {
        let first = patternBytes(1_000_000, seed: 1)
        let server = try StallingHTTPServer(content: first, stallAfter: 300_000)
        defer { server.stop() }
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
        #expect(daemon.ctl("download", "fetcher", "http://127.0.0.1:\(server.port)/file.bin", "--output", output, "--no-wait").status == 0)
        #expect(waitUntil(timeout: 5) { server.sent == 300_000 })
        #expect(daemon.ctl("background", "fetcher").status == 0)
        #expect(waitUntil(timeout: 5) { daemon.ctl("transfers", "fetcher").stdout.contains("paused") })
        // The file changes on the server: a new ETag, so If-Range fails and the server answers 200.
        let second = patternBytes(1_200_000, seed: 2)
        _ = FileManager.default.createFile(atPath: server.directory.file("file.bin"), contents: Data(second))
        server.directory.write("etag.txt", "\"v2\"")
        #expect(daemon.ctl("foreground", "fetcher").status == 0)
        #expect(waitUntil(timeout: 10) { daemon.ctl("transfers", "fetcher").stdout.contains("done") })
        #expect(sha256(output) == sha256(server.directory.file("file.bin")), "the new file, whole, nothing of the old")
    }

    @Test func netlifectlDownloadWaitsAndRefusesWhatCannotWork() throws {
        let files = TemporaryDirectory()
        let out = TemporaryDirectory()
        defer { files.remove(); out.remove() }
        let content = patternBytes(300_000, seed: 3)
        _ = FileManager.default.createFile(atPath: files.file("a.bin"), contents: Data(content))
        let daemon = try TestDaemon(config: httpApp(root: files.path) + "\n[app fetcher]\n")
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(daemon.port(of: "files"))/a.bin"
        let done = daemon.ctl("download", "fetcher", url, "--output", out.file("a.bin"))
        #expect(done.status == 0, "\(done)")
        #expect(done.stdout.contains("done, 300000/300000 bytes"), "\(done.stdout)")
        #expect(sha256(out.file("a.bin")) == sha256(files.file("a.bin")))
        let missing = daemon.ctl("download", "fetcher", url + ".missing", "--output", out.file("b.bin"))
        #expect(missing.status == 5, "failed: the server's answer rules out a retry")
        #expect(missing.stdout.contains("failed (server answered 404"), "\(missing)")
        // A host name: resolved on the loop (evdns reads /etc/hosts); localhost's ::1 refuses (the service
        // listens on 127.0.0.1 only) and the next address is tried.
        let named = daemon.ctl("download", "fetcher", "http://localhost:\(daemon.port(of: "files"))/a.bin", "--output", out.file("d.bin"))
        #expect(named.status == 0, "\(named)")
        #expect(sha256(out.file("d.bin")) == sha256(files.file("a.bin")))
        #expect(daemon.ctl("download", "fetcher", "gopher://127.0.0.1/a", "--output", out.file("c")).status == 1)
        #expect(daemon.ctl("download", "fetcher", "not a url", "--output", out.file("c")).status == 1)
        #expect(daemon.ctl("download", "nobody", url, "--output", out.file("c")).status == 1)
        let json = daemon.ctl("--json", "transfers")
        let reply = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let transfers = reply?["transfers"] as? [[String: Any]] ?? []
        #expect(transfers.contains { $0["state"] as? String == "done" && $0["bytes"] as? Int == 300_000 && $0["total"] as? Int == 300_000 })
        #expect(daemon.isRunning)
    }

    @Test func withoutOutputTheFileGoesIntoTheStateDirectoryAndAPlaceNetlifedSeesOtherwiseIsRefused() throws {
        let files = TemporaryDirectory()
        let out = TemporaryDirectory()
        defer { files.remove(); out.remove() }
        _ = FileManager.default.createFile(atPath: files.file("report 1.bin"), contents: Data(patternBytes(50_000, seed: 5)))
        let daemon = try TestDaemon(config: httpApp(root: files.path) + "\n[app fetcher]\n")
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(daemon.port(of: "files"))/report%201.bin"
        // The state directory is the control socket's (no state-directory key, no $STATE_DIRECTORY).
        let expected = daemon.directory.file("control/downloads/fetcher/report 1.bin")
        let done = daemon.ctl("download", "fetcher", url)
        #expect(done.status == 0, "\(done)")
        #expect(done.stdout.contains("-> \(expected): done, 50000/50000 bytes"), "\(done.stdout)")
        #expect(sha256(expected) == sha256(files.file("report 1.bin")))
        // A directory netlifed cannot see.
        let hidden = daemon.ctl("download", "fetcher", url, "--output", out.file("absent/f.bin"))
        #expect(hidden.status == 1 && hidden.stderr.contains("netlifed cannot see the directory \(out.file("absent"))"), "\(hidden)")
        #expect(hidden.stderr.contains("ReadWritePaths=\(out.file("absent"))") && hidden.stderr.contains("without --output the file goes to"), "\(hidden)")
        // netlifectl in a mount namespace where that directory is another (a tmpfs over it), as systemd's
        // PrivateTmp= makes netlifed's /tmp another than its clients'.
        let other = run(["/usr/bin/unshare", "-m", "/bin/sh", "-c",
                         "mount -t tmpfs none '\(out.path)' && exec '\(product("netlifectl"))' --control '\(daemon.controlPath)' download fetcher '\(url)' --output '\(out.file("f.bin"))'"],
                        timeout: 20)
        #expect(other.status == 1 && other.stderr.contains("netlifed sees another \(out.path) than netlifectl does"), "\(other)")
        #expect(!FileManager.default.fileExists(atPath: out.file("f.bin")))
        #expect(daemon.isRunning)
    }
}

/// The offset a download's record (`OUTPUT.part.meta`) vouches for; 0 when there is none.
private func recordedOffset(_ record: String) -> Int {
    record.split(separator: "\n").first { $0.hasPrefix("offset=") }.flatMap { Int($0.dropFirst(7)) } ?? 0
}
