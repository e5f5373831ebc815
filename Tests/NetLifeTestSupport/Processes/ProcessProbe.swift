#if canImport(Testing)   // built only for the tests: see Package.swift
// What the kernel says about a process under test, read from /proc/PID and its cgroup: descriptors, threads,
// resident memory, CPU time, context switches, cgroup members and freeze state; and small figures helpers.

import Foundation

/// A process's resource use, read from /proc/PID.
public struct ProcessProbe {
    /// The process looked at.
    public let pid: Int32

    /// A probe of process `pid`.
    public init(pid: Int32) { self.pid = pid }

    /// Open descriptors (entries of /proc/PID/fd).
    public var descriptorCount: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// Threads (`Threads:` in /proc/PID/status).
    public var threadCount: Int { statusField("Threads") ?? -1 }

    /// Resident memory in bytes (`VmRSS:` in /proc/PID/status, which the kernel gives in KiB).
    public var residentBytes: Int { (statusField("VmRSS") ?? 0) * 1024 }

    /// The most resident memory the process has had, in bytes (`VmHWM:`, its high-water mark).
    public var peakResidentBytes: Int { (statusField("VmHWM") ?? 0) * 1024 }

    private func statusField(_ name: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return Int(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }

    /// The descriptors' targets, for a message when the count does not come back.
    public var descriptorTargets: [String] {
        let directory = "/proc/\(pid)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }.map {
            "\($0) -> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0)) ?? "?")
        }
    }
}

/// The descriptor and thread counts of a daemon at one moment, to compare with later.
public struct ResourceBaseline {
    /// Open descriptors then.
    public let descriptors: Int
    /// Threads then.
    public let threads: Int

    /// The counts the probe reads now.
    public init(_ probe: ProcessProbe) {
        descriptors = probe.descriptorCount
        threads = probe.threadCount
    }
}

/// A program's cgroup as the kernel shows it.
public struct CgroupProbe {
    /// The cgroup's directory under /sys/fs/cgroup.
    public let directory: String

    /// A probe of the cgroup at `directory`.
    public init(directory: String) { self.directory = directory }

    /// Whether the cgroup exists.
    public var exists: Bool { FileManager.default.fileExists(atPath: directory) }

    /// The pids in the cgroup (`cgroup.procs`).
    public var members: [Int32] {
        ((try? String(contentsOfFile: directory + "/cgroup.procs", encoding: .utf8)) ?? "")
            .split(separator: "\n").compactMap { Int32($0) }
    }

    /// Whether the kernel says the cgroup is frozen (`frozen 1` in `cgroup.events`, cgroup v2).
    public var isFrozen: Bool {
        ((try? String(contentsOfFile: directory + "/cgroup.events", encoding: .utf8)) ?? "")
            .split(separator: "\n").contains("frozen 1")
    }
}

/// The CPU time process `pid` has used, user plus system, in clock ticks (utime + stime of /proc/PID/stat).
public func cpuTicks(of pid: Int32) -> Int? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    // After the command's ")": field 3 (state) first, so utime (14) and stime (15) are at 11 and 12.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
    return user + system
}

/// Clock ticks a second, to turn `cpuTicks` into time.
public let clockTicksPerSecond = Int(sysconf(Int32(_SC_CLK_TCK)))

/// voluntary + nonvoluntary context switches of `pid` from /proc/PID/status, nil when it cannot be read.
public func contextSwitches(of pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    let counts = status.split(separator: "\n").filter { $0.hasPrefix("voluntary_ctxt_switches:") || $0.hasPrefix("nonvoluntary_ctxt_switches:") }
        .compactMap { $0.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } }
    return counts.count == 2 ? counts[0] + counts[1] : nil
}

/// The median of some figures.
public func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

/// Milliseconds since `start`.
public func milliseconds(since start: Date) -> Double { Date().timeIntervalSince(start) * 1000 }

/// Milliseconds as text with two decimals: "1.25 ms".
public func format(ms: Double) -> String { String(format: "%.2f ms", ms) }
#endif
