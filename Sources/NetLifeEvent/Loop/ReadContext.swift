// What every connection's callbacks need from their loop, held strongly by each connection so that the hot
// path never goes through the loop's `unowned` reference (a checked retain and release per message): the
// scratch area small reads land in, the control connections looked at between ordinary callbacks, and the
// connections to serve again at the next turn.
//
// Connections' events are edge-triggered (`Connection`): epoll reports a socket once per arrival, so one that
// stopped with more to read or write (its share of a turn used up) is put on the next-turn list rather than
// left for a report that would not come. It is served after the loop has polled again, behind the sockets
// that became ready meanwhile, so a bulk stream cannot make a turn last forever.
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

/// What the loop serves again at its next turn (`ReadContext.serveAtNextTurn`): a connection that used up its
/// share of a turn with more to read or write.
protocol NextTurnServed: AnyObject {
    func servedAgain()
}

/// The loop's read scratch area, the descriptors whose readiness is looked at between ordinary callbacks
/// (the reading connections of `.control` priority), and the connections served again at the next turn. One
/// per loop.
final class ReadContext {
    /// Ordinary callbacks between two looks at the control connections.
    static let interval = 64

    /// 64 KiB that small reads land in (`Connection`), and reads whose bytes are not kept in an evbuffer (a
    /// child's output lines, input discarded at a close).
    let scratch: UnsafeMutableRawBufferPointer
    private let base: OpaquePointer
    private var descriptors: [pollfd] = []
    private var callbacksSinceLook = 0
    /// A timer of zero delay on the loop's base, made and freed by the loop (nil once it is freed): it fires
    /// after the loop's next poll and serves `nextTurn`.
    var nextTurnTimer: OpaquePointer?
    /// Open connections waiting for the next turn; a connection leaves the list when it closes, so the
    /// references need no retain.
    private var nextTurn: [Waiting] = []
    private struct Waiting {
        unowned(unsafe) let source: any NextTurnServed
    }
    /// When the first callback of the loop's current turn began (monotonic nanoseconds), 0 before it: the
    /// loop reads it when the turn ends (`EventLoop.run`).
    var turnStartedAt: UInt64 = 0

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

    /// Called first by every callback libevent makes into the loop's sources: the first one after a poll
    /// starts the turn's clock (`LoopTurnTimes`).
    @inline(__always)
    func callbackBegins() {
        if turnStartedAt == 0 { turnStartedAt = MonotonicTime.now().nanoseconds }
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

    /// Serves `connection` again (`Connection.servedAgain()`) at the next turn. The connection makes sure it
    /// is on the list once.
    func serveAtNextTurn(_ connection: any NextTurnServed) {
        guard let nextTurnTimer else { return }
        nextTurn.append(Waiting(source: connection))
        if nextTurn.count == 1 {
            var now = timeval(tv_sec: 0, tv_usec: 0)
            // Adding a timer fails only when memory is exhausted; then it runs later in this turn instead.
            if event_add(nextTurnTimer, &now) != 0 { event_active(nextTurnTimer, EV_TIMEOUT, 0) }
        }
    }

    /// Takes a closing connection off the next-turn list.
    func forget(_ connection: any NextTurnServed) {
        let gone = ObjectIdentifier(connection)
        nextTurn.removeAll { ObjectIdentifier($0.source) == gone }
    }

    /// The timer fired: serves the connections that were waiting. One that asks again waits for the turn after.
    /// A connection that closes meanwhile stays allocated until this callback has returned
    /// (`EventLoop.releaseAfterCallback`), and is skipped.
    fileprivate func nextTurnCame() {
        var waiting: [Waiting] = []
        swap(&waiting, &nextTurn)
        for connection in waiting { connection.source.servedAgain() }
    }
}

func readContextNextTurn(_: CInt, _: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let readContext = Unmanaged<ReadContext>.fromOpaque(context).takeUnretainedValue()
    readContext.callbackBegins()
    readContext.nextTurnCame()
}
