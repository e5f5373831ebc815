// Child processes watched through the loop: spawned with posix_spawn in their own process group, their
// exit seen through a pidfd (no SIGCHLD handler, no blocked thread), their stdout and stderr read line by
// line through pipe events, at most one 64 KiB read per pipe per loop turn so that a child that writes
// without pause cannot hold the loop. When the child exits, what it left in its process group is killed,
// as systemd's KillMode=control-group does, unless its owner asks, at the exit, to keep the group: then the
// exit is reported but the child is not reaped (waitid with WNOWAIT), so that its pid, the group's id, stays
// reserved and a later signal to the group cannot reach a stranger; what is left of the group runs on, its
// output still read, until the owner kills it (`killKeptGroup()`, `close()`).
//
// A process app's program (docs/process-apps.md) needs more than a hook: its listeners at descriptors 3, 4, ...
// under systemd's socket-activation protocol, a working directory, and a cgroup it joins before its first
// instruction (so that nothing it forks can start outside). posix_spawn cannot write LISTEN_PID (the child's
// own pid, unknown before the spawn), change directory portably (posix_spawn_file_actions_addchdir_np is
// hidden behind _GNU_SOURCE) or join a cgroup; so when any of these is asked, the program is started through
// a fixed /bin/sh script: it changes directory, writes `$$` into each cgroup's cgroup.procs, exports
// LISTEN_PID=$$ and execs the program, which keeps the shell's pid (and so the pidfd, the process group and
// the cgroup). The script's text holds no data: the directory, the cgroup files and the program's arguments
// reach it as positional parameters, so no quoting can go wrong. A step that fails exits with systemd's code
// for it (200 chdir, 219 cgroup) and the shell's message goes to the log; a program that cannot be executed
// exits 127 (not found) or 126 (not executable), as a shell's would (`locateProgram` lets an owner find that
// out before the spawn, as execvp would).
// Running as another user (`user`) is the script's last step, after the cgroup is joined: posix_spawn cannot
// change credentials and fork from a multithreaded daemon is not worth it, so the script execs util-linux's
// setpriv(1) with the uid and gid (positional parameters too), which sets them and the user's groups and
// execs the program in the same process. Without setpriv it exits 217 (systemd's code for a user that cannot
// be set) with a message rather than run the program as root.
// Every child, hooks included, inherits only stdin, stdout, stderr and the descriptors it is given: the rest
// is closed in the child (posix_spawn_file_actions_addclosefrom_np), even what a library of the daemon opened
// without close-on-exec.

@preconcurrency import Glibc
internal import CLibevent

/// What a child wrote, as its owner is told.
public enum ChildOutput: Equatable, Sendable {
    /// One line of stdout or stderr, without its newline.
    case line(String)
    /// This many lines were over the output limit and were dropped.
    case dropped(Int)
}

/// The account a child's program runs as: its user and group ids; its supplementary groups are the user's
/// in the group database (setpriv's `--init-groups`).
public struct ChildUser: Equatable, Sendable {
    public var uid: UInt32
    public var gid: UInt32

    public init(uid: UInt32, gid: UInt32) {
        self.uid = uid
        self.gid = gid
    }
}

/// What a child gets beyond arguments and environment: descriptors placed at 3, 4, ... (socket activation),
/// a working directory, cgroups it joins before its program runs, and the user it runs as.
public struct ChildLaunchOptions: Equatable, Sendable {
    /// Descriptors of the daemon placed at 3, 4, ... in the child, in this order (the daemon's own copies
    /// keep their numbers and their close-on-exec flag).
    public var descriptors: [CInt]
    /// systemd socket activation: when set, the first `listenerNames.count` descriptors are listeners, and
    /// the child gets LISTEN_FDS (their count), LISTEN_FDNAMES (the names joined by `:`) and LISTEN_PID (its
    /// own pid). Descriptors after them (an events socket) are passed without being announced.
    public var listenerNames: [String]?
    /// The directory the program starts in; nil keeps the daemon's.
    public var workingDirectory: String?
    /// Cgroup directories the child joins (writing its pid into their `cgroup.procs`) before its program
    /// runs: a v2 cgroup, or a v1 freezer cgroup.
    public var joinCgroups: [String]
    /// The user the program runs as, set by setpriv(1) as the script's last step; nil keeps the daemon's.
    /// Changing it needs root (CAP_SETUID and CAP_SETGID).
    public var user: ChildUser?
    /// systemd's watchdog: the child gets WATCHDOG_PID (its own pid, which only the script knows) beside the
    /// WATCHDOG_USEC its environment carries, so that sd_watchdog_enabled() in it says yes.
    public var watchdogPID = false

    public init(descriptors: [CInt] = [], listenerNames: [String]? = nil, workingDirectory: String? = nil,
                joinCgroups: [String] = [], user: ChildUser? = nil) {
        self.descriptors = descriptors
        self.listenerNames = listenerNames
        self.workingDirectory = workingDirectory
        self.joinCgroups = joinCgroups
        self.user = user
    }

    /// The exit status of the script when the user cannot be set (setpriv is missing); systemd's EXIT_USER.
    public static let userExitStatus: Int32 = 217

    /// The number of the first descriptor a child is given (after stdin, stdout and stderr).
    public static let firstDescriptor: CInt = 3

    /// The most descriptors passed (systemd's own limit on LISTEN_FDS is far higher; a config with more
    /// listeners than this is a mistake).
    public static let maxDescriptors = 1024

    /// Whether the child is started through the /bin/sh script (see the file's header).
    var needsScript: Bool { listenerNames != nil || workingDirectory != nil || !joinCgroups.isEmpty || user != nil || watchdogPID }

    /// Why these options cannot be used, or nil: too many descriptors, more names than descriptors, a
    /// name systemd would refuse (empty, longer than 255 bytes, with `:` or a control character), or a uid or
    /// gid of -1 (which setresuid reads as "unchanged": the program would keep root).
    public var problem: String? {
        if descriptors.count > Self.maxDescriptors { return "more than \(Self.maxDescriptors) descriptors" }
        if descriptors.contains(where: { $0 < 0 }) { return "a negative descriptor" }
        if let user, user.uid == UInt32.max || user.gid == UInt32.max { return "uid or gid -1" }
        guard let names = listenerNames else { return nil }
        if names.count > descriptors.count { return "\(names.count) listener names for \(descriptors.count) descriptors" }
        for name in names where name.isEmpty || name.utf8.count > 255
            || name.unicodeScalars.contains(where: { $0 == ":" || $0.value < 0x20 || $0.value == 0x7F }) {
            return "listener name '\(name.prefix(64))' is not a valid LISTEN_FDNAMES name"
        }
        return nil
    }

    /// The argument vector that runs `arguments` under these options: `arguments` itself, or the /bin/sh
    /// script followed by its positional parameters (directory, cgroup files, uid and gid, then the
    /// program's arguments).
    func spawnArguments(_ arguments: [String]) -> [String] {
        guard needsScript else { return arguments }
        var script: [String] = []
        var parameters: [String] = []
        /// The newest parameter, as the script names it ($10 would be $1 followed by a 0).
        func last() -> String { parameters.count < 10 ? "$\(parameters.count)" : "${\(parameters.count)}" }
        if let workingDirectory {
            parameters.append(workingDirectory)
            script.append("cd -- \"\(last())\" || exit 200")
        }
        for directory in joinCgroups {
            parameters.append(directory + "/cgroup.procs")
            script.append("echo $$ > \"\(last())\" || exit 219")
        }
        if let user {
            // Kept in variables: the shift below drops the parameters.
            parameters.append(String(user.uid))
            script.append("netlife_uid=\(last())")
            parameters.append(String(user.gid))
            script.append("netlife_gid=\(last())")
        }
        if !parameters.isEmpty { script.append("shift \(parameters.count)") }
        if listenerNames != nil { script.append("LISTEN_PID=$$; export LISTEN_PID") }
        if watchdogPID { script.append("WATCHDOG_PID=$$; export WATCHDOG_PID") }
        if user != nil {
            script.append("command -v setpriv > /dev/null || { echo \"netlife-exec: setpriv (util-linux) is not in PATH: "
                + "cannot run the program as uid $netlife_uid\" >&2; exit \(Self.userExitStatus); }")
            script.append("exec setpriv --reuid=\"$netlife_uid\" --regid=\"$netlife_gid\" --init-groups -- \"$@\"")
        } else {
            script.append("exec \"$@\"")
        }
        return ["/bin/sh", "-c", script.joined(separator: "; "), "netlife-exec"] + parameters + arguments
    }

    /// The environment with the socket-activation variables set (LISTEN_PID is the script's to set); without
    /// socket activation, `environment` unchanged.
    func spawnEnvironment(_ environment: [String: String]) -> [String: String] {
        guard let names = listenerNames else { return environment }
        var environment = environment
        environment["LISTEN_PID"] = nil
        environment["LISTEN_FDS"] = String(names.count)
        environment["LISTEN_FDNAMES"] = names.joined(separator: ":")
        return environment
    }
}

/// A spawned process, its exit and its output observed on the loop.
public final class ChildProcess {
    private unowned let loop: EventLoop
    /// Where the loop keeps this object (`LoopOwned`).
    var loopSlot: Int32 = -1
    /// The process id; also its process group id.
    public let pid: Int32
    private let pidfd: CInt
    private var exitEvent: OpaquePointer?
    private var outputs: [OutputPipe] = []
    /// Dropped once called, so that a closure that refers to this process does not keep it alive.
    private var onExit: ((ChildExitStatus) -> Void)?
    /// Asked when the child exits: whether the rest of its process group runs on.
    private var keepsGroupAfterExit: (() -> Bool)?
    private var onOutput: ((ChildOutput) -> Void)?
    private var outputLimit: LineRateLimiter
    /// The exit status, once the process has ended.
    public private(set) var exitStatus: ChildExitStatus?
    /// Whether the child has exited and the rest of its process group was kept running: the child is a
    /// zombie, not yet reaped, until `killKeptGroup()` or `close()`.
    public private(set) var isGroupKept = false

    /// Spawns `arguments[0]` (looked up in PATH) with `arguments` and exactly `environment`, stdin from
    /// /dev/null, in a new process group, with an empty signal mask and default signal dispositions.
    ///
    /// - Parameters:
    ///   - options: descriptors at 3, 4, ..., socket activation, working directory, cgroups and user (see
    ///     `ChildLaunchOptions`); a problem with them is EINVAL.
    ///   - outputLimit: how many lines of output are delivered; the others are counted and reported as
    ///     `.dropped` before the next delivered line and when the child exits.
    ///   - onOutput: each line the child writes to stdout or stderr, and counts of dropped lines.
    ///   - keepsGroupAfterExit: asked when the child exits; true leaves the rest of its process group
    ///     running (`isGroupKept`), its output still delivered, until `killKeptGroup()` or `close()`. Nil or
    ///     false: the group is killed at the exit.
    ///   - onExit: called once when the child has exited, after its pending output has been delivered.
    /// The corresponding C functions are `posix_spawnp` and `pidfd_open`.
    public init(loop: EventLoop, arguments: [String], environment: [String: String],
                options: ChildLaunchOptions = ChildLaunchOptions(),
                outputLimit: LineRateLimiter = .hookOutput,
                onOutput: @escaping (ChildOutput) -> Void,
                keepsGroupAfterExit: (() -> Bool)? = nil,
                onExit: @escaping (ChildExitStatus) -> Void) throws(SystemError) {
        guard !arguments.isEmpty else { throw SystemError("posix_spawnp", Errno(rawValue: ENOENT)) }
        guard options.problem == nil else { throw SystemError("posix_spawnp(\(arguments[0]))", Errno(rawValue: EINVAL)) }
        loop.assertInLoop()
        self.loop = loop
        self.onExit = onExit
        self.keepsGroupAfterExit = keepsGroupAfterExit
        self.onOutput = onOutput
        self.outputLimit = outputLimit

        // Only the daemon's ends are non-blocking: a child handed a non-blocking stdout fails its writes with
        // EAGAIN whenever the pipe is full (`seq 1 200000` would).
        var stdoutPipe: [CInt] = [-1, -1]
        var stderrPipe: [CInt] = [-1, -1]
        try sys("pipe2") { netlife_pipe2(&stdoutPipe, O_CLOEXEC) }
        do throws(SystemError) {
            try sys("pipe2") { netlife_pipe2(&stderrPipe, O_CLOEXEC) }
            try sys("fcntl(O_NONBLOCK)") { fcntl(stdoutPipe[0], F_SETFL, O_NONBLOCK) }
            try sys("fcntl(O_NONBLOCK)") { fcntl(stderrPipe[0], F_SETFL, O_NONBLOCK) }
        } catch {
            for fd in stdoutPipe + stderrPipe where fd >= 0 { Glibc.close(fd) }
            throw error
        }
        defer { Glibc.close(stdoutPipe[1]); Glibc.close(stderrPipe[1]) }

        let spawned: pid_t
        do {
            spawned = try Self.spawn(arguments: options.spawnArguments(arguments),
                                     environment: options.spawnEnvironment(environment),
                                     descriptors: options.descriptors, stdout: stdoutPipe[1], stderr: stderrPipe[1])
        } catch {
            Glibc.close(stdoutPipe[0]); Glibc.close(stderrPipe[0])
            throw error
        }
        pid = spawned
        do {
            pidfd = try sys("pidfd_open") { pidfd_open(spawned, 0) }
        } catch {
            // Cannot watch it: do not leave it running unobserved.
            kill(-spawned, SIGKILL)
            var status: CInt = 0
            waitpid(spawned, &status, 0)
            Glibc.close(stdoutPipe[0]); Glibc.close(stderrPipe[0])
            throw error
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        exitEvent = try! libevent("event_new") { event_new(loop.base, pidfd, Int16(EV_READ), childExited, context) }
        libeventMustSucceed("event_add") { event_add(exitEvent!, nil) }
        outputs = [OutputPipe(loop: loop, fd: stdoutPipe[0], owner: self),
                   OutputPipe(loop: loop, fd: stderrPipe[0], owner: self)]
        loop.retain(self)
    }

    private static func spawn(arguments: [String], environment: [String: String], descriptors: [CInt],
                              stdout: CInt, stderr: CInt) throws(SystemError) -> pid_t {
        // Each passed descriptor is first copied above the range 3..<3+count, so that placing one cannot
        // overwrite another still to be placed (a listener that is itself fd 4 going to 3 while fd 3 goes to 4).
        // The copies are close-on-exec; dup2 in the child clears the flag on the placed descriptor only.
        let first = ChildLaunchOptions.firstDescriptor
        var copies: [CInt] = []
        defer { copies.forEach { Glibc.close($0) } }
        for fd in descriptors {
            copies.append(try sys("fcntl(F_DUPFD_CLOEXEC)") { fcntl(fd, F_DUPFD_CLOEXEC, first + CInt(descriptors.count)) })
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        for (index, copy) in copies.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, copy, first + CInt(index))
        }
        // Nothing else of the daemon's reaches the child, not even a descriptor some library opened without
        // close-on-exec (a program must not hold, say, a D-Bus socket of Avahi's).
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, first + CInt(descriptors.count)) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.sorted(by: { $0.key < $1.key }).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { Glibc.free($0) }
            envp.forEach { Glibc.free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else { throw SystemError("posix_spawnp(\(arguments[0]))", Errno(rawValue: result)) }
        return pid
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which its header declares only
    /// under _GNU_SOURCE; looked up by name instead, nil on an older glibc (children then inherit whatever
    /// is not close-on-exec).
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt)? = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt).self)
    }()

    /// Finds `program` as execvp would, so that one that cannot run is an error before the spawn rather than
    /// exit status 127 or 126: a name with a slash is itself, any other is looked up in the directories of
    /// `searchPath` (glibc's "/bin:/usr/bin" when nil; an empty entry is the current directory), skipping
    /// what is missing or cannot be executed. Relative paths are taken from `directory` (where the child
    /// starts) when given. Permissions are the daemon's: a program run as another user may still be
    /// refused then.
    ///
    /// - Returns: the path the program would be executed from.
    /// - Throws: `SystemError` naming `execvp(program)`: ENOENT when nothing of that name was found, EACCES
    ///   when something was but cannot be executed (no execute permission, a directory).
    /// The corresponding C functions are `stat` and `access`.
    public static func locateProgram(_ program: String, searchPath: String?, directory: String? = nil) throws(SystemError) -> String {
        /// 0 when `path` is an executable regular file, else why not.
        func executableError(_ path: String) -> CInt {
            let full = path.hasPrefix("/") ? path : (directory.map { $0 + "/" + path } ?? path)
            var info = stat()
            guard stat(full, &info) == 0 else { return errno }
            guard info.st_mode & S_IFMT == S_IFREG else { return EACCES }
            return access(full, X_OK) == 0 ? 0 : errno
        }
        var denied = false
        if !program.isEmpty, !program.contains("\0") {
            let candidates = program.contains("/") ? [program]
                : (searchPath ?? "/bin:/usr/bin").split(separator: ":", omittingEmptySubsequences: false)
                    .map { $0.isEmpty ? program : "\($0)/\(program)" }
            for candidate in candidates {
                let error = executableError(candidate)
                if error == 0 { return candidate }
                if error == EACCES { denied = true }
            }
        }
        throw SystemError("execvp(\(program))", Errno(rawValue: denied ? EACCES : ENOENT))
    }

    /// The pidfd of the child while it runs (for `pidfd_getfd`), nil once it has exited and been reaped. The
    /// child owns it: do not close it.
    public var processDescriptor: CInt? { exitStatus == nil ? pidfd : nil }

    /// Sends `signal` to the child's whole process group (the child and what it started), also while the
    /// group is kept after the child's exit.
    public func signalGroup(_ signal: CInt) {
        guard exitStatus == nil || isGroupKept || signal == SIGKILL else { return }
        kill(-pid, signal)
    }

    /// A wait status in waitpid's encoding, as a value.
    private static func decodeWaitStatus(_ status: CInt) -> ChildExitStatus {
        (status & 0x7f) == 0 ? .exited((status >> 8) & 0xff) : .signaled(status & 0x7f)
    }

    fileprivate func exited() {
        loop.readContext.callbackBegins()
        var status: CInt = 0
        if keepsGroupAfterExit?() == true, netlife_peek_exit(pid, &status) == 0 {
            return keepGroup(Self.decodeWaitStatus(status))
        }
        // The child is a zombie now, so its process group id cannot have been reused: end what it left behind
        // (a `sleep 30 &`) before reaping it.
        kill(-pid, SIGKILL)
        guard waitpid(pid, &status, WNOHANG) == pid else { return }
        let exit = Self.decodeWaitStatus(status)
        finish(exit)
        let onExit = self.onExit
        self.onExit = nil
        keepsGroupAfterExit = nil
        onExit?(exit)
    }

    /// The child has exited and its owner keeps the rest of its group: the exit is reported, the child stays
    /// an unreaped zombie (its pid keeps the group's id reserved), and the pipes are read on, for what is left
    /// of the group may still write to them.
    private func keepGroup(_ exit: ChildExitStatus) {
        exitStatus = exit
        isGroupKept = true
        // The pidfd stays readable from now on: it is not watched again.
        if let exitEvent { event_free(exitEvent) }
        exitEvent = nil
        keepsGroupAfterExit = nil
        // What the child itself wrote last is in the pipes: delivered before its exit is reported.
        for output in outputs { output.deliverPending() }
        let onExit = self.onExit
        self.onExit = nil
        onExit?(exit)
    }

    /// Kills what is left of a kept group (SIGKILL) and reaps the child; its pipes are drained and closed.
    /// Does nothing unless the group is kept. `onExit` is not called again.
    public func killKeptGroup() {
        guard isGroupKept, let exit = exitStatus else { return }
        isGroupKept = false
        kill(-pid, SIGKILL)
        // A zombie since its exit: reaped at once, without waiting.
        var status: CInt = 0
        while waitpid(pid, &status, WNOHANG) == -1 && errno == EINTR {}
        finish(exit)
    }

    /// Stops watching the child (it is killed first if it still runs, with the rest of its group) and reaps
    /// it; `onExit` is not called. A kept group is killed too.
    public func close() {
        if isGroupKept { return killKeptGroup() }
        guard exitStatus == nil else { return }
        onExit = nil
        onOutput = nil
        keepsGroupAfterExit = nil
        kill(-pid, SIGKILL)
        var status: CInt = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        finish(.signaled(SIGKILL))
    }

    private func finish(_ status: ChildExitStatus) {
        exitStatus = status
        if let exitEvent { event_free(exitEvent) }
        exitEvent = nil
        Glibc.close(pidfd)
        // Whatever the child wrote before exiting is in the pipes now; a grandchild that keeps them open
        // is not waited for.
        for output in outputs { output.drainAndClose() }
        outputs = []
        reportDroppedOutput()
        onOutput = nil
        loop.release(self)
    }

    /// A line from one of the pipes, read at `now`: delivered if the output limit lets it through (it is
    /// decoded only then). Returns false when no further line read at `now` can pass (the limit refused
    /// this one, or nobody listens): the reader then hands the rest of its chunk to `refuseLines(_:)`.
    @discardableResult
    fileprivate func outputLine(_ bytes: UnsafeBufferPointer<UInt8>, now: MonotonicTime) -> Bool {
        guard onOutput != nil, outputLimit.admit(now: now) else { return false }
        reportDroppedOutput()
        onOutput?(.line(String(decoding: bytes, as: UTF8.self)))
        return true
    }

    /// `count` more lines read at the instant of the last refused one: counted as dropped in one step.
    fileprivate func refuseLines(_ count: Int) {
        guard onOutput != nil else { return }
        outputLimit.refuse(count)
    }

    private func reportDroppedOutput() {
        let dropped = outputLimit.takeDropped()
        if dropped > 0 { onOutput?(.dropped(dropped)) }
    }
}

/// One pipe from a child, read line by line.
private final class OutputPipe: LoopOwned {
    private let fd: CInt
    /// Where the loop keeps this object (`LoopOwned`).
    var loopSlot: Int32 = -1
    private var event: OpaquePointer?
    private var pending: [UInt8] = []
    private weak var owner: ChildProcess?
    private unowned let loop: EventLoop

    init(loop: EventLoop, fd: CInt, owner: ChildProcess) {
        self.loop = loop
        self.fd = fd
        self.owner = owner
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = try! libevent("event_new") { event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), outputReadable, context) }
        libeventMustSucceed("event_add") { event_add(event!, nil) }
        loop.retain(self)
    }

    /// Reads once (at most 64 KiB: the loop calls again while more is waiting); returns false at end of file
    /// or on error.
    @discardableResult
    func readOnce() -> Bool {
        let scratch = loop.readScratch
        let count = read(fd, scratch.baseAddress, scratch.count)
        if count > 0 {
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[0..<count]))
            let now = MonotonicTime.now()
            emitLines(now: now)
            // Keep a runaway line from growing without bound.
            if pending.count > 8192 { flushPartialLine(now: now) }
            return true
        }
        return count == -1 && (errno == EAGAIN || errno == EINTR)
    }

    private func emitLines(now: MonotonicTime) {
        guard let owner else { return pending.removeAll() }
        let consumed = pending.withUnsafeBufferPointer { buffer -> Int in
            guard let base = buffer.baseAddress else { return 0 }
            var start = 0
            var refused = -1   // lines after the first refused one: counted, not offered one by one
            // memchr: a flood of short lines (`yes`) is split at memory speed.
            while start < buffer.count, let found = memchr(base + start, 0x0A, buffer.count - start) {
                let newline = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                if refused >= 0 {
                    refused += 1
                } else if !owner.outputLine(UnsafeBufferPointer(rebasing: buffer[start..<newline]), now: now) {
                    refused = 0
                }
                start = newline + 1
            }
            if refused > 0 { owner.refuseLines(refused) }
            return start
        }
        pending.removeSubrange(..<consumed)
    }

    private func flushPartialLine(now: MonotonicTime) {
        if !pending.isEmpty { _ = pending.withUnsafeBufferPointer { owner?.outputLine($0, now: now) } }
        pending.removeAll()
    }

    func drainAndClose() {
        guard let event else { return }
        // What the child wrote last is in the pipe; one more read takes it (bounded: a grandchild that keeps
        // writing is not followed).
        readOnce()
        flushPartialLine(now: .now())
        event_free(event)
        self.event = nil
        Glibc.close(fd)
        loop.release(self)
    }

    fileprivate func readableEvent() {
        loop.readContext.callbackBegins()
        readable()
    }

    private func readable() {
        if !readOnce() { drainAndClose() }
    }

    /// Reads what is waiting now (one read, as the loop would), unless the pipe is closed.
    func deliverPending() {
        guard event != nil else { return }
        readable()
    }
}

private func childExited(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<ChildProcess>.fromOpaque(context!).takeUnretainedValue().exited()
}

private func outputReadable(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<OutputPipe>.fromOpaque(context!).takeUnretainedValue().readableEvent()
}

extension ChildProcess: LoopSource {
    var closeRank: Int { 1 }
    func closeForLoopShutdown() { close() }
}
