// The event loop's own watchdog: a heartbeat timer on the loop records when the loop last turned, and a
// separate thread checks that it keeps turning. If the loop stalls for longer than the threshold (a
// callback that blocks), the thread calls the stall handler, which reports and aborts the process so that a
// supervisor (systemd) restarts it.

@preconcurrency import Glibc
import Synchronization

/// Watches an event loop from another thread.
public final class LoopStallWatchdog: Sendable {
    private let threshold: Duration
    private let lastBeat = Atomic<UInt64>(0)
    private let running = Atomic<Bool>(false)
    private let onStall: @Sendable (Duration) -> Void
    nonisolated(unsafe) private var heartbeat: EventTimer?

    /// - Parameters:
    ///   - threshold: how long the loop may go without turning.
    ///   - onStall: called on the watchdog thread with how long the loop has been stalled. It should not
    ///     return (it aborts); if it does, the watchdog keeps watching.
    public init(threshold: Duration, onStall: @escaping @Sendable (Duration) -> Void) {
        self.threshold = threshold
        self.onStall = onStall
    }

    /// The loop turned: called by the heartbeat, and by nested restricted-mode runs.
    public func beat() {
        lastBeat.store(MonotonicTime.now().nanoseconds, ordering: .relaxed)
    }

    /// Starts the heartbeat on `loop` (loop thread) and the watching thread.
    public func start(on loop: EventLoop) {
        beat()
        let interval = threshold / 4
        let timer = EventTimer(loop: loop) { [unowned self] in
            beat()
            heartbeat?.arm(after: interval)
        }
        timer.arm(after: interval)
        heartbeat = timer
        loop.stallWatchdog = self
        running.store(true, ordering: .relaxed)
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { context in
            let watchdog = Unmanaged<LoopStallWatchdog>.fromOpaque(context!).takeRetainedValue()
            watchdog.watch()
            return nil
        }, box.toOpaque())
        if created == 0 { pthread_detach(thread) } else { box.release() }
    }

    /// Stops watching (loop thread).
    public func stop() {
        running.store(false, ordering: .relaxed)
        heartbeat?.close()
        heartbeat = nil
    }

    private func watch() {
        let poll = max(threshold / 10, .milliseconds(10))
        while running.load(ordering: .relaxed) {
            var sleep = poll.timespec
            nanosleep(&sleep, nil)
            let stalled = MonotonicTime.now() - MonotonicTime(nanoseconds: lastBeat.load(ordering: .relaxed))
            if stalled > threshold && running.load(ordering: .relaxed) {
                onStall(stalled)
            }
        }
    }
}

extension Duration {
    /// The duration as a C `timespec`.
    public var timespec: timespec {
        let ns = max(0, nanoseconds)
        return Glibc.timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
    }
}
