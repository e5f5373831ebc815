// The disk work of the transfers that waits on the disk: the fsync of a part before its record, the
// record's atomic write (write, fsync, rename, fsync of the directory), and the final fsync and rename of a
// finished part. On ext4 an fsync writes the dirty pages back in the calling thread: seconds per GiB that
// the event loop must not wait for (the https benchmark measured 1.1 to 1.8 s of a stalled loop per GiB
// downloaded, and `status` p99 over 30 ms). So they run in order on one serial queue of their own, and
// each one's result comes back to the loop through the loop's Waker. Appending to the part stays on the
// loop: a write() lands in the page cache.

import Dispatch
import NetLifeEvent

/// One serial queue for the transfers' fsyncs and renames, and the way back to the loop.
public final class TransferDisk: @unchecked Sendable {
    private let queue = DispatchQueue(label: "netlifed.transfer-disk")
    private let waker: Waker

    /// Made on the loop thread.
    public init(loop: EventLoop) throws(SystemError) {
        waker = try Waker(loop: loop)
    }

    /// Runs `work` on the disk queue, after everything queued before it, and `done` with what it threw (nil
    /// when nothing) on the loop.
    public func run(_ work: @escaping @Sendable () throws(SystemError) -> Void, done: @escaping (SystemError?) -> Void) {
        let box = LoopOnly(done)
        let waker = self.waker
        queue.async {
            let error = SystemError.catching(work)
            waker.wake { box.value(error) }
        }
    }

    /// Waits until the work queued so far is done (the daemon's exit: the last records reach the disk).
    public func drain() {
        queue.sync {}
    }

    public func close() {
        drain()
        waker.close()
    }
}

/// A value that only the loop thread touches, carried through another thread untouched.
private struct LoopOnly<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
