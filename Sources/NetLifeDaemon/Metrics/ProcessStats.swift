// The standard `process_*` figures, from /proc as every Prometheus client library reads them: CPU time, virtual
// and resident memory and the start time from /proc/self/stat (ProcessStat), the boot time from /proc/stat's
// `btime`, the open descriptors from /proc/self/fd and their limit from RLIMIT_NOFILE. The parsing is pure;
// `current` reads.

@preconcurrency import Glibc
import NetLifeEvent

enum ProcessStats {
    /// The boot time (seconds since the epoch) from /proc/stat's `btime` line; nil without one.
    static func parseBootTime(_ bytes: [UInt8]) -> UInt64? {
        for line in bytes.split(separator: 0x0A) where line.starts(with: Array("btime ".utf8)) {
            return UInt64(String(decoding: line.dropFirst(6), as: UTF8.self).trimmingSpaces)
        }
        return nil
    }

    /// The figures of a stat line, given the clock's ticks per second, the page size and the boot time.
    static func sample(_ stat: ProcessStat, ticksPerSecond: UInt64, pageBytes: UInt64, bootTime: UInt64?) -> ProcessSample {
        let ticks = Double(max(1, ticksPerSecond))
        return ProcessSample(cpuSeconds: Double(stat.userTicks &+ stat.systemTicks) / ticks,
                             residentBytes: stat.residentPages &* pageBytes,
                             virtualBytes: stat.virtualBytes,
                             startTimeSeconds: bootTime.map { Double($0) + Double(stat.startTicks) / ticks })
    }

    /// This process's figures now. The boot time is read once by the caller (it does not change).
    static func current(bootTime: UInt64?) -> ProcessSample {
        var sample = ProcessSample()
        if case .success(let bytes) = RegularFile.read("/proc/self/stat", limit: 4096), let stat = ProcessStat.parse(bytes) {
            sample = Self.sample(stat, ticksPerSecond: ProcessStat.ticksPerSecond,
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
