// One resumable HTTP upload on the event loop: the thin shell of ResumableUpload. It connects (HostConnector),
// writes each request's head and then the file's bytes as a libevent file segment (sendfile: the file is
// never read into memory), reads response heads with HTTPResponseParser (104 progress included), keeps the
// record (write, fsync, rename) and checks before each body that the file is still the one being sent. Each
// request is held to the transfer limits (TransferPace), counting the bytes the server takes and sends. The
// decisions (create, HEAD for the offset, PATCH from it, what a 409 or a 404 means) are the machine's.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// An upload of a local file to an `http://` URL whose server speaks the resumable-upload draft (netlifed's
/// http service with `upload-root`, or any other).
public final class Upload: Transfer, ConnectionDelegate {
    public let url: URLParts
    /// The local file being sent.
    public let output: String
    /// Where the record lives (chosen by the daemon).
    public let recordPath: String
    /// Told after every change of state or progress worth showing.
    public var onChange: ((any Transfer) -> Void)?

    /// The idle and low-speed limits each request is held to, from connecting to the final response head:
    /// bytes the server takes of the request and bytes it answers both count. A limit hit counts as a broken
    /// connection (paused).
    public let limits: TransferLimits

    private var machine: ResumableUpload
    private unowned let loop: EventLoop
    private let logger: Logger
    private var connector: HostConnector?
    private var connection: Connection?
    private var parser = HTTPResponseParser()
    /// Whether the final head of the request sent is still awaited.
    private var awaitingHead = false
    private let pace: TransferPaceTimer
    /// The length of the request (head and body) as queued on the connection: what has left the output
    /// since was taken by the server.
    private var requestLength = 0
    /// Bytes of responses received on this request's connection.
    private var bytesReceived = 0

    /// Reads the record an earlier run left at `recordPath`, ready to `start()`.
    public init(file: String, url: URLParts, recordPath: String, loop: EventLoop, logger: Logger,
                limits: TransferLimits = .defaults) {
        self.limits = limits
        pace = TransferPaceTimer(loop: loop)
        self.url = url
        output = file
        self.recordPath = recordPath
        self.loop = loop
        self.logger = logger.labeled("\(logger.label) upload \(file)")
        machine = ResumableUpload(url: url, existing: readSmallFile(recordPath).flatMap(UploadRecord.decode))
        parser.returnsInformational = true
    }

    public var state: TransferState { machine.state }
    public var resumeFiles: [String] { [recordPath] }
    public var direction: TransferDirection { .upload }
    /// Bytes the server has acknowledged.
    public var bytesDone: Int { machine.bytesDone }
    public var total: Int? { machine.total }

    /// Begins or resumes: a new upload, or HEAD for the server's offset when the record names a resource.
    public func start() {
        perform(machine.start(file: Self.identity(of: output)))
    }

    /// Stops it, keeping the record (the task expired, the app suspends, the daemon stops).
    public func pause(_ reason: String) {
        perform(machine.pause(reason))
    }

    /// The identity of the file at `path` (size, modification time, inode); nil when it is no readable
    /// regular file.
    static func identity(of path: String) -> UploadFileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, access(path, R_OK) == 0 else { return nil }
        return identity(info)
    }

    private static func identity(_ info: stat) -> UploadFileIdentity {
        UploadFileIdentity(size: Int(info.st_size), modifiedSeconds: Int64(info.st_mtim.tv_sec),
                           modifiedNanoseconds: Int(info.st_mtim.tv_nsec), inode: UInt64(info.st_ino))
    }

    // MARK: Actions

    private func perform(_ actions: [ResumableUpload.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: ResumableUpload.Action) {
        switch action {
        case .sendRequest(let request, let body):
            send(request, body: body)
        case .closeConnection:
            closeConnection()
        case .writeRecord(let record):
            if let error = writeFileAtomically(recordPath, Array(record.encoded().utf8)) {
                closeConnection()
                perform(machine.pause("cannot write the record: \(error)"))
            }
        case .removeRecord:
            if let error = removeFile(recordPath) ?? syncDirectory(of: recordPath) {
                logger.warning("the finished upload's record stays: \(error)")
            }
        case .report(let state):
            if case .paused(let reason) = state { logger.info("paused at \(machine.bytesDone) bytes: \(reason)") }
            if case .failed(let reason) = state { logger.warning("failed: \(reason)") }
            if state == .done { logger.info("done: \(machine.bytesDone) bytes") }
            if state != .running { pace.stop() }
            onChange?(self)
        }
    }

    // MARK: The connection

    private func send(_ request: HTTPClientRequest, body: UploadBody?) {
        closeConnection()
        logger.debug("\(request.method) \(request.url)\(request.value(of: "Upload-Offset").map { " from \($0)" } ?? "")")
        parser.reset()
        awaitingHead = true
        requestLength = 0
        bytesReceived = 0
        pace.start(limits: limits, bytes: { [weak self] in self?.bytesMoved ?? 0 }) { [weak self] stall in
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
                connected(fd, request, body)
            case .failure(let error):
                perform(machine.connectionFailed(error.message))
            }
        }
    }

    private func connected(_ fd: CInt, _ request: HTTPClientRequest, _ body: UploadBody?) {
        let connection: Connection
        do {
            connection = try Connection(loop: loop, fd: fd)
        } catch {
            return perform(machine.connectionFailed("\(error)"))
        }
        connection.delegate = self
        // Reading goes on while the file is sent: a 104, or an early 409, arrives meanwhile.
        connection.outputHighWaterMark = .max
        self.connection = connection
        connection.output.append(request.serialized)
        if let body, body.count > 0 {
            // Opened now and checked against the identity the upload started with: the bytes sent are that
            // file's. The segment owns the descriptor from here on.
            let file = open(output, O_RDONLY | O_CLOEXEC)
            var info = stat()
            guard file >= 0, fstat(file, &info) == 0, Self.identity(info) == machine.file else {
                if file >= 0 { close(file) }
                return perform(machine.fileChanged(Self.identity(of: output)))
            }
            do {
                try connection.output.appendFile(file, offset: body.offset, length: body.count)
            } catch {
                return perform(machine.connectionFailed("cannot send the file: \(error)"))
            }
        }
        requestLength = connection.output.count
        connection.flush()
    }

    /// What the limits are judged on: the bytes of the request the server has taken, and of its answers.
    private var bytesMoved: Int {
        bytesReceived + max(0, requestLength - (connection?.output.count ?? requestLength))
    }

    private func closeConnection() {
        connector?.cancel()
        connector = nil
        awaitingHead = false
        pace.stop()
        guard let connection else { return }
        self.connection = nil
        connection.delegate = nil
        connection.close(.now)
    }

    public func connectionDidRead(_ connection: Connection) {
        guard connection === self.connection, awaitingHead else { return connection.input.removeAll() }
        // Every head is parsed from the start of the input and drained, or the input dropped: all is new.
        bytesReceived += connection.input.count
        // Each head is handled before the next is parsed: a final one may close the connection.
        while awaitingHead, connection === self.connection, !connection.input.isEmpty {
            let bytes = connection.input.peekBytes(limit: HTTPResponseParser.maxHeadBytes + 1)
            do {
                guard let (head, consumed) = try parser.consume(bytes) else {
                    connection.input.removeAll()
                    return
                }
                connection.input.drain(consumed)
                if head.status < 200 {
                    perform(machine.interimHead(head))
                } else {
                    awaitingHead = false
                    perform(machine.responseHead(head))
                }
            } catch {
                perform(machine.connectionFailed("bad response: \(error.message)"))
            }
        }
    }

    public func connectionDidReachEnd(_ connection: Connection) {
        guard connection === self.connection, awaitingHead else { return }
        perform(machine.connectionFailed("the server closed the connection before answering"))
    }

    public func connectionDidClose(_ connection: Connection, error: SystemError?) {
        guard connection === self.connection else { return }
        self.connection = nil
        guard awaitingHead else { return }
        perform(machine.connectionFailed(error.map { "\($0)" } ?? "the connection closed"))
    }
}
