// One control connection: reads request lines and answers each in order, within bounds that no client can
// stretch. A turn of the loop handles at most `linesPerTurn` lines or `timePerTurn` of work, then yields; a
// session whose unread replies pass the connection's high-water mark is not read until the client takes
// them; a request must be completed within `request` of the previous reply (or of connecting), and a session
// with nothing pending is closed after `idle`. While the session is held back by its unread replies it waits
// for the client to read, not to send: the requests it holds may be complete, so the request deadline does
// not run; a client that leaves its replies unread for `unreadReplies` is told so after them and closed.
// Replies to requests whose client has gone are dropped; the commands still complete.

import NetLife
import NetLifeControl
import NetLifeEvent

/// One control connection.
final class ControlSession: ConnectionDelegate {
    /// How long a client may take.
    struct Timeouts {
        /// From connecting, or from the last reply, to a complete request line, once the client has sent part of
        /// one (or has sent nothing since connecting).
        var request: Duration = ControlProtocol.requestTimeout
        /// How long a session that has completed its exchanges may stay open without a new request.
        var idle: Duration = ControlProtocol.idleTimeout
        /// How long the client may leave its replies unread once they pass the connection's high-water mark.
        var unreadReplies: Duration = ControlProtocol.unreadRepliesTimeout
    }

    /// Lines handled per loop turn before the session yields to other work.
    static let linesPerTurn = 32
    /// The work a session does in one loop turn before it yields, whatever the number of lines: a client
    /// that pipelines expensive requests (`status` of hundreds of apps, milliseconds each) keeps another
    /// client waiting for one slice, not for `linesPerTurn` of them.
    static let timePerTurn = Duration.milliseconds(2)

    let connection: Connection
    /// Who the client is, as the kernel recorded it at connect time (SO_PEERCRED, SO_PEERGROUPS).
    let requester: Requester?
    /// The client's process id.
    var peerProcess: Int32? { requester?.pid }
    private weak var server: ControlServer?
    private let timeouts: Timeouts
    /// What the session waits for from its client, against `deadline`.
    private enum Wait: Equatable {
        /// A complete request line: the client has begun one, or has sent nothing since connecting.
        case request
        /// A new request, after every exchange completed.
        case idle
        /// The client to take its replies: reading is paused because they passed the high-water mark.
        case repliesTaken
        /// Nothing: a command is running, or the session streams events.
        case nothing
    }

    /// The deadline of the current wait (`wait`).
    private var deadline: EventTimer?
    /// Re-enters `processInput` on the next loop turn: after a yield, or after an asynchronous reply.
    private var continuation: EventTimer?
    private var wait = Wait.request
    /// Whether a command is running (its reply has not been sent yet), or the session streams events: such a
    /// session is never evicted to make room.
    var isBusy: Bool { commandRunning || isStreaming }
    private var commandRunning = false
    /// Whether the session has become a stream of events (`watch`); it reads no more requests.
    private(set) var isStreaming = false
    private var onStreamEnd: (() -> Void)?
    /// Since when the session has been waiting for a request (for eviction).
    private(set) var waitingSince = MonotonicTime.now()
    /// Whether `processInput` is on the stack: a reply given synchronously lets that loop continue.
    private var isProcessing = false
    /// Whether the last (unterminated) request before the client's half-close has been taken.
    private var tookFinalRequest = false

    init(connection: Connection, requester: Requester?, server: ControlServer, loop: EventLoop, timeouts: Timeouts) {
        self.connection = connection
        self.requester = requester
        self.server = server
        self.timeouts = timeouts
        deadline = EventTimer(loop: loop) { [weak self] in self?.deadlinePassed() }
        continuation = EventTimer(loop: loop) { [weak self] in self?.processInput() }
        connection.delegate = self
        deadline?.arm(after: timeouts.request)
    }

    // MARK: Connection events

    func connectionDidRead(_ connection: Connection) {
        processInput()
        // The first bytes of a new request after an idle period start the (shorter) request deadline.
        if wait == .idle, !connection.input.isEmpty, connection.state == .open {
            startWaiting(for: .request)
        }
    }

    func connectionDidReachEnd(_ connection: Connection) {
        // The client may half-close after its request (`printf ... | socat`): answer what is buffered first.
        processInput()
    }

    func connectionDidDrainOutput(_ connection: Connection) {
        // The client took its replies: the session waits for requests again (those already buffered are
        // handled now, and each reply restarts the deadline).
        if wait == .repliesTaken { startWaiting(for: connection.input.isEmpty ? .idle : .request) }
        processInput()
    }

    func connectionDidClose(_ connection: Connection, error: SystemError?) {
        deadline?.close()
        continuation?.close()
        server?.sessionClosed(self)
        onStreamEnd?()
        onStreamEnd = nil
    }

    // MARK: Streaming

    /// Turns the session into a stream of lines (`watch`): no deadline, no more requests read; `onEnd` runs
    /// when the connection closes.
    func startStreaming(onEnd: @escaping () -> Void) {
        isStreaming = true
        onStreamEnd = onEnd
        startWaiting(for: .nothing)
    }

    /// Appends one line to a streaming session and writes what the socket takes now.
    func stream(_ line: [UInt8]) {
        guard connection.state == .open else { return }
        connection.output.append(line)
        connection.flush()
    }

    /// Ends the session with an error line (for example when it is evicted).
    func end(_ code: ControlErrorCode, _ message: String) {
        send(Reply.error(code, message))
        connection.close(.afterFlush)
    }

    // MARK: Requests

    /// Handles buffered request lines: at most `linesPerTurn` or `timePerTurn` of them (at least one), and
    /// none while a command runs or while the client has not read the replies already sent.
    private func processInput() {
        guard !isProcessing else { return }
        isProcessing = true
        defer {
            isProcessing = false
            regulateReading()
        }
        if isStreaming {
            // A watcher sends nothing more; what it sends is dropped, and its end of input ends the watch.
            connection.input.removeAll()
            if connection.inputEnded { connection.close(.afterFlush) }
            return
        }
        var handled = 0
        let sliceEnd = MonotonicTime.now() + Self.timePerTurn
        while !isBusy && connection.state == .open {
            if connection.pauseReadingIfOutputIsHigh() {
                // Resumed by connectionDidDrainOutput. The wait begins when reading first pauses, not at each
                // reply that finds it paused.
                if wait != .repliesTaken { startWaiting(for: .repliesTaken) }
                return
            }
            if handled == Self.linesPerTurn || (handled > 0 && MonotonicTime.now() >= sliceEnd) {
                continuation?.arm(after: .zero)
                return
            }
            switch connection.input.readLine(maxLength: ControlProtocol.maxRequestBytes) {
            case .line(let bytes):
                handled += 1
                if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                handle(bytes)
            case .tooLong:
                let message = "request line longer than \(ControlProtocol.maxRequestBytes) bytes"
                server?.refusedUnreadable(Reply.error(.requestTooLarge, message))
                end(.requestTooLarge, message)
                return
            case .incomplete:
                guard connection.inputEnded else { return }
                if connection.input.isEmpty || tookFinalRequest {
                    connection.close(.afterFlush)
                    return
                }
                // The client half-closed after a request without its newline: that request is the last one.
                tookFinalRequest = true
                let bytes = connection.input.peekBytes()
                connection.input.removeAll()
                handled += 1
                handle(bytes)
            }
        }
    }

    /// Reads only while less than one maximal request is waiting to be handled, so that a client pipelining
    /// faster than its requests are answered cannot grow the input without bound.
    private func regulateReading() {
        guard connection.state == .open, !isStreaming else { return }
        if connection.input.count > ControlProtocol.maxRequestBytes {
            connection.pauseReading()
        } else {
            connection.resumeReading()
        }
    }

    private func handle(_ bytes: [UInt8]) {
        startWaiting(for: .nothing)
        let request: JSON
        do {
            request = try JSON.parse(bytes, maxDepth: ControlProtocol.maxRequestDepth,
                                     maxElements: ControlProtocol.maxRequestElements)
        } catch {
            let reply = Reply.error(.badRequest, "request is not valid JSON: \(error)")
            server?.refusedUnreadable(reply)
            replied(with: reply)
            return
        }
        commandRunning = true
        server?.handle(request, from: self) { [weak self] reply in self?.replied(with: reply) }
    }

    /// Sends a command's reply and waits for the next request.
    private func replied(with reply: JSON) {
        commandRunning = false
        guard send(reply), !isStreaming else { return }
        waitingSince = .now()
        startWaiting(for: connection.input.isEmpty ? .idle : .request)
        // A reply given later than the request (a transition) resumes reading on the next turn, never by
        // recursing from inside the command.
        if !isProcessing { continuation?.arm(after: .zero) }
    }

    // MARK: Deadlines

    /// Starts waiting for `next`, with its deadline from now.
    private func startWaiting(for next: Wait) {
        wait = next
        switch next {
        case .request: deadline?.arm(after: timeouts.request)
        case .idle: deadline?.arm(after: timeouts.idle)
        case .repliesTaken: deadline?.arm(after: timeouts.unreadReplies)
        case .nothing: deadline?.cancel()
        }
    }

    /// The client did not do what the session waited for in time: it is told why (after every reply already
    /// queued) and the connection closes once they are written, or when the client takes none of them for
    /// the connection's flush timeout.
    private func deadlinePassed() {
        switch wait {
        case .request, .idle:
            end(.timeout, "no complete request within the time allowed; closing the connection")
        case .repliesTaken:
            end(.slowReader, "replies not read for \(Self.text(timeouts.unreadReplies)) (more than \(ControlProtocol.maxUnreadReplyBytes >> 10) KiB waiting); closing the connection")
        case .nothing:
            break
        }
    }

    /// `60s`, `250ms`: a duration as the config writes it.
    private static func text(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }

    /// Writes one reply line; returns whether the connection is still open to carry it.
    @discardableResult
    func send(_ reply: JSON) -> Bool {
        guard connection.state == .open else { return false }
        connection.output.append(reply.serializedLine)
        connection.flush()
        return connection.state == .open
    }
}
