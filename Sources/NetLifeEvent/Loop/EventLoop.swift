// The event loop: one libevent `event_base`, driven by one thread.
//
// Everything in netlife runs on the loop thread. Objects registered with the loop (timers, signal
// watchers, listeners, connections, child processes) are kept alive by the loop's owner table from the
// moment they register until their explicit `close()`; C callbacks receive them as unretained pointers.
// A connection is kept until the callback that closed it has returned, so that its read and write callbacks
// need no reference of their own.
// Another thread talks to the loop only through a `Waker`. `EventLoop.close()` closes whatever is still
// registered, so that nothing the loop kept alive outlives it (a registered source's closures usually reach
// the loop's owner, which holds the loop: a reference cycle that only closing breaks).

@preconcurrency import Glibc
internal import CLibevent

/// A libevent event loop. Create it, register sources, then call `run()` on the thread that owns it.
public final class EventLoop {
    let base: OpaquePointer
    /// The objects the loop keeps alive, each at the index its `loopSlot` holds; `nil` where one was released.
    /// Freed indices are reused, so that keeping and releasing cost no hashing (1,000 listeners close at once).
    private var owners: [LoopOwned?] = []
    private var freeSlots: [Int32] = []
    /// Objects released since the reaper last ran, kept until the callback that released them has returned.
    private var released: [AnyObject] = []
    /// An event activated when `released` gains its first object; it runs after the current callback.
    private var reaper: OpaquePointer?
    private var ownerThread: pthread_t
    private var stopRequested = false
    /// The stall watchdog, told about turns of nested restricted-mode runs.
    var stallWatchdog: LoopStallWatchdog?
    /// The base of restricted-mode runs, made on first use.
    private var restrictedBase: OpaquePointer?
    /// A timer on the restricted base that bounds each of its turns.
    private var restrictedTick: OpaquePointer?
    /// The scratch area and the control connections looked at between ordinary callbacks.
    let readContext: ReadContext
    /// Whether a restricted-mode run is in progress (they do not nest).
    public private(set) var isRunningRestricted = false
    /// A test's clock (`init(manualClockAt:)`); nil: the system's monotonic clock.
    let manualClock: ManualClock?
    /// How long the turns of `run()` took, counted by duration (`LoopTurnTimes`), while `measuresTurnTimes`.
    public private(set) var turnTimes = LoopTurnTimes()
    /// Whether `run()` times its turns (`/metrics` asks for it; set before `run()`). Timing costs an entry into
    /// libevent and two clock reads per turn: a 10-connection ping-pong took 654 instructions per message with
    /// it, 623 without (callgrind, `Benchmarks/profile pingpong`).
    public var measuresTurnTimes = false

    /// The loop's time: the monotonic clock's, or a manual clock's. Shells take their deadlines from it.
    public var now: MonotonicTime { manualClock?.now ?? MonotonicTime.now() }

    /// Creates a loop whose time starts at `start` and moves only with `advance(by:)`: its timers fire there,
    /// not on the system clock (a test's loop).
    public convenience init(manualClockAt start: MonotonicTime) throws(SystemError) {
        try self.init(clock: ManualClock(now: start))
    }

    /// Creates the loop. The corresponding C function is `event_base_new_with_config`.
    public convenience init() throws(SystemError) {
        try self.init(clock: nil)
    }

    /// The most normal-priority callbacks one dispatch runs before libevent polls again (the control socket's
    /// are not counted, and run first).
    static let dispatchBatch: Int32 = 64

    /// The 64 KiB scratch area of `readContext`.
    var readScratch: UnsafeMutableRawBufferPointer { readContext.scratch }

    private init(clock: ManualClock?) throws(SystemError) {
        manualClock = clock
        let config = event_config_new()
        defer { event_config_free(config) }
        // No libevent locks: only the loop thread touches the base. No EVENT_BASE_FLAG_PRECISE_TIMER: with it,
        // libevent's epoll backend re-arms a timerfd (timerfd_settime) on every loop turn, a fourth system
        // call per message where an echo makes three (epoll_wait, read, writev). Without it the loop's clock
        // is CLOCK_MONOTONIC_COARSE (4 ms ticks) and epoll waits in whole milliseconds; `EventTimer` checks
        // its deadline on the precise clock, so a timer is late by at most a few milliseconds and never early.
        _ = event_config_set_flag(config, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue))
        // Bounded turns: libevent runs every ready callback of a priority before it polls again, so a control
        // request that arrives while 1,000 busy connections are served waited for all of them (status p99
        // 4.6 to 7 ms with 4 KB in flight on each). After `dispatchBatch` normal callbacks it polls again,
        // and a ready control callback runs first; control callbacks themselves are not limited.
        var noInterval = timeval(tv_sec: -1, tv_usec: 0)
        _ = event_config_set_max_dispatch_interval(config, &noInterval, Self.dispatchBatch, EventPriority.normal.rawValue)
        let base = try libevent("event_base_new_with_config") { event_base_new_with_config(config) }
        // Two priorities: the control socket before everything else (`EventPriority`).
        do {
            try libevent("event_base_priority_init") { event_base_priority_init(base, 2) }
        } catch {
            event_base_free(base)
            throw error
        }
        self.base = base
        readContext = ReadContext(base: base)
        ownerThread = pthread_self()
        do {
            reaper = try libevent("event_new") {
                event_new(base, -1, 0, loopReaperFired, Unmanaged.passUnretained(self).toOpaque())
            }
            readContext.nextTurnTimer = try libevent("evtimer_new") {
                netlife_evtimer_new(base, readContextNextTurn, Unmanaged.passUnretained(readContext).toOpaque())
            }
        } catch {
            if let reaper { event_free(reaper) }
            event_base_free(base)
            throw error
        }
    }

    /// Runs the loop until `stop()` is called. The calling thread becomes the loop thread.
    /// The corresponding C function is `event_base_loop`.
    public func run() throws(SystemError) {
        ownerThread = pthread_self()
        stopRequested = false
        // Callbacks run outside `run()` (a manual clock's timers, `runOnce()`) began no turn of it.
        readContext.turnStartedAt = 0
        while !stopRequested {
            guard measuresTurnTimes else {
                try libevent("event_base_loop") { event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY) }
                if event_base_got_break(base) != 0 { break }
                continue
            }
            // One turn per call (EVLOOP_ONCE: wait, then run the callbacks until none is active), so that the
            // turn can be timed here: from its first callback (`ReadContext.callbackBegins`) to now.
            try libevent("event_base_loop") { event_base_loop(base, EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY) }
            let started = readContext.turnStartedAt
            if started != 0 {
                readContext.turnStartedAt = 0
                let now = MonotonicTime.now().nanoseconds
                turnTimes.record(nanoseconds: now &- min(now, started))
            }
            if event_base_got_break(base) != 0 { break }
        }
    }

    /// Makes `run()` return after the callback that is running now. Loop thread only.
    public func stop() {
        assertInLoop()
        stopRequested = true
        event_base_loopbreak(base)
    }

    /// Whether the caller runs on the loop thread.
    public var isInLoopThread: Bool { pthread_equal(ownerThread, pthread_self()) != 0 }

    /// Traps in debug builds when called off the loop thread.
    public func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(isInLoopThread, "called off the event loop thread", file: file, line: line)
    }

    /// Keeps `object` alive until `release(_:)`, while libevent holds an unretained pointer to it. Keeping an
    /// object that is kept already does nothing.
    func retain(_ object: LoopOwned) {
        guard object.loopSlot < 0 else { return }
        if let slot = freeSlots.popLast() {
            owners[Int(slot)] = object
            object.loopSlot = slot
        } else {
            object.loopSlot = Int32(owners.count)
            owners.append(object)
        }
    }

    /// Ends what `retain(_:)` began. The object's deinit, if this was its last reference, runs after the
    /// table is updated.
    func release(_ object: LoopOwned) {
        _ = unkeep(object)
    }

    /// Ends what `retain(_:)` began once the running callback has returned, so that a callback holding no
    /// reference of its own (`Connection`'s) may go on after its object closed inside it. Only for objects
    /// that do not refer to the loop: the loop lets them go at its next turn, or when it closes.
    func releaseAfterCallback(_ object: LoopOwned) {
        guard let kept = unkeep(object) else { return }
        released.append(kept)
        if released.count == 1, let reaper { event_active(reaper, EV_TIMEOUT, 0) }
    }

    /// Takes `object` out of the table and returns the table's reference, if it was kept.
    private func unkeep(_ object: LoopOwned) -> LoopOwned? {
        let slot = object.loopSlot
        guard slot >= 0, Int(slot) < owners.count, owners[Int(slot)] === object else { return nil }
        object.loopSlot = -1
        freeSlots.append(slot)
        return owners[Int(slot)].take()
    }

    /// Drops the objects released before this callback. Their deinits may release others: those wait for the
    /// next run.
    fileprivate func reapReleased() {
        var dropped: [AnyObject] = []
        swap(&dropped, &released)
    }

    /// How many objects the loop keeps alive; tests use it to find leaks.
    public var registeredObjectCount: Int { owners.count - freeSlots.count }

    /// Whether `close()` has run.
    public private(set) var isClosed = false

    /// Closes every source still registered (connections and child processes first, then listeners,
    /// signal watchers, wakers and timers), then frees the base. Loop thread only, after `run()` returned.
    /// Calling it again does nothing. The corresponding C function is `event_base_free`.
    ///
    /// A source's `close()` may call its owner back (a connection's delegate), and such a callback may
    /// register or close other sources; those are closed too, in further passes.
    ///
    /// - Returns: the type names of the sources that were still registered, for a log line.
    @discardableResult
    public func close() -> [String] {
        guard !isClosed else { return [] }
        assertInLoop()
        var closed: [String] = []
        for _ in 0..<8 {
            let open = owners.compactMap { $0 as? LoopSource }.sorted { $0.closeRank < $1.closeRank }
            if open.isEmpty { break }
            for source in open where source.loopSlot >= 0 {
                closed.append(String(describing: type(of: source)))
                source.closeForLoopShutdown()
            }
        }
        // Anything left (it kept re-registering) is released with the loop.
        for case let object? in owners { object.loopSlot = -1 }
        owners.removeAll()
        freeSlots.removeAll()
        reapReleased()
        stallWatchdog = nil
        isClosed = true
        freeBases()
        return closed
    }

    private func freeBases() {
        if let reaper { event_free(reaper) }
        reaper = nil
        if let timer = readContext.nextTurnTimer { event_free(timer) }
        readContext.nextTurnTimer = nil
        if let restrictedTick { event_free(restrictedTick) }
        if let restrictedBase { event_base_free(restrictedBase) }
        restrictedTick = nil
        restrictedBase = nil
        event_base_free(base)
    }

    deinit {
        // A loop dropped without close() (unit tests): free what it owns. Sources still registered cannot be
        // closed here (they refer to the loop `unowned`); they are released with `owners`.
        if !isClosed { freeBases() }
    }

    // MARK: Restricted mode

    /// Runs a nested loop that serves only `connections` (the public form takes `Connection`s) (their reads and writes) until `condition` holds or
    /// `timeout` passes, like running a CFRunLoop in a private mode: no timer, no listener, no other
    /// connection and no signal of the main loop is served meanwhile, and the main loop is never re-entered.
    /// Returns whether `condition` holds.
    ///
    /// It blocks the loop thread for up to `timeout`; callers bound it by a budget.
    func runRestricted(serving connections: [any RestrictedModeServed], timeout: Duration, until condition: () -> Bool) -> Bool {
        assertInLoop()
        precondition(!isRunningRestricted, "restricted-mode runs do not nest")
        if condition() { return true }
        // The base cannot be made when descriptors or memory run out (a peer can use up descriptors): the run
        // then gives up at once, as at its timeout.
        guard let (base, tick) = makeRestrictedBase() else { return false }
        isRunningRestricted = true
        let served = connections.filter { $0.isOpen }
        for connection in served { connection.enterRestrictedMode(base: base) }
        let deadline = MonotonicTime.now() + timeout
        while !condition() {
            let left = deadline - MonotonicTime.now()
            guard left > .zero, served.contains(where: { $0.isOpen }) else { break }
            // Wake at least every 50 ms so that the condition is re-checked and the stall watchdog fed.
            var tv = min(left, .milliseconds(50)).timeval
            libeventMustSucceed("event_add") { event_add(tick, &tv) }
            event_base_loop(base, EVLOOP_ONCE)
            stallWatchdog?.beat()
        }
        event_del(tick)
        for connection in served { connection.leaveRestrictedMode() }
        isRunningRestricted = false
        return condition()
    }

    /// The restricted-mode base and its tick timer, made on first use; nil when they cannot be made.
    /// The corresponding C functions are `event_base_new_with_config` and `event_new`.
    private func makeRestrictedBase() -> (base: OpaquePointer, tick: OpaquePointer)? {
        if let restrictedBase, let restrictedTick { return (restrictedBase, restrictedTick) }
        let config = event_config_new()
        defer { event_config_free(config) }
        _ = event_config_set_flag(config, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue))
        guard let base = event_base_new_with_config(config) else { return nil }
        guard let tick = netlife_evtimer_new(base, { _, _, _ in }, nil) else {
            event_base_free(base)
            return nil
        }
        restrictedBase = base
        restrictedTick = tick
        return (base, tick)
    }
}

private func loopReaperFired(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let loop = Unmanaged<EventLoop>.fromOpaque(context).takeUnretainedValue()
    loop.readContext.callbackBegins()
    loop.reapReleased()
}

/// The order in which one loop turn runs its ready callbacks: every ready `control` callback runs before any
/// `normal` one.
public enum EventPriority: Int32, Sendable {
    /// The control socket: a request is served first even when every connection has bytes waiting.
    case control = 0
    /// Everything else (libevent's default on a base with two priorities).
    case normal = 1
}

/// An object the loop keeps alive while libevent holds an unretained pointer to it (`EventLoop.retain`).
protocol LoopOwned: AnyObject {
    /// Where the loop keeps it: an index into the loop's table, or -1 while it is not kept. Only the loop
    /// writes it; each conforming class stores it (`var loopSlot: Int32 = -1`).
    var loopSlot: Int32 { get set }
}

/// What a restricted-mode run serves (`runRestricted`): a connection, its events moved to the run's base.
protocol RestrictedModeServed: AnyObject {
    var isOpen: Bool { get }
    func enterRestrictedMode(base: OpaquePointer)
    func leaveRestrictedMode()
}

/// A source the loop can close when it shuts down.
protocol LoopSource: LoopOwned {
    /// Lower ranks close first: ends of I/O before the timers their closing may touch. Connections 0,
    /// children 1, listeners and descriptor watchers 2, signal watchers 3, wakers 4, timers 5 (each
    /// conformance is declared with its type).
    var closeRank: Int { get }
    func closeForLoopShutdown()
}

extension SignalWatcher: LoopSource {
    var closeRank: Int { 3 }
    func closeForLoopShutdown() { close() }
}

extension Waker: LoopSource {
    var closeRank: Int { 4 }
    func closeForLoopShutdown() { close() }
}

extension EventTimer: LoopSource {
    var closeRank: Int { 5 }
    func closeForLoopShutdown() { close() }
}
