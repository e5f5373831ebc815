// How a transfer that cannot finish ends for an operator: `netlifectl download` exits 7 when the download
// paused on an error (here a refused connection: the serving app is in the background, its listener
// closed), and `transfers cancel` stops a transfer by id, app or URL, removes its part and record, forgets
// it in the journal, and it is not tried again at the next foreground.

import Foundation
import Testing
import NetLifeTestSupport

/// The transfers of the daemon's `transfers --json` reply.
private func transfers(_ daemon: TestDaemon) -> [[String: Any]] {
    let result = daemon.ctl("--json", "transfers")
    let reply = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
    return reply?["transfers"] as? [[String: Any]] ?? []
}

@Suite(.timeLimit(.minutes(1))) struct TransferCancelTests {
    @Test func aRefusedDownloadExits7AndCancelByURLForgetsIt() throws {
        let files = TemporaryDirectory()
        let out = TemporaryDirectory()
        defer { files.remove(); out.remove() }
        files.write("a.bin", "hello")
        let daemon = try TestDaemon(config: httpApp(root: files.path) + "\n[app fetcher]\n")
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(daemon.port(of: "files"))/a.bin"
        // In the background the files app's listener is closed: connect() gets ECONNREFUSED.
        #expect(daemon.ctl("background", "files").status == 0)
        let output = out.file("a.bin")
        let refused = daemon.ctl("download", "fetcher", url, "--output", output)
        #expect(refused.status == 7, "\(refused)")
        #expect(refused.stdout.contains("paused ("), "\(refused.stdout)")
        #expect(refused.stderr.contains("download paused:") && refused.stderr.lowercased().contains("refused"), "\(refused.stderr)")
        let listed = transfers(daemon)
        #expect(listed.count == 1 && listed.first?["error"] as? Bool == true, "\(listed)")
        let id = listed.first?["id"] as? Int ?? 0
        #expect(id > 0, "\(listed)")
        #expect(daemon.ctl("transfers").stdout.hasPrefix("[\(id)] fetcher: "), "the text shows the id")
        #expect(daemon.directory.read("control/transfers.json").contains("\"id\":\(id)"), "the journal keeps the id")

        let cancelled = daemon.ctl("transfers", "cancel", "--url", url)
        #expect(cancelled.status == 0, "\(cancelled)")
        #expect(cancelled.stdout.contains("cancelled [\(id)] fetcher: \(url)"), "\(cancelled.stdout)")
        #expect(transfers(daemon).isEmpty)
        #expect(!daemon.directory.read("control/transfers.json").contains("a.bin"), "gone from the journal")
        // The next foreground of the fetcher starts nothing: the files app is back, and still nothing comes.
        #expect(daemon.ctl("foreground", "files").status == 0)
        #expect(daemon.ctl("background", "fetcher").status == 0)
        #expect(daemon.ctl("foreground", "fetcher").status == 0)
        usleep(300_000)
        #expect(transfers(daemon).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: output) && !FileManager.default.fileExists(atPath: output + ".part"))

        let unknown = daemon.ctl("transfers", "cancel", String(id))
        #expect(unknown.status == 1, "\(unknown)")
        #expect(unknown.stderr.contains("no transfer with id \(id)"), "\(unknown.stderr)")
        #expect(daemon.ctl("transfers", "cancel").status == 2, "nothing named is a usage error")
        #expect(daemon.ctl("transfers", "cancel", "x").status == 2)
        #expect(daemon.isRunning)
    }

    @Test func cancellingARunningDownloadClosesItRemovesItsPartAndRecordAndItIsNotRetried() throws {
        let content = patternBytes(1_000_000, seed: 41)
        let server = try StallingHTTPServer(content: content, stallAfter: 200_000)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(server.port)/file.bin"
        let output = out.file("file.bin")
        #expect(daemon.ctl("download", "fetcher", url, "--output", output, "--no-wait").status == 0)
        #expect(waitUntil(timeout: 10) { transfers(daemon).first?["bytes"] as? Int == 200_000 })
        // The record reaches the disk off the loop, just after.
        #expect(waitUntil(timeout: 5) { FileManager.default.fileExists(atPath: output + ".part") && FileManager.default.fileExists(atPath: output + ".part.meta") })
        let tasks = daemon.status("fetcher")["tasks"] as? [[String: Any]] ?? []
        #expect(tasks.count == 1, "the download runs under a background task: \(tasks)")
        let id = transfers(daemon).first?["id"] as? Int ?? 0

        let cancelled = daemon.ctl("--json", "transfers", "cancel", String(id), "--app", "fetcher")
        #expect(cancelled.status == 0, "\(cancelled)")
        let reply = try JSONSerialization.jsonObject(with: Data(cancelled.stdout.utf8)) as? [String: Any]
        #expect((reply?["removed"] as? [String] ?? []).sorted() == [output + ".part", output + ".part.meta"], "\(cancelled.stdout)")
        #expect((reply?["cancelled"] as? [[String: Any]])?.first?["state"] as? String == "cancelled")
        #expect(!FileManager.default.fileExists(atPath: output + ".part") && !FileManager.default.fileExists(atPath: output + ".part.meta"))
        #expect((daemon.status("fetcher")["tasks"] as? [[String: Any]])?.isEmpty == true, "its background task ended")
        #expect(transfers(daemon).isEmpty)
        let requests = server.sent
        #expect(daemon.ctl("background", "fetcher").status == 0)
        #expect(daemon.ctl("foreground", "fetcher").status == 0)
        usleep(300_000)
        #expect(server.sent == requests && transfers(daemon).isEmpty, "not tried again at the next foreground")
        #expect(!FileManager.default.fileExists(atPath: output + ".part"))
        #expect(daemon.isRunning)
    }
}
