// A request does what its requester may do, and nothing more. netlifed runs as root here, as the shipped
// unit runs it; an unprivileged user made by the test, a member of `control-group` and nothing else, drives
// it with the real netlifectl. Every file a request names is used with that user's rights: a write where it
// cannot write, a read of what it cannot read, a link planted at a download's files, are all refused with
// nothing written, created, truncated or read; its own downloads end owned by it, and a download resumed
// after a restart is still held to its rights. Per-app `allow-users`/`allow-groups` and `admin-group` are
// checked both ways, and every change is attributed to the uid that asked.

import Foundation
import Testing
import NetLifeTestSupport

/// The owner uid and the text of a file, nil when there is none.
private func ownerAndText(_ path: String) -> (uid: UInt32, text: String)? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return (info.st_uid, (try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
}

/// Whether anything exists at `path` (a link counts, whether or not it points somewhere).
private func exists(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0
}

/// The daemon config: an http app serving `root` (and taking uploads into `uploads`), a client app, and the
/// user's group let onto the control socket.
private func config(group: String, root: String, uploads: String, daemonLines: String = "", apps: String = "") -> String {
    httpApp(root: root, listenerLines: "upload-root = \(uploads)")
        .replacingOccurrences(of: "[daemon]", with: "[daemon]\ncontrol-group = \(group)\n\(daemonLines)") + "\n[app fetcher]\n" + apps
}

@Suite(.serialized, .timeLimit(.minutes(3)), .enabled(if: getuid() == 0, "making users and acting for them needs root"))
struct LeastPrivilegeTests {
    @Test func aMemberCanNeitherWriteNorReadAsRoot() throws {
        let user = try TestUser()
        let files = TemporaryDirectory()
        let uploads = TemporaryDirectory()
        let rootOnly = TemporaryDirectory()
        let sticky = TemporaryDirectory()
        let tag = UUID().uuidString.prefix(8)
        let etcNew = "/etc/netlife-test-new-\(tag)"
        let etcVictim = "/etc/netlife-test-victim-\(tag)"
        let etcTarget = "/etc/netlife-test-target-\(tag)"
        defer {
            user.remove(); files.remove(); uploads.remove(); rootOnly.remove(); sticky.remove()
            for path in [etcNew, etcVictim, etcTarget] { unlink(path) }
        }
        let payload = String(repeating: "payload!", count: 7000)   // 56,000 bytes
        files.write("p.bin", payload)
        _ = FileManager.default.createFile(atPath: etcVictim, contents: Data("original\n".utf8), attributes: [.posixPermissions: 0o644])
        chmod(rootOnly.path, 0o755)
        rootOnly.write("secret.pem", "root's secret\n")
        chmod(rootOnly.file("secret.pem"), 0o600)
        chmod(sticky.path, 0o1777)
        sticky.write("victim", "original\n")
        chmod(sticky.file("victim"), 0o644)

        let daemon = try TestDaemon(config: config(group: user.group, root: files.path, uploads: uploads.path))
        defer { daemon.stop() }
        chmod(daemon.directory.path, 0o755)
        let control = daemon.controlPath
        let url = "http://127.0.0.1:\(daemon.port(of: "files"))/p.bin"

        // A new file in /etc, a file in a root-owned 0755 directory, over root's file in /etc and in sticky /tmp.
        for output in [etcNew, rootOnly.file("new.bin"), etcVictim, sticky.file("victim")] {
            let refused = user.ctl(control, "download", "fetcher", url, "--output", output)
            #expect(refused.status == 1, "\(output): \(refused)")
            #expect(refused.stderr.contains("cannot write") || refused.stderr.contains("may not replace"), "\(output): \(refused)")
            #expect(!exists(output + ".part") && !exists(output + ".part.meta") && !exists(output + ".part.meta.tmp"), "\(output)")
        }
        #expect(!exists(etcNew))
        #expect((try? FileManager.default.contentsOfDirectory(atPath: rootOnly.path)) == ["secret.pem"])
        #expect(ownerAndText(etcVictim).map { $0.uid == 0 && $0.text == "original\n" } == true)
        #expect(ownerAndText(sticky.file("victim")).map { $0.uid == 0 && $0.text == "original\n" } == true)

        // Links planted at the output and at each of its part, record and temporary record names.
        let out = user.home.file("out.bin")
        for planted in [out, out + ".part", out + ".part.meta", out + ".part.meta.tmp"] {
            for target in [etcVictim, etcTarget] {
                symlink(target, planted)
                let refused = user.ctl(control, "download", "fetcher", url, "--output", out)
                #expect(refused.status == 1, "\(planted) -> \(target): \(refused)")
                #expect(refused.stderr.contains("symbolic link"), "\(refused)")
                unlink(planted)
            }
        }
        #expect(!exists(etcTarget), "a link's target was created")
        #expect(ownerAndText(etcVictim).map { $0.uid == 0 && $0.text == "original\n" } == true)
        #expect(!exists(out))

        // An upload of a file only root may read, and a --cacert only root may read.
        let upload = user.ctl(control, "upload", "fetcher", rootOnly.file("secret.pem"), "http://127.0.0.1:\(daemon.port(of: "files"))/secret.pem")
        #expect(upload.status == 1, "\(upload)")
        #expect(upload.stderr.contains("Permission denied"), "\(upload.stderr)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: uploads.path))?.isEmpty == true, "nothing reached the server")
        let cacert = user.ctl(control, "download", "fetcher", url, "--output", out, "--cacert", rootOnly.file("secret.pem"))
        #expect(cacert.status == 1 && cacert.stderr.contains("--cacert") && cacert.stderr.contains("Permission denied"), "\(cacert)")
        #expect(!exists(out) && !exists(out + ".part"))
        // Without --output the file would go to the daemon's own directory: refused with the reason.
        let noOutput = user.ctl(control, "download", "fetcher", url)
        #expect(noOutput.status == 1 && noOutput.stderr.contains("give --output PATH"), "\(noOutput)")

        // The user's own download and upload work, and what it downloads is its own.
        let own = user.ctl(control, "download", "fetcher", url, "--output", out)
        #expect(own.status == 0, "\(own)")
        #expect(ownerAndText(out).map { $0.uid == user.uid && $0.text == payload } == true, "\(String(describing: ownerAndText(out)?.uid))")
        user.home.write("mine.bin", "the user's own bytes\n")
        chown(user.home.file("mine.bin"), user.uid, user.gid)
        chmod(user.home.file("mine.bin"), 0o600)
        let sent = user.ctl(control, "upload", "fetcher", user.home.file("mine.bin"), "http://127.0.0.1:\(daemon.port(of: "files"))/mine.bin")
        #expect(sent.status == 0, "\(sent)")
        #expect(uploads.read("mine.bin") == "the user's own bytes\n")

        // Root's own requests keep the daemon's rights.
        let rootDownload = daemon.ctl("download", "fetcher", url, "--output", rootOnly.file("root.bin"))
        #expect(rootDownload.status == 0, "\(rootDownload)")
        #expect(ownerAndText(rootOnly.file("root.bin"))?.uid == 0)
    }

    @Test func aResumedDownloadIsStillHeldToItsRequestersRights() throws {
        let user = try TestUser()
        let files = TemporaryDirectory()
        let uploads = TemporaryDirectory()
        let state = TemporaryDirectory()
        defer { user.remove(); files.remove(); uploads.remove(); state.remove() }
        let payload = String(repeating: "resume!!", count: 10_000)
        files.write("r.bin", payload)
        let kept = user.home.file("kept")
        let lost = user.home.file("lost")
        for directory in [kept, lost] {
            mkdir(directory, 0o755)
            chown(directory, user.uid, user.gid)
        }
        // The server runs in a daemon of its own, which outlives the client's restart.
        let server = try TestDaemon(config: httpApp(root: files.path, listenerLines: "upload-root = \(uploads.path)"))
        defer { server.stop() }
        let url = "http://127.0.0.1:\(server.port(of: "files"))/r.bin"
        let client = "[daemon]\ncontrol-group = \(user.group)\nstate-directory = \(state.path)\n[app fetcher]\n"
        do {
            let first = try TestDaemon(config: client)
            defer { first.stop() }
            chmod(first.directory.path, 0o755)
            // The server's listener is closed in the background: both downloads pause on the refusal.
            #expect(server.ctl("background", "files").status == 0)
            for directory in [kept, lost] {
                let paused = user.ctl(first.controlPath, "download", "fetcher", url, "--output", directory + "/r.bin")
                #expect(paused.status == 7, "\(paused)")
            }
            #expect(state.read("transfers.json").contains("\"uid\":\(user.uid)"), "the journal records who asked: \(state.read("transfers.json"))")
        }
        #expect(server.ctl("foreground", "files").status == 0)
        // Meanwhile the user loses the right to write in one of its directories.
        chown(lost, 0, 0)
        let second = try TestDaemon(config: client)
        defer { second.stop() }
        #expect(waitUntil(timeout: 20) { exists(kept + "/r.bin") }, "the resumed download finished: \(second.log)")
        #expect(ownerAndText(kept + "/r.bin").map { $0.uid == user.uid && $0.text == payload } == true)
        #expect(waitUntil(timeout: 10) { !second.ctl("transfers").stdout.contains("running") }, "\(second.ctl("transfers").stdout)")
        #expect(!exists(lost + "/r.bin"), "the download into a directory its requester can no longer write did not finish as root")
        let lostState = second.ctl("transfers").stdout
        #expect(lostState.contains("Permission denied"), "\(lostState)")
    }

    @Test func perAppAndDaemonWideCommandsFollowTheAccessKeys() throws {
        let user = try TestUser()
        defer { user.remove() }
        let apps = "[daemon]\ncontrol-group = \(user.group)\n"
            + echoApp("open", appLines: "auto-suspend = never")
            + echoApp("mine", appLines: "auto-suspend = never\nallow-users = \(user.name)")
            + echoApp("ours", appLines: "auto-suspend = never\nallow-groups = \(user.group)")
            + echoApp("theirs", appLines: "auto-suspend = never\nallow-users = root\nallow-groups = root")
        let daemon = try TestDaemon(config: apps)
        defer { daemon.stop() }
        chmod(daemon.directory.path, 0o755)
        let control = daemon.controlPath
        let watcher = try #require(RawControlClient(path: control))
        defer { watcher.close() }
        #expect(watcher.send("{\"cmd\":\"watch\"}\n") > 0)
        #expect(watcher.line(timeout: 5) != nil)

        for app in ["open", "mine", "ours"] {
            let allowed = user.ctl(control, "background", app)
            #expect(allowed.status == 0, "\(app): \(allowed)")
            #expect(daemon.state(app) == "background")
        }
        let refused = user.ctl(control, "background", "theirs")
        #expect(refused.status == 4, "\(refused)")
        #expect(refused.stderr.contains("uid \(user.uid) may not run 'background' on app theirs"), "\(refused)")
        #expect(refused.stderr.contains("allow-users: root") && refused.stderr.contains("allow-groups: root"), "\(refused)")
        #expect(daemon.state("theirs") == "active", "a refusal changes nothing")
        #expect(user.ctl(control, "task", "begin", "theirs").status == 4)
        #expect(user.ctl(control, "--json", "status").status == 0, "read-only commands stay open")
        #expect(user.ctl(control, "status", "theirs").status == 0)
        #expect(user.ctl(control, "transfers").status == 0)
        let reload = user.ctl(control, "reload")
        #expect(reload.status == 4 && reload.stderr.contains("admin-group"), "\(reload)")
        #expect(user.ctl(control, "memory-pressure").status == 4)
        #expect(user.ctl(control, "lock").status == 4)
        #expect(daemon.state("open") == "background", "lock did nothing")
        #expect(daemon.ctl("background", "theirs").status == 0, "root may")

        // Attribution: the log and the watchers say who asked.
        #expect(daemon.log.contains("uid \(user.uid) (pid "), "\(daemon.log)")
        #expect(daemon.log.contains("asked: background mine"), "\(daemon.log)")
        var requests: [[String: Any]] = []
        while let line = watcher.line(timeout: 2), let event = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] {
            if event["event"] as? String == "request" { requests.append(event) }
            if event["event"] as? String == "request", event["app"] as? String == "theirs" { break }
        }
        let mine = requests.first { $0["app"] as? String == "mine" }
        #expect(mine?["uid"] as? Int == Int(user.uid) && mine?["command"] as? String == "background" && (mine?["pid"] as? Int ?? 0) > 0, "\(requests)")
        #expect(requests.last?["uid"] as? Int == 0, "root's own request: \(requests)")
        #expect(!requests.contains { $0["app"] as? String == "theirs" && $0["uid"] as? Int == Int(user.uid) }, "a refused request is no change")
    }

    @Test func membersOfTheAdminGroupMayRunDaemonWideCommands() throws {
        let user = try TestUser()
        defer { user.remove() }
        let daemon = try TestDaemon(config: "[daemon]\ncontrol-group = \(user.group)\nadmin-group = \(user.group)\n" + echoApp("open"))
        defer { daemon.stop() }
        chmod(daemon.directory.path, 0o755)
        #expect(user.ctl(daemon.controlPath, "reload").status == 0)
        #expect(user.ctl(daemon.controlPath, "lock").status == 0)
        #expect(daemon.state("open") == "background")
    }
}
