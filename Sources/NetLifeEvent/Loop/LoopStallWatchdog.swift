// The event loop's own watchdog: a heartbeat timer on the loop records when the loop last turned, and a
// separate thread checks that it keeps turning. If the loop stalls for longer than the threshold (a
// callback that blocks), the thread calls the stall handler, which reports and aborts the process so that a
// supervisor (systemd) restarts it.
//
// One thread serves the daemon's whole lifetime: a reload that changes `loop-stall` changes the threshold
// in place (an atomic), and the thread, woken through an eventfd, takes it at once. `stop()` wakes the
// thread through the same eventfd and joins it, so a stopped watchdog leaves no thread behind.

@preconcurrency import Glibc
internal import CLibevent
import Synchronization

/// The watchdog's arithmetic, apart from threads and clocks.
public enum StallPolicy {
    /// How often the watching thread looks: a tenth of the threshold, at least every 10 ms.
    public static func pollInterval(threshold: Duration) -> Duration {
        max(threshold / 10, .milliseconds(10))
    }

    /// How often the heartbeat records a turn of the loop: a quarter of the threshold.
    public static func heartbeatInterval(threshold: Duration) -> Duration {
        threshold / 4
    }

    /// How long the loop has been stalled at `now` if that is longer than `threshold`, else nil.
    public static func stall(now: MonotonicTime, lastBeat: MonotonicTime, threshold: Duration) -> Duration? {
        let stalled = now - lastBeat
        return stalled > threshold ? stalled : nil
    }
}

/// Watches an event loop from another thread.
public final class LoopStallWatchdog: Sendable {
    private let thresholdNanoseconds: Atomic<Int64>
    private let lastBeat = Atomic<UInt64>(0)
    private let stopping = Atomic<Bool>(false)
    /// Wakes the watching thread: a new threshold, or stop.
    private let wakeFD: CInt
    private let onStall: @Sendable (_ stalled: Duration, _ threshold: Duration) -> Void
    // Touched on the loop thread only (start, threshold changes, heartbeat, stop).
    nonisolated(unsafe) private var heartbeat: EventTimer?
    nonisolated(unsafe) private var thread: pthread_t?

    /// - Parameters:
    ///   - threshold: how long the loop may go without turning.
    ///   - onStall: called on the watchdog thread with how long the loop has been stalled and the threshold
    ///     it passed. It should not return (it aborts); if it does, the watchdog keeps watching. It must
    ///     touch nothing the loop thread owns.
    public init(threshold: Duration, onStall: @escaping @Sendable (_ stalled: Duration, _ threshold: Duration) -> Void) {
        thresholdNanoseconds = Atomic(threshold.nanoseconds)
        self.onStall = onStall
        wakeFD = eventfd(0, CInt(EFD_NONBLOCK | EFD_CLOEXEC))
        precondition(wakeFD >= 0, "eventfd failed: errno \(errno)")
    }

    deinit {
        Glibc.close(wakeFD)
    }

    /// The current threshold. Setting it (loop thread) takes effect at once, on the heartbeat and on the
    /// watching thread; no thread is added.
    public var threshold: Duration {
        get { .nanoseconds(thresholdNanoseconds.load(ordering: .relaxed)) }
        set {
            // A fresh beat first, so that a lower threshold does not judge the time before the change.
            beat()
            thresholdNanoseconds.store(newValue.nanoseconds, ordering: .relaxed)
            heartbeat?.arm(after: StallPolicy.heartbeatInterval(threshold: newValue))
            wakeThread()
        }
    }

    /// Whether the watching thread runs.
    public var isRunning: Bool { thread != nil }

    /// The loop turned: called by the heartbeat, and by nested restricted-mode runs.
    public func beat() {
        lastBeat.store(MonotonicTime.now().nanoseconds, ordering: .relaxed)
    }

    /// Starts the heartbeat on `loop` (loop thread) and the watching thread. Does nothing if it runs.
    public func start(on loop: EventLoop) {
        guard thread == nil else { return }
        beat()
        let timer = EventTimer(loop: loop) { [weak self] in
            guard let self else { return }
            beat()
            heartbeat?.arm(after: StallPolicy.heartbeatInterval(threshold: threshold))
        }
        timer.arm(after: StallPolicy.heartbeatInterval(threshold: threshold))
        heartbeat = timer
        loop.stallWatchdog = self
        stopping.store(false, ordering: .releasing)
        let box = Unmanaged.passRetained(self)
        var created = pthread_t()
        let result = pthread_create(&created, nil, { context in
            let watchdog = Unmanaged<LoopStallWatchdog>.fromOpaque(context!).takeRetainedValue()
            watchdog.watch()
            return nil
        }, box.toOpaque())
        if result == 0 { thread = created } else { box.release() }
    }

    /// Stops watching (loop thread): the thread is woken and joined before this returns.
    public func stop() {
        heartbeat?.close()
        heartbeat = nil
        guard let thread else { return }
        stopping.store(true, ordering: .releasing)
        wakeThread()
        pthread_join(thread, nil)
        self.thread = nil
    }

    private func wakeThread() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private func watch() {
        while !stopping.load(ordering: .acquiring) {
            let threshold = self.threshold
            var poller = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            let timeout = CInt(clamping: max(1, StallPolicy.pollInterval(threshold: threshold).nanoseconds / 1_000_000))
            if poll(&poller, 1, timeout) > 0 {
                // A new threshold or stop: drain the eventfd and look again.
                var counter: UInt64 = 0
                _ = read(wakeFD, &counter, 8)
                continue
            }
            guard !stopping.load(ordering: .acquiring) else { break }
            let last = MonotonicTime(nanoseconds: lastBeat.load(ordering: .relaxed))
            if let stalled = StallPolicy.stall(now: MonotonicTime.now(), lastBeat: last, threshold: threshold) {
                onStall(stalled, threshold)
            }
        }
    }
}

extension Duration {
    /// The duration as a C `timespec`.
    public var timespec: Glibc.timespec {
        let ns = max(0, nanoseconds)
        return Glibc.timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
    }
}
