// The memory and pids controllers for process apps' cgroups in cgroup2. A child cgroup has `memory.current`
// and `pids.current` only when its parent lists the controllers in `cgroup.subtree_control`, and a cgroup
// other than the root may enable them for its children only while it holds no process of its own (the
// "no internal processes" rule). systemd's `Delegate=yes` gives netlifed a cgroup with the controllers
// available but not enabled, netlifed itself inside: as systemd's documentation asks of a delegate,
// netlifed moves itself into a leaf of its own, `netlife-daemon`, and then enables the controllers, so that
// the apps' cgroups (siblings of the leaf) account their memory and tasks. This happens only where netlifed
// is alone in its cgroup (a delegated one, not a login session's), and a failure leaves things as they were
// but for the accounting. `plan` is pure; `prepare` performs it.

@preconcurrency import Glibc

/// What to do to netlifed's cgroup2 directory before apps' cgroups are made in it.
public enum CgroupDelegation: Equatable, Sendable {
    /// Nothing: the controllers are enabled already, or none is available.
    case none
    /// Enable these controllers for the children (the root cgroup, or one already without processes).
    case enable([String])
    /// Move netlifed into the leaf, then enable these controllers.
    case moveToLeafThenEnable([String])
    /// Other processes share netlifed's cgroup (a login session, a container's init): leave it alone.
    case notAlone

    /// The name of netlifed's own leaf.
    public static let leafName = "netlife-daemon"
    /// The controllers process apps' cgroups want.
    public static let wanted = ["memory", "pids"]

    /// What to do, from the texts of the directory's `cgroup.controllers`, `cgroup.subtree_control` and
    /// `cgroup.procs`: the wanted controllers that are available and not enabled yet are enabled; netlifed
    /// first moves to its leaf unless the directory is the hierarchy's root or holds no process.
    public static func plan(isRoot: Bool, controllers: String, subtreeControl: String, procs: String, ownPid: Int32) -> CgroupDelegation {
        let available = Set(controllers.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))
        let enabled = Set(subtreeControl.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))
        let missing = wanted.filter { available.contains($0) && !enabled.contains($0) }
        guard !missing.isEmpty else { return .none }
        if isRoot { return .enable(missing) }
        let pids = procs.split(separator: "\n").compactMap { Int32($0) }
        if pids.isEmpty { return .enable(missing) }
        return pids == [ownPid] ? .moveToLeafThenEnable(missing) : .notAlone
    }

    /// The directory in which apps' cgroups are made, given netlifed's own: its parent when netlifed lives in
    /// its leaf.
    public static func appsDirectory(forOwn directory: String) -> String {
        guard directory.hasSuffix("/" + leafName) else { return directory }
        return String(directory.dropLast(leafName.count + 1))
    }

    /// Makes `directory` (netlifed's cgroup2 directory, or its parent when netlifed is in its leaf already)
    /// enable the memory and pids controllers for the apps' cgroups when it can, and returns what happened
    /// in words when something was done or failed (nil when there was nothing to do).
    /// The corresponding C functions are `mkdir` and `write` (`cgroup.procs`, `cgroup.subtree_control`).
    public static func prepare(directory: String, mountPoint: String) -> String? {
        let read = { (name: String) in
            (try? KernelFile.read(directory + "/" + name, limit: 1 << 20)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        }
        let step = plan(isRoot: directory == mountPoint, controllers: read("cgroup.controllers"),
                        subtreeControl: read("cgroup.subtree_control"), procs: read("cgroup.procs"), ownPid: getpid())
        let controllers: [String]
        switch step {
        case .none, .notAlone:
            return nil
        case .enable(let missing):
            controllers = missing
        case .moveToLeafThenEnable(let missing):
            controllers = missing
            let leaf = directory + "/" + leafName
            do {
                do {
                    try sys("mkdir(\(leaf))") { mkdir(leaf, 0o755) }
                } catch where error.errno.rawValue == EEXIST {
                    // Made by an earlier netlifed in this cgroup: it is netlifed's leaf still.
                }
                try KernelFile.write(leaf + "/cgroup.procs", "\(getpid())\n")
            } catch {
                return "cannot move netlifed into \(leaf) (\(error)): apps' memory and tasks are not accounted"
            }
        }
        let text = controllers.map { "+" + $0 }.joined(separator: " ")
        do {
            try KernelFile.write(directory + "/cgroup.subtree_control", text + "\n")
        } catch {
            return "cannot enable \(text) in \(directory) (\(error)): apps' memory and tasks are not accounted"
        }
        return "enabled \(text) in \(directory) for the apps' cgroups"
            + (step == .moveToLeafThenEnable(controllers) ? " (netlifed moved into \(directory)/\(leafName))" : "")
    }
}
