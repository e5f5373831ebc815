// libcurl's multi-socket interface on netlifed's event loop, as curl's own hiperfifo.c example runs it on
// libevent: libcurl says which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when to call it back
// (CURLMOPT_TIMERFUNCTION); an IOWatcher per socket and one EventTimer call `curl_multi_socket_action`, and
// the transfers that finished are read with `curl_multi_info_read`. No thread of netlifed's blocks: name
// resolution runs on libcurl's own resolver thread (the threaded resolver Debian's libcurl is built with).
//
// libcurl forbids adding or removing a handle from inside its callbacks (CURLM_RECURSIVE_API_CALL): a
// request started or stopped there (a redirect, a restart, a pause from a write) waits until
// `curl_multi_socket_action` returns.

internal import CCurl
import NetLife
import NetLifeEvent

/// One libcurl multi handle, driven by the loop. Loop-confined; `close()` before letting it go.
public final class CurlMulti {
    /// The loop it runs on.
    unowned let loop: EventLoop
    private let multi: UnsafeMutableRawPointer
    private var watchers: [curl_socket_t: IOWatcher] = [:]
    /// Watchers libcurl no longer wants, closed at the start of the next turn.
    private var retired: [IOWatcher] = []
    private var timer: EventTimer?
    /// The requests on the multi handle, by their easy handle.
    private var running: [UnsafeMutableRawPointer: CurlRequest] = [:]
    /// Whether libcurl is inside `curl_multi_socket_action` (its callbacks may run).
    private var inAction = false
    /// Adds and removes asked for while `inAction`, done when it returns.
    private var deferred: [() -> Void] = []
    private let logger: Logger
    /// Where the transfers' fsyncs and renames run, off the loop.
    public let disk: TransferDisk

    /// The most body bytes all requests together hand over in one loop turn: past it, a request waits for
    /// the next turn (CURL_WRITEFUNC_PAUSE, resumed from a zero-delay timer), so that libcurl, which reads a
    /// socket until it is dry, never keeps the loop from a control request for more than about a millisecond.
    static let turnBudget = 512 * 1024
    private var spentThisTurn = 0
    private var waitingForTurn: [CurlRequest] = []
    private var nextTurn: EventTimer?

    /// libcurl's global state, set up once per process before the first handle.
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// A multi handle on `loop`; nil when libcurl cannot make one (out of memory).
    public init?(loop: EventLoop, logger: Logger) {
        guard Self.initialized, let disk = try? TransferDisk(loop: loop), let multi = curl_multi_init() else { return nil }
        self.disk = disk
        self.loop = loop
        self.multi = multi
        self.logger = logger
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = nl_multi_pointer(multi, CURLMOPT_SOCKETDATA, context)
        _ = nl_multi_socket_callback(multi, curlSocketCallback)
        _ = nl_multi_pointer(multi, CURLMOPT_TIMERDATA, context)
        _ = nl_multi_timer_callback(multi, curlTimerCallback)
        timer = EventTimer(loop: loop) { [weak self] in self?.act(on: CURL_SOCKET_TIMEOUT, CInt(0)) }
        nextTurn = EventTimer(loop: loop) { [weak self] in self?.resumeWaiting() }
    }

    /// Whether this turn's budget of body bytes is spent.
    var turnIsSpent: Bool { spentThisTurn >= Self.turnBudget }

    /// `count` body bytes were handed over in this turn.
    func spend(_ count: Int) { spentThisTurn += count }

    /// `request` paused its body until the next turn.
    func resumeNextTurn(_ request: CurlRequest) {
        waitingForTurn.append(request)
        nextTurn?.arm(after: .zero)
    }

    /// A new turn: the requests that waited for it go on (libcurl hands their held bytes over at once).
    private func resumeWaiting() {
        closeRetired()
        spentThisTurn = 0
        let waiting = waitingForTurn
        waitingForTurn.removeAll()
        inAction = true
        for request in waiting where !request.isFinished && running[request.easy] != nil {
            _ = curl_easy_pause(request.easy, CURLPAUSE_CONT)
        }
        inAction = false
        afterAction()
    }

    /// How many requests are on the handle.
    public var count: Int { running.count }

    /// Starts `request`. From inside a callback, once libcurl returns.
    func add(_ request: CurlRequest) {
        if isClosed { return request.finish(.failure(CurlFailure("netlifed is stopping"))) }
        if inAction { return deferred.append { [weak self] in self?.add(request) } }
        guard !request.isFinished, running[request.easy] == nil else { return }
        let code = curl_multi_add_handle(multi, request.easy)
        guard code == CURLM_OK else {
            return request.finish(.failure(CurlFailure(String(cString: curl_multi_strerror(code)))))
        }
        running[request.easy] = request
    }

    /// Stops `request` without telling it: its connections are closed (no request reuses one). From inside a
    /// callback, once libcurl returns.
    func remove(_ request: CurlRequest) {
        if inAction { return deferred.append { [weak self] in self?.remove(request) } }
        guard running.removeValue(forKey: request.easy) != nil else { return }
        _ = curl_multi_remove_handle(multi, request.easy)
    }

    private var isClosed = false

    /// Stops every request and frees the handle. Calling it again does nothing.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        for request in running.values { _ = curl_multi_remove_handle(multi, request.easy) }
        running.removeAll()
        for watcher in watchers.values { watcher.close() }
        watchers.removeAll()
        closeRetired()
        timer?.close()
        timer = nil
        nextTurn?.close()
        nextTurn = nil
        waitingForTurn.removeAll()
        curl_multi_cleanup(multi)
        disk.close()
    }

    // MARK: libcurl's calls

    /// libcurl wants `socket` watched for `what` (CURL_POLL_IN, OUT, INOUT) or no longer (CURL_POLL_REMOVE).
    fileprivate func watch(_ socket: curl_socket_t, _ what: CInt) {
        if what == CURL_POLL_REMOVE {
            // Often asked from inside this very watcher's handler: it stops watching now and is let go only
            // at the next turn, never while its own handler runs.
            if let watcher = watchers.removeValue(forKey: socket) {
                try? watcher.watch([])
                retired.append(watcher)
            }
            return
        }
        let watcher: IOWatcher
        if let existing = watchers[socket] {
            watcher = existing
        } else {
            watcher = IOWatcher(loop: loop, descriptor: socket) { [weak self] events in
                var flags: CInt = 0
                if events.contains(.readable) { flags |= CURL_CSELECT_IN }
                if events.contains(.writable) { flags |= CURL_CSELECT_OUT }
                self?.act(on: socket, flags)
            }
            watchers[socket] = watcher
        }
        var events: IOWatcher.Events = []
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { events.insert(.readable) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { events.insert(.writable) }
        do {
            try watcher.watch(events)
        } catch {
            logger.error("libcurl's socket \(socket) cannot be watched: \(error)")
        }
    }

    /// libcurl wants to be called in `milliseconds` (0: at once, -1: no timer).
    fileprivate func schedule(_ milliseconds: Int) {
        guard let timer else { return }
        if milliseconds < 0 { return timer.cancel() }
        timer.arm(after: .milliseconds(milliseconds))
    }

    private func act(on socket: curl_socket_t, _ flags: CInt) {
        var stillRunning: CInt = 0
        closeRetired()
        spentThisTurn = 0
        inAction = true
        _ = curl_multi_socket_action(multi, socket, flags, &stillRunning)
        inAction = false
        afterAction()
    }

    private func closeRetired() {
        let done = retired
        retired.removeAll()
        for watcher in done { watcher.close() }
    }

    /// What waits for libcurl to return: the transfers that ended, then the adds and removes asked for.
    private func afterAction() {
        finishDone()
        while !deferred.isEmpty {
            let work = deferred
            deferred.removeAll()
            for step in work { step() }
        }
    }

    /// Tells each request that ended how; it is off the handle before it hears.
    private func finishDone() {
        var left: CInt = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = nl_message_result(message)
            guard let request = running.removeValue(forKey: easy) else { continue }
            _ = curl_multi_remove_handle(multi, easy)
            request.finish(result == CURLE_OK ? .success(()) : .failure(request.message(for: result)))
        }
    }
}

private func curlSocketCallback(_ easy: UnsafeMutableRawPointer?, _ socket: curl_socket_t, _ what: CInt, _ context: UnsafeMutableRawPointer?, _ socketContext: UnsafeMutableRawPointer?) -> CInt {
    guard let context else { return -1 }
    Unmanaged<CurlMulti>.fromOpaque(context).takeUnretainedValue().watch(socket, what)
    return 0
}

private func curlTimerCallback(_ multi: UnsafeMutableRawPointer?, _ milliseconds: Int, _ context: UnsafeMutableRawPointer?) -> CInt {
    guard let context else { return -1 }
    Unmanaged<CurlMulti>.fromOpaque(context).takeUnretainedValue().schedule(milliseconds)
    return 0
}
