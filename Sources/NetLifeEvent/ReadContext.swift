// What every connection's read callback needs from its loop, held strongly by each connection so that the
// hot path never goes through the loop's `unowned` reference (a checked retain and release per message): the
// scratch area small reads land in, and the control connections looked at between ordinary callbacks.
//
// The control socket's connections are served first in each loop turn (`EventPriority.control`), but libevent
// learns that one of them is readable only when it polls, and a turn with 1,000 busy connections runs all
// their callbacks before it polls again: a `status` waited for the whole turn (p99 15.6 ms).
//
// libevent's own remedy, polling again after every N callbacks (`event_config_set_max_dispatch_interval`),
// costs a full epoll_wait that returns every ready descriptor again: with 1,000 busy connections and N = 64,
// ping-pong fell to 0.67x of the C reference. Instead, every 64th ordinary connection callback polls just the
// control connections that are reading (one `poll` call on a handful of descriptors), and only when one is
// readable does it ask libevent to poll for new events before running the rest of the turn
// (`event_base_loopcontinue`); the control event then runs first, by its priority.

@preconcurrency import Glibc
internal import CLibevent

/// The loop's read scratch area, and the descriptors whose readiness is looked at between ordinary callbacks
/// (the reading connections of `.control` priority). One per loop.
final class ReadContext {
    /// Ordinary callbacks between two looks at the control connections.
    static let interval = 64

    /// 64 KiB that small reads land in (`Connection`), and reads whose bytes are not kept in an evbuffer (a
    /// child's output lines, input discarded at a close).
    let scratch: UnsafeMutableRawBufferPointer
    private let base: OpaquePointer
    private var descriptors: [pollfd] = []
    private var callbacksSinceLook = 0

    init(base: OpaquePointer) {
        self.base = base
        scratch = .allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit { scratch.deallocate() }

    func add(_ fd: CInt) {
        guard !descriptors.contains(where: { $0.fd == fd }) else { return }
        descriptors.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
    }

    func remove(_ fd: CInt) {
        descriptors.removeAll { $0.fd == fd }
    }

    /// Called by each ordinary connection callback; every `interval`-th one looks at the urgent descriptors
    /// and, if one is readable, makes the loop poll for new events after the current callback.
    @inline(__always)
    func ordinaryCallbackRan() {
        callbacksSinceLook &+= 1
        if callbacksSinceLook >= Self.interval { lookAtControlConnections() }
    }

    private func lookAtControlConnections() {
        callbacksSinceLook = 0
        guard !descriptors.isEmpty else { return }
        if poll(&descriptors, nfds_t(descriptors.count), 0) > 0 { event_base_loopcontinue(base) }
    }
}
