// Child processes watched through the loop: spawned with posix_spawn in their own process group, their
// exit seen through a pidfd (no SIGCHLD handler, no blocked thread), their stdout and stderr read line by
// line through pipe events.

@preconcurrency import Glibc
internal import CLibevent

/// How a child process ended.
public enum ChildExitStatus: Equatable, Sendable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    public var description: String {
        switch self {
        case .exited(let code): return "exit status \(code)"
        case .signaled(let signal): return "killed by signal \(signal)"
        }
    }

    /// Whether the process exited with status 0.
    public var isSuccess: Bool { self == .exited(0) }
}

/// A spawned process, its exit and its output observed on the loop.
public final class ChildProcess {
    private unowned let loop: EventLoop
    /// The process id; also its process group id.
    public let pid: Int32
    private let pidfd: CInt
    private var exitEvent: OpaquePointer?
    private var outputs: [OutputPipe] = []
    private let onExit: (ChildExitStatus) -> Void
    /// The exit status, once the process has ended.
    public private(set) var exitStatus: ChildExitStatus?

    /// Spawns `arguments[0]` (looked up in PATH) with `arguments` and exactly `environment`, stdin from
    /// /dev/null, in a new process group, with an empty signal mask and default signal dispositions.
    ///
    /// - Parameters:
    ///   - onOutputLine: each line the child writes to stdout or stderr, without its newline.
    ///   - onExit: called once when the child has exited, after its pending output has been delivered.
    /// The corresponding C functions are `posix_spawnp` and `pidfd_open`.
    public init(loop: EventLoop, arguments: [String], environment: [String: String],
                onOutputLine: @escaping (String) -> Void,
                onExit: @escaping (ChildExitStatus) -> Void) throws(SystemError) {
        precondition(!arguments.isEmpty, "ChildProcess needs a program")
        loop.assertInLoop()
        self.loop = loop
        self.onExit = onExit

        var stdoutPipe: [CInt] = [-1, -1]
        var stderrPipe: [CInt] = [-1, -1]
        try sys("pipe2") { netlife_pipe2(&stdoutPipe, O_CLOEXEC | O_NONBLOCK) }
        do throws(SystemError) {
            try sys("pipe2") { netlife_pipe2(&stderrPipe, O_CLOEXEC | O_NONBLOCK) }
        } catch {
            Glibc.close(stdoutPipe[0]); Glibc.close(stdoutPipe[1])
            throw error
        }
        defer { Glibc.close(stdoutPipe[1]); Glibc.close(stderrPipe[1]) }

        let spawned: pid_t
        do {
            spawned = try Self.spawn(arguments: arguments, environment: environment,
                                     stdout: stdoutPipe[1], stderr: stderrPipe[1])
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
        outputs = [OutputPipe(loop: loop, fd: stdoutPipe[0], onLine: onOutputLine),
                   OutputPipe(loop: loop, fd: stderrPipe[0], onLine: onOutputLine)]
        loop.retain(self)
    }

    private static func spawn(arguments: [String], environment: [String: String], stdout: CInt, stderr: CInt) throws(SystemError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)

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

    /// Sends `signal` to the child's whole process group (the child and what it started).
    public func signalGroup(_ signal: CInt) {
        guard exitStatus == nil || signal == SIGKILL else { return }
        kill(-pid, signal)
    }

    fileprivate func reap() {
        var status: CInt = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return }
        finish((status & 0x7f) == 0 ? .exited((status >> 8) & 0xff) : .signaled(status & 0x7f))
        onExit(exitStatus!)
    }

    /// Stops watching the child (it is killed first if it still runs) and reaps it; `onExit` is not called.
    public func close() {
        guard exitStatus == nil else { return }
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
        loop.release(self)
    }
}

/// One pipe from a child, read line by line.
private final class OutputPipe {
    private let fd: CInt
    private var event: OpaquePointer?
    private var pending: [UInt8] = []
    private let onLine: (String) -> Void
    private unowned let loop: EventLoop

    init(loop: EventLoop, fd: CInt, onLine: @escaping (String) -> Void) {
        self.loop = loop
        self.fd = fd
        self.onLine = onLine
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = try! libevent("event_new") { event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), outputReadable, context) }
        libeventMustSucceed("event_add") { event_add(event!, nil) }
        loop.retain(self)
    }

    /// Reads what is available; returns false at end of file or on error.
    @discardableResult
    func readAvailable() -> Bool {
        let scratch = loop.readScratch
        while true {
            let count = read(fd, scratch.baseAddress, scratch.count)
            if count > 0 {
                pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[0..<count]))
                emitLines()
                // Keep a runaway line from growing without bound.
                if pending.count > 8192 { flushPartialLine() }
                continue
            }
            if count == -1 && (errno == EAGAIN || errno == EINTR) { return true }
            return false
        }
    }

    private func emitLines() {
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            onLine(String(decoding: pending[..<newline], as: UTF8.self))
            pending.removeSubrange(...newline)
        }
    }

    private func flushPartialLine() {
        if !pending.isEmpty { onLine(String(decoding: pending, as: UTF8.self)) }
        pending.removeAll()
    }

    func drainAndClose() {
        guard let event else { return }
        readAvailable()
        flushPartialLine()
        event_free(event)
        self.event = nil
        Glibc.close(fd)
        loop.release(self)
    }

    fileprivate func readable() {
        if !readAvailable() { drainAndClose() }
    }
}

private func childExited(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<ChildProcess>.fromOpaque(context!).takeUnretainedValue().reap()
}

private func outputReadable(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<OutputPipe>.fromOpaque(context!).takeUnretainedValue().readable()
}
