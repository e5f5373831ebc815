// Cgroups a netlifed left behind when it ended without cleaning up (SIGKILL, an abort by its loop-stall
// watchdog, a power cut of the process): its programs still run in them. Under systemd the unit's cgroup is
// killed as a whole (KillMode=control-group), but a daemon run by hand or by another supervisor would leave
// them for ever. Each app cgroup's name carries the pid of the netlifed that made it and the inode of that
// netlifed's pid namespace (`netlife-APP-rN-dPID-nNS-XXXXXXXX`, ProcessCgroup.name), so a new daemon can
// tell the cgroups of a netlifed that is gone from those of one still running beside it (tests run many at
// once in one cgroup): at start it kills what is left in the former and removes them, in every hierarchy it
// places apps in. A pid is judged only in its own namespace: a daemon in a container sees the host's cgroup
// hierarchies, where a host daemon's pid means nothing (or another process) in the container's namespace, so
// a cgroup made in another pid namespace, or by a netlifed too old to record its namespace, is left alone.

@preconcurrency import Glibc

/// The cgroups of netlifeds that are gone, and their removal.
public enum CgroupLeftovers {
    /// Who made a cgroup: a netlifed's pid, in the pid namespace whose inode is `pidNamespace` (nil: the
    /// name records none).
    public struct Owner: Equatable, Sendable {
        public var pid: Int32
        public var pidNamespace: UInt64?
    }

    /// The inode of this process's pid namespace (`readlink /proc/self/ns/pid`: `pid:[4026531836]`).
    public static let ownPidNamespace: UInt64? = {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = readlink("/proc/self/ns/pid", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard text.hasPrefix("pid:["), text.hasSuffix("]") else { return nil }
        return UInt64(text.dropFirst(5).dropLast())
    }()

    /// The netlifed that made the cgroup named `name`, or nil when the name is not an app cgroup's
    /// (`netlife-…-dPID[-nNS]-XXXXXXXX`, eight hex digits last).
    public static func owner(ofCgroupNamed name: String) -> Owner? {
        guard name.hasPrefix("netlife-") else { return nil }
        var parts = name.split(separator: "-")
        guard parts.count >= 4, let random = parts.last, random.count == 8, random.allSatisfy(\.isHexDigit) else { return nil }
        parts.removeLast()
        var namespace: UInt64?
        if let last = parts.last, last.first == "n", let inode = UInt64(last.dropFirst()), parts.count >= 4 {
            namespace = inode
            parts.removeLast()
        }
        guard let owner = parts.last, owner.first == "d", let pid = Int32(owner.dropFirst()), pid > 0 else { return nil }
        return Owner(pid: pid, pidNamespace: namespace)
    }

    /// The pid of the netlifed that made the cgroup named `name` (`owner(ofCgroupNamed:)`).
    public static func ownerPid(ofCgroupNamed name: String) -> Int32? { owner(ofCgroupNamed: name)?.pid }

    /// Whether process `pid` exists. Any process counts, not only a netlifed: the cgroup's maker may be a
    /// program that uses ProcessCgroup (a test), and a pid reused meanwhile only delays a removal, it never
    /// kills what a running owner holds. The corresponding C function is `kill` (signal 0).
    public static func isAlive(_ pid: Int32) -> Bool {
        Glibc.kill(pid, 0) == 0 || errno != ESRCH
    }

    /// The app cgroups in `parent` whose netlifed is gone (never this process's). The corresponding C
    /// functions are `opendir` and `readdir`.
    public static func find(in parent: String, isRunning: (Int32) -> Bool = isAlive,
                            namespace: UInt64? = ownPidNamespace) -> [String] {
        guard let stream = opendir(parent) else { return [] }
        defer { closedir(stream) }
        var found: [String] = []
        let own = getpid()
        while let entry = readdir(stream) {
            guard entry.pointee.d_type == UInt8(DT_DIR) else { continue }
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            // Judged only when it was made in this pid namespace.
            guard let owner = owner(ofCgroupNamed: name), let namespace, owner.pidNamespace == namespace,
                  owner.pid != own, !isRunning(owner.pid) else { continue }
            found.append(parent + "/" + name)
        }
        return found.sorted()
    }

    /// Finds the leftovers in the hierarchies of `layout` where apps are placed (cgroup2 beside netlifed's
    /// leaf, the v1 freezer, and the v1 memory and pids cgroups that account for them), kills their
    /// processes and removes them, polling on `loop` for up to `timeout`. `done` gets the directories this
    /// daemon removed (not those another removed first) and those still there at the end. Returns nil (and
    /// calls nothing) when there are none.
    @discardableResult
    public static func remove(in layout: CgroupLayout, loop: EventLoop, timeout: Duration,
                              done: @escaping (_ removed: [String], _ left: [String]) -> Void) -> EventTimer? {
        var leftovers: [ProcessCgroup] = []
        if let unified = layout.unified {
            let parent = CgroupDelegation.appsDirectory(forOwn: unified.directory)
            leftovers += find(in: parent).map { ProcessCgroup(existing: $0, kind: .v2) }
        }
        // The v1 hierarchies: the freezer one can freeze and so kill a whole tree at once; the accounting ones
        // hold the same processes, signalled one by one, and are empty once those are gone.
        for hierarchy in [layout.freezer, layout.memory, layout.pids].compactMap({ $0 }) {
            leftovers += find(in: hierarchy.directory).map { ProcessCgroup(existing: $0, kind: .v1Freezer) }
        }
        guard !leftovers.isEmpty else { return nil }
        var removed: [String] = []
        let freezerDirectory = layout.freezer?.directory
        func sweep() -> Bool {
            leftovers = leftovers.filter { cgroup in
                // Another netlifed starting beside this one may have removed it first: not counted.
                guard access(cgroup.directory, F_OK) == 0 else { return false }
                let parent = String(cgroup.directory[..<(cgroup.directory.lastIndex(of: "/") ?? cgroup.directory.endIndex)])
                if cgroup.kind == .v2 || parent == freezerDirectory {
                    _ = try? cgroup.kill()
                } else {
                    cgroup.signalSubtree(SIGKILL)
                }
                guard cgroup.subtreeMemberCount() == 0 else { return true }
                if (try? cgroup.removeSubtree()) != nil {
                    removed.append(cgroup.directory)
                    return false
                }
                return access(cgroup.directory, F_OK) == 0
            }
            return leftovers.isEmpty
        }
        if sweep() {
            if !removed.isEmpty { done(removed, []) }
            return nil
        }
        let deadline = MonotonicTime.now() + timeout
        final class Box { weak var timer: EventTimer? }
        let box = Box()
        let timer = EventTimer(loop: loop) {
            if sweep() || MonotonicTime.now() >= deadline {
                box.timer?.close()
                done(removed, leftovers.map(\.directory))
            } else {
                box.timer?.arm(after: .milliseconds(20))
            }
        }
        box.timer = timer
        timer.arm(after: .milliseconds(20))
        return timer
    }
}
