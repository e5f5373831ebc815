// One resumable HTTP download on the event loop: the thin shell of ResumableDownload. It connects
// (OutboundConnector), writes the request, reads the response with HTTPResponseParser and ChunkedDecoder,
// appends the body to `OUTPUT.part`, keeps the record in `OUTPUT.part.meta` (write, fsync, rename), checks
// a digest in slices across loop turns, and renames the file into place (only at the entity's length). Each
// request is held to the transfer limits (TransferPace) from connecting to its body's end: a limit hit is a
// broken connection, a pause. The decisions (Range, If-Range, what a 200, 206 or 416 means) are the machine's.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// A download from an `http://` URL (numeric address) into a file.
public final class Download: Transfer, ConnectionDelegate {
    public let url: URLParts
    /// Where the finished file goes; the part and its record sit next to it.
    public let output: String
    public var partPath: String { part.path }
    public var recordPath: String { part.recordPath }
    public var resumeFiles: [String] { [part.path, part.recordPath] }
    /// Told after every change of state or progress worth showing.
    public var onChange: ((any Transfer) -> Void)?

    private var machine: ResumableDownload
    private unowned let loop: EventLoop
    private let logger: Logger
    private let part: PartFile
    private var connector: HostConnector?
    private var connection: Connection?
    private var parser = HTTPResponseParser()
    private enum Phase { case idle, head, body(HTTPBodyFraming, remaining: Int?), closed }
    private var phase: Phase = .idle
    private var chunked = ChunkedDecoder()
    private var digestWork: EventTimer?
    /// The idle and low-speed limits each request is held to, from connecting to the body's end.
    public let limits: TransferLimits
    private let pace: TransferPaceTimer
    /// Bytes received on the connections of this request; what the limits are judged on.
    private var bytesReceived = 0
    /// What the connection's input held after the last read was handled: bytes beyond it are new.
    private var inputSeen = 0

    /// Reads what an earlier run left (`OUTPUT.part` and its record), ready to `start()`.
    public init(url: URLParts, output: String, loop: EventLoop, logger: Logger, limits: TransferLimits = .defaults) {
        self.url = url
        self.output = output
        self.loop = loop
        self.limits = limits
        pace = TransferPaceTimer(loop: loop)
        self.logger = logger.labeled("\(logger.label) download \(output)")
        part = PartFile(output: output)
        let (partSize, existing) = part.leftOver()
        machine = ResumableDownload(url: url, existing: existing, partSize: partSize)
    }

    public var state: TransferState { machine.state }
    public var direction: TransferDirection { .download }
    public var bytesDone: Int { machine.bytesDone }
    public var total: Int? { machine.total }

    /// Begins or resumes the transfer.
    public func start() {
        perform(machine.start())
    }

    /// Stops it, keeping the part and the record (the task expired, the app suspends, the daemon stops).
    public func pause(_ reason: String) {
        perform(machine.pause(reason))
    }

    // MARK: Actions

    private func perform(_ actions: [ResumableDownload.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: ResumableDownload.Action) {
        switch action {
        case .sendRequest(let request):
            send(request)
        case .appendBody(let framing):
            phase = .body(framing, remaining: framing.length)
            chunked = ChunkedDecoder()
            // An empty body (none, or Content-Length: 0) is complete now: no byte will come to say so.
            if framing.length == 0 { return perform(machine.bodyEnded()) }
            readBody()
        case .closeConnection:
            closeConnection()
        case .truncatePart(let length):
            if let error = part.truncate(to: length) { return failIO(error) }
        case .writeRecord(let record):
            if let error = part.writeRecord(record) { return failIO(error) }
        case .computeDigest(let algorithm):
            computeDigest(algorithm)
        case .renameIntoPlace:
            if let mismatch = part.lengthMismatch(expectedLength: machine.total) {
                closeConnection()
                return perform(machine.pause(mismatch))
            }
            if let error = part.renameIntoPlace() { return failIO(error) }
            logger.info("done: \(machine.bytesDone) bytes")
            perform(machine.renamed())
        case .removeRecord:
            // The file is in place: a record left behind only makes a later run of the same download find it done.
            if let error = part.removeRecord() { logger.warning("the finished download's record stays: \(error)") }
        case .report(let state):
            if case .paused(let reason) = state { logger.info("paused: \(reason)") }
            if case .failed(let reason) = state { logger.warning("failed: \(reason)") }
            if state != .running {
                part.close()
                pace.stop()
            }
            onChange?(self)
        }
    }

    // MARK: The connection

    private func send(_ request: HTTPClientRequest) {
        closeConnection()
        let range = request.value(of: "Range")
        logger.debug("\(request.method) \(request.url)\(range.map { " (\($0))" } ?? "")")
        parser = HTTPResponseParser()
        phase = .head
        bytesReceived = 0
        inputSeen = 0
        pace.start(limits: limits, bytes: { [weak self] in self?.bytesReceived ?? 0 }) { [weak self] stall in
            guard let self else { return }
            closeConnection()
            perform(machine.connectionFailed("\(stall)"))
        }
        connector = HostConnector(loop: loop, host: request.url.host.connectName, port: UInt16(clamping: request.url.port)) { [weak self] result in
            guard let self else {
                if case .success(let fd) = result { SocketCalls.close(fd) }
                return
            }
            connector = nil
            switch result {
            case .success(let fd):
                do {
                    let connection = try Connection(loop: loop, fd: fd)
                    connection.delegate = self
                    self.connection = connection
                    connection.output.append(request.serialized)
                    connection.flush()
                } catch {
                    perform(machine.connectionFailed("\(error)"))
                }
            case .failure(let error):
                perform(machine.connectionFailed(error.message))
            }
        }
    }

    private func closeConnection() {
        connector?.cancel()
        connector = nil
        phase = .closed
        pace.stop()
        guard let connection else { return }
        self.connection = nil
        connection.delegate = nil
        connection.close(.now)
    }

    public func connectionDidRead(_ connection: Connection) {
        bytesReceived += max(0, connection.input.count - inputSeen)
        switch phase {
        case .head: readHead(connection)
        case .body: readBody()
        case .idle, .closed: connection.input.removeAll()
        }
        if connection === self.connection { inputSeen = connection.input.count }
    }

    public func connectionDidReachEnd(_ connection: Connection) {
        if case .body(.untilClose, _) = phase {
            readBody()
            if case .body = phase { perform(machine.bodyEnded()) }
            return
        }
        if case .closed = phase { return }
        perform(machine.connectionFailed("the server closed the connection before the response was complete"))
    }

    public func connectionDidClose(_ connection: Connection, error: SystemError?) {
        guard connection === self.connection else { return }
        self.connection = nil
        if case .closed = phase { return }
        perform(machine.connectionFailed(error.map { "\($0)" } ?? "the connection closed"))
    }

    private func readHead(_ connection: Connection) {
        let bytes = connection.input.peekBytes(limit: HTTPResponseParser.maxHeadBytes + 1)
        do {
            guard let (head, consumed) = try parser.consume(bytes) else { return }
            connection.input.drain(consumed)
            perform(machine.responseHead(head))
        } catch {
            perform(machine.connectionFailed("bad response: \(error.message)"))
        }
    }

    /// Appends what the connection holds of the body to the part.
    private func readBody() {
        while case .body(let framing, let remaining) = phase, let input = connection?.input, !input.isEmpty {
            switch framing {
            case .length, .untilClose, .none:
                let count = min(input.count, remaining ?? Int.max, 1 << 20)
                guard append(input, count) else { return }
                if let remaining {
                    phase = .body(framing, remaining: remaining - count)
                    perform(machine.bodyBytes(count))
                    if remaining - count == 0, case .body = phase { perform(machine.bodyEnded()) }
                } else {
                    perform(machine.bodyBytes(count))
                }
            case .chunked:
                let bytes = input.peekBytes(limit: 1 << 20)
                let step: ChunkedDecoder.Step
                do {
                    step = try chunked.decode(bytes)
                } catch {
                    return perform(machine.connectionFailed("bad chunked body: \(error.message)"))
                }
                switch step {
                case .data(let count):
                    guard append(input, count) else { return }
                    perform(machine.bodyBytes(count))
                case .framing(let count):
                    if count == 0 { return }
                    input.drain(count)
                case .end(let count):
                    input.drain(count)
                    perform(machine.bodyEnded())
                }
            }
        }
    }

    /// Writes the first `count` bytes of `input` to the part and drains them; false (and paused) on an error.
    private func append(_ input: EventBuffer, _ count: Int) -> Bool {
        guard let error = part.append(input, count) else { return true }
        failIO(error)
        return false
    }

    // MARK: Files

    private func failIO(_ error: SystemError) {
        closeConnection()
        perform(machine.pause("\(error)"))
    }

    /// Hashes the part 1 MiB per loop turn, so that a large file does not stall the loop.
    private func computeDigest(_ algorithm: DigestAlgorithm) {
        let fd = open(partPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return failIO(SystemError("open \(partPath)", Errno.current)) }
        var sha256 = SHA256Digest()
        var md5 = MD5Digest()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var step: () -> Void = {}
        step = { [weak self] in
            guard let self else {
                close(fd)
                return
            }
            let count = read(fd, &buffer, buffer.count)
            if count < 0 {
                close(fd)
                digestWork = nil
                return failIO(SystemError("read \(partPath)", Errno.current))
            }
            if count > 0 {
                switch algorithm {
                case .sha256: sha256.update(buffer[0..<count])
                case .md5: md5.update(buffer[0..<count])
                }
                digestWork?.arm(after: .zero)
                return
            }
            close(fd)
            digestWork?.close()
            digestWork = nil
            perform(machine.digestComputed(algorithm == .sha256 ? .sha256(sha256.finish()) : .md5(md5.finish())))
        }
        digestWork = EventTimer(loop: loop) { step() }
        digestWork?.arm(after: .zero)
    }
}
