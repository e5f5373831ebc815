// The only way another thread talks to the loop: it queues a closure and writes to an eventfd; the loop
// reads the eventfd and runs the queued closures on its own thread.

@preconcurrency import Glibc
internal import CLibevent

/// Runs closures on the loop thread on behalf of other threads.
public final class Waker: Sendable {
    private let fd: CInt
    private let queue = ThreadLock<Queue>(Queue())

    private struct Queue {
        var work: [@Sendable () -> Void] = []
        var isOpen = true
    }
    // Touched on the loop thread only (creation, callbacks, close).
    nonisolated(unsafe) private var event: OpaquePointer?
    nonisolated(unsafe) private unowned var loop: EventLoop
    /// Where the loop keeps this object (`LoopOwned`).
    nonisolated(unsafe) var loopSlot: Int32 = -1

    /// Creates a waker for `loop`. The corresponding C functions are `eventfd` and `event_new`.
    public init(loop: EventLoop) throws(SystemError) {
        loop.assertInLoop()
        self.loop = loop
        fd = try sys("eventfd") { eventfd(0, CInt(EFD_NONBLOCK | EFD_CLOEXEC)) }
        let context = Unmanaged.passUnretained(self).toOpaque()
        do {
            let event = try libevent("event_new") {
                event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), wakerFired, context)
            }
            self.event = event
            try libevent("event_add") { event_add(event, nil) }
        } catch {
            if let event { event_free(event) }
            Glibc.close(fd)
            throw error
        }
        loop.retain(self)
    }

    /// Queues `work` to run on the loop thread. Safe from any thread, including signal-free contexts.
    public func wake(_ work: @escaping @Sendable () -> Void) {
        // The write happens under the lock so that `close()` cannot close (and the kernel reuse) the fd
        // between the check and the write.
        queue.withLock { queue in
            guard queue.isOpen else { return }
            queue.work.append(work)
            var one: UInt64 = 1
            _ = write(fd, &one, 8)
        }
    }

    fileprivate func drain() {
        loop.readContext.callbackBegins()
        var counter: UInt64 = 0
        _ = read(fd, &counter, 8)
        let work = queue.withLock { queue -> [@Sendable () -> Void] in
            defer { queue.work.removeAll() }
            return queue.work
        }
        for item in work { item() }
    }

    /// Stops the waker. Closures queued later never run.
    public func close() {
        guard let event else { return }
        event_free(event)
        self.event = nil
        queue.withLock { queue in
            queue.isOpen = false
            Glibc.close(fd)
        }
        loop.release(self)
    }
}

private func wakerFired(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    Unmanaged<Waker>.fromOpaque(context!).takeUnretainedValue().drain()
}
