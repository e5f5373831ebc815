// `netlifectl download` over TLS against real servers of other makes, with certificates made by the test
// (PeerCertificates): nginx over https with HTTP/2, a download paused by the lifecycle resuming with Range and
// If-Range; a server certificate from a CA netlifed was not told to trust failing the transfer (and
// `--insecure` then succeeding); FTP with explicit TLS (`--ssl-reqd`, pyftpdlib) resuming with REST; https
// through the CONNECT proxy named in netlifed's own environment (tinyproxy), and `no_proxy` going around it;
// redirects followed, a resume through them still a range request, credentials not sent to another host.
// The `Peers` suite checks the servers themselves with the curl command line, whose behaviour netlifed's
// libcurl engine shares.

import Foundation
import Testing
import NetLifeTestSupport


/// The transfer of `daemon` that writes to `output`, as `netlifectl --json transfers` shows it.
private func transfer(_ daemon: TestDaemon, output: String) -> [String: Any]? {
    let json = daemon.ctl("--json", "transfers")
    let reply = (try? JSONSerialization.jsonObject(with: Data(json.stdout.utf8))) as? [String: Any]
    return (reply?["transfers"] as? [[String: Any]])?.first { $0["output"] as? String == output }
}

/// The reason a transfer record gives ("" when none).
private func reason(_ record: [String: Any]?) -> String {
    (record?["reason"] as? String) ?? ""
}

/// A test CA and an nginx serving `file.bin` over TLS with a certificate it signed; `stop()` ends and removes
/// them.
private final class TLSSite {
    let scratch = TemporaryDirectory()
    let certificates: PeerCertificates
    let nginx: NginxServer
    /// The file's path on the server.
    var file: String { nginx.directory.file("www/file.bin") }

    init(rate: Int, content: [UInt8]) throws {
        do {
            certificates = try PeerCertificates(directory: scratch.path)
            nginx = try NginxServer(rate: rate, certificates: certificates)
        } catch {
            scratch.remove()
            throw error
        }
        nginx.put("file.bin", content)
    }

    func stop() {
        nginx.stop()
        scratch.remove()
    }
}

/// Waits until `output`'s part holds more than `atLeast` bytes, sends `fetcher` to the background and suspends
/// it (its background time runs out and the download pauses); returns the part's size.
private func pauseInBackground(_ daemon: TestDaemon, output: String, atLeast: Int,
                               sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    #expect(waitUntil(timeout: 10) { fileSize(output + ".part") > atLeast }, "\(daemon.ctl("transfers").stdout)",
            sourceLocation: sourceLocation)
    #expect(daemon.ctl("background", "fetcher").status == 0, sourceLocation: sourceLocation)
    #expect(daemon.ctl("suspend", "fetcher").status == 0, sourceLocation: sourceLocation)
    #expect(waitUntil(timeout: 6) { daemon.currentState("fetcher") == "suspended" }, "suspended once the task expired",
            sourceLocation: sourceLocation)
    #expect(daemon.ctl("transfers", "fetcher").stdout.contains("paused"), sourceLocation: sourceLocation)
    return fileSize(output + ".part")
}

/// Brings `fetcher` back to the foreground and waits until its download is done.
private func resumeUntilDone(_ daemon: TestDaemon, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(daemon.ctl("foreground", "fetcher").status == 0, sourceLocation: sourceLocation)
    #expect(waitUntil(timeout: 20) { daemon.ctl("transfers", "fetcher").stdout.contains("done") },
            "\(daemon.ctl("transfers").stdout)", sourceLocation: sourceLocation)
}

@Suite enum TLSDownloadTests {}

extension TLSDownloadTests {
    @Suite(.timeLimit(.minutes(2))) struct HTTPS {
        /// The TLS choices are kept in the journal with the transfer: a daemon killed with SIGKILL and started
        /// again resumes the download against the same `--cacert` (without it the server would not verify),
        /// and `transfers` never shows the URL's password.
        @Test func aDaemonKilledMidDownloadResumesWithTheSameCACertificate() throws {
            let content = patternBytes(3_000_000, seed: 35)
            let site = try TLSSite(rate: 1_000_000, content: content)
            defer { site.stop() }
            let out = TemporaryDirectory()
            let state = TemporaryDirectory()
            defer { out.remove(); state.remove() }
            let config = "[daemon]\nstate-directory = \(state.path)\n[app fetcher]\nauto-suspend = never\n"
            let output = out.file("file.bin")
            let url = site.nginx.url("file.bin", credentials: "ann:secret")
            let first = try TestDaemon(config: config, expectedEnd: .anything)
            defer { first.stop() }
            let started = first.ctl("download", "fetcher", url, "--output", output, "--cacert", site.certificates.caPath, "--no-wait")
            try #require(started.status == 0, "\(started)")
            #expect(!started.stdout.contains("secret") && first.ctl("transfers").stdout.contains("ann:***@"), "\(first.ctl("transfers").stdout)")
            #expect(waitUntil(timeout: 10) { fileSize(output + ".part") > 1_200_000 })
            #expect(state.read("transfers.json").contains(site.certificates.caPath), "the journal keeps --cacert")
            first.signal(SIGKILL)
            #expect(first.waitForExit())
            let second = try TestDaemon(config: config)
            defer { second.stop() }
            #expect(waitUntil(timeout: 20) { second.ctl("transfers", "fetcher").stdout.contains("done") },
                    "\(second.ctl("transfers").stdout)\n\(second.log)")
            #expect(sha256(output) == sha256(site.file), "byte-exact")
            let ranged = site.nginx.requests.filter { $0.range != nil }
            #expect(ranged.count == 1 && ranged.first?.status == 206, "resumed with one range request: \(site.nginx.accessLog)")
        }

        @Test func aDownloadOverHTTP2PausedByTheLifecycleResumesWithRangeAndIfRange() throws {
            let content = patternBytes(4_000_000, seed: 31)
            let site = try TLSSite(rate: 1_000_000, content: content)
            defer { site.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: fetcherConfig)
            defer { daemon.stop() }
            let output = out.file("file.bin")
            let started = daemon.ctl("download", "fetcher", site.nginx.url("file.bin"), "--output", output,
                                     "--cacert", site.certificates.caPath, "--no-wait")
            try #require(started.status == 0, "\(started)")
            let kept = pauseInBackground(daemon, output: output, atLeast: 500_000)
            #expect(kept > 0 && kept < content.count, "part: \(kept) bytes")
            resumeUntilDone(daemon)
            #expect(sha256(output) == sha256(site.file), "byte-exact")
            // nginx saw HTTP/2 only: a plain GET, then a range request from where the part stopped, with its
            // ETag in If-Range, and sent only the rest.
            let requests = site.nginx.requests
            #expect(!requests.isEmpty && requests.allSatisfy { $0.httpVersion == "HTTP/2.0" }, "\(site.nginx.accessLog)")
            let gets = requests.filter { $0.method == "GET" }
            #expect(gets.count == 2, "\(site.nginx.accessLog)")
            #expect(gets.first?.range == nil && gets.first?.status == 200, "\(site.nginx.accessLog)")
            let resumed = try #require(gets.last)
            let offset = resumed.rangeStart ?? -1
            #expect(resumed.status == 206 && offset > 0 && resumed.bytes == content.count - offset, "\(resumed)")
            #expect(resumed.ifRange == site.nginx.etag("file.bin"), "If-Range carried nginx's strong ETag: \(resumed)")
        }

        @Test func aCertificateFromACANetlifedDoesNotTrustFailsTheDownloadAndInsecureThenSucceeds() throws {
            let content = patternBytes(300_000, seed: 32)
            let site = try TLSSite(rate: 50_000_000, content: content)
            defer { site.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
            defer { daemon.stop() }
            let url = site.nginx.url("file.bin")
            // The system's trust store does not hold the test CA, and the other CA signed nothing here.
            for (name, options) in [("system.bin", [String]()), ("other.bin", ["--cacert", site.certificates.otherCAPath])] {
                let output = out.file(name)
                let refused = daemon.ctl(["download", "fetcher", url, "--output", output] + options)
                #expect(refused.status != 0, "\(options): \(refused)")
                #expect((refused.stdout + refused.stderr).contains("certificate"), "\(options): \(refused)")
                let record = transfer(daemon, output: output)
                #expect(record?["state"] as? String == "failed", "\(options): \(record ?? [:])")
                #expect(reason(record).contains("certificate"), "\(options): \(record ?? [:])")
                #expect(!FileManager.default.fileExists(atPath: output))
            }
            #expect(site.nginx.requests.isEmpty, "no request went over a connection that failed verification: \(site.nginx.accessLog)")
            // Verification off: the same server is fine.
            let insecure = daemon.ctl("download", "fetcher", url, "--output", out.file("insecure.bin"), "--insecure")
            #expect(insecure.status == 0, "\(insecure)")
            #expect(insecure.stdout.contains("done, 300000/300000 bytes"), "\(insecure.stdout)")
            #expect(sha256(out.file("insecure.bin")) == sha256(site.file), "byte-exact")
            // And the right CA for this transfer only.
            let trusted = daemon.ctl("download", "fetcher", url, "--output", out.file("trusted.bin"), "--cacert", site.certificates.caPath)
            #expect(trusted.status == 0, "\(trusted)")
            #expect(sha256(out.file("trusted.bin")) == sha256(site.file), "byte-exact")
            #expect(site.nginx.requests.filter { $0.method == "GET" && $0.status == 200 }.count == 2, "\(site.nginx.accessLog)")
            #expect(daemon.isRunning)
        }
    }
}

extension TLSDownloadTests {
    @Suite(.timeLimit(.minutes(2))) struct FTPS {
        @Test func aDownloadWithExplicitTLSPausedByTheLifecycleResumesWithREST() throws {
            let scratch = TemporaryDirectory()
            defer { scratch.remove() }
            let certificates = try PeerCertificates(directory: scratch.path)
            let server = try FTPServer(rate: 200_000, certificates: certificates)
            defer { server.stop() }
            let content = patternBytes(1_500_000, seed: 33)
            try server.put("file.bin", content)
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: fetcherConfig)
            defer { daemon.stop() }
            let output = out.file("file.bin")
            let started = daemon.ctl("download", "fetcher", server.url("file.bin"), "--output", output, "--ssl-reqd",
                                     "--cacert", certificates.caPath, "--no-wait")
            try #require(started.status == 0, "\(started)")
            let kept = pauseInBackground(daemon, output: output, atLeast: 200_000)
            #expect(kept > 0 && kept < content.count, "part: \(kept) bytes")
            #expect(waitUntil(timeout: 5) { server.sent.count == 1 }, "the first data connection closed: \(server.sent)")
            resumeUntilDone(daemon)
            #expect(sha256(output) == sha256(server.path("file.bin")), "byte-exact")
            // Every login secured first (the server refuses USER before AUTH, and a data connection before
            // PROT P); two RETRs, the second asking for the rest with REST and getting only that.
            let commands = server.commands
            let logins = commands.filter { $0.hasPrefix("USER ") }.count
            #expect(logins >= 1 && commands.filter { $0.hasPrefix("AUTH ") }.count == logins, "\(commands)")
            #expect(commands.filter { $0.hasPrefix("RETR ") }.count == 2, "\(commands)")
            let rest = commands.last { $0.hasPrefix("REST ") }.flatMap { Int($0.dropFirst(5)) } ?? -1
            #expect(rest > 0 && rest <= kept, "REST \(rest), part \(kept): \(commands)")
            #expect(waitUntil(timeout: 5) { server.sent.count == 2 } && server.sent.last == content.count - rest,
                    "sent \(server.sent) for REST \(rest)")
        }

        @Test func aServerCertificateFromAnUntrustedCAFailsBeforeLoggingIn() throws {
            let scratch = TemporaryDirectory()
            defer { scratch.remove() }
            let certificates = try PeerCertificates(directory: scratch.path)
            let server = try FTPServer(rate: 50_000_000, certificates: certificates)
            defer { server.stop() }
            try server.put("file.bin", patternBytes(100_000, seed: 34))
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
            defer { daemon.stop() }
            let output = out.file("file.bin")
            let refused = daemon.ctl("download", "fetcher", server.url("file.bin"), "--output", output, "--ssl-reqd",
                                     "--cacert", certificates.otherCAPath)
            #expect(refused.status != 0, "\(refused)")
            #expect((refused.stdout + refused.stderr).contains("certificate"), "\(refused)")
            let record = transfer(daemon, output: output)
            #expect(record?["state"] as? String == "failed" && reason(record).contains("certificate"), "\(record ?? [:])")
            #expect(server.commands.contains { $0.hasPrefix("AUTH ") }, "\(server.commands)")
            #expect(!server.commands.contains { $0.hasPrefix("USER") || $0.hasPrefix("PASS") }, "no credentials sent: \(server.commands)")
        }

        @Test func sslReqdRefusesAServerWithoutTLSBeforeLoggingIn() throws {
            let server = try FTPServer(rate: 50_000_000)
            defer { server.stop() }
            try server.put("file.bin", patternBytes(100_000, seed: 35))
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
            defer { daemon.stop() }
            let output = out.file("file.bin")
            let refused = daemon.ctl("download", "fetcher", server.url("file.bin"), "--output", output, "--ssl-reqd")
            #expect(refused.status != 0, "\(refused)")
            #expect(transfer(daemon, output: output)?["state"] as? String == "failed", "\(daemon.ctl("transfers").stdout)")
            #expect(server.commands.contains { $0.hasPrefix("AUTH ") }, "TLS was asked for: \(server.commands)")
            #expect(!server.commands.contains { $0.hasPrefix("USER") || $0.hasPrefix("PASS") }, "no credentials in the clear: \(server.commands)")
            #expect(!FileManager.default.fileExists(atPath: output))
        }
    }
}

extension TLSDownloadTests {
    @Suite(.timeLimit(.minutes(2))) struct Proxy {
        @Test func httpsGoesThroughTheProxyOfNetlifedsEnvironmentAndNoProxyGoesAroundIt() throws {
            let content = patternBytes(300_000, seed: 36)
            let site = try TLSSite(rate: 50_000_000, content: content)
            defer { site.stop() }
            let proxy = try ConnectProxy()
            defer { proxy.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let nginx = site.nginx
            // The second address of the same server is exempt from the proxy.
            let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n",
                                        environment: ["https_proxy": proxy.url, "no_proxy": nginx.secondHost])
            defer { daemon.stop() }
            let proxied = daemon.ctl("download", "fetcher", nginx.url("file.bin"), "--output", out.file("proxied.bin"),
                                     "--cacert", site.certificates.caPath)
            #expect(proxied.status == 0, "\(proxied)")
            #expect(sha256(out.file("proxied.bin")) == sha256(site.file), "byte-exact")
            #expect(proxy.connectTargets == ["\(nginx.host):\(nginx.port)"], "a tunnel through the proxy: \(proxy.log)")
            let direct = daemon.ctl("download", "fetcher", nginx.url("file.bin", host: nginx.secondHost),
                                    "--output", out.file("direct.bin"), "--cacert", site.certificates.caPath)
            #expect(direct.status == 0, "\(direct)")
            #expect(sha256(out.file("direct.bin")) == sha256(site.file), "byte-exact")
            #expect(proxy.connectTargets == ["\(nginx.host):\(nginx.port)"], "no tunnel for the no_proxy host: \(proxy.log)")
            #expect(nginx.requests.map(\.address) == [nginx.host, nginx.secondHost], "\(nginx.accessLog)")
        }

        @Test func plainHTTPGoesThroughTheHTTPProxyOfNetlifedsEnvironment() throws {
            let nginx = try NginxServer(rate: 50_000_000)
            defer { nginx.stop() }
            let content = patternBytes(300_000, seed: 37)
            nginx.put("file.bin", content)
            let proxy = try ConnectProxy()
            defer { proxy.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n", environment: ["http_proxy": proxy.url])
            defer { daemon.stop() }
            let done = daemon.ctl("download", "fetcher", nginx.url("file.bin"), "--output", out.file("file.bin"))
            #expect(done.status == 0, "\(done)")
            #expect(sha256(out.file("file.bin")) == sha256(nginx.directory.file("www/file.bin")), "byte-exact")
            #expect(proxy.requests.contains { $0.hasPrefix("GET \(nginx.url("file.bin")) ") }, "the request went through the proxy: \(proxy.log)")
        }
    }
}

extension TLSDownloadTests {
    @Suite(.timeLimit(.minutes(2))) struct Redirects {
        @Test func aChainOfRedirectsToAnotherHostIsFollowed() throws {
            let content = patternBytes(300_000, seed: 38)
            let site = try TLSSite(rate: 50_000_000, content: content)
            defer { site.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
            defer { daemon.stop() }
            let nginx = site.nginx
            let done = daemon.ctl("download", "fetcher", nginx.url("chain/file.bin"), "--output", out.file("file.bin"),
                                  "--cacert", site.certificates.caPath)
            #expect(done.status == 0, "\(done)")
            #expect(done.stdout.contains("done, 300000/300000 bytes"), "\(done.stdout)")
            #expect(sha256(out.file("file.bin")) == sha256(site.file), "byte-exact")
            // 301 to /hop on the same host, 302 from there to the other address, which serves the file.
            let hops = nginx.requests.map { "\($0.address) \($0.path) \($0.status)" }
            #expect(hops == ["\(nginx.host) /chain/file.bin 301", "\(nginx.host) /hop/file.bin 302", "\(nginx.secondHost) /file.bin 200"],
                    "\(nginx.accessLog)")
        }

        @Test func aRedirectedDownloadPausedByTheLifecycleResumesWithARangeRequest() throws {
            let content = patternBytes(4_000_000, seed: 39)
            let site = try TLSSite(rate: 1_000_000, content: content)
            defer { site.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: fetcherConfig)
            defer { daemon.stop() }
            let nginx = site.nginx
            let output = out.file("file.bin")
            let started = daemon.ctl("download", "fetcher", nginx.url("chain/file.bin"), "--output", output,
                                     "--cacert", site.certificates.caPath, "--no-wait")
            try #require(started.status == 0, "\(started)")
            let kept = pauseInBackground(daemon, output: output, atLeast: 500_000)
            #expect(kept > 0 && kept < content.count, "part: \(kept) bytes")
            resumeUntilDone(daemon)
            #expect(sha256(output) == sha256(site.file), "byte-exact")
            // Whether it resumed from the first URL (through the redirects again) or from where they led, the
            // request that reached the file asked for the rest, with the ETag, and got only that.
            let served = nginx.requests.filter { $0.path == "/file.bin" && $0.address == nginx.secondHost }
            #expect(served.count == 2, "\(nginx.accessLog)")
            let resumed = try #require(served.last)
            let offset = resumed.rangeStart ?? -1
            #expect(resumed.status == 206 && offset > 0 && resumed.bytes == content.count - offset, "\(nginx.accessLog)")
            #expect(resumed.ifRange == nginx.etag("file.bin"), "\(nginx.accessLog)")
        }

        @Test func credentialsInTheURLAreNotSentToAnotherHostAfterARedirect() throws {
            let content = patternBytes(300_000, seed: 40)
            let site = try TLSSite(rate: 50_000_000, content: content)
            defer { site.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
            defer { daemon.stop() }
            let nginx = site.nginx
            let done = daemon.ctl("download", "fetcher", nginx.url("away/file.bin", credentials: "user:secret"),
                                  "--output", out.file("file.bin"), "--cacert", site.certificates.caPath)
            #expect(done.status == 0, "\(done)")
            #expect(sha256(out.file("file.bin")) == sha256(site.file), "byte-exact")
            let requests = nginx.requests
            #expect(requests.map(\.address) == [nginx.host, nginx.secondHost], "\(nginx.accessLog)")
            // "user:secret" in base64: sent to the host of the URL, not to the one it redirected to.
            #expect(requests.first?.authorization == "Basic dXNlcjpzZWNyZXQ=", "\(nginx.accessLog)")
            #expect(requests.count == 2 && requests.last?.authorization == nil, "\(nginx.accessLog)")
        }

        @Test func aRedirectLoopFailsTheDownloadAfterALimit() throws {
            let site = try TLSSite(rate: 50_000_000, content: patternBytes(1000, seed: 41))
            defer { site.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
            defer { daemon.stop() }
            let output = out.file("file.bin")
            let failed = daemon.ctl("download", "fetcher", site.nginx.url("loop/start"), "--output", output,
                                    "--cacert", site.certificates.caPath)
            #expect(failed.status != 0, "\(failed)")
            #expect(transfer(daemon, output: output)?["state"] as? String == "failed", "\(daemon.ctl("transfers").stdout)")
            let loops = site.nginx.requests.filter { $0.path.hasPrefix("/loop/") }.count
            #expect(loops > 1 && loops <= 51, "\(loops) requests before giving up")
            #expect(!FileManager.default.fileExists(atPath: output))
            #expect(daemon.isRunning)
        }
    }
}

// MARK: the peers as curl sees them

/// Runs curl with `arguments` (and `environment` added to the test's own); fails the test if curl cannot run.
private func curl(_ arguments: [String], environment: [String: String] = [:]) -> ProcessResult {
    var base = ProcessInfo.processInfo.environment
    for (key, value) in environment { base[key] = value }
    return run(["/usr/bin/curl", "--silent", "--show-error", "--max-time", "20"] + arguments, environment: base, timeout: 30)
}

extension TLSDownloadTests {
    /// The servers above checked with the curl command line: if one of these fails, a netlifed test failing
    /// says nothing about netlifed.
    @Suite(.timeLimit(.minutes(2))) struct Peers {
        @Test func nginxServesHTTP2WithRangesIfRangeRedirectsAndItsOwnCertificate() throws {
            let content = patternBytes(1_000_000, seed: 42)
            let site = try TLSSite(rate: 50_000_000, content: content)
            defer { site.stop() }
            let out = TemporaryDirectory()
            defer { out.remove() }
            let nginx = site.nginx
            let ca = site.certificates.caPath
            let part = out.file("file.bin")
            let first = curl(["--cacert", ca, "--http2", "--range", "0-299999", "--output", part, nginx.url("file.bin")])
            #expect(first.status == 0 && fileSize(part) == 300_000, "\(first)")
            let resumed = curl(["--cacert", ca, "--http2", "--continue-at", "-", "--header", "If-Range: \(nginx.etag("file.bin"))",
                                "--output", part, "--write-out", "%{http_code} %{http_version}", nginx.url("file.bin")])
            #expect(resumed.stdout == "206 2", "\(resumed)")
            #expect(sha256(part) == sha256(site.file))
            let stale = curl(["--cacert", ca, "--range", "0-9", "--header", "If-Range: \"stale\"", "--output", "/dev/null",
                              "--write-out", "%{http_code}", nginx.url("file.bin")])
            #expect(stale.stdout == "200", "a stale If-Range gets the whole file: \(stale)")
            let last = try #require(nginx.requests.dropLast().last)
            #expect(last.httpVersion == "HTTP/2.0" && last.rangeStart == 300_000 && last.ifRange == nginx.etag("file.bin") && last.bytes == 700_000,
                    "\(nginx.accessLog)")
            // Redirects, and credentials kept from the other host.
            let before = nginx.requests.count
            let chain = curl(["--cacert", ca, "--location", "--output", "/dev/null", "--write-out", "%{num_redirects} %{url_effective}",
                              nginx.url("chain/file.bin")])
            #expect(chain.stdout == "2 \(nginx.url("file.bin", host: nginx.secondHost))", "\(chain)")
            let away = curl(["--cacert", ca, "--location", "--output", "/dev/null", nginx.url("away/file.bin", credentials: "user:secret")])
            #expect(away.status == 0, "\(away)")
            let redirected = Array(nginx.requests.dropFirst(before))
            #expect(redirected.map { "\($0.address) \($0.path) \($0.status) \($0.authorization ?? "-")" } == [
                "\(nginx.host) /chain/file.bin 301 -", "\(nginx.host) /hop/file.bin 302 -", "\(nginx.secondHost) /file.bin 200 -",
                "\(nginx.host) /away/file.bin 302 Basic dXNlcjpzZWNyZXQ=", "\(nginx.secondHost) /file.bin 200 -",
            ], "\(nginx.accessLog)")
            let loop = curl(["--cacert", ca, "--location", "--max-redirs", "5", "--output", "/dev/null", nginx.url("loop/start")])
            #expect(loop.status == 47, "too many redirects: \(loop)")
            // Verification: the wrong CA, or none (the system's store), is refused; the certificate names both addresses.
            #expect(curl(["--cacert", site.certificates.otherCAPath, "--output", "/dev/null", nginx.url("file.bin")]).status == 60)
            #expect(curl(["--output", "/dev/null", nginx.url("file.bin")]).status == 60)
            #expect(curl(["--insecure", "--output", "/dev/null", nginx.url("file.bin")]).status == 0)
            #expect(curl(["--cacert", ca, "--output", "/dev/null", nginx.url("file.bin", host: nginx.secondHost)]).status == 0)
        }

        @Test func pyftpdlibRequiresExplicitTLSAndResumesWithREST() throws {
            let scratch = TemporaryDirectory()
            defer { scratch.remove() }
            let certificates = try PeerCertificates(directory: scratch.path)
            let server = try FTPServer(rate: 50_000_000, certificates: certificates)
            defer { server.stop() }
            let content = patternBytes(1_000_000, seed: 43)
            try server.put("file.bin", content)
            let out = TemporaryDirectory()
            defer { out.remove() }
            let part = out.file("file.bin")
            out.write("file.bin", bytes: Array(content.prefix(400_000)))
            let resumed = curl(["--ssl-reqd", "--cacert", certificates.caPath, "--continue-at", "-", "--output", part, server.url("file.bin")])
            #expect(resumed.status == 0, "\(resumed)")
            #expect(sha256(part) == sha256(server.path("file.bin")))
            #expect(server.commands.contains("REST 400000") && server.commands.contains("PROT P"), "\(server.commands)")
            #expect(waitUntil(timeout: 5) { server.sent == [600_000] }, "\(server.sent)")
            // Without TLS the server refuses the login; with the wrong CA curl refuses the server.
            #expect(curl(["--output", "/dev/null", server.url("file.bin")]).status == 67)
            #expect(curl(["--ssl-reqd", "--cacert", certificates.otherCAPath, "--output", "/dev/null", server.url("file.bin")]).status == 60)
        }

        @Test func tinyproxyTunnelsHTTPSAndLogsTheConnect() throws {
            let site = try TLSSite(rate: 50_000_000, content: patternBytes(100_000, seed: 44))
            defer { site.stop() }
            let proxy = try ConnectProxy()
            defer { proxy.stop() }
            let nginx = site.nginx
            let through = curl(["--cacert", site.certificates.caPath, "--output", "/dev/null", "--write-out", "%{http_code}", nginx.url("file.bin")],
                               environment: ["https_proxy": proxy.url])
            #expect(through.stdout == "200", "\(through)")
            #expect(proxy.connectTargets == ["\(nginx.host):\(nginx.port)"], "\(proxy.log)")
            let around = curl(["--cacert", site.certificates.caPath, "--output", "/dev/null", nginx.url("file.bin", host: nginx.secondHost)],
                              environment: ["https_proxy": proxy.url, "no_proxy": nginx.secondHost])
            #expect(around.status == 0, "\(around)")
            #expect(proxy.connectTargets.count == 1, "\(proxy.log)")
            #expect(nginx.requests.map(\.address) == [nginx.host, nginx.secondHost], "\(nginx.accessLog)")
            // Plain http through http_proxy: the request itself, with the whole URL, goes to the proxy.
            let plain = try NginxServer(rate: 50_000_000)
            defer { plain.stop() }
            plain.put("file.bin", patternBytes(1000, seed: 45))
            let forwarded = curl(["--output", "/dev/null", "--write-out", "%{http_code}", plain.url("file.bin")],
                                 environment: ["http_proxy": proxy.url])
            #expect(forwarded.stdout == "200", "\(forwarded)")
            #expect(proxy.requests.last == "GET \(plain.url("file.bin")) HTTP/1.1", "\(proxy.log)")
        }
    }
}
