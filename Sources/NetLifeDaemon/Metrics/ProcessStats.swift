// The standard `process_*` figures, from /proc as every Prometheus client library reads them: CPU time, virtual
// and resident memory and the start time from /proc/self/stat, the boot time from /proc/stat's `btime`, the
// open descriptors from /proc/self/fd and their limit from RLIMIT_NOFILE. The parsing is pure; `sample` reads.

@preconcurrency import Glibc
import NetLifeEvent

enum ProcessStats {
    /// What netlifed shows of /proc/PID/stat.
    struct Stat: Equatable, Sendable {
        /// User and system CPU time, in clock ticks (fields 14 and 15).
        var userTicks: UInt64
        var systemTicks: UInt64
        /// When the process started, in clock ticks after boot (field 22).
        var startTicks: UInt64
        /// Virtual memory in bytes (field 23) and resident pages (field 24).
        var virtualBytes: UInt64
        var residentPages: UInt64
    }

    /// The fields of a /proc/PID/stat line. The command name (field 2) is in parentheses and may hold spaces
    /// and parentheses itself: the fields are counted from the last `)`. Nil when the line is not one.
    static func parseStat(_ bytes: [UInt8]) -> Stat? {
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
        return Stat(userTicks: user, systemTicks: system, startTicks: start, virtualBytes: virtual, residentPages: resident)
    }

    /// The boot time (seconds since the epoch) from /proc/stat's `btime` line; nil without one.
    static func parseBootTime(_ bytes: [UInt8]) -> UInt64? {
        for line in bytes.split(separator: 0x0A) where line.starts(with: Array("btime ".utf8)) {
            return UInt64(String(decoding: line.dropFirst(6), as: UTF8.self).trimmingSpaces)
        }
        return nil
    }

    /// The figures of a stat line, given the clock's ticks per second, the page size and the boot time.
    static func sample(_ stat: Stat, ticksPerSecond: UInt64, pageBytes: UInt64, bootTime: UInt64?) -> ProcessSample {
        let ticks = Double(max(1, ticksPerSecond))
        return ProcessSample(cpuSeconds: Double(stat.userTicks &+ stat.systemTicks) / ticks,
                             residentBytes: stat.residentPages &* pageBytes,
                             virtualBytes: stat.virtualBytes,
                             startTimeSeconds: bootTime.map { Double($0) + Double(stat.startTicks) / ticks })
    }

    /// This process's figures now. The boot time is read once by the caller (it does not change).
    static func current(bootTime: UInt64?) -> ProcessSample {
        var sample = ProcessSample()
        if case .success(let bytes) = RegularFile.read("/proc/self/stat", limit: 4096), let stat = parseStat(bytes) {
            sample = Self.sample(stat, ticksPerSecond: UInt64(max(1, sysconf(Int32(_SC_CLK_TCK)))),
                                 pageBytes: UInt64(max(1, sysconf(Int32(_SC_PAGESIZE)))), bootTime: bootTime)
        }
        sample.openFileDescriptors = OpenFileLimit.openCount()
        sample.maxFileDescriptors = (try? OpenFileLimit.current())?.soft
        return sample
    }

    /// The boot time from /proc/stat, or nil.
    static func bootTime() -> UInt64? {
        guard case .success(let bytes) = RegularFile.read("/proc/stat", limit: 1 << 20) else { return nil }
        return parseBootTime(bytes)
    }
}

private extension String {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " || $0 == "\n" }).reversed())
    }
}
