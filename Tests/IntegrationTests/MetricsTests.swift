// `[daemon] metrics` against the real netlifed, as Prometheus sees it: the bound port in `netlifectl status`,
// the families moving as netlifectl drives the apps (a transition counted, the state gauge changed, a VoIP
// wake-up and a frozen program's wake-up on a connection with their latency, control requests by command and
// result), `promtool check metrics` silent on the real
// text with every family present, the example alert rules checked by `promtool check rules`, and a real
// Prometheus that scrapes netlifed every second and answers a query with an app's state.

import Foundation
import Testing
import NetLifeTestSupport

/// The metrics address netlifectl's `--json status` shows (`127.0.0.1:PORT`), nil when it shows none.
private func metricsAddress(_ daemon: TestDaemon) -> String? {
    let result = daemon.ctl("--json", "status")
    guard let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else { return nil }
    return object["metrics"] as? String
}

/// GET (or another method) of `path` at `address` with curl: the response's head and body.
private func fetch(_ address: String, _ path: String = "/metrics", method: String = "GET") -> (status: Int32, head: String, body: String) {
    let scratch = TemporaryDirectory()
    defer { scratch.remove() }
    let verb = method == "HEAD" ? ["--head"] : ["-X", method]
    let result = run(["/usr/bin/curl", "-sS", "--max-time", "10"] + verb + ["-D", scratch.file("head"), "-o", scratch.file("body"),
                      "http://\(address)\(path)"], timeout: 15)
    return (result.status, scratch.read("head"), scratch.read("body"))
}

/// The value of the sample `series` (`name{labels}` as the text writes it) in `body`, or nil.
private func value(_ body: String, _ series: String) -> Double? {
    for line in body.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1))
    }
    return nil
}

/// `promtool check metrics` on `body`: its exit status and what it printed.
private func promtoolCheck(_ body: String) -> ProcessResult {
    let scratch = TemporaryDirectory()
    defer { scratch.remove() }
    scratch.write("metrics.txt", body)
    return run(["/bin/sh", "-c", "/usr/bin/promtool check metrics < \(scratch.file("metrics.txt"))"], timeout: 30)
}

private let alertRules = URL(fileURLWithPath: repositoryDirectory).appendingPathComponent("docs/netlife-alerts.yml").path

@Suite(.timeLimit(.minutes(3)))
struct MetricsTests {
    /// A daemon with metrics on port 0, an echo app `web` and an app `phone` with a VoIP line socket to `server`.
    private func startDaemon(_ server: PeerServer) throws -> TestDaemon {
        try TestDaemon(config: """
            [daemon]
            metrics = 127.0.0.1:0

            """ + echoApp("web", appLines: "auto-suspend = never") + lineSocketApp("phone", server, socketLines: "voip = yes"))
    }

    @Test func theScrapeFollowsWhatNetlifectlDoesAndPromtoolFindsNothingToSay() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try startDaemon(server)
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        let address = try #require(metricsAddress(daemon), "netlifectl --json status names the metrics address")
        #expect(address.hasPrefix("127.0.0.1:") && !address.hasSuffix(":0"), "the port the kernel chose: \(address)")
        let text = daemon.ctl("status")
        #expect(text.stdout.hasPrefix("netlifed: metrics at http://\(address)/metrics\n"), "\(text.stdout)")

        let first = fetch(address)
        #expect(first.status == 0 && first.head.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(first)")
        #expect(first.head.lowercased().contains("content-type: text/plain; version=0.0.4; charset=utf-8"), "\(first.head)")
        #expect(value(first.body, #"netlife_app_state{app="web",state="active"}"#) == 1)
        #expect(value(first.body, #"netlife_app_state{app="web",state="background"}"#) == 0)
        #expect(value(first.body, #"netlife_app_transitions_total{app="web",command="launch"}"#) == 1)
        #expect(value(first.body, #"netlife_app_transitions_total{app="web",command="background"}"#) == nil)
        #expect(value(first.body, #"netlife_app_background_time_remaining_seconds{app="web"}"#) == .infinity)

        // A transition: counted, timed, and the state gauge follows.
        #expect(daemon.ctl("background", "web").status == 0)
        // A wake-up: the phone app suspended, then data on its VoIP socket.
        #expect(daemon.waitForSocket("phone", state: "connected"))
        #expect(daemon.ctl("background", "phone").status == 0)
        #expect(daemon.ctl("suspend", "phone").status == 0)
        peer.send("ring\n")
        #expect(waitUntil(timeout: 5) { value(fetch(address).body, #"netlife_app_wakeups_total{app="phone",reason="voip-data"}"#) == 1 })
        // An error reply, counted by its code.
        #expect(daemon.ctl("foreground", "nosuchapp").status != 0)

        let second = fetch(address)
        let body = second.body
        #expect(value(body, #"netlife_app_state{app="web",state="active"}"#) == 0)
        #expect(value(body, #"netlife_app_state{app="web",state="background"}"#) == 1)
        #expect(value(body, #"netlife_app_transitions_total{app="web",command="background"}"#) == 1)
        #expect(value(body, #"netlife_app_stage_duration_seconds_count{app="web",stage="did-enter-background"}"#) == 1)
        #expect(value(body, #"netlife_app_stage_duration_seconds_bucket{app="web",stage="did-enter-background",le="+Inf"}"#) == 1)
        #expect((value(body, #"netlife_app_background_time_remaining_seconds{app="web"}"#) ?? 0) > 20, "background time counts down from 30 s")
        #expect(value(body, #"netlife_app_wake_latency_seconds_count{app="phone",reason="voip-data"}"#) == 1)
        #expect((value(body, #"netlife_app_wake_latency_seconds_sum{app="phone",reason="voip-data"}"#) ?? 1) < 0.5)
        #expect(value(body, #"netlife_control_requests_total{command="background",result="ok"}"#) == 2)
        #expect(value(body, #"netlife_control_requests_total{command="foreground",result="unknown-app"}"#) == 1)
        #expect((value(body, #"netlife_control_requests_total{command="status",result="ok"}"#) ?? 0) >= 1)
        #expect((value(body, "netlife_loop_turn_duration_seconds_count") ?? 0) > 10)
        #expect((value(body, "process_open_fds") ?? 0) > 5 && (value(body, "process_resident_memory_bytes") ?? 0) > 1e6)
        let started = value(body, "process_start_time_seconds") ?? 0
        #expect(abs(started - Date().timeIntervalSince1970) < 120, "started \(started)")

        // Every family is there, histograms with observations among them, and promtool has nothing to say.
        let families = Set(body.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] })
        for name in ["netlife_app_state", "netlife_app_transitions_total", "netlife_app_stage_duration_seconds", "netlife_app_watchdog_kills_total",
                     "netlife_app_terminations_total", "netlife_app_jetsam_terminations_total", "netlife_app_idle_backgrounds_total",
                     "netlife_app_wakeups_total", "netlife_app_wake_latency_seconds", "netlife_app_memory_bytes", "netlife_app_connections",
                     "netlife_app_connections_accepted_total", "netlife_app_background_time_remaining_seconds", "netlife_app_background_tasks",
                     "netlife_app_transfer_bytes_total", "netlife_control_requests_total", "netlife_loop_turn_duration_seconds",
                     "netlife_build_info", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                     "process_open_fds", "process_max_fds", "process_start_time_seconds"] {
            #expect(families.contains(Substring(name)), "no family \(name)")
        }
        let check = promtoolCheck(body)
        #expect(check.status == 0 && check.stdout.isEmpty && check.stderr.isEmpty, "\(check)")
    }

    @Test func onlyGetAndHeadOfMetricsAreServed() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try startDaemon(server)
        defer { daemon.stop() }
        let address = try #require(metricsAddress(daemon))
        let head = fetch(address, method: "HEAD")
        // curl --head writes the head as the output too: nothing else came.
        #expect(head.status == 0 && head.head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.body == head.head, "\(head)")
        let other = fetch(address, "/")
        #expect(other.status == 0 && other.head.hasPrefix("HTTP/1.1 404 Not Found\r\n") && other.body.contains("only /metrics is served here"), "\(other)")
        let post = fetch(address, method: "POST")
        #expect(post.status == 0 && post.head.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n") && post.head.contains("Allow: GET, HEAD"), "\(post)")
        // Garbage: 400 and the connection closed.
        let port = try #require(UInt16(address.split(separator: ":").last ?? ""))
        let client = try #require(Peer.connect(port: port))
        defer { client.close() }
        client.send("\u{1}\u{2} nonsense\r\n\r\n")
        let answer = client.read(untilContaining: "\r\n\r\n")
        #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer)")
        #expect(client.readEnd(timeout: 5) == .endOfStream, "closed after the 400")
        #expect(daemon.isRunning)
    }

    @Test func aConnectionThatWakesAFrozenProgramIsCountedWithItsLatency() throws {
        // redis as a process app whose listener wakes it: the path through App+ConnectionWake.
        let server = AdoptedServer(.redis)
        defer { server.remove() }
        let daemon = try TestDaemon(config: "[daemon]\nmetrics = 127.0.0.1:0\n"
                                    + server.app("web", appLines: "auto-suspend = 300ms", listenerLines: "on-background = wake"))
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 10) { daemon.currentState("web") == "active" }, "launched: \(daemon.log)")
        let address = try #require(metricsAddress(daemon))
        #expect(daemon.ctl("background", "web").status == 0)
        #expect(waitUntil(timeout: 3) { daemon.currentState("web") == "suspended" })
        let peer = try #require(Peer.connect(host: server.host, port: server.port))
        defer { peer.close() }
        peer.send(server.request)
        #expect(peer.read(untilContaining: server.answer).contains(server.answer), "the woken program serves the connection")
        let body = fetch(address).body
        #expect(value(body, #"netlife_app_wakeups_total{app="web",reason="connection"}"#) == 1)
        #expect(value(body, #"netlife_app_wake_latency_seconds_count{app="web",reason="connection"}"#) == 1)
        let latency = value(body, #"netlife_app_wake_latency_seconds_sum{app="web",reason="connection"}"#) ?? -1
        print("wake of a frozen redis: \(String(format: "%.3f", latency * 1000)) ms from the connection seen to the program thawed")
        #expect(latency >= 0 && latency < 0.5, "\(latency) s")
        #expect(value(body, #"netlife_app_state{app="web",state="background"}"#) == 1, "woken into the background")
    }

    @Test func aDownloadsBytesAreCountedForItsApp() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let content = pattern(300_000)
        try FileManager.default.createDirectory(atPath: directory.file("files"), withIntermediateDirectories: true)
        directory.write("files/f.bin", bytes: content)
        // The app `files` serves the file; the app `fetcher` downloads it from there.
        let config = httpApp(root: directory.file("files")).replacingOccurrences(of: "[daemon]\n", with: "[daemon]\nmetrics = 127.0.0.1:0\n")
        let daemon = try TestDaemon(config: config + "[app fetcher]\n")
        defer { daemon.stop() }
        let address = try #require(metricsAddress(daemon))
        #expect(value(fetch(address).body, #"netlife_app_transfer_bytes_total{app="fetcher",direction="download"}"#) == nil)
        let done = daemon.ctl("download", "fetcher", "http://127.0.0.1:\(daemon.port(of: "files"))/f.bin", "--output", directory.file("copy.bin"))
        #expect(done.status == 0, "\(done)")
        #expect(directory.readBytes("copy.bin") == content)
        let body = fetch(address).body
        #expect(value(body, #"netlife_app_transfer_bytes_total{app="fetcher",direction="download"}"#) == Double(content.count))
        #expect(value(body, #"netlife_app_transfer_bytes_total{app="files",direction="download"}"#) == nil)
    }

    @Test func aStartThatCannotBindTheMetricsAddressFailsAndSaysWhy() throws {
        // The address is taken: a listening socket of the test's own.
        let taken = try #require(PeerServer())
        defer { taken.close() }
        let daemon = try TestDaemon(config: "[daemon]\nmetrics = \(taken.address)\n" + echoApp("web"), waitForReady: false,
                                    expectedEnd: .anything)
        defer { daemon.stop() }
        #expect(daemon.waitForExit(timeout: 15), "netlifed does not start without its metrics listener")
        #expect(daemon.exitStatus == 1, "a failure a restart may cure: \(daemon.endDescription)")
        #expect(daemon.log.contains("cannot listen for metrics on \(taken.address): "), "\(daemon.log)")
    }

    @Test func theExampleAlertRulesAreValidForPrometheus() {
        let check = run(["/usr/bin/promtool", "check", "rules", alertRules], timeout: 30)
        #expect(check.status == 0 && check.stdout.contains("SUCCESS: 4 rules found"), "\(check)")
    }

    @Test(.timeLimit(.minutes(2)))
    func aRealPrometheusScrapesNetlifedAndAnswersAQueryWithAnAppsState() throws {
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try startDaemon(server)
        defer { daemon.stop() }
        let address = try #require(metricsAddress(daemon))
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("prometheus.yml", """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files:
              - \(alertRules)
            scrape_configs:
              - job_name: netlife
                static_configs:
                  - targets: ['\(address)']

            """)
        let prometheus = try SpawnedProgram(["/usr/bin/prometheus", "--config.file=\(scratch.file("prometheus.yml"))",
                                             "--storage.tsdb.path=\(scratch.file("data"))", "--web.listen-address=127.0.0.1:0"],
                                            output: scratch.file("prometheus.log"))
        defer { _ = prometheus.end(signallingGroup: true, grace: 5) }
        // Its port, from the kernel: the socket its process listens on (never a port bound, closed and guessed).
        var port: UInt16?
        #expect(waitUntil(timeout: 20, every: 0.1) {
            port = listeningPort(of: prometheus.pid)
            return port != nil || !prometheus.isRunning
        }, "prometheus listens: \(scratch.read("prometheus.log").suffix(2000))")
        let web = "127.0.0.1:\(try #require(port))"

        #expect(daemon.ctl("background", "web").status == 0)
        var answer = ""
        let answered = waitUntil(timeout: 45, every: 0.5) {
            let query = run(["/usr/bin/curl", "-sS", "--max-time", "5", "-G", "http://\(web)/api/v1/query",
                             "--data-urlencode", #"query=netlife_app_state{app="web",state="background"}"#], timeout: 10)
            answer = query.stdout
            return answer.contains(#""status":"success""#) && answer.contains(#""value":["#) && answer.contains(#","1"]"#)
        }
        #expect(answered, "Prometheus answers with the state netlifed reported: \(answer)\n\(scratch.read("prometheus.log").suffix(2000))")
        let targets = run(["/usr/bin/curl", "-sS", "--max-time", "5", "http://\(web)/api/v1/targets"], timeout: 10).stdout
        #expect(targets.contains(#""health":"up""#) && targets.contains(address), "\(targets)")
        let rules = run(["/usr/bin/curl", "-sS", "--max-time", "5", "http://\(web)/api/v1/rules"], timeout: 10).stdout
        #expect(rules.contains("NetlifeWatchdogKill") && !rules.contains(#""health":"err""#), "the example rules load and evaluate: \(rules.prefix(2000))")
    }
}

/// The TCP port process `pid` listens on, from `ss -ltnpH` (its listening sockets, with their owners).
private func listeningPort(of pid: Int32) -> UInt16? {
    let listing = run(["/usr/bin/ss", "-ltnpH"], timeout: 10).stdout
    for line in listing.split(separator: "\n") where line.contains("pid=\(pid),") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 4, let port = fields[3].split(separator: ":").last.flatMap({ UInt16($0) }), port != 0 else { continue }
        return port
    }
    return nil
}
