// The open-file limit (RLIMIT_NOFILE). Every connection, listener and hook pipe is a descriptor; with
// Debian's default soft limit of 1024 the whole daemon would serve about a thousand connections and then
// log `accept: Too many open files`. At start netlifed raises its soft limit to the hard limit, as nginx
// (worker_rlimit_nofile) and HAProxy do; the hard limit stays the administrator's (systemd's LimitNOFILE=,
// prlimit, limits.conf).

@preconcurrency import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent

/// A process's RLIMIT_NOFILE.
public struct OpenFileLimit: Equatable, Sendable, CustomStringConvertible {
    /// The limit that applies (the soft limit).
    public var soft: UInt64
    /// The most the soft limit may be raised to without privilege.
    public var hard: UInt64

    public init(soft: UInt64, hard: UInt64) {
        self.soft = soft
        self.hard = hard
    }

    /// The soft limit to set: the hard limit when the soft one is lower, else nil (nothing to do).
    public var raised: OpenFileLimit? {
        soft < hard ? OpenFileLimit(soft: hard, hard: hard) : nil
    }

    public var description: String { "\(Self.format(soft)) (hard limit \(Self.format(hard)))" }

    /// RLIM_INFINITY, which Swift imports as a literal it cannot hold: all ones in rlim_t.
    static let unlimited = UInt64(rlim_t.max)

    static func format(_ value: UInt64) -> String { value == unlimited ? "unlimited" : String(value) }

    /// The limit of this process. The corresponding C function is `getrlimit`.
    public static func current() throws(SystemError) -> OpenFileLimit {
        var limit = rlimit()
        try sys("getrlimit") { getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }
        return OpenFileLimit(soft: UInt64(limit.rlim_cur), hard: UInt64(limit.rlim_max))
    }

    /// What `raiseToHardLimit()` did.
    public enum Outcome: Equatable, Sendable {
        /// The soft limit was already the hard limit.
        case unchanged(OpenFileLimit)
        case raised(from: OpenFileLimit, to: OpenFileLimit)
        /// setrlimit failed (a seccomp filter without @resources, for one): the limit stays as it was.
        case refused(OpenFileLimit, SystemError)
    }

    /// Raises this process's soft limit to its hard limit. The corresponding C function is `setrlimit`.
    public static func raiseToHardLimit() throws(SystemError) -> Outcome {
        let before = try current()
        guard let target = before.raised else { return .unchanged(before) }
        var limit = rlimit(rlim_cur: rlim_t(target.soft), rlim_max: rlim_t(target.hard))
        do {
            try sys("setrlimit") { setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }
        } catch {
            return .refused(before, error)
        }
        return .raised(from: before, to: try current())
    }

    /// The limit after `outcome`.
    public static func after(_ outcome: Outcome) -> OpenFileLimit {
        switch outcome {
        case .unchanged(let limit), .refused(let limit, _), .raised(_, let limit): limit
        }
    }

    /// The log line that says what happened, with its level.
    public static func logRecord(_ outcome: Outcome) -> (Logger.Level, String) {
        switch outcome {
        case .unchanged(let limit):
            (.notice, "open files: limit \(limit)")
        case .raised(let from, let to):
            (.notice, "open files: limit \(to), raised from \(format(from.soft))")
        case .refused(let limit, let error):
            (.warning, "open files: limit \(limit); raising it to the hard limit failed: \(error)")
        }
    }

    /// The limit and the descriptors open now, as the `version` reply carries them (unlimited as null).
    static func reported(_ limit: OpenFileLimit) -> VersionReply.OpenFiles {
        let finite = { (value: UInt64) in value == unlimited ? nil : value }
        return VersionReply.OpenFiles(limit: finite(limit.soft), hardLimit: finite(limit.hard), open: openCount())
    }

    /// How many descriptors this process has open (the entries of /proc/self/fd, less the one that lists
    /// them), or nil when /proc cannot be read. The corresponding C functions are `opendir` and `readdir`.
    public static func openCount() -> UInt64? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count: UInt64 = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { $0.first == UInt8(ascii: ".") }
            if !isDot { count += 1 }
        }
        return count > 0 ? count - 1 : 0
    }
}
