// A process app's cgroup is a subtree, not one directory: a program running as root (or as the owner of a
// delegated cgroup) may make cgroups inside its own and move processes there (systemd-in-a-container does,
// so do tools that set limits on their workers). Members, signals and removal therefore walk every
// directory below the app's cgroup: members are the union of their `cgroup.procs`, SIGTERM reaches each of
// them, and removal goes deepest first (a cgroup with a child cgroup cannot be removed: EBUSY). Freezing and
// `cgroup.kill` act on descendants already (the kernel's own recursion). The walk is bounded
// (`maxDescendants`), so a program that makes cgroups without end costs the daemon a bounded amount of work.

@preconcurrency import Glibc

extension ProcessCgroup {
    /// The most cgroups walked below one app's cgroup; those past it are neither counted nor signalled one
    /// by one (`cgroup.kill` and the freezer still reach them) and keep the app's cgroup from being removed.
    public static let maxDescendants = 1024

    /// The cgroup's directory and every cgroup directory below it (at most `maxDescendants` of them), each
    /// after all of its descendants: the order in which they can be removed. A directory that cannot be read
    /// (removed meanwhile) is left out. The corresponding C functions are `opendir` and `readdir`.
    public func subtree() -> [String] { Self.subtree(of: directory) }

    /// `directory` and every directory below it, each after its descendants (see `subtree()`).
    static func subtree(of directory: String) -> [String] {
        var preorder: [String] = []
        var pending = [directory]
        while let next = pending.popLast(), preorder.count <= Self.maxDescendants {
            preorder.append(next)
            guard let stream = opendir(next) else { continue }
            defer { closedir(stream) }
            while let entry = readdir(stream) {
                guard entry.pointee.d_type == UInt8(DT_DIR) else { continue }
                let name = withUnsafePointer(to: &entry.pointee.d_name) {
                    String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
                }
                if name == "." || name == ".." { continue }
                pending.append(next + "/" + name)
            }
        }
        // In preorder each directory comes before its descendants; reversed, after them.
        return preorder.reversed()
    }

    /// The pids of the processes in the cgroup and in every cgroup below it, at most `maxMembers`.
    public func subtreeMembers() -> [Int32] {
        var pids: [Int32] = []
        for directory in subtree() where pids.count < Self.maxMembers {
            guard let text = try? KernelFile.read(directory + "/cgroup.procs", limit: Self.maxMembers * 8) else { continue }
            for line in text.split(separator: UInt8(ascii: "\n")) where pids.count < Self.maxMembers {
                if let pid = Int32(String(decoding: line, as: UTF8.self)), pid > 0 { pids.append(pid) }
            }
        }
        return pids
    }

    /// How many processes the cgroup and every cgroup below it hold: the lines of their `cgroup.procs`,
    /// counted in place without parsing a pid; nothing of /proc is read. The kernel writes the list at
    /// about 0.4 µs a process (0.8 ms for 2,000), so a count stops at `maxMembers`.
    public func subtreeMemberCount() -> Int {
        var count = 0
        for directory in subtree() where count < Self.maxMembers {
            count += (try? KernelFile.countLines(directory + "/cgroup.procs", limit: (Self.maxMembers - count) * 8)) ?? 0
        }
        return min(count, Self.maxMembers)
    }

    /// Sends `signal` to every process of the cgroup and of the cgroups below it; returns how many.
    /// The corresponding C function is `kill`.
    @discardableResult
    public func signalSubtree(_ signal: CInt) -> Int {
        let pids = subtreeMembers()
        for pid in pids { _ = Glibc.kill(pid, signal) }
        return pids.count
    }

    /// Removes the cgroups below this one, deepest first, then this one; each must be empty. Stops at the
    /// first that cannot be removed (its parents could not be either) and throws its error.
    /// The corresponding C function is `rmdir`.
    public func removeSubtree() throws(SystemError) {
        guard !isRemoved else { return }
        for directory in subtree().dropLast() {
            try sys("rmdir(\(directory))") { rmdir(directory) }
        }
        try remove()
    }
}
