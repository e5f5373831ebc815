// What a process has done so far, from /proc/PID/stat: its CPU time and memory. The metrics read netlifed's
// own; idle detection sums the CPU time of a process app's program (each of its processes) to see whether the
// program works, since the connections it serves never pass through netlifed. (Not /proc/PID/io's byte counts:
// a server's own timers read files, redis's cron /proc/self/stat ten times a second, so they never stand
// still.) Parsing is pure; `of(pids:)` reads.

@preconcurrency import Glibc

/// The fields netlifed uses of a /proc/PID/stat line.
public struct ProcessStat: Equatable, Sendable {
    /// User and system CPU time, in clock ticks (fields 14 and 15).
    public var userTicks: UInt64
    public var systemTicks: UInt64
    /// When the process started, in clock ticks after boot (field 22).
    public var startTicks: UInt64
    /// Virtual memory in bytes (field 23) and resident pages (field 24).
    public var virtualBytes: UInt64
    public var residentPages: UInt64

    public init(userTicks: UInt64, systemTicks: UInt64, startTicks: UInt64, virtualBytes: UInt64, residentPages: UInt64) {
        self.userTicks = userTicks
        self.systemTicks = systemTicks
        self.startTicks = startTicks
        self.virtualBytes = virtualBytes
        self.residentPages = residentPages
    }

    /// The fields of a /proc/PID/stat line. The command name (field 2) is in parentheses and may hold spaces
    /// and parentheses itself: the fields are counted from the last `)`. Nil when the line is not one.
    public static func parse(_ bytes: [UInt8]) -> ProcessStat? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // Field 3 (the state) is the first after the command name.
        let fields = bytes[(close + 1)...].split(whereSeparator: { $0 == 0x20 || $0 == 0x0A })
        func field(_ number: Int) -> UInt64? {
            let index = number - 3
            guard fields.indices.contains(index) else { return nil }
            return UInt64(String(decoding: fields[index], as: UTF8.self))
        }
        guard let user = field(14), let system = field(15), let start = field(22), let virtual = field(23),
              let resident = field(24) else { return nil }
        return ProcessStat(userTicks: user, systemTicks: system, startTicks: start, virtualBytes: virtual, residentPages: resident)
    }

    /// The clock ticks of the CPU times (USER_HZ).
    public static let ticksPerSecond = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
}

/// What a group of processes has done so far: their CPU time.
public struct ProcessActivity: Equatable, Sendable {
    public var cpu: Duration

    public init(cpu: Duration = .zero) {
        self.cpu = cpu
    }

    /// The sum over `pids` of what each has done; a process that exited meanwhile (or whose file cannot be
    /// read) adds nothing. One small read a process.
    public static func of(pids: [Int32]) -> ProcessActivity {
        var ticks: UInt64 = 0
        for pid in pids {
            if case .success(let bytes) = RegularFile.read("/proc/\(pid)/stat", limit: 4096), let stat = ProcessStat.parse(bytes) {
                ticks &+= stat.userTicks &+ stat.systemTicks
            }
        }
        return ProcessActivity(cpu: .milliseconds(Int64(clamping: ticks.multipliedReportingOverflow(by: 1000).partialValue / ProcessStat.ticksPerSecond)))
    }
}
