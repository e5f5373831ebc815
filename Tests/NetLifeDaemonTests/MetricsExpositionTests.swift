// The metrics' pure core: histograms, the text exposition format (escaping, numbers, HELP and TYPE once per
// family, cumulative buckets ending in +Inf with _sum and _count), the family table against Prometheus' naming
// rules, the registry fed with app events and control requests, a scrape written in slices, and the /proc
// parsing of the process figures.

@testable import NetLifeDaemon
import NetLife
import NetLifeControl
import NetLifeEvent
import Testing

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// The lines of an exposition that are samples (not comments).
private func samples(_ text: String) -> [Substring] {
    text.split(separator: "\n").filter { !$0.hasPrefix("#") }
}

@Suite struct HistogramTests {
    @Test func anObservationCountsInTheFirstBucketWhoseBoundItDoesNotPassAndTheExpositionIsCumulative() {
        var histogram = Histogram(bounds: [1, 0.5, 2, 2, .infinity])
        #expect(histogram.bounds == [0.5, 1, 2], "sorted, duplicates and +Inf dropped")
        for value in [0.1, 0.5, 0.7, 1, 3, .nan] { histogram.observe(value) }
        #expect(histogram.bucketCounts == [2, 2, 0, 1])
        #expect(histogram.cumulativeCounts == [2, 4, 4, 5])
        #expect(histogram.count == 5, "a NaN is no observation")
        #expect(abs(histogram.sum - 5.3) < 1e-9)
    }

    @Test func countsKeptElsewhereAreTakenOnlyWithOneBucketPastTheBounds() {
        let kept = Histogram(bounds: [1, 2], bucketCounts: [1, 2, 3], sum: 9, count: 6)
        #expect(kept.cumulativeCounts == [1, 3, 6] && kept.count == 6 && kept.sum == 9)
        let wrong = Histogram(bounds: [1, 2], bucketCounts: [1, 2], sum: 9, count: 6)
        #expect(wrong.cumulativeCounts == [0, 0, 0] && wrong.count == 0)
    }
}

@Suite struct ExpositionTests {
    private static let family = MetricFamily(.appState, "netlife_test", .gauge, labels: ["app", "state"], help: "A test.")

    @Test func labelValuesEscapeBackslashQuoteAndLineFeedAndHelpEscapesBackslashAndLineFeed() {
        var exposition = Exposition()
        exposition.header(MetricFamily(.appState, "netlife_test", .counter, help: "a \\ b\nc \"d\""))
        exposition.sample(Self.family, "a\\b", "say \"hi\"\nbye", value: 1)
        #expect(text(exposition.bytes) == """
            # HELP netlife_test a \\\\ b\\nc "d"
            # TYPE netlife_test counter
            netlife_test{app="a\\\\b",state="say \\"hi\\"\\nbye"} 1

            """)
    }

    @Test func numbersAreWrittenAsPrometheusReadsThem() {
        #expect(Exposition.text(0) == "0" && Exposition.text(-0.0) == "0" && Exposition.text(42) == "42" && Exposition.text(-3) == "-3")
        #expect(Exposition.text(0.005) == "0.005" && Exposition.text(1e-05) == "1e-05" && Exposition.text(2.5) == "2.5")
        #expect(Exposition.text(.infinity) == "+Inf" && Exposition.text(-.infinity) == "-Inf" && Exposition.text(.nan) == "NaN")
        #expect(Exposition.text(1e20) == "1e+20", "past 10^15 a whole number keeps its exponent")
        var exposition = Exposition()
        let plain = MetricFamily(.appState, "n", .gauge, help: "h")
        for value in [0, 7, 18_446_744_073_709_551_615] as [UInt64] { exposition.sample(plain, count: value) }
        exposition.sample(plain, value: .infinity)
        exposition.sample(plain, value: 0.25)
        #expect(text(exposition.bytes) == "n 0\nn 7\nn 18446744073709551615\nn +Inf\nn 0.25\n")
    }

    @Test func aHistogramIsItsCumulativeBucketsThenInfThenSumAndCount() {
        var histogram = Histogram(bounds: [0.001, 0.5])
        histogram.observe(0.25)
        histogram.observe(0.5)
        histogram.observe(3)
        var exposition = Exposition()
        let family = MetricFamily(.appWakeLatency, "netlife_h_seconds", .histogram, labels: ["app", "reason"], help: "h")
        exposition.histogram(family, "web", "connection", histogram: histogram)
        #expect(text(exposition.bytes) == """
            netlife_h_seconds_bucket{app="web",reason="connection",le="0.001"} 0
            netlife_h_seconds_bucket{app="web",reason="connection",le="0.5"} 2
            netlife_h_seconds_bucket{app="web",reason="connection",le="+Inf"} 3
            netlife_h_seconds_sum{app="web",reason="connection"} 3.75
            netlife_h_seconds_count{app="web",reason="connection"} 3

            """)
        var unlabelled = Exposition()
        unlabelled.histogram(MetricFamily(.loopTurnDuration, "t_seconds", .histogram, help: "t"), histogram: Histogram(bounds: [1]))
        #expect(text(unlabelled.bytes) == "t_seconds_bucket{le=\"1\"} 0\nt_seconds_bucket{le=\"+Inf\"} 0\nt_seconds_sum 0\nt_seconds_count 0\n")
    }
}

@Suite struct MetricFamilyTableTests {
    @Test func everyNameFollowsPrometheusNamingRules() throws {
        let name = try Regex("^[a-zA-Z_:][a-zA-Z0-9_:]*$")
        let label = try Regex("^[a-zA-Z_][a-zA-Z0-9_]*$")
        let families = MetricFamily.all
        #expect(Set(families.map(\.name)).count == families.count, "each family once")
        #expect(Set(families.map(\.id)).count == families.count)
        for family in families {
            #expect(family.name.wholeMatch(of: name) != nil, "\(family.name)")
            #expect(family.name.hasPrefix("netlife_") || family.name.hasPrefix("process_"), "\(family.name)")
            #expect((family.kind == .counter) == family.name.hasSuffix("_total"), "a counter's name, and only a counter's, ends in _total: \(family.name)")
            #expect(!family.name.hasSuffix("_count") && !family.name.hasSuffix("_sum") && !family.name.hasSuffix("_bucket"), "\(family.name)")
            #expect(!family.name.contains("milliseconds") && !family.name.contains("_ms"), "base units: seconds and bytes")
            if family.kind == .histogram { #expect(family.name.hasSuffix("_seconds"), "\(family.name)") }
            #expect(!family.help.isEmpty && !family.help.contains("\n"), "\(family.name)")
            for each in family.labels {
                #expect(each.wholeMatch(of: label) != nil && !each.hasPrefix("__") && each != "le", "\(family.name): \(each)")
            }
            if family.name.hasPrefix("netlife_app_") { #expect(family.labels.first == "app", "\(family.name)") }
        }
        #expect(MetricFamily.all.filter { $0.name.hasPrefix("process_") }.map(\.name).sorted() == [
            "process_cpu_seconds_total", "process_max_fds", "process_open_fds", "process_resident_memory_bytes",
            "process_start_time_seconds", "process_virtual_memory_bytes",
        ])
    }
}

@Suite struct MetricsRegistryTests {
    @Test func appEventsAreCountedUnderTheAppsNameInTheirVocabularys() {
        var registry = MetricsRegistry()
        let stages = [StageReport(event: .willResignActive, duration: .microseconds(300)),
                      StageReport(event: .didEnterBackground, duration: .milliseconds(20))]
        registry.record(.transitionFinished(command: .background, state: .background, stages: stages), app: "web")
        registry.record(.transitionFinished(command: .launch(background: true), state: .background, stages: []), app: "web")
        registry.record(.watchdogKilled(WatchdogTimeout(stage: .transition(.didEnterBackground), budget: .seconds(5), elapsed: .seconds(6))), app: "web")
        registry.record(.stopped(TerminationRecord(reason: .watchdog(WatchdogTimeout(stage: .expiration, budget: .seconds(1), elapsed: .seconds(2))))), app: "web")
        registry.record(.stopped(TerminationRecord(reason: .memoryPressure(nil))), app: "web")
        registry.record(.idle(unusedFor: .seconds(61)), app: "web")
        registry.record(.woken(.connection(listener: "main")), app: "web")
        registry.record(.wakeServed(.connection(listener: "main"), latency: .microseconds(800)), app: "web")
        registry.record(.stateChanged(from: .active, to: .inactive), app: "other")
        let web = registry.counters(of: "web")
        let commands = MetricVocabulary.commands
        #expect(web.transitions[commands.firstIndex(of: "background")!] == 1)
        #expect(web.transitions[commands.firstIndex(of: "launch")!] == 1, "launch --background is a launch")
        #expect(web.stageDurations[MetricVocabulary.stages.firstIndex(of: "did-enter-background")!]?.count == 1)
        #expect(web.stageDurations[MetricVocabulary.stages.firstIndex(of: "did-enter-background")!]?.sum == 0.02)
        #expect(web.stageDurations[MetricVocabulary.stages.firstIndex(of: "will-resign-active")!]?.bucketCounts.first == 1,
                "300 µs is under the first bound, 500 µs")
        #expect(web.watchdogKills == 1 && web.jetsamTerminations == 1 && web.idleBackgrounds == 1)
        #expect(web.terminations[MetricVocabulary.terminations.firstIndex(of: "watchdog")!] == 1)
        #expect(web.terminations[MetricVocabulary.terminations.firstIndex(of: "memory-pressure")!] == 1)
        #expect(web.wakeups[MetricVocabulary.wakeReasons.firstIndex(of: "connection")!] == 1)
        #expect(web.wakeLatency[MetricVocabulary.wakeReasons.firstIndex(of: "connection")!]?.sum == 0.0008)
        #expect(registry.apps["other"] == nil, "a state change is a gauge read at scrape time, not a count")

        registry.keepApps(["other"])
        #expect(registry.apps.isEmpty, "an app a reload removed leaves no series")
    }

    @Test func aControlRequestIsCountedByItsCommandInTheTableAndItsResult() throws {
        var registry = MetricsRegistry()
        let ok = try JSON.parse(#"{"ok":true,"apps":[]}"#)
        let refused = ControlError(.unknownApp, "no app named 'x'").json
        registry.recordControlRequest(try JSON.parse(#"{"cmd":"status"}"#), reply: ok)
        registry.recordControlRequest(try JSON.parse(#"{"cmd":"status"}"#), reply: ok)
        registry.recordControlRequest(try JSON.parse(#"{"cmd":"background","app":"x"}"#), reply: refused)
        // Names no client may add: a command outside the table, a request that was no JSON, an error code this
        // daemon lacks.
        registry.recordControlRequest(try JSON.parse(#"{"cmd":"rm -rf \"/\""}"#), reply: ControlError(.unknownCommand, "?").json)
        registry.recordControlRequest(nil, reply: ControlError(.badRequest, "not JSON").json)
        registry.recordControlRequest(try JSON.parse(#"{"cmd":"version"}"#), reply: try JSON.parse(#"{"ok":false,"error":{"code":"new-code"}}"#))
        let counted = registry.orderedControlRequests.map { "\($0.key.command) \($0.key.result) \($0.count)" }
        #expect(counted == ["status ok 2", "background unknown-app 1", "version unknown 1", "unknown bad-request 1", "unknown unknown-command 1"])
    }
}

@Suite struct MetricsScrapeTests {
    private static func sampleScrape() -> MetricsScrape {
        var registry = MetricsRegistry()
        registry.record(.transitionFinished(command: .background, state: .background,
                                            stages: [StageReport(event: .didEnterBackground, duration: .milliseconds(2))]), app: "b")
        registry.record(.woken(.voipData(socket: "v")), app: "b")
        registry.record(.wakeServed(.voipData(socket: "v"), latency: .milliseconds(1)), app: "b")
        registry.recordControlRequest(nil, reply: ControlError(.badRequest, "x").json)
        let apps = [
            AppSample(name: "a", state: .active, memoryBytes: 4096, connections: 2, acceptedConnections: 5, backgroundTimeRemaining: nil,
                      transferBytes: [100, 0]),
            AppSample(name: "b", state: .suspended, backgroundTimeRemaining: 0, counters: registry.counters(of: "b")),
        ]
        var turns = LoopTurnTimes()
        turns.record(nanoseconds: 6_000_000)
        return MetricsScrape(apps: apps, controlRequests: registry.orderedControlRequests,
                             loopTurns: Histogram(bounds: LoopTurnTimes.boundNanoseconds.map { Double($0) / 1e9 }, bucketCounts: turns.bucketCounts,
                                                  sum: 0.006, count: 1),
                             process: ProcessSample(cpuSeconds: 1.5, residentBytes: 1 << 20, virtualBytes: 1 << 30, openFileDescriptors: 12,
                                                    maxFileDescriptors: 1024, startTimeSeconds: 1_700_000_000.5),
                             version: "9.9")
    }

    @Test func everyFamilyHasItsHelpAndTypeOnceBeforeItsSamplesAndNoFamilyIsSplit() {
        var scrape = Self.sampleScrape()
        let body = text(scrape.renderAll())
        var seen: [String] = []
        var current = ""
        for line in body.split(separator: "\n") {
            if line.hasPrefix("# HELP ") {
                current = String(line.split(separator: " ")[2])
                #expect(!seen.contains(current), "\(current) begins twice")
                seen.append(current)
            } else if line.hasPrefix("# TYPE ") {
                #expect(line.split(separator: " ")[2] == current, "TYPE follows its HELP: \(line)")
            } else {
                let name = String(line.prefix { $0 != "{" && $0 != " " })
                #expect(name == current || name.hasPrefix(current + "_"), "\(name) is outside its family \(current)")
            }
        }
        #expect(seen == MetricFamily.all.map(\.name), "every family, in the table's order")
        #expect(body.contains("netlife_app_state{app=\"a\",state=\"active\"} 1\nnetlife_app_state{app=\"a\",state=\"background\"} 0"))
        #expect(body.contains("netlife_app_state{app=\"b\",state=\"suspended\"} 1"))
        #expect(body.contains("netlife_app_transitions_total{app=\"b\",command=\"background\"} 1\n"))
        #expect(!body.contains("netlife_app_transitions_total{app=\"a\""), "a labelled series appears with its first count")
        #expect(body.contains("netlife_app_watchdog_kills_total{app=\"a\"} 0\n"), "an app's own counters are there from the start")
        #expect(body.contains("netlife_app_stage_duration_seconds_bucket{app=\"b\",stage=\"did-enter-background\",le=\"0.005\"} 1"))
        #expect(body.contains("netlife_app_wake_latency_seconds_count{app=\"b\",reason=\"voip-data\"} 1"))
        #expect(body.contains("netlife_app_background_time_remaining_seconds{app=\"a\"} +Inf\n"))
        #expect(body.contains("netlife_app_background_time_remaining_seconds{app=\"b\"} 0\n"))
        #expect(body.contains("netlife_app_transfer_bytes_total{app=\"a\",direction=\"download\"} 100\n"))
        #expect(body.contains("netlife_control_requests_total{command=\"unknown\",result=\"bad-request\"} 1\n"))
        #expect(body.contains("netlife_loop_turn_duration_seconds_bucket{le=\"0.005\"} 0\nnetlife_loop_turn_duration_seconds_bucket{le=\"0.01\"} 1"))
        #expect(body.contains("netlife_build_info{version=\"9.9\"} 1\n"))
        #expect(body.contains("process_start_time_seconds 1700000000.5\n") && body.contains("process_open_fds 12\n"), "\(body.suffix(900))")
    }

    @Test func aScrapeWrittenInSlicesIsTheTextWrittenAtOnce() {
        var whole = Self.sampleScrape()
        let expected = whole.renderAll()
        for size in [1, 2, 7, 100] {
            var sliced = Self.sampleScrape()
            var text = Exposition()
            var slices = 0
            while !sliced.render(into: &text, maxUnits: size) { slices += 1 }
            #expect(text.bytes == expected, "slices of \(size) units")
            #expect(slices > 0 || size == 100)
        }
    }

    @Test func aProcessFigureThatCouldNotBeReadLeavesItsFamilyOut() {
        var scrape = MetricsScrape(apps: [], process: ProcessSample(cpuSeconds: 2))
        let body = text(scrape.renderAll())
        #expect(body.contains("process_cpu_seconds_total 2\n"))
        #expect(!body.contains("process_open_fds"))
        #expect(body.contains("# TYPE netlife_app_state gauge"), "a family of the apps is there without an app")
    }
}

@Suite struct ProcessStatsTests {
    @Test func theStatFieldsAreCountedFromTheLastParenthesis() throws {
        let line = "4242 (net) (life d) S 1 4242 4242 0 -1 4194560 1200 0 0 0 150 50 0 0 20 0 3 0 98700 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
        let stat = try #require(ProcessStat.parse(Array(line.utf8)))
        #expect(stat == ProcessStat(userTicks: 150, systemTicks: 50, startTicks: 98700, virtualBytes: 123_456_789, residentPages: 2048))
        let sample = ProcessStats.sample(stat, ticksPerSecond: 100, pageBytes: 4096, bootTime: 1_700_000_000)
        #expect(sample.cpuSeconds == 2 && sample.residentBytes == 2048 * 4096 && sample.virtualBytes == 123_456_789)
        #expect(sample.startTimeSeconds == 1_700_000_987)
        #expect(ProcessStat.parse(Array("4242 (short) S 1 2".utf8)) == nil)
        #expect(ProcessStat.parse(Array("no parenthesis".utf8)) == nil)
        #expect(ProcessStats.parseBootTime(Array("cpu 1 2 3\nbtime 1700000000\nprocesses 5\n".utf8)) == 1_700_000_000)
        #expect(ProcessStats.parseBootTime(Array("cpu 1 2 3\n".utf8)) == nil)
    }

    @Test func thisProcessFiguresAreRead() {
        let sample = ProcessStats.current(bootTime: ProcessStats.bootTime())
        #expect((sample.cpuSeconds ?? -1) >= 0)
        #expect((sample.residentBytes ?? 0) > 1 << 20)
        #expect((sample.openFileDescriptors ?? 0) >= 3)
        #expect((sample.maxFileDescriptors ?? 0) >= (sample.openFileDescriptors ?? .max))
        let started = sample.startTimeSeconds ?? 0
        #expect(started > 1_600_000_000 && started <= WallClock.now() + 1, "\(started)")
    }
}
