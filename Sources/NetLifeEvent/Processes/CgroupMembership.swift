// Whether a process belongs to an app's cgroup, from /proc/PID/cgroup: a datagram on a program's
// NOTIFY_SOCKET is accepted only from a process of that program, and the kernel's credentials name the
// sender by pid. An app's cgroup has a name no other cgroup has (ProcessCgroup.name: the app, the run,
// netlifed's pid and 32 random bits), so a process is a member when the path of its cgroup in that
// hierarchy (`0::PATH` for cgroup2, `N:freezer:PATH` for the v1 freezer) has that name as one of its
// components: the app's cgroup itself or any cgroup below it, whatever cgroup namespace shortens the path.

extension ProcessCgroup {
    /// The longest /proc/PID/cgroup read (a few lines; one per v1 hierarchy).
    static let maxProcCgroupBytes = 16 * 1024

    /// Whether process `pid` is in this cgroup or below it now (false when it is gone or cannot be read).
    /// The corresponding file is /proc/PID/cgroup.
    public func hasMember(pid: Int32) -> Bool {
        guard pid > 0, let text = try? KernelFile.read("/proc/\(pid)/cgroup", limit: Self.maxProcCgroupBytes) else { return false }
        let name = directory.split(separator: "/").last.map(String.init) ?? ""
        return Self.isMember(procCgroup: text, kind: kind, cgroupName: name)
    }

    /// Whether the text of a /proc/PID/cgroup places the process in the cgroup named `cgroupName` (or below it)
    /// in the hierarchy of `kind`.
    static func isMember(procCgroup text: [UInt8], kind: Kind, cgroupName: String) -> Bool {
        guard !cgroupName.isEmpty else { return false }
        for line in text.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: ":"), maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let controllers = fields[1].split(separator: UInt8(ascii: ","))
            let matches = switch kind {
            case .v2: fields[0].elementsEqual("0".utf8) && fields[1].isEmpty
            case .v1Freezer: controllers.contains { $0.elementsEqual("freezer".utf8) }
            }
            guard matches else { continue }
            return fields[2].split(separator: UInt8(ascii: "/")).contains { $0.elementsEqual(cgroupName.utf8) }
        }
        return false
    }
}
