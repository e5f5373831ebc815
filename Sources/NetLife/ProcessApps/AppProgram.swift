// The program of a process app (docs/process-apps.md), as its App drives it: an ordinary Linux program that
// netlifed starts with the app's listeners (socket activation), holds in a cgroup of its own, freezes while
// the app is suspended, and, if the program speaks the lifecycle protocol (NETLIFE_EVENTS), tells each stage
// of a transition and waits for its answer as it waits for a hook. ProcessProgram, beside it, implements it
// (cgroups, the protocol's codec, /proc and pidfd_getfd); App only decides when, and its pipeline's
// watchdog is the one deadline of a stage.

@preconcurrency import Glibc
import NetLifeEvent

/// The listeners' hint in a stage's event: a program that speaks the protocol stops polling listeners that
/// were shut down (their epoll reports EPOLLHUP without pause) and polls them again once they listen.
public enum ListenerHint: String, Sendable {
    case stopPolling = "stop-polling"
    case resumePolling = "resume-polling"
}

/// A process app's program, as its App drives it. Loop thread only.
public protocol AppProgram: AnyObject {
    /// Told when the program ends without being asked to (`stop()` and `kill()` report nothing); set by the App.
    var onExit: ((ChildExitStatus) -> Void)? { get set }
    /// Told what the current run says on its NOTIFY_SOCKET, and when its watchdog (`watchdog`) runs out; set by
    /// the App. After `stop()` only STOPPING=1 is told (until the run exits); nothing after `kill()`.
    var onNotify: ((ProgramNotifyState.Action) -> Void)? { get set }
    /// Told when `speaksProtocol` changes (the program said hello, or its channel closed); set by the App,
    /// whose lifecycle freezes a silent program at once in the background but lets one that speaks the
    /// protocol, told to stop polling, follow auto-suspend.
    var onProtocolChange: (() -> Void)? { get set }
    /// The app's background tasks as the program's requests reach them (begin, end, which are its own);
    /// set by the App. A task's expiration is told to the program (`taskExpiring`).
    var tasks: ProgramTasks { get set }
    /// Whether the program runs (started and not yet seen to exit).
    var isRunning: Bool { get }
    /// Whether nothing of it is left: no process, and its cgroup removed (the daemon waits for this before
    /// it exits).
    var isGone: Bool { get }
    /// Whether the program has said hello on the protocol: its stages are then awaited.
    var speaksProtocol: Bool { get }
    /// Calls `done` once nothing of an earlier run of the program is left, and returns true, when one is
    /// still ending (asked to stop and within its grace, or its cgroup still emptying); returns false, and
    /// never calls `done`, when none is. `done` is not called after `stop()` or `kill()`. A launch waits for
    /// this before `start`, so that the new run never shares its listeners with the old one.
    func afterEarlierRunsEnd(_ done: @escaping () -> Void) -> Bool
    /// Starts the program with `listeners` (name and netlifed's descriptor, in order) at descriptors 3, 4, ...
    func start(listeners: [(name: String, fd: CInt)]) throws(SystemError)
    /// Tells the program a stage of a transition. Returns true when an answer is awaited: `answered` is then
    /// called once it comes (never after `kill()` or `stop()`).
    func deliver(_ event: LifecycleEvent, budget: Duration, listeners: ListenerHint?, answered: @escaping () -> Void) -> Bool
    /// One of the program's tasks is about to expire: it should end it (the background time's grace is all
    /// it has left).
    func taskExpiring(_ id: BackgroundTaskIdentifier, budget: Duration)
    /// Freezes every process of the program (no code of it runs); `thaw()` undoes it.
    func freeze()
    func thaw()
    /// Asks the program to end (SIGTERM), and kills whatever is left of it after `grace`; stops waiting for
    /// earlier runs (`afterEarlierRunsEnd`).
    func stop(grace: Duration)
    /// Kills every process of the program now (the watchdog), earlier runs still ending included, and stops
    /// waiting for them.
    func kill()
    /// Resets the program's TCP connections (reclaim of a suspended app), except those it declared VoIP;
    /// returns how many were reset.
    func reclaimSockets() -> Int
    /// The listening sockets at `addresses` that the program's processes hold now (`adopt = yes`): every
    /// process of its cgroup is looked at, its main process first.
    func findListeners(at addresses: [SocketAddress]) throws(SystemError) -> [SocketAddress: [HeldListener]]
    /// A copy in netlifed of a socket `findListeners` found (`pidfd_getfd`).
    func take(_ listener: HeldListener) throws(SystemError) -> CInt
    /// How many TCP connections at one of `ports` (its `on-background = wake` listeners) the program's
    /// processes hold now.
    func servedConnections(ports: Set<UInt16>) -> Int
    /// What `status` shows.
    var status: ProgramStatus { get }
    /// What the program's processes have done so far (CPU time, bytes of their read and write calls), for
    /// idle detection; nil when it does not run.
    var activity: ProcessActivity? { get }
}

extension AppProgram {
    /// A program whose runs leave nothing behind once they exit has no earlier run to wait for.
    public func afterEarlierRunsEnd(_ done: @escaping () -> Void) -> Bool { false }
    /// A program that binds nothing itself has no listener to adopt.
    public func findListeners(at addresses: [SocketAddress]) throws(SystemError) -> [SocketAddress: [HeldListener]] { [:] }
    public func take(_ listener: HeldListener) throws(SystemError) -> CInt { throw SystemError("pidfd_getfd", Errno(rawValue: ESRCH)) }
    /// A program that serves no connection of its own has none to count.
    public func servedConnections(ports: Set<UInt16>) -> Int { 0 }
    /// A program that says nothing of its processes is never seen at work.
    public var activity: ProcessActivity? { nil }
}
