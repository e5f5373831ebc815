// The http service's access log against the real daemon and curl: one combined-format line per response
// (GET, HEAD, 206, 404) with the body bytes sent and what the client sent escaped; a reload or SIGHUP after
// the file was renamed (logrotate's way) makes a new file for the next line; `journal` logs through the
// app's logger; --check-config refuses a path whose directory does not exist.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1))) struct HTTPAccessLogTests {
    private func lines(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    @Test func eachResponseIsOneCombinedLineAndAReloadAfterARenameMakesANewFile() throws {
        let files = TemporaryDirectory()
        let logs = TemporaryDirectory()
        defer { files.remove(); logs.remove() }
        files.write("a.bin", String(repeating: "x", count: 1000))
        let log = logs.file("access.log")
        let config = httpApp(root: files.path, listenerLines: "access-log = \(log)") + """

            [listener files.quiet]
            address = 127.0.0.1:0
            service = http
            root = \(files.path)
            access-log = journal
            """
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        let url = "http://127.0.0.1:\(daemon.port(of: "files"))"
        func curl(_ arguments: String...) {
            _ = run(["/usr/bin/curl", "-s", "-o", "/dev/null", "-e", "http://ref/", "-A", "agent \"q\""] + arguments)
        }
        curl(url + "/a.bin")
        curl("-I", url + "/a.bin")
        curl("-r", "0-99", url + "/a.bin")
        curl(url + "/missing")
        #expect(waitUntil(timeout: 3) { lines(log).count == 4 }, "\(lines(log))")
        let written = lines(log)
        let shape = #/^127\.0\.0\.1 - - \[\d\d/[A-Z][a-z][a-z]/\d{4}:\d\d:\d\d:\d\d \+0000\] "[^"]*" \d{3} \d+ "[^"]*" "[^"]*"$/#
        #expect(written.allSatisfy { $0.wholeMatch(of: shape) != nil }, "\(written)")
        let tail = #" "http://ref/" "agent \x22q\x22""#
        #expect(written.count == 4 && written[0].hasSuffix(#""GET /a.bin HTTP/1.1" 200 1000"# + tail), "\(written)")
        #expect(written.count == 4 && written[1].hasSuffix(#""HEAD /a.bin HTTP/1.1" 200 0"# + tail), "\(written)")
        #expect(written.count == 4 && written[2].hasSuffix(#""GET /a.bin HTTP/1.1" 206 100"# + tail), "\(written)")
        #expect(written.count == 4 && written[3].contains(#""GET /missing HTTP/1.1" 404 "#), "\(written)")

        // logrotate: rename, then reload (netlifectl reload or SIGHUP); the next line makes a new file.
        #expect(rename(log, log + ".1") == 0)
        #expect(daemon.ctl("reload").status == 0)
        curl("-r", "10-19", url + "/a.bin")
        #expect(waitUntil(timeout: 3) { lines(log).count == 1 }, "\(lines(log))")
        #expect(lines(log).first?.contains(#""GET /a.bin HTTP/1.1" 206 10 "#) == true)
        #expect(lines(log + ".1").count == 4, "nothing more went to the renamed file")
        #expect(rename(log, log + ".2") == 0)
        daemon.signal(SIGHUP)
        #expect(waitUntil(timeout: 3) { daemon.log.components(separatedBy: "reloaded").count == 3 })
        curl(url + "/a.bin")
        #expect(waitUntil(timeout: 3) { lines(log).count == 1 }, "\(lines(log))")
        let mode = (try? FileManager.default.attributesOfItem(atPath: log)[.posixPermissions] as? Int) ?? 0
        #expect(mode & 0o007 == 0, "not readable by others: \(String(mode, radix: 8))")

        // `journal`: the line is a record of the app's logger.
        curl("http://127.0.0.1:\(daemon.port(of: "files", listener: "quiet"))/a.bin")
        #expect(waitUntil(timeout: 3) { daemon.log.contains(#"app files: 127.0.0.1 - - ["#) && daemon.log.contains(#""GET /a.bin HTTP/1.1" 200 1000"#) },
                "\(daemon.log.suffix(1500))")
        #expect(lines(log).count == 1, "the journal listener writes nothing to the file")
    }

    /// A log netlifed creates is mode 0640 whatever its umask (systemd's UMask=0077), and takes the group of
    /// a set-group-id directory: adm reads it, as Debian's nginx logs. An existing log keeps its mode.
    @Test func aCreatedAccessLogIsReadableByItsDirectorysGroup() throws {
        let files = TemporaryDirectory()
        defer { files.remove() }
        files.write("a.txt", "x")
        let logs = files.file("logs")
        #expect(mkdir(logs, 0o750) == 0)
        let adm = groupID(named: "adm") ?? 4
        #expect(chown(logs, 0, adm) == 0 && chmod(logs, 0o2750) == 0)
        let daemon = try TestDaemon(config: httpApp(root: files.path, listenerLines: "access-log = \(logs)/access.log"),
                                    launcher: ["/bin/sh", "-c", "umask 077; exec \"$@\"", "sh"])
        defer { daemon.stop() }
        #expect(run(["/usr/bin/curl", "-sS", "http://127.0.0.1:\(daemon.port(of: "files"))/a.txt"]).stdout == "x")
        var info = stat()
        #expect(waitUntil(timeout: 5) { stat(logs + "/access.log", &info) == 0 })
        #expect(info.st_mode & 0o777 == 0o640, "mode \(String(info.st_mode & 0o777, radix: 8))")
        #expect(info.st_gid == adm, "the directory's group")
    }

    @Test func anAccessLogInAMissingDirectoryIsRefusedByCheckConfigAsByTheDaemon() throws {
        let files = TemporaryDirectory()
        defer { files.remove() }
        files.write("bad.conf", httpApp(root: files.path, listenerLines: "access-log = \(files.path)/nowhere/access.log"))
        let bad = run([product("netlifed"), "--check-config", files.file("bad.conf")])
        #expect(bad.status == 1, "the daemon would not start: \(bad)")
        #expect(bad.stderr.contains("service http: access-log's directory \(files.path)/nowhere does not exist"), "\(bad)")
        let started = run([product("netlifed"), "--config", files.file("bad.conf"), "--control", files.file("c/s.sock")], timeout: 10)
        #expect(started.status == 78, "\(started)")
        files.write("good.conf", httpApp(root: files.path, listenerLines: "access-log = \(files.path)/access.log"))
        #expect(run([product("netlifed"), "--check-config", files.file("good.conf")]).status == 0)
    }
}
