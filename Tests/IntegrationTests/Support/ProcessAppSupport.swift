// What the process-app tests need beyond TestDaemon and Peer: configs for the Python reference client
// (Examples/netlife_events.py) and for an unmodified lighttpd, a program's part of `status`, what its cgroup
// and /proc say (members, freeze state, CPU time), and reads that wait for a text on a peer.

import Foundation
import Testing

/// The repository's Python reference client of the lifecycle protocol, run as netlife's demo echo server.
let demoScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Examples/netlife_events.py").path

/// The Debian python, named explicitly (not whatever `python3` is first in PATH).
let systemPython = "/usr/bin/python3"

/// Where Debian's lighttpd lives; the lighttpd test fails without it.
let lighttpdPath = "/usr/sbin/lighttpd"
let lighttpdIsInstalled = FileManager.default.isExecutableFile(atPath: lighttpdPath)

/// An `[app NAME]` running the demo with `environment` (NETLIFE_DEMO_* knobs; values without spaces) and one
/// listener `main` on 127.0.0.1:0.
func demoApp(_ name: String, environment: [String: String] = [:], appLines: String = "") -> String {
    let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    return """
        [app \(name)]
        exec = \(systemPython) \(demoScript)
        \(variables.isEmpty ? "" : "environment = \(variables)")
        \(appLines)

        [listener \(name).main]
        address = 127.0.0.1:0

        """
}

/// A document root with one file and a lighttpd config that takes its listener by socket activation.
final class LighttpdSite {
    let directory = TemporaryDirectory()
    /// The file's path on the server and its body.
    let path = "/index.txt"
    let body = "hello from lighttpd under netlifed\n"

    init() {
        try? FileManager.default.createDirectory(atPath: directory.file("www"), withIntermediateDirectories: true)
        directory.write("www/index.txt", body)
        // A keep-alive idle limit well past the test's pauses, so that a kept connection stays open.
        directory.write("lighttpd.conf", """
            server.document-root = "\(directory.file("www"))"
            server.systemd-socket-activation = "enable"
            server.errorlog = "\(directory.file("error.log"))"
            server.max-keep-alive-idle = 60

            """)
    }

    /// An `[app NAME]` running lighttpd in the foreground, with one listener `main` on 127.0.0.1:0.
    func app(_ name: String, appLines: String = "") -> String {
        """
        [app \(name)]
        exec = \(lighttpdPath) -D -f \(directory.file("lighttpd.conf"))
        \(appLines)

        [listener \(name).main]
        address = 127.0.0.1:0

        """
    }

    /// A keep-alive HTTP/1.1 request for the file.
    var request: String { "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" }

    func remove() { directory.remove() }
}

extension TestDaemon {
    /// The `program` member of an app's status (empty when there is none).
    func program(_ app: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any] {
        status(app, sourceLocation: sourceLocation)["program"] as? [String: Any] ?? [:]
    }

    /// The program's pid, nil while it does not run.
    func programPid(_ app: String) -> Int32? {
        (program(app)["pid"] as? Int).map(Int32.init)
    }

    /// The app's `lastTermination`, if any.
    func lastTermination(_ app: String) -> [String: Any]? {
        status(app)["lastTermination"] as? [String: Any]
    }
}

/// A program's cgroup as the kernel shows it.
struct CgroupProbe {
    let directory: String

    var exists: Bool { FileManager.default.fileExists(atPath: directory) }

    /// The pids in the cgroup (`cgroup.procs`).
    var members: [Int32] {
        ((try? String(contentsOfFile: directory + "/cgroup.procs", encoding: .utf8)) ?? "")
            .split(separator: "\n").compactMap { Int32($0) }
    }

    /// Whether the kernel says the cgroup is frozen (`frozen 1` in `cgroup.events`, cgroup v2).
    var isFrozen: Bool {
        ((try? String(contentsOfFile: directory + "/cgroup.events", encoding: .utf8)) ?? "")
            .split(separator: "\n").contains("frozen 1")
    }
}

/// The CPU time process `pid` has used, user plus system, in clock ticks (utime + stime of /proc/PID/stat).
func cpuTicks(of pid: Int32) -> Int? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    // After the command's ")": field 3 (state) first, so utime (14) and stime (15) are at 11 and 12.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
    return user + system
}

/// Clock ticks a second, to turn `cpuTicks` into time.
let clockTicksPerSecond = Int(sysconf(Int32(_SC_CLK_TCK)))

/// Milliseconds since `start`.
func milliseconds(since start: Date) -> Double { Date().timeIntervalSince(start) * 1000 }

func format(ms: Double) -> String { String(format: "%.2f ms", ms) }

extension Peer {
    /// Reads until what arrived contains `text`, the peer ends, or `timeout` passes; returns all of it.
    func read(untilContaining text: String, timeout: TimeInterval = 3) -> String {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while !String(decoding: received, as: UTF8.self).contains(text) && Date() < deadline {
            guard case .bytes(let bytes) = read(timeout: max(0.01, deadline.timeIntervalSinceNow)) else { break }
            received += bytes
        }
        return String(decoding: received, as: UTF8.self)
    }
}

/// voluntary + nonvoluntary context switches of `pid` from /proc/PID/status, nil when it cannot be read.
func contextSwitches(of pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    let counts = status.split(separator: "\n").filter { $0.hasPrefix("voluntary_ctxt_switches:") || $0.hasPrefix("nonvoluntary_ctxt_switches:") }
        .compactMap { $0.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } }
    return counts.count == 2 ? counts[0] + counts[1] : nil
}
