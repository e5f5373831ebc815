// The cgroup a process app runs in: found, made, filled, frozen, thawed, killed and removed.
//
// `CgroupLayout` is pure: from the text of /proc/self/cgroup and /proc/self/mountinfo it finds the cgroup2
// hierarchy and the v1 freezer hierarchy and netlifed's own directory in each, and `choose(isWritable:)`
// picks where an app's cgroup goes: cgroup v2 when netlifed may write its own v2 directory (root, or systemd's
// `Delegate=yes`), else the v1 freezer, else nothing (the process group and SIGSTOP/SIGCONT, which the program
// can observe). `ProcessCgroup` is the thin shell over the cgroup's files. Freezing is asynchronous in the
// kernel: `freezeState()` says where it is, and `whenFrozen(loop:timeout:_:)` polls it on the loop without
// blocking. Killing ends every member (v2 `cgroup.kill`; v1: freeze, SIGKILL each member, thaw, again until
// empty), so that nothing the program started escapes by leaving its process group.

@preconcurrency import Glibc

/// Where the cgroup hierarchies are mounted, and netlifed's own cgroup in each.
public struct CgroupLayout: Equatable, Sendable {
    /// One mounted hierarchy and netlifed's place in it.
    public struct Hierarchy: Equatable, Sendable {
        /// Where the hierarchy is mounted, for example `/sys/fs/cgroup/unified`.
        public var mountPoint: String
        /// netlifed's cgroup as /proc/self/cgroup names it, for example `/system.slice/netlifed.service`.
        public var cgroupPath: String
        /// netlifed's cgroup directory: the mount point joined with the path below the mount's root.
        public var directory: String
    }

    /// The cgroup2 (unified) hierarchy, if it is mounted where netlifed's cgroup can be reached.
    public var unified: Hierarchy?
    /// The v1 freezer hierarchy, likewise.
    public var freezer: Hierarchy?
    /// The v1 memory and pids hierarchies, likewise (a hybrid layout accounts there, not in cgroup2).
    public var memory: Hierarchy?
    public var pids: Hierarchy?

    public init(unified: Hierarchy?, freezer: Hierarchy?, memory: Hierarchy? = nil, pids: Hierarchy? = nil) {
        self.unified = unified
        self.freezer = freezer
        self.memory = memory
        self.pids = pids
    }

    /// The longest text of /proc/self/cgroup or /proc/self/mountinfo read (a machine with thousands of
    /// mounts has a mountinfo of a few hundred KiB).
    public static let maxFileBytes = 4 << 20

    /// Reads the layout from the two texts: linear in their length. A hierarchy that is not mounted, or whose
    /// mount does not contain netlifed's cgroup (a mount of a subtree, as in a container), is nil.
    public init(procSelfCgroup: String, mountinfo: String) {
        var unifiedPath: String?
        var freezerPath: String?
        var memoryPath: String?
        var pidsPath: String?
        for line in procSelfCgroup.split(separator: "\n", omittingEmptySubsequences: true) {
            // ID:CONTROLLERS:PATH; the path may itself contain colons.
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[2].hasPrefix("/") else { continue }
            if parts[0] == "0" && parts[1].isEmpty {
                unifiedPath = String(parts[2])
            } else {
                let controllers = parts[1].split(separator: ",")
                if controllers.contains("freezer") { freezerPath = String(parts[2]) }
                if controllers.contains("memory") { memoryPath = String(parts[2]) }
                if controllers.contains("pids") { pidsPath = String(parts[2]) }
            }
        }
        var unified: Hierarchy?
        var freezer: Hierarchy?
        var memory: Hierarchy?
        var pids: Hierarchy?
        for line in mountinfo.split(separator: "\n", omittingEmptySubsequences: true) {
            guard let mount = MountinfoLine(line) else { continue }
            // A later mount on the same point hides an earlier one: the last that fits wins.
            if mount.fileSystem == "cgroup2", let path = unifiedPath, let found = mount.hierarchy(for: path) {
                unified = found
            } else if mount.fileSystem == "cgroup", mount.superOptions.contains("freezer"),
                      let path = freezerPath, let found = mount.hierarchy(for: path) {
                freezer = found
            }
            if mount.fileSystem == "cgroup", mount.superOptions.contains("memory"),
               let path = memoryPath, let found = mount.hierarchy(for: path) {
                memory = found
            }
            if mount.fileSystem == "cgroup", mount.superOptions.contains("pids"),
               let path = pidsPath, let found = mount.hierarchy(for: path) {
                pids = found
            }
        }
        self.init(unified: unified, freezer: freezer, memory: memory, pids: pids)
    }

    /// The layout of this process. The corresponding files are /proc/self/cgroup and /proc/self/mountinfo.
    public static func current() throws(SystemError) -> CgroupLayout {
        let cgroup = try KernelFile.read("/proc/self/cgroup", limit: maxFileBytes)
        let mountinfo = try KernelFile.read("/proc/self/mountinfo", limit: maxFileBytes)
        return CgroupLayout(procSelfCgroup: String(decoding: cgroup, as: UTF8.self),
                            mountinfo: String(decoding: mountinfo, as: UTF8.self))
    }

    /// Where an app's cgroup goes: v2 when netlifed's v2 directory is writable, else the v1 freezer when its
    /// directory is, else the process group with the reason.
    ///
    /// - Parameter isWritable: whether netlifed may make cgroups in a directory and move processes into them
    ///   (the shell's probe is `ProcessCgroup.isWritable(_:)`).
    ///   `asRoot`: whether netlifed runs as root (the remedy the reason names differs).
    public func choose(isWritable: (String) -> Bool, asRoot: Bool = geteuid() == 0) -> CgroupChoice {
        if let unified, isWritable(unified.directory) { return .v2(parent: unified.directory) }
        if let freezer, isWritable(freezer.directory) { return .v1Freezer(parent: freezer.directory) }
        var reasons: [String] = []
        // Root whose cgroup tree is read-only is under a sandbox (systemd's ProtectControlGroups=): running as
        // root is no remedy there.
        let remedy = asRoot ? "a read-only cgroup tree: under systemd, the drop-in with Delegate=yes and ProtectControlGroups=no"
                                    : "run as root, or under systemd with Delegate=yes"
        if let unified { reasons.append("\(unified.directory) is not writable (\(remedy))") }
        if let freezer { reasons.append("\(freezer.directory) is not writable") }
        if reasons.isEmpty { reasons.append("no cgroup2 or v1 freezer hierarchy is mounted") }
        return .processGroup(reason: reasons.joined(separator: "; ")
                             + "; suspension uses SIGSTOP/SIGCONT, which the program can observe")
    }
}

/// Where a process app's cgroup is made.
public enum CgroupChoice: Equatable, Sendable {
    /// A child of this cgroup v2 directory.
    case v2(parent: String)
    /// A child of this v1 freezer directory.
    case v1Freezer(parent: String)
    /// No cgroup: the program runs in its own process group only, and why.
    case processGroup(reason: String)
}

/// The fields of one line of /proc/self/mountinfo that matter here.
struct MountinfoLine {
    var root: String
    var mountPoint: String
    var fileSystem: Substring
    var superOptions: [Substring]

    /// Parses `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`; nil for
    /// anything else.
    init?(_ line: Substring) {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 10, let dash = fields[6...].firstIndex(of: "-"), dash + 3 < fields.count else { return nil }
        root = Self.unescaped(fields[3])
        mountPoint = Self.unescaped(fields[4])
        fileSystem = fields[dash + 1]
        superOptions = fields[dash + 3].split(separator: ",")
    }

    /// The hierarchy seen through this mount by a process in cgroup `path`, or nil when the mount shows only
    /// a subtree that does not contain it, or the cgroup lies outside the process's cgroup namespace (the
    /// kernel then writes it with `..` components).
    func hierarchy(for path: String) -> CgroupLayout.Hierarchy? {
        guard root.hasPrefix("/"), mountPoint.hasPrefix("/"), !path.split(separator: "/").contains("..") else { return nil }
        let below: Substring
        if root == "/" {
            below = path[...]
        } else if path == root || path.hasPrefix(root + "/") {
            below = path.dropFirst(root.count)
        } else {
            return nil
        }
        let trimmed = below.drop(while: { $0 == "/" })
        let directory = trimmed.isEmpty ? mountPoint : (mountPoint == "/" ? "/" : mountPoint + "/") + trimmed
        return CgroupLayout.Hierarchy(mountPoint: mountPoint, cgroupPath: path, directory: directory)
    }

    /// mountinfo writes space, tab, newline and backslash in paths as `\ooo` octal escapes.
    static func unescaped(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count,
               let value = octal(utf8[(index + 1)..<(index + 4)]) {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func octal(_ digits: ArraySlice<UInt8>) -> UInt8? {
        var value = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(digit) else { return nil }
            value = value * 8 + Int(digit - UInt8(ascii: "0"))
        }
        return value <= 255 ? UInt8(value) : nil
    }
}

/// How far a cgroup's freezing has come.
public enum CgroupFreezeState: String, Equatable, Sendable {
    case thawed
    /// Asked to freeze; some members still run.
    case freezing
    case frozen
}

/// The cgroup of one process app, made by netlifed under its own.
public final class ProcessCgroup {
    /// Which kind of hierarchy the cgroup lives in.
    public enum Kind: String, Equatable, Sendable {
        case v2 = "cgroup2"
        case v1Freezer = "freezer"
    }

    public let kind: Kind
    /// The cgroup's directory.
    public let directory: String
    /// Whether `remove()` has removed it.
    public private(set) var isRemoved = false

    /// The most members read or signalled in one go; a cgroup of a program that forks without bound still
    /// costs the daemon a bounded amount of work per call.
    public static let maxMembers = 65_536

    /// Makes a cgroup named `name` in the place `choice` names; nil for `.processGroup`.
    /// The corresponding C function is `mkdir`.
    public static func create(named name: String, in choice: CgroupChoice) throws(SystemError) -> ProcessCgroup? {
        switch choice {
        case .v2(let parent): return try ProcessCgroup(creating: parent + "/" + name, kind: .v2)
        case .v1Freezer(let parent): return try ProcessCgroup(creating: parent + "/" + name, kind: .v1Freezer)
        case .processGroup: return nil
        }
    }

    /// A fresh name for an app's cgroup, `netlife-APP-dPID-nNS-XXXXXXXX` (`netlife-APP-rRUN-dPID-nNS-XXXXXXXX`
    /// for run RUN): the app's name with anything but letters, digits, `-` and `_` replaced by `_` (at most 64
    /// bytes), this netlifed's pid and the inode of its pid namespace (so that a later one can tell what a
    /// netlifed that is gone left, and never judges by a pid of another namespace: CgroupLeftovers), and 32
    /// random bits, so that no run's cgroup is ever another's.
    public static func name(forApp app: String, run: Int? = nil) -> String {
        let safe = app.unicodeScalars.prefix(64).map { scalar -> Character in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_")
                ? Character(scalar) : "_"
        }
        let random = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let namespace = CgroupLeftovers.ownPidNamespace.map { "-n\($0)" } ?? ""
        return "netlife-\(String(safe))-\(run.map { "r\($0)-" } ?? "")d\(getpid())\(namespace)-\(String(repeating: "0", count: 8 - random.count))\(random)"
    }

    /// Whether netlifed may make cgroups in `directory` and move processes into them: the directory and its
    /// `cgroup.procs` are writable. The corresponding C function is `access`.
    public static func isWritable(_ directory: String) -> Bool {
        access(directory, W_OK) == 0 && access(directory + "/cgroup.procs", W_OK) == 0
    }

    /// Makes the directory of a new cgroup (it must not exist).
    public init(creating directory: String, kind: Kind) throws(SystemError) {
        try sys("mkdir(\(directory))") { mkdir(directory, 0o755) }
        self.directory = directory
        self.kind = kind
    }

    /// Adopts an existing cgroup directory (a daemon's own tests; a cgroup left by a previous run).
    public init(existing directory: String, kind: Kind) {
        self.directory = directory
        self.kind = kind
    }

    /// The file a process writes its pid into to join the cgroup (a child can join itself before it execs
    /// its program: `ChildLaunchOptions.joinCgroups`).
    public var procsFile: String { directory + "/cgroup.procs" }

    /// Moves process `pid` (all its threads) into the cgroup. The corresponding file is `cgroup.procs`.
    public func add(pid: Int32) throws(SystemError) {
        try KernelFile.write(procsFile, "\(pid)\n")
    }

    /// The pids of the cgroup's processes, at most `maxMembers`.
    public func members() throws(SystemError) -> [Int32] {
        let text = try KernelFile.read(procsFile, limit: Self.maxMembers * 8)
        var pids: [Int32] = []
        for line in text.split(separator: UInt8(ascii: "\n")) where pids.count < Self.maxMembers {
            if let pid = Int32(String(decoding: line, as: UTF8.self)), pid > 0 { pids.append(pid) }
        }
        return pids
    }

    /// Asks the kernel to freeze every member. Freezing completes asynchronously: see `freezeState()` and
    /// `whenFrozen(loop:timeout:_:)`. The corresponding file is `cgroup.freeze` (v2) or `freezer.state` (v1).
    public func freeze() throws(SystemError) {
        switch kind {
        case .v2: try KernelFile.write(directory + "/cgroup.freeze", "1\n")
        case .v1Freezer: try KernelFile.write(directory + "/freezer.state", "FROZEN\n")
        }
    }

    /// Lets every member run again.
    public func thaw() throws(SystemError) {
        switch kind {
        case .v2: try KernelFile.write(directory + "/cgroup.freeze", "0\n")
        case .v1Freezer: try KernelFile.write(directory + "/freezer.state", "THAWED\n")
        }
    }

    /// How far freezing has come: v2 reads `cgroup.freeze` (asked) and `frozen` in `cgroup.events` (done);
    /// v1 reads `freezer.state`.
    public func freezeState() throws(SystemError) -> CgroupFreezeState {
        switch kind {
        case .v2:
            let asked = try KernelFile.read(directory + "/cgroup.freeze", limit: 64)
            let events = try KernelFile.read(directory + "/cgroup.events", limit: 4096)
            return Self.v2FreezeState(freeze: String(decoding: asked, as: UTF8.self), events: String(decoding: events, as: UTF8.self))
        case .v1Freezer:
            let state = try KernelFile.read(directory + "/freezer.state", limit: 64)
            return Self.v1FreezeState(String(decoding: state, as: UTF8.self))
        }
    }

    /// Whether every member is frozen.
    public func isFrozen() throws(SystemError) -> Bool {
        try freezeState() == .frozen
    }

    /// The state from the texts of v2's `cgroup.freeze` and `cgroup.events`.
    static func v2FreezeState(freeze: String, events: String) -> CgroupFreezeState {
        if KernelFile.field("frozen", in: events) == "1" { return .frozen }
        return KernelFile.trimmed(freeze) == "1" ? .freezing : .thawed
    }

    /// The state from the text of v1's `freezer.state`.
    static func v1FreezeState(_ text: String) -> CgroupFreezeState {
        switch KernelFile.trimmed(text) {
        case "FROZEN": return .frozen
        case "FREEZING": return .freezing
        default: return .thawed
        }
    }

    /// Sends SIGKILL to every member, and to every member of the cgroups below it, once. v2 writes
    /// `cgroup.kill` (kernel 5.14 and later: the kernel kills the whole subtree, forks under way too); v1, or
    /// a v2 kernel without `cgroup.kill`, asks the cgroup to freeze (descendants freeze with it, so that
    /// members stop forking; freezing is asynchronous, and a process forked before it took hold is caught by
    /// the next round), signals each member of the subtree, and thaws it so that they die. Members leave the cgroup as they
    /// exit, asynchronously: `killUntilEmpty(loop:timeout:_:)` repeats this until none is left.
    ///
    /// - Returns: how many members were signalled one by one (0 when `cgroup.kill` did it).
    @discardableResult
    public func kill() throws(SystemError) -> Int {
        if kind == .v2 {
            do {
                try KernelFile.write(directory + "/cgroup.kill", "1\n")
                return 0
            } catch where error.errno.rawValue == ENOENT {
                // Before Linux 5.14: signal the members one by one, as v1 does.
            }
        }
        try freeze()
        let count = signalSubtree(SIGKILL)
        try thaw()
        return count
    }

    /// The memory the cgroup and its descendants use, in bytes: v2's `memory.current`, present when the
    /// parent cgroup enables the memory controller for its children; nil without it (a hybrid layout's
    /// cgroup2 has no controllers: `AccountingCgroup` counts there). No process's own files are read: a sum of
    /// resident sets costs a /proc read per process and counts shared pages once per process.
    public func memoryBytes() -> UInt64? {
        guard kind == .v2, let text = try? KernelFile.read(directory + "/memory.current", limit: 64) else { return nil }
        return UInt64(KernelFile.trimmed(String(decoding: text, as: UTF8.self)))
    }

    /// The tasks (processes and their threads) in the cgroup and its descendants: v2's `pids.current`,
    /// present when the parent cgroup enables the pids controller for its children; nil without it.
    public func taskCount() -> UInt64? {
        guard kind == .v2, let text = try? KernelFile.read(directory + "/pids.current", limit: 64) else { return nil }
        return UInt64(KernelFile.trimmed(String(decoding: text, as: UTF8.self)))
    }

    /// Removes the cgroup, which must be empty (EBUSY otherwise). Calling it again does nothing.
    /// The corresponding C function is `rmdir`.
    public func remove() throws(SystemError) {
        guard !isRemoved else { return }
        try sys("rmdir(\(directory))") { rmdir(directory) }
        isRemoved = true
    }
}

extension ProcessCgroup {
    /// Calls `done(true)` on the loop once every member is frozen, or `done(false)` when `timeout` passes
    /// first (or the state cannot be read). The state is polled after 1 ms, then at doubling intervals up to
    /// 32 ms, so that the loop never waits. Close the returned timer to stop waiting (`done` is then never
    /// called).
    @discardableResult
    public func whenFrozen(loop: EventLoop, timeout: Duration, _ done: @escaping (Bool) -> Void) -> EventTimer {
        Self.poll(loop: loop, timeout: timeout, check: { [weak self] in
            guard let self, let state = try? self.freezeState() else { return nil }
            return state == .frozen ? true : nil
        }, done: done)
    }

    /// Kills every member of the subtree (`kill()`), then again at each poll while members are left, until
    /// the cgroup and every cgroup below it are empty (`done(true)`) or `timeout` passes (`done(false)`).
    /// Close the returned timer to stop.
    @discardableResult
    public func killUntilEmpty(loop: EventLoop, timeout: Duration, _ done: @escaping (Bool) -> Void) -> EventTimer {
        _ = try? kill()
        return Self.poll(loop: loop, timeout: timeout, check: { [weak self] in
            guard let self else { return nil }
            if self.subtreeMemberCount() == 0 { return true }
            _ = try? self.kill()
            return nil
        }, done: done)
    }

    /// Polls `check` (nil: not yet) on the loop with a back-off from 1 ms to 32 ms, until it answers or
    /// `timeout` passes.
    private static func poll(loop: EventLoop, timeout: Duration, check: @escaping () -> Bool?,
                             done: @escaping (Bool) -> Void) -> EventTimer {
        // The handler holds the box, the box holds the timer weakly: once the timer is closed (here or by the
        // owner) and let go, all three are freed.
        final class Box { weak var timer: EventTimer? }
        let box = Box()
        let deadline = MonotonicTime.now() + timeout
        var delay = Duration.milliseconds(1)
        let timer = EventTimer(loop: loop) {
            let answer = check() ?? (MonotonicTime.now() >= deadline ? false : nil)
            guard let answer else {
                delay = min(delay * 2, .milliseconds(32))
                box.timer?.arm(after: delay)
                return
            }
            box.timer?.close()
            done(answer)
        }
        box.timer = timer
        timer.arm(after: delay)
        return timer
    }
}

/// The small text files of the kernel (cgroup files, /proc): each read or write is one checked call whose
/// error names the file. What is read of them is bounded by the work it may cost: past the bound, a file is
/// not refused but read no further.
enum KernelFile {
    /// Reads a whole file, at most `limit` bytes. The corresponding C functions are `open` and `read`.
    static func read(_ path: String, limit: Int) throws(SystemError) -> [UInt8] {
        try FileDescriptor.open(path, .readOnly).readToEnd(atMost: limit)
    }

    /// The number of newlines in a file's first `limit` bytes (about), read in 64 KiB chunks that are
    /// counted where they lie. The corresponding C functions are `open`, `read` and `memchr`.
    static func countLines(_ path: String, limit: Int) throws(SystemError) -> Int {
        let file = try FileDescriptor.open(path, .readOnly)
        var lines = 0
        var total = 0
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
        defer { chunk.deallocate() }
        guard let base = chunk.baseAddress else { return 0 }
        while total < limit {
            let count = try file.read(into: chunk)
            if count == 0 { break }
            total += count
            var cursor = base
            var left = count
            while left > 0, let found = memchr(cursor, Int32(UInt8(ascii: "\n")), left) {
                lines += 1
                left -= found - cursor + 1
                cursor = found + 1
            }
        }
        return lines
    }

    /// Writes `text` to a file in one `write`, as the kernel's control files want it.
    /// The corresponding C functions are `open` and `write`.
    static func write(_ path: String, _ text: String) throws(SystemError) {
        let bytes = Array(text.utf8)
        let written = try FileDescriptor.open(path, .writeOnly).write(bytes)
        guard written == bytes.count else { throw SystemError("write \(path)", Errno(rawValue: EIO)) }
    }

    /// The value of `key` in a text of `KEY VALUE` or `KEY: VALUE` lines (cgroup.events, /proc/PID/status),
    /// without surrounding white space.
    static func field(_ key: String, in text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix(key) {
            var rest = line.dropFirst(key.count)
            guard let first = rest.first, first == ":" || first == " " || first == "\t" else { continue }
            if first == ":" { rest = rest.dropFirst() }
            return trimmed(rest)
        }
        return nil
    }

    /// `text` without leading and trailing spaces, tabs and newlines.
    static func trimmed(_ text: some StringProtocol) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(text[first...last])
    }
}
