#if canImport(Testing)   // built only for the tests: see Package.swift
// One way to start a helper program from a test and to know when it has ended: posix_spawn into a process
// group of its own, and waitpid on its pid.
//
// Foundation's Process is not used for this: on Linux it learns of a child's end from a socket the child
// inherits, so a grandchild that outlives its parent (a `swift build` left behind by a killed script, a
// server's worker) keeps `isRunning` true and `waitUntilExit()` waiting for ever, and a run's time limit
// can only kill the child, not what it started. Here a time limit kills the whole group.

import Foundation

/// A program started with `spawn`, in a process group of its own (its pid is the group's id).
public final class SpawnedProgram: @unchecked Sendable {
    /// The program's pid, and its process group's id.
    public let pid: pid_t
    private let lock = NSLock()
    private var ended: Int32?

    /// Starts `arguments[0]` (a path) with stdin from /dev/null, stdout appended to the file `output` and
    /// stderr to `errors` (or `output` too), with an empty signal mask, default signal dispositions, in a
    /// new process group, and no other descriptor of the test process. `environment` replaces the test
    /// process's own. Throws `TestFailure` when the program cannot be started.
    public init(_ arguments: [String], output: String, errors: String? = nil, environment: [String: String]? = nil) throws {
        guard let executable = arguments.first else { throw TestFailure("spawn: no program given") }
        func openForAppend(_ path: String) throws -> CInt {
            let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw TestFailure("open(\(path)): \(String(cString: strerror(errno)))") }
            return fd
        }
        let outputFD = try openForAppend(output)
        defer { close(outputFD) }
        let errorsFD = try errors.map(openForAppend) ?? outputFD
        defer { if errorsFD != outputFD { close(errorsFD) } }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 1)
        posix_spawn_file_actions_adddup2(&actions, errorsFD, 2)
        // Descriptors other tests opened without O_CLOEXEC (a peer's socket) must not live on in the program.
        // glibc declares posix_spawn_file_actions_addclosefrom_np only for _GNU_SOURCE, which Swift's Glibc
        // module does not define, so it is looked up by name.
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, CInt) -> CInt
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            throw TestFailure("posix_spawn_file_actions_addclosefrom_np is missing (glibc 2.34 or later needed)")
        }
        guard unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3) == 0 else {
            throw TestFailure("posix_spawn_file_actions_addclosefrom_np failed")
        }

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

        let variables = environment ?? ProcessInfo.processInfo.environment
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = variables.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw TestFailure("cannot run \(executable): \(String(cString: strerror(result)))") }
        self.pid = pid
    }

    /// How the program ended, once it has, as Foundation's `terminationStatus` says it: the exit status, or
    /// the number of the signal that ended it. Nil while it runs. Reaps it.
    public var status: Int32? {
        lock.withLock {
            if ended == nil {
                var raw: CInt = 0
                if waitpid(pid, &raw, WNOHANG) == pid { ended = Self.terminationStatus(raw) }
            }
            return ended
        }
    }

    /// Whether the program still runs.
    public var isRunning: Bool { status == nil }

    /// Sends `signal` to the program (not to its group).
    public func signal(_ signal: Int32) { kill(pid, signal) }

    /// Waits for the program's end, polling every 2 ms. After `timeout`: SIGTERM to its whole group, then,
    /// once the program has ended or 100 ms later, SIGKILL to what is left of the group. Returns its status
    /// and whether the time ran out. Never waits much longer than `timeout`: what the program started and
    /// left running does not hold it.
    public func wait(timeout: TimeInterval) -> (status: Int32, timedOut: Bool) {
        if waitUntil(timeout: timeout, every: 0.002, { !isRunning }), let status { return (status, false) }
        return end(signallingGroup: true, grace: 0.1)
    }

    /// Ends the program now: SIGTERM to it (to its whole group with `signallingGroup`), then, once it has
    /// ended or `grace` later, SIGKILL to it and to what is left of its group, and reaps it. Returns its
    /// status, and whether it was still running.
    @discardableResult
    public func end(signallingGroup: Bool = false, grace: TimeInterval) -> (status: Int32, timedOut: Bool) {
        lock.withLock {
            if let ended { return (ended, false) }
            kill(signallingGroup ? -pid : pid, SIGTERM)
            // A zombie until reaped below: its pid, the group's id, cannot be reused before the SIGKILL.
            waitUntil(timeout: grace, every: 0.002) { processIsGone(pid) }
            kill(pid, SIGKILL)
            kill(-pid, SIGKILL)
            var raw: CInt = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            let status = Self.terminationStatus(raw)
            ended = status
            return (status, true)
        }
    }

    private static func terminationStatus(_ raw: CInt) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : signal
    }
}
#endif
