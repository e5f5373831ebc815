// Accounting for a process app where its cgroup2 has none. On a hybrid layout every controller is bound to
// a v1 hierarchy and the cgroup2 mount only groups processes, so `memory.current` and `pids.current` do not
// exist there: the program then also joins a cgroup of its own in the v1 memory and pids hierarchies, and
// their counters are its figures. Each is one small file whatever the number of processes: the memory
// controller charges each page once (2,000 `sleep`s that share their text are not 2,000 resident sets), and
// the pids controller keeps a count where `cgroup.procs` lists every process (about 0.4 µs a process,
// slower under load, on the loop).

@preconcurrency import Glibc

/// A process app's cgroup in a v1 accounting hierarchy: joined, read, removed.
public final class AccountingCgroup {
    /// What the cgroup counts.
    public enum Controller: String, Sendable {
        /// Bytes charged (`memory.usage_in_bytes`).
        case memory
        /// Tasks, processes and their threads (`pids.current`).
        case pids

        /// The file that holds the count.
        var counterFile: String {
            switch self {
            case .memory: "memory.usage_in_bytes"
            case .pids: "pids.current"
            }
        }
    }

    public let controller: Controller
    /// The cgroup's directory.
    public let directory: String
    /// Whether `remove()` has removed it.
    public private(set) var isRemoved = false

    /// Makes the directory of a new cgroup (it must not exist). The corresponding C function is `mkdir`.
    public init(creating directory: String, controller: Controller) throws(SystemError) {
        try sys("mkdir(\(directory))") { mkdir(directory, 0o755) }
        self.directory = directory
        self.controller = controller
    }

    /// The count of the cgroup and the cgroups below it; nil when it cannot be read.
    public func count() -> UInt64? {
        guard let text = try? KernelFile.read(directory + "/" + controller.counterFile, limit: 64) else { return nil }
        return UInt64(KernelFile.trimmed(String(decoding: text, as: UTF8.self)))
    }

    /// Removes the cgroups below this one, deepest first, then this one; each must be empty (the memory
    /// controller moves the charge of pages still cached to the parent). Calling it again does nothing.
    /// The corresponding C function is `rmdir`.
    public func remove() throws(SystemError) {
        guard !isRemoved else { return }
        for directory in ProcessCgroup.subtree(of: directory) {
            try sys("rmdir(\(directory))") { rmdir(directory) }
        }
        isRemoved = true
    }
}
