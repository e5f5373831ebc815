// The config from the command line: --check-config prints every error as FILE:LINE: message and exits
// 1, a valid file exits 0, netlifed refuses to start on a bad config, and the shipped default is valid.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct ConfigTests {
    @Test func checkConfigPrintsEveryErrorWithFileAndLine() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("bad.conf", """
            [daemon]
            colour = blue
            [app a]
            launch = sometimes
            background-budget = fast
            [listener a.main]
            address = 127.0.0.1:99999
            service = echo
            connections = maybe
            [listener b.main]
            address = 127.0.0.1:1
            service = echo
            [gadget]
            """)
        let path = directory.file("bad.conf")
        let result = run([product("netlifed"), "--check-config", path])
        #expect(result.status == 1)
        let expected = [
            "\(path):2: unknown key 'colour' in [daemon]",
            "\(path):4: launch must be foreground, background or no, got 'sometimes'",
            "\(path):5: background-budget: 'fast' is not a duration",
            "\(path):7: address: bad port '99999'",
            "\(path):9: connections must be keep or close, got 'maybe'",
            "\(path):10: listener b.main belongs to app 'b', which has no [app b] section",
            "\(path):13: unknown section [gadget]",
        ]
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == expected.count, "\(result.stderr)")
        for (line, prefix) in zip(lines, expected) {
            #expect(line.hasPrefix(prefix), "\(line) should start with \(prefix)")
        }
    }

    @Test func validConfigsPassAndTheShippedDefaultIsValid() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("good.conf", echoConfig(port: 7070, appLines: "profile = ios4\ntask-time = 90s\non-did-enter-background = /bin/echo 'in background'"))
        let good = run([product("netlifed"), "--check-config", directory.file("good.conf")])
        #expect(good.status == 0, "\(good)")
        let repository = URL(fileURLWithPath: repositoryDirectory)
        let shipped = run([product("netlifed"), "--check-config", repository.appendingPathComponent("Config/netlifed.conf").path])
        #expect(shipped.status == 0, "\(shipped)")
    }

    /// Five broken configs: --check-config prints every independent error, each once, none that follows from
    /// another, and exits 1; what it passes, the daemon starts with.
    @Test func checkConfigPrintsEveryIndependentErrorOnceAndNoneThatFollows() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        func check(_ name: String, _ text: String) -> ProcessResult {
            directory.write(name, text)
            return run([product("netlifed"), "--check-config", directory.file(name)])
        }
        func errorLines(_ result: ProcessResult) -> [String] { result.stderr.split(separator: "\n").map(String.init) }
        // A bad root and a missing key: both.
        let http = check("http.conf", "[app files]\n[listener files.main]\naddress = 127.0.0.1:0\nservice = http\nroot = relative\n"
                                       + "tls-certificate = \(directory.file("none.pem"))\ntls-key = \(directory.file("none.key"))\n")
        #expect(http.status == 1)
        #expect(errorLines(http).count == 3 && http.stderr.contains("http.conf:5: service http: root must be")
                && http.stderr.contains("http.conf:6: service http: tls-certificate") && http.stderr.contains("http.conf:7: service http: tls-key"), "\(http)")
        // A keepalive on a socket that is no VoIP one, and a quiet policy without quiet-enter: both.
        let socket = check("socket.conf", "[app mail]\n[socket mail.s]\nconnect = 127.0.0.1:9\nprotocol = line\npolicy = quiet\nkeepalive = 1h\n")
        #expect(socket.status == 1)
        #expect(errorLines(socket).count == 2 && socket.stderr.contains("socket.conf:6: keepalive belongs to a VoIP socket")
                && socket.stderr.contains("protocol line: policy = quiet needs quiet-enter"), "\(socket)")
        // A quote error in exec: that error alone, not a "user needs exec" that would follow from it.
        let quoted = check("quoted.conf", "[app web]\nexec = /bin/sleep 'unterminated\nuser = nobody\n")
        #expect(quoted.status == 1)
        #expect(errorLines(quoted).count == 1 && quoted.stderr.contains("quoted.conf:2: exec:"), "\(quoted)")
        // A program that is not there: the launch would fail.
        let missing = check("missing.conf", "[app web]\nexec = /nonexistent/netlife-program --flag\n")
        #expect(missing.status == 1 && missing.stderr.contains("missing.conf:2: exec: /nonexistent/netlife-program cannot be run: No such file or directory"), "\(missing)")
        let unknown = check("path.conf", "[app web]\nexec = netlife-no-such-program\n")
        #expect(unknown.status == 1 && unknown.stderr.contains("path.conf:2: exec: no program netlife-no-such-program in PATH"), "\(unknown)")
        // What it passes, the daemon starts with.
        let good = check("good.conf", "[app web]\nexec = sleep 60\n")
        #expect(good.status == 0 && good.stdout.hasSuffix(": ok\n"), "\(good)")
    }

    @Test func pathsMissingOnThisHostAreErrorsForCheckConfigAsForTheDaemon() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let missing = directory.file("not-made-yet")
        let files = "[app files]\n[listener files.http]\naddress = 127.0.0.1:0\nservice = http\nroot = \(missing)\n"
        directory.write("files.conf", files)
        // --check-config runs every check the start runs: "ok" means netlifed starts with the config here.
        let checked = run([product("netlifed"), "--check-config", directory.file("files.conf")])
        #expect(checked.status == 1, "the daemon would not start: \(checked)")
        #expect(checked.stderr.contains("files.conf:5: service http: root must be an existing directory"), "\(checked)")
        #expect(!checked.stdout.contains("ok"), "\(checked)")
        // A real error beside it still fails the check, and both are printed.
        directory.write("both.conf", files + "[app x]\nauto-suspend = soon\n")
        let both = run([product("netlifed"), "--check-config", directory.file("both.conf")])
        #expect(both.status == 1, "\(both)")
        #expect(both.stderr.contains("both.conf:5: service http: root must be") && both.stderr.contains("both.conf:7: auto-suspend"), "\(both)")
        // The daemon itself does not start without the directory.
        let started = run([product("netlifed"), "--config", directory.file("files.conf"), "--control", directory.file("c/s.sock")], timeout: 10)
        #expect(started.status == 78, "\(started)")
    }

    @Test(.enabled(if: getuid() == 0, "a read-only bind mount needs root"))
    func anUploadRootASandboxMakesReadOnlyIsRefusedAtStartWithItsRemedy() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let incoming = directory.file("incoming")
        _ = try? FileManager.default.createDirectory(atPath: incoming, withIntermediateDirectories: true)
        directory.write("up.conf", "[app files]\n[listener files.http]\naddress = 127.0.0.1:0\nservice = http\nroot = \(directory.path)\nupload-root = \(incoming)\n")
        #expect(run([product("netlifed"), "--check-config", directory.file("up.conf")]).status == 0, "writable here")
        // What ProtectSystem=strict does to a path the unit does not list in ReadWritePaths=: a read-only view.
        let script = "set -e\nmount --bind '\(incoming)' '\(incoming)'\nmount -o remount,bind,ro '\(incoming)'\n"
            + "exec '\(product("netlifed"))' --config '\(directory.file("up.conf"))' --control '\(directory.file("c/s.sock"))'\n"
        let sandboxed = run(["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script], timeout: 10)
        #expect(sandboxed.status == 78, "\(sandboxed)")
        #expect(sandboxed.stderr.contains("upload-root \(incoming) is not writable here") && sandboxed.stderr.contains("ReadWritePaths=\(incoming)"),
                "\(sandboxed)")
    }

    @Test func netlifedRefusesToStartOnABadConfig() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("bad.conf", "[app x]\nauto-suspend = soon\n")
        let result = run([product("netlifed"), "--config", directory.file("bad.conf"), "--control", directory.file("c/s.sock")], timeout: 10)
        #expect(result.status == 78, "EX_CONFIG, which the unit's RestartPreventExitStatus= names: \(result)")
        #expect(result.stderr.contains("<3>netlifed: \(directory.file("bad.conf")):2: auto-suspend: 'soon' is not a duration"), "\(result)")
        let lines = result.stderr.split(separator: "\n")
        #expect(!lines.isEmpty && lines.allSatisfy { $0.hasPrefix("<") }, "every line has its <N> priority: \(result)")
        // Run by hand in a terminal, each line begins with the local time (script gives it a terminal).
        let terminal = run(["/usr/bin/script", "-qec", "'\(product("netlifed"))' --config '\(directory.file("bad.conf"))' --control '\(directory.file("c/s.sock"))'",
                            "/dev/null"], timeout: 10)
        let stamped = terminal.stdout.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).filter { !$0.isEmpty }
        #expect(!stamped.isEmpty && stamped.allSatisfy { line in
            line.range(of: #"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} <\d>"#, options: .regularExpression) != nil
        }, "\(terminal)")
        let usage = run([product("netlifed"), "--frobnicate"])
        #expect(usage.status == 2)
        #expect(usage.stderr.contains("See 'netlifed --help'."))
    }

    @Test func aSecondDaemonOnTheSameControlSocketRefusesToStart() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0))
        defer { daemon.stop() }
        daemon.directory.write("other.conf", "[app other]\nlaunch = no\n")
        let second = run([product("netlifed"), "--config", daemon.directory.file("other.conf"), "--control", daemon.controlPath], timeout: 10)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another netlifed is already listening on \(daemon.controlPath)"))
        #expect(daemon.ctl("status").status == 0)
    }
}
