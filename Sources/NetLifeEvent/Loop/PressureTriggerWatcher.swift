// A kernel pressure trigger (PSI) watched on the loop: a pressure file (a cgroup's `memory.pressure`, or
// /proc/pressure/memory) opened for reading and writing without blocking, a trigger such as `some 150000
// 2000000` (stall and window in microseconds) written to it, and each time the kernel sees that much stall
// within a window, one call of the handler, on the loop thread. The kernel raises at most one event per window,
// and only while the stall goes on.
//
// The trigger signals with POLLPRI, which libevent 2.1 has no event for (its descriptor also polls readable
// and writable at all times, so a read event would fire without end). A private epoll instance watches it for
// EPOLLPRI alone, and libevent watches the instance for reading (shim.h: netlife_priority_watch): measured on a
// hybrid host, a trigger `some 100000 2000000` on a 32 MiB cgroup churning its page cache fired twice in 20 s,
// 2 s apart, and an idle one never. A trigger whose cgroup is removed reports an error at every poll: the
// watcher then stops watching and says so once (`gone`), rather than spinning.

@preconcurrency import Glibc
internal import CLibevent

/// Calls a handler on the loop thread each time a kernel pressure trigger fires.
///
/// The watcher owns the pressure file's descriptor and the epoll instance; `close()` closes both, which
/// removes the trigger from the kernel. Closing it again does nothing.
public final class PressureTriggerWatcher {
    /// What happened to the trigger.
    public enum Event: Equatable, Sendable {
        /// The stall passed the trigger's threshold within its window.
        case fired
        /// The pressure file went away (its cgroup was removed): the trigger will never fire again, and the
        /// watcher has stopped watching.
        case gone
    }

    /// The step of arming that failed.
    public enum Step: String, Sendable {
        /// Opening the pressure file for reading and writing.
        case open
        /// Writing the trigger: the kernel checks it here.
        case write
        /// Watching the trigger (the epoll instance, libevent).
        case watch
    }

    /// Why a trigger could not be armed: the step, the file, what was written and the errno.
    public struct ArmError: Error, Equatable, Sendable, CustomStringConvertible {
        public var step: Step
        public var path: String
        /// The trigger as written (without its terminating NUL).
        public var trigger: String
        public var errno: Errno

        public init(step: Step, path: String, trigger: String, errno: Errno) {
            self.step = step
            self.path = path
            self.trigger = trigger
            self.errno = errno
        }

        public var description: String {
            switch step {
            case .open: "open \(path): \(errno)"
            case .write: "write '\(trigger)' to \(path): \(errno)"
            case .watch: "watch \(path): \(errno)"
            }
        }
    }

    /// The pressure file.
    public let path: String
    /// The trigger written to it.
    public let trigger: String
    private var file: FileDescriptor?
    private var instance: FileDescriptor?
    /// The epoll instance's descriptor, while `instance` owns it.
    private var instanceDescriptor: CInt = -1
    private var watcher: IOWatcher?
    private let handler: (Event) -> Void

    /// Arms `trigger` (`some|full STALL_US WINDOW_US`) on the pressure file at `path` and watches it.
    /// The corresponding C functions are `open`, `write`, `epoll_create1` and `epoll_ctl`.
    public init(loop: EventLoop, path: String, trigger: String, _ handler: @escaping (Event) -> Void) throws(ArmError) {
        loop.assertInLoop()
        self.path = path
        self.trigger = trigger
        self.handler = handler
        let file = try Self.arm(path: path, trigger: trigger)
        let refused = { (error: SystemError) in ArmError(step: .watch, path: path, trigger: trigger, errno: error.errno) }
        let fd = file.rawValue
        let instance: FileDescriptor
        do {
            instance = FileDescriptor(owning: try sys("epoll_create1") { netlife_priority_watch(fd) }, name: "epoll of \(path)")
        } catch {
            throw refused(error)
        }
        instanceDescriptor = instance.rawValue
        let watcher = IOWatcher(loop: loop, descriptor: instance.rawValue) { [weak self] _ in self?.fired() }
        do {
            try watcher.watch(.readable)
        } catch {
            watcher.close()
            throw refused(error)
        }
        self.file = consume file
        self.instance = consume instance
        self.watcher = watcher
    }

    /// Opens the pressure file and writes the trigger, as the watcher's init does, then closes it (which
    /// removes the trigger): whether the kernel takes this trigger from this process, without watching it.
    public static func check(path: String, trigger: String) throws(ArmError) {
        let file = try arm(path: path, trigger: trigger)
        _ = try? file.close()
    }

    private static func arm(path: String, trigger: String) throws(ArmError) -> FileDescriptor {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(path, .readWrite, options: .nonBlocking)
        } catch {
            throw ArmError(step: .open, path: path, trigger: trigger, errno: error.errno)
        }
        // With its terminating NUL: the kernel copies what is written and puts a NUL on its last byte, so a
        // trigger written without one loses its last digit (a window of 2000000 would be read as 200000).
        let bytes = Array(trigger.utf8) + [0]
        do throws(SystemError) {
            let written = try file.write(bytes)
            guard written == bytes.count else { throw SystemError("write \(path)", Errno(rawValue: EIO)) }
        } catch {
            throw ArmError(step: .write, path: path, trigger: trigger, errno: error.errno)
        }
        return file
    }

    /// Whether the trigger is still watched (not closed, and its file not gone).
    public var isWatching: Bool { watcher != nil }

    /// Stops watching and closes the file, which removes the trigger. Calling it again does nothing.
    public func close() {
        watcher?.close()
        watcher = nil
        instance = nil
        instanceDescriptor = -1
        file = nil
    }

    private func fired() {
        let descriptor = instanceDescriptor
        guard descriptor >= 0 else { return }
        let gone: Bool
        do {
            gone = try sys("epoll_wait") { netlife_priority_watch_take(descriptor) } == 1
        } catch {
            // Only a bug (a closed instance) makes epoll_wait fail without waiting: count it as the event.
            gone = false
        }
        if gone {
            close()
            handler(.gone)
        } else {
            handler(.fired)
        }
    }

    /// The text of a pressure file now: its `some` and `full` lines. The corresponding C functions are `open`
    /// and `read`.
    public static func read(_ path: String) throws(SystemError) -> String {
        String(decoding: try KernelFile.read(path, limit: 4096), as: UTF8.self)
    }

    /// Whether this process holds CAP_SYS_RESOURCE now (its effective set, from /proc/self/status), or nil
    /// when that cannot be read. Without it, Linux 6.5 and later take only triggers whose window is a multiple
    /// of 2 s, and earlier kernels none on /proc/pressure.
    public static func holdsSysResource() -> Bool? {
        guard let text = try? KernelFile.read("/proc/self/status", limit: 1 << 16),
              let field = KernelFile.field("CapEff", in: String(decoding: text, as: UTF8.self)),
              let mask = UInt64(field, radix: 16) else { return nil }
        return mask & (1 << 24) != 0
    }
}
