#if canImport(Testing)   // built only for the tests: see Package.swift
// What tests read of a running TestDaemon beyond its state: the resources its process holds, the real port
// of a `127.0.0.1:0` listener, the state of an app while polling, how fast it answers `status`, whether it is
// healthy after an attack, a program app's part of `status`, and the id a `task begin` printed.

import Foundation
import Testing

/// The id netlifectl printed for a `task begin`, after checking that it succeeded (-1 when it printed none).
public func taskID(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
    return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

extension TestDaemon {
    /// Resource use of the daemon process.
    public var probe: ProcessProbe { ProcessProbe(pid: pid) }

    /// The port a listener (bound to `127.0.0.1:0` in the config) really got, read from `netlifectl --json status`.
    public func port(of app: String, listener: String = "main", sourceLocation: SourceLocation = #_sourceLocation) -> UInt16 {
        let listeners = status(app, sourceLocation: sourceLocation)["listeners"] as? [[String: Any]] ?? []
        guard let address = listeners.first(where: { $0["name"] as? String == listener })?["address"] as? String,
              let port = address.split(separator: ":").last.flatMap({ UInt16($0) }), port != 0 else {
            Issue.record("no port for listener \(app).\(listener) in status", sourceLocation: sourceLocation)
            return 0
        }
        return port
    }

    /// The state of an app, or nil when `status` fails (without recording an issue: for polling).
    public func currentState(_ app: String) -> String? {
        let result = ctl("--json", "status", app)
        guard result.status == 0,
              let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let apps = object["apps"] as? [[String: Any]] else { return nil }
        return apps.first?["state"] as? String
    }

    /// Median and worst `status` round trip over `count` requests from a raw client, in milliseconds.
    public func statusLatency(count: Int = 21, request: String = "{\"cmd\":\"status\"}\n") -> (median: Double, worst: Double, failures: Int) {
        guard let client = RawControlClient(path: controlPath) else { return (.infinity, .infinity, count) }
        defer { client.close() }
        var times: [Double] = []
        var failures = 0
        for _ in 0..<count {
            let (reply, ms) = client.roundTrip(request)
            if !isOK(reply) { failures += 1 }
            times.append(ms)
        }
        return (median(times), times.max() ?? .infinity, failures)
    }

    /// Checks that the daemon is alive, answers `status` in a few milliseconds, and that its descriptor and
    /// thread counts are back to `baseline` (after up to `settle` seconds).
    public func expectHealthy(comparedTo baseline: ResourceBaseline?, settle: TimeInterval = 3, label: String,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(isRunning, "netlifed died during \(label); log tail:\n\(log.suffix(3000))", sourceLocation: sourceLocation)
        guard isRunning else { return }
        let latency = statusLatency()
        print("\(label): status round trip median \(String(format: "%.2f", latency.median)) ms, worst \(String(format: "%.2f", latency.worst)) ms")
        #expect(latency.failures == 0, "status failed \(latency.failures) times after \(label)", sourceLocation: sourceLocation)
        // The goal is 10 ms; the margin covers a loaded 2-core machine running debug builds.
        #expect(latency.median < 15 * slowdown, "status median \(latency.median) ms after \(label)", sourceLocation: sourceLocation)
        guard let baseline else { return }
        let probe = self.probe
        let settled = waitUntil(timeout: settle) {
            probe.descriptorCount <= baseline.descriptors && probe.threadCount <= baseline.threads
        }
        print("\(label): descriptors \(baseline.descriptors) -> \(probe.descriptorCount), threads \(baseline.threads) -> \(probe.threadCount)")
        #expect(settled, "descriptors \(baseline.descriptors) -> \(probe.descriptorCount), threads \(baseline.threads) -> \(probe.threadCount) after \(label):\n\(probe.descriptorTargets.joined(separator: "\n"))",
                sourceLocation: sourceLocation)
    }
}

extension TestDaemon {
    /// The `program` member of an app's status (empty when there is none).
    public func program(_ app: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any] {
        status(app, sourceLocation: sourceLocation)["program"] as? [String: Any] ?? [:]
    }

    /// The program's pid, nil while it does not run.
    public func programPid(_ app: String) -> Int32? {
        (program(app)["pid"] as? Int).map(Int32.init)
    }

    /// The app's `lastTermination`, if any.
    public func lastTermination(_ app: String) -> [String: Any]? {
        status(app)["lastTermination"] as? [String: Any]
    }
}
#endif
