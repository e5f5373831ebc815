// Memory accounting for a process app where its cgroup2 has none. On a hybrid layout every controller is
// bound to a v1 hierarchy and the cgroup2 mount only groups processes, so `memory.current` does not exist:
// the program then also joins a cgroup of its own in the v1 memory hierarchy, and `memory.usage_in_bytes`
// there is its figure (the kernel's charge of the group's pages, each page once: 2,000 `sleep`s that share
// their text are not 2,000 resident sets). Reading it costs one small file whatever the number of processes.

@preconcurrency import Glibc

/// A process app's cgroup in the v1 memory hierarchy: joined, read for its usage, removed.
public final class MemoryCgroup {
    /// The cgroup's directory.
    public let directory: String
    /// Whether `remove()` has removed it.
    public private(set) var isRemoved = false

    /// Makes the directory of a new cgroup (it must not exist). The corresponding C function is `mkdir`.
    public init(creating directory: String) throws(SystemError) {
        try sys("mkdir(\(directory))") { mkdir(directory, 0o755) }
        self.directory = directory
    }

    /// The file a process writes its pid into to join the cgroup (`ChildLaunchOptions.joinCgroups`).
    public var procsFile: String { directory + "/cgroup.procs" }

    /// The memory charged to the cgroup and the cgroups below it, in bytes; nil when it cannot be read.
    /// The corresponding file is `memory.usage_in_bytes`.
    public func usageBytes() -> UInt64? {
        guard let text = try? KernelFile.read(directory + "/memory.usage_in_bytes", limit: 64) else { return nil }
        return UInt64(KernelFile.trimmed(String(decoding: text, as: UTF8.self)))
    }

    /// Whether no process is left in it or below it.
    public var isEmpty: Bool {
        ProcessCgroup.subtree(of: directory).allSatisfy { directory in
            (try? KernelFile.read(directory + "/cgroup.procs", limit: 16))?.isEmpty ?? true
        }
    }

    /// Removes the cgroups below this one, deepest first, then this one; each must be empty (the kernel
    /// moves the charge of pages still cached to the parent). Calling it again does nothing.
    /// The corresponding C function is `rmdir`.
    public func remove() throws(SystemError) {
        guard !isRemoved else { return }
        for directory in ProcessCgroup.subtree(of: directory) {
            try sys("rmdir(\(directory))") { rmdir(directory) }
        }
        isRemoved = true
    }
}
