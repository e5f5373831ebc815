// The http service over TLS (`tls-certificate`, `tls-key`) against the real binary, as curl, wget and
// openssl s_client see it: byte-exact bodies, resumes, If-Range and uploads as over plain HTTP; TLS 1.2 and
// 1.3, ALPN http/1.1; a plaintext and a TLS listener in one app; a renewed certificate served after reload;
// the listener closed on background; a peer that sends no ClientHello cut off; bad certificate keys refused
// with their file and line; a 1 GiB body that never holds the loop.

import Foundation
import Testing
import NetLifeTestSupport

/// A config of one app `files` with a TLS listener `main` serving `root` (and `extra` lines on it).
private func tlsApp(root: String, _ certificates: PeerCertificates, extra: String = "", daemon: String = "") -> String {
    httpApp(root: root, listenerLines: "tls-certificate = \(certificates.certificatePath)\ntls-key = \(certificates.keyPath)\n\(extra)")
        .replacingOccurrences(of: "[daemon]", with: "[daemon]\n\(daemon)")
}

/// curl over TLS, trusting only the test CA.
private func curl(_ certificates: PeerCertificates, _ arguments: [String], timeout: TimeInterval = 60) -> ProcessResult {
    run(["/usr/bin/curl", "-sS", "--cacert", certificates.caPath] + arguments, timeout: timeout)
}

@Suite(.timeLimit(.minutes(5))) struct TLSServiceTests {
    @Test func curlAndWgetFetchResumeAndIfRangeOverTLSByteExactly() throws {
        let files = TemporaryDirectory()
        let work = TemporaryDirectory()
        defer { files.remove(); work.remove() }
        let certificates = try PeerCertificates(directory: work.path)
        let content = patternBytes(5_000_000, seed: 3)
        _ = FileManager.default.createFile(atPath: files.file("f.bin"), contents: Data(content))
        let original = sha256(files.file("f.bin"))
        let daemon = try TestDaemon(config: tlsApp(root: files.path, certificates))
        defer { daemon.stop() }
        let url = "https://127.0.0.1:\(daemon.port(of: "files"))/f.bin"

        // The whole file, over the default (TLS 1.3) and over TLS 1.2; ALPN settles on http/1.1 each time.
        for (label, limit) in [("TLSv1.3", [String]()), ("TLSv1.2", ["--tls-max", "1.2"])] {
            let output = work.file("whole-\(label).bin")
            let fetched = curl(certificates, limit + ["-v", "-o", output, "-w", "%{http_code} %{size_download}", url])
            #expect(fetched.status == 0, "\(fetched)")
            #expect(fetched.stdout == "200 5000000", "\(label): \(fetched.stdout)")
            #expect(fetched.stderr.contains("SSL connection using \(label)"), "\(label): \(fetched.stderr)")
            #expect(fetched.stderr.contains("ALPN: server accepted http/1.1"), "\(label): \(fetched.stderr)")
            #expect(sha256(output) == original, "\(label): a byte-exact copy")
        }
        // By host name too: the certificate names localhost.
        let byName = curl(certificates, ["-o", "/dev/null", "-w", "%{http_code}", url.replacingOccurrences(of: "127.0.0.1", with: "localhost")])
        #expect(byName.stdout == "200", "\(byName)")

        // curl -C - and wget -c resume a cut download with exactly the missing bytes.
        for (tool, cut) in [("curl", 1_234_567), ("wget", 3_999_999)] {
            let partial = work.file("\(tool).bin")
            _ = FileManager.default.createFile(atPath: partial, contents: Data(content[..<cut]))
            let result = tool == "curl"
                ? curl(certificates, ["-C", "-", "-o", partial, "-w", "%{http_code} %{size_download}", url])
                : run(["/usr/bin/wget", "-q", "-c", "--ca-certificate=\(certificates.caPath)", "-O", partial, url], timeout: 60)
            #expect(result.status == 0, "\(tool): \(result)")
            if tool == "curl" { #expect(result.stdout == "206 \(content.count - cut)", "curl fetched only the missing bytes: \(result.stdout)") }
            #expect(sha256(partial) == original, "\(tool) resumed at \(cut) to a byte-exact copy")
        }

        // If-Range: the current ETag gives the range (206), another one the whole file (200).
        let head = curl(certificates, ["-I", url])
        let etag = try #require(head.stdout.split(separator: "\r\n").first { $0.lowercased().hasPrefix("etag:") }?
            .dropFirst("etag:".count).trimmingCharacters(in: .whitespaces))
        let ranged = work.file("ranged.bin")
        let matched = curl(certificates, ["-H", "Range: bytes=100-199", "-H", "If-Range: \(etag)", "-o", ranged, "-w", "%{http_code}", url])
        #expect(matched.stdout == "206", "\(matched)")
        #expect(FileManager.default.contents(atPath: ranged).map { [UInt8]($0) } == Array(content[100..<200]))
        let stale = curl(certificates, ["-H", "Range: bytes=100-199", "-H", "If-Range: \"0-0-0\"", "-o", ranged, "-w", "%{http_code} %{size_download}", url])
        #expect(stale.stdout == "200 5000000", "a stale validator gets the whole file: \(stale)")
    }

    @Test func anUploadOverTLSCompletesByteExactly() throws {
        let files = TemporaryDirectory()
        let incoming = TemporaryDirectory()
        let work = TemporaryDirectory()
        defer { files.remove(); incoming.remove(); work.remove() }
        let certificates = try PeerCertificates(directory: work.path)
        let content = patternBytes(3_000_000, seed: 5)
        _ = FileManager.default.createFile(atPath: work.file("a.bin"), contents: Data(content[..<1_000_000]))
        _ = FileManager.default.createFile(atPath: work.file("b.bin"), contents: Data(content[1_000_000...]))
        _ = FileManager.default.createFile(atPath: work.file("whole.bin"), contents: Data(content))
        let daemon = try TestDaemon(config: tlsApp(root: files.path, certificates, extra: "upload-root = \(incoming.path)\n"))
        defer { daemon.stop() }
        let base = "https://127.0.0.1:\(daemon.port(of: "files"))"
        let partial = ["-H", "Content-Type: application/partial-upload"]

        let created = curl(certificates, ["-i", "-X", "POST", "-H", "Upload-Complete: ?0", "-H", "Upload-Length: \(content.count)", base + "/up.bin"])
        #expect(created.stdout.hasPrefix("HTTP/1.1 201") || created.stdout.contains("\r\n\r\nHTTP/1.1 201"), "\(created)")
        let location = try #require(created.stdout.split(separator: "\r\n").last { $0.lowercased().hasPrefix("location:") }?
            .dropFirst("location:".count).trimmingCharacters(in: .whitespaces))
        let first = curl(certificates, ["-X", "PATCH"] + partial + ["-H", "Upload-Offset: 0", "-H", "Upload-Complete: ?0",
                         "--data-binary", "@" + work.file("a.bin"), "-o", "/dev/null", "-w", "%{http_code}", base + location])
        #expect(first.stdout == "204", "\(first)")
        let offset = curl(certificates, ["-I", base + location])
        #expect(offset.stdout.lowercased().contains("upload-offset: 1000000"), "\(offset)")
        let last = curl(certificates, ["-X", "PATCH"] + partial + ["-H", "Upload-Offset: 1000000", "-H", "Upload-Complete: ?1",
                        "--data-binary", "@" + work.file("b.bin"), "-o", "/dev/null", "-w", "%{http_code}", base + location])
        #expect(last.stdout == "201", "\(last)")
        #expect(sha256(incoming.file("up.bin")) == sha256(work.file("whole.bin")), "the upload arrived byte-exactly")
    }

    @Test func aPlaintextAndATLSListenerShareAnApp() throws {
        let files = TemporaryDirectory()
        let work = TemporaryDirectory()
        defer { files.remove(); work.remove() }
        let certificates = try PeerCertificates(directory: work.path)
        files.write("a.txt", "shared\n")
        let config = tlsApp(root: files.path, certificates) + """
            [listener files.plain]
            address = 127.0.0.1:0
            service = http
            root = \(files.path)

            """
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        let tlsPort = daemon.port(of: "files")
        let plainPort = daemon.port(of: "files", listener: "plain")
        #expect(curl(certificates, ["https://127.0.0.1:\(tlsPort)/a.txt"]).stdout == "shared\n")
        #expect(run(["/usr/bin/curl", "-sS", "http://127.0.0.1:\(plainPort)/a.txt"]).stdout == "shared\n")
        // Each speaks only its own: TLS to the plaintext listener fails, plain HTTP to the TLS one is answered 400.
        #expect(curl(certificates, ["https://127.0.0.1:\(plainPort)/a.txt"], timeout: 15).status != 0)
        let plainToTLS = run(["/usr/bin/curl", "-sS", "-f", "-m", "10", "http://127.0.0.1:\(tlsPort)/a.txt"])
        #expect(plainToTLS.status == 22 && !plainToTLS.stdout.contains("shared"), "\(plainToTLS)")
        #expect(daemon.isRunning)
    }

    @Test func reloadServesARenewedCertificateToNewConnections() throws {
        let files = TemporaryDirectory()
        let work = TemporaryDirectory()
        defer { files.remove(); work.remove() }
        let certificates = try PeerCertificates(directory: work.path)
        files.write("a.txt", "x\n")
        let daemon = try TestDaemon(config: tlsApp(root: files.path, certificates))
        defer { daemon.stop() }
        let port = daemon.port(of: "files")
        let before = certificates.fingerprint
        #expect(before.contains("Fingerprint="), "\(before)")
        #expect(PeerCertificates.servedFingerprint(port: port) == before)
        try certificates.renew()
        let renewed = certificates.fingerprint
        #expect(renewed != before)
        #expect(PeerCertificates.servedFingerprint(port: port) == before, "the files alone change nothing until reload")
        let reload = daemon.ctl("reload")
        #expect(reload.status == 0, "\(reload)")
        #expect(PeerCertificates.servedFingerprint(port: port) == renewed, "after reload the renewed certificate is served")
        #expect(daemon.log.contains("reload: TLS certificate \(certificates.certificatePath) changed: new connections get the new one"), "the log says so")
        #expect(curl(certificates, ["https://127.0.0.1:\(port)/a.txt"]).stdout == "x\n")

        // A certificate broken before a reload: the reload is refused with the file and line, the old one stays.
        try "not a certificate\n".write(toFile: certificates.certificatePath, atomically: true, encoding: .utf8)
        let refused = daemon.ctl("reload")
        #expect(refused.status != 0, "\(refused)")
        #expect((refused.stdout + refused.stderr).contains("netlifed.conf:") && (refused.stdout + refused.stderr).contains(certificates.certificatePath), "\(refused)")
        #expect(PeerCertificates.servedFingerprint(port: port) == renewed)

        // A key replaced by a FIFO: the reload answers at once with the reason and the old key serves on
        // (it used to wait on the FIFO until the loop-stall watchdog aborted the daemon).
        try FileManager.default.removeItem(atPath: certificates.keyPath)
        #expect(mkfifo(certificates.keyPath, 0o600) == 0)
        let started = Date()
        let fifo = daemon.ctl("reload")
        #expect(Date().timeIntervalSince(started) < 2 * slowdown, "answered at once")
        #expect(fifo.status != 0 && (fifo.stdout + fifo.stderr).contains("not a regular file (a FIFO)"), "\(fifo)")
        #expect(daemon.isRunning)
        #expect(PeerCertificates.servedFingerprint(port: port) == renewed)
    }

    @Test func backgroundClosesTheTLSListenerAndForegroundReopensIt() throws {
        let files = TemporaryDirectory()
        let work = TemporaryDirectory()
        defer { files.remove(); work.remove() }
        let certificates = try PeerCertificates(directory: work.path)
        files.write("a.txt", "x\n")
        let daemon = try TestDaemon(config: tlsApp(root: files.path, certificates))
        defer { daemon.stop() }
        let port = daemon.port(of: "files")
        #expect(curl(certificates, ["https://127.0.0.1:\(port)/a.txt"]).stdout == "x\n")
        #expect(daemon.ctl("background", "files").status == 0)
        #expect(tcpConnect(port: port) == ECONNREFUSED)
        #expect(daemon.ctl("foreground", "files").status == 0)
        #expect(curl(certificates, ["https://127.0.0.1:\(port)/a.txt"]).stdout == "x\n")
    }

    @Test func aPeerThatSendsNoClientHelloIsCutOffAndTheDaemonLives() throws {
        let files = TemporaryDirectory()
        let work = TemporaryDirectory()
        defer { files.remove(); work.remove() }
        let certificates = try PeerCertificates(directory: work.path)
        files.write("a.txt", "x\n")
        let daemon = try TestDaemon(config: tlsApp(root: files.path, certificates, extra: "request-timeout = 1s\n"))
        defer { daemon.stop() }
        let port = daemon.port(of: "files")

        // Plain HTTP, then a pattern of bytes, where a ClientHello belongs: the handshake fails and the connection ends.
        for garbage in [Array("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n".utf8), patternBytes(4096, seed: 9)] {
            let peer = try #require(Peer.connect(port: port))
            defer { peer.close() }
            _ = peer.send(bytes: garbage)
            let started = Date()
            let end = peer.readEnd(timeout: 5)
            #expect(end != .timedOut, "the connection was not ended")
            #expect(Date().timeIntervalSince(started) < 0.9, "cut at once, not by the timeout")
        }
        // A handshake begun and never finished (half a record header): cut by request-timeout.
        let stalled = try #require(Peer.connect(port: port))
        defer { stalled.close() }
        _ = stalled.send(bytes: [0x16, 0x03, 0x01])
        let started = Date()
        #expect(stalled.readEnd(timeout: 5) != .timedOut)
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.8 && elapsed < 2 * slowdown, "the unfinished handshake was cut after \(elapsed) s")

        #expect(daemon.isRunning)
        #expect(curl(certificates, ["https://127.0.0.1:\(port)/a.txt"]).stdout == "x\n")
    }

    /// Mozilla's "intermediate" profile: TLS 1.2 with AEAD suites and forward secrecy only, groups X25519,
    /// P-256 and P-384; nothing older or weaker is accepted.
    @Test func theTLSSettingsAreMozillasIntermediateProfile() throws {
        let files = TemporaryDirectory()
        let work = TemporaryDirectory()
        defer { files.remove(); work.remove() }
        let certificates = try PeerCertificates(directory: work.path)
        files.write("a.txt", "x\n")
        let daemon = try TestDaemon(config: tlsApp(root: files.path, certificates))
        defer { daemon.stop() }
        let port = daemon.port(of: "files")
        func handshake(_ options: [String]) -> Bool {
            let result = run(["/bin/sh", "-c", "/usr/bin/openssl s_client -connect 127.0.0.1:\(port) \(options.joined(separator: " ")) </dev/null"], timeout: 20)
            return result.status == 0 && result.stdout.contains("Cipher is ") && !result.stdout.contains("Cipher is (NONE)")
        }
        #expect(handshake(["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"]), "an AEAD suite with ECDHE")
        #expect(handshake(["-tls1_3"]))
        for cbc in ["ECDHE-ECDSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384", "AES128-GCM-SHA256", "AES256-SHA"] {
            #expect(!handshake(["-tls1_2", "-cipher", cbc]), "\(cbc) is refused")
        }
        for group in ["X448", "secp521r1"] {
            #expect(!handshake(["-tls1_3", "-groups", group]), "\(group) is refused")
            #expect(!handshake(["-tls1_2", "-groups", group]), "\(group) is refused over TLS 1.2")
        }
        #expect(handshake(["-tls1_3", "-groups", "X25519"]) && handshake(["-tls1_3", "-groups", "P-384"]))
        #expect(!handshake(["-tls1_1"]), "TLS 1.1 is refused")

        // Plain HTTP sent to the TLS port is answered 400, as nginx answers it, not closed without a word.
        let plain = run(["/usr/bin/curl", "-sS", "-D", "-", "http://127.0.0.1:\(port)/a.txt"], timeout: 20)
        #expect(plain.stdout.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && plain.stdout.contains("this port speaks HTTPS"), "\(plain)")
        #expect(curl(certificates, ["https://127.0.0.1:\(port)/a.txt"]).stdout == "x\n", "HTTPS goes on as before")
        #expect(daemon.isRunning)
    }

    @Test func badCertificateKeysAreConfigErrorsNamingTheFileAndLine() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let certificates = try PeerCertificates(directory: directory.path)
        let missing = directory.file("missing.key")
        func check(_ name: String, _ lines: String, service: String = "service = http\nroot = \(directory.path)") -> ProcessResult {
            directory.write(name, "[app files]\n[listener files.main]\naddress = 127.0.0.1:0\n\(service)\n\(lines)\n")
            return run([product("netlifed"), "--check-config", directory.file(name)])
        }
        // Lines: 1 [app], 2 [listener], 3 address, 4 service, 5 root, 6 and 7 the TLS keys.
        let good = check("good.conf", "tls-certificate = \(certificates.certificatePath)\ntls-key = \(certificates.keyPath)")
        #expect(good.status == 0, "\(good)")

        // A missing key: an error for --check-config as for the daemon, which does not start without it.
        let absent = check("absent.conf", "tls-certificate = \(certificates.certificatePath)\ntls-key = \(missing)")
        #expect(absent.status == 1 && absent.stderr.contains("absent.conf:7: service http: tls-key \(missing) cannot be read: No such file or directory"), "\(absent)")
        let started = run([product("netlifed"), "--config", directory.file("absent.conf"), "--control", directory.file("c/s.sock")], timeout: 10)
        #expect(started.status == 78, "\(started)")
        #expect(started.stderr.contains("absent.conf:7:") && started.stderr.contains(missing), "\(started)")

        // A certificate that is not one, and a key that is not the certificate's.
        directory.write("garbage.pem", "not a certificate\n")
        let garbage = check("garbage.conf", "tls-certificate = \(directory.file("garbage.pem"))\ntls-key = \(certificates.keyPath)")
        #expect(garbage.status == 1)
        #expect(garbage.stderr.contains("garbage.conf:6: service http: tls-certificate \(directory.file("garbage.pem")) is not a PEM certificate chain"), "\(garbage)")
        let wrongKey = check("wrong.conf", "tls-certificate = \(certificates.certificatePath)\ntls-key = \(certificates.caPath)")
        #expect(wrongKey.status == 1)
        #expect(wrongKey.stderr.contains("wrong.conf:7: service http: tls-key \(certificates.caPath) is not the PEM private key"), "\(wrongKey)")

        // A FIFO where the key should be is refused at once, never waited on; an encrypted key is refused,
        // saying so, with no pass phrase asked for (OpenSSL would prompt on the terminal and block).
        #expect(mkfifo(directory.file("fifo.key"), 0o600) == 0)
        let started2 = Date()
        let fifo = check("fifo.conf", "tls-certificate = \(certificates.certificatePath)\ntls-key = \(directory.file("fifo.key"))")
        #expect(Date().timeIntervalSince(started2) < 5, "no wait on the FIFO")
        #expect(fifo.stderr.contains("fifo.conf:7:") && fifo.stderr.contains("not a regular file (a FIFO)"), "\(fifo)")
        let encrypted = run(["/usr/bin/openssl", "pkey", "-in", certificates.keyPath, "-aes256", "-passout", "pass:secret",
                             "-out", directory.file("encrypted.key")])
        #expect(encrypted.status == 0, "\(encrypted)")
        let locked = check("locked.conf", "tls-certificate = \(certificates.certificatePath)\ntls-key = \(directory.file("encrypted.key"))")
        #expect(locked.status == 1)
        #expect(locked.stderr.contains("locked.conf:7: service http: tls-key \(directory.file("encrypted.key")) is an encrypted key"), "\(locked)")
        #expect(!locked.stderr.contains("pass phrase:") && !locked.stdout.contains("pass phrase:"), "nothing prompted")
        // The config file itself as a FIFO.
        #expect(mkfifo(directory.file("fifo-config.conf"), 0o600) == 0)
        let fifoConfig = run([product("netlifed"), "--check-config", directory.file("fifo-config.conf")], timeout: 10)
        #expect(fifoConfig.status == 1 && fifoConfig.stderr.contains("not a regular file (a FIFO)"), "\(fifoConfig)")

        // One without the other, and TLS on a service that does not serve it.
        let alone = check("alone.conf", "tls-certificate = \(certificates.certificatePath)")
        #expect(alone.status == 1)
        #expect(alone.stderr.contains("alone.conf:6: service http: tls-certificate needs tls-key"), "\(alone)")
        let echo = check("echo.conf", "tls-certificate = \(certificates.certificatePath)\ntls-key = \(certificates.keyPath)", service: "service = echo\n")
        #expect(echo.status == 1)
        #expect(echo.stderr.contains("echo.conf:6: tls-certificate: netlifed serves TLS for listeners of service = http only"), "\(echo)")
        #expect(echo.stderr.contains("echo.conf:7: tls-key:"), "\(echo)")
    }

    @Test func aOneGiBBodyOverTLSNeverHoldsTheLoop() throws {
        // Without kernel TLS every byte is encrypted by SSL_write on the loop, 256 KiB per turn: a control
        // request waits at most one such turn (round trips during the transfer: median 0.12 ms, worst 4 to
        // 10 ms on a loaded 2-core machine), and the loop-stall watchdog never fires. Its 250 ms, not the
        // 100 ms of HTTPServiceTests' sendfile test: with that test's transfer running beside this one on 2
        // cores, scheduling alone held either daemon off the CPU for 110 to 134 ms. (A sparse file.)
        let files = TemporaryDirectory()
        let work = TemporaryDirectory()
        defer { files.remove(); work.remove() }
        let certificates = try PeerCertificates(directory: work.path)
        let size = 1 << 30
        let fd = open(files.file("big.bin"), O_WRONLY | O_CREAT, 0o644)
        #expect(fd >= 0 && ftruncate(fd, off_t(size)) == 0)
        close(fd)
        let daemon = try TestDaemon(config: tlsApp(root: files.path, certificates, daemon: "loop-stall = 250ms"))
        defer { daemon.stop() }
        let url = "https://127.0.0.1:\(daemon.port(of: "files"))/big.bin"
        let idle = daemon.statusLatency()
        let download = try BackgroundProcess(["/usr/bin/curl", "-sS", "--cacert", certificates.caPath, "-o", "/dev/null",
                                              "-w", "%{size_download} %{speed_download}", url])
        var during: [(median: Double, worst: Double, failures: Int)] = []
        while download.isRunning && during.count < 20 {
            during.append(daemon.statusLatency())
        }
        let (result, elapsed) = download.wait(timeout: 120)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.hasPrefix("\(size) "), "\(result.stdout)")
        let medians = during.map(\.median).sorted()
        let worst = during.map(\.worst).max() ?? 0
        print("1 GiB over TLS in \(String(format: "%.1f", elapsed)) s; status round trip idle median \(String(format: "%.2f", idle.median)) ms; during the transfer: \(during.count) rounds of 21, median of medians \(String(format: "%.2f", medians.isEmpty ? 0 : medians[medians.count / 2])) ms, worst \(String(format: "%.2f", worst)) ms")
        #expect(during.count >= 2, "the transfer outlasted a few status rounds")
        #expect(during.allSatisfy { $0.failures == 0 })
        #expect(!medians.isEmpty && medians[medians.count / 2] < 15 * slowdown, "a control request waited \(medians) ms")
        #expect(daemon.isRunning, "the loop-stall watchdog did not fire: \(daemon.log.suffix(500))")
    }
}
