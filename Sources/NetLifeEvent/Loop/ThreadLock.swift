// The lock of the one hand-off between threads (Waker's queue): a pthread mutex, which ThreadSanitizer
// understands, since it intercepts pthread_mutex_lock and unlock. Synchronization.Mutex is built on futexes
// inside the Swift standard library, which is not instrumented: ThreadSanitizer saw the accesses it guards
// but not the lock, and reported Waker.wake (a disk thread) against Waker.drain (the loop) as a race. What
// the closures carry across (a disk result read on the loop) is ordered by this lock too.

@preconcurrency import Glibc

/// A value guarded by a pthread mutex.
final class ThreadLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&value)
    }
}
