// One resumable HTTP or HTTPS upload on the event loop: the thin shell of ResumableUpload. Each request runs
// on libcurl (CurlRequest), the file's bytes read into libcurl's buffer with pread as it asks for them (no
// more of the file in memory than that buffer); response heads (104 progress included) go to the machine;
// the record is kept (write, fsync, rename) and the file checked before each body to be still the one being
// sent. Each request is held to the transfer limits (TransferPace), counting the bytes the server takes and
// answers. The decisions (create, HEAD for the offset, PATCH from it, what a 409 or a 404 means) are the
// machine's.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// An upload of a local file to an `http://` or `https://` URL whose server speaks the resumable-upload draft (netlifed's
/// http service with `upload-root`, or any other).
public final class Upload: Transfer {
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

    /// How the server is checked over TLS.
    public let tls: TransferTLS
    /// Whose rights the file is read with (nil: the daemon's own). The record, in the state directory, is
    /// the daemon's.
    public let owner: FileCredentials?

    private var machine: ResumableUpload
    private let curl: CurlMulti
    private let logger: Logger
    private var request: CurlRequest?
    /// The file being sent, and the next offset to read of it and where the body ends.
    private var sendingFile: FileDescriptor?
    private var sending: (next: Int, end: Int)?
    /// Whether the final head of the request arrived.
    private var finished = false
    private let pace: TransferPaceTimer
    /// Bytes of the request handed to libcurl and heads received: what the limits are judged on.
    private var bytesMoved = 0

    /// Reads the record an earlier run left at `recordPath`, ready to `start()`.
    public init(file: String, url: URLParts, recordPath: String, tls: TransferTLS = .verified, owner: FileCredentials? = nil,
                curl: CurlMulti, loop: EventLoop, logger: Logger, limits: TransferLimits = .defaults) {
        self.tls = tls
        self.owner = owner
        self.curl = curl
        self.limits = limits
        pace = TransferPaceTimer(loop: loop)
        self.url = url
        output = file
        self.recordPath = recordPath
        self.logger = logger.labeled("\(logger.label) upload \(file)")
        let record = try? RegularFile.read(recordPath, limit: RecordText.maxFileBytes).get()
        machine = ResumableUpload(url: url, existing: record.flatMap { UploadRecord.decode(String(decoding: $0, as: UTF8.self)) })
    }

    public var state: TransferState { machine.state }
    public var resumeFiles: [String] { [recordPath] }
    public var direction: TransferDirection { .upload }
    /// Bytes the server has acknowledged.
    public var bytesDone: Int { machine.bytesDone }
    public var total: Int? { machine.total }

    /// Begins or resumes: a new upload, or HEAD for the server's offset when the record names a resource.
    public func start() {
        perform(machine.start(file: Self.identity(of: output, as: owner)))
    }

    /// Stops it, keeping the record (the task expired, the app suspends, the daemon stops).
    public func pause(_ reason: String) {
        perform(machine.pause(reason))
    }

    public func resetConnections() { request?.resetSockets() }

    /// The identity of the file at `path` (size, modification time, inode); nil when `owner` cannot open it
    /// for reading or it is no regular file.
    static func identity(of path: String, as owner: FileCredentials?) -> UploadFileIdentity? {
        guard let opened = try? RegularFile.openWithStatus(path, .readOnly, as: owner) else { return nil }
        return identity(opened.status)
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
            if let error = SystemError.catching({ () throws(SystemError) in try FileCalls.writeAtomically(recordPath, Array(record.encoded().utf8)) }) {
                closeConnection()
                perform(machine.pause("cannot write the record: \(error)"))
            }
        case .removeRecord:
            if let error = SystemError.catching({ () throws(SystemError) in try FileCalls.remove(recordPath); try FileCalls.syncDirectory(of: recordPath) }) {
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

    // MARK: The request

    private func send(_ spec: HTTPClientRequest, body: UploadBody?) {
        closeConnection()
        logger.debug("\(spec.method) \(spec.url)\(spec.value(of: "Upload-Offset").map { " from \($0)" } ?? "")")
        bytesMoved = 0
        var file: FileDescriptor?
        if let body, body.count > 0 {
            // Opened now and checked against the identity the upload started with: the bytes sent are that
            // file's.
            guard let opened = try? RegularFile.openWithStatus(output, .readOnly, as: owner), Self.identity(opened.status) == machine.file else {
                return perform(machine.fileChanged(Self.identity(of: output, as: owner)))
            }
            file = .some(opened.file)
        }
        let method: CurlRequestSpec.Method = spec.method == "HEAD" ? .head : .send(spec.method, length: body?.count ?? 0)
        let request: CurlRequest
        switch CurlRequest.make(CurlRequestSpec(method: method, url: spec.url, headers: spec.headers, tls: tls), on: curl) {
        case .success(let made): request = made
        case .failure(let failure): return perform(machine.connectionFailed(failure.message))
        }
        sending = file != nil ? (body?.offset ?? 0, (body?.offset ?? 0) + (body?.count ?? 0)) : nil
        sendingFile = file.take()
        pace.start(limits: limits, bytes: { [weak self] in self?.bytesMoved ?? 0 }) { [weak self] stall in
            guard let self else { return }
            closeConnection()
            perform(machine.connectionFailed("\(stall)"))
        }
        request.onSend = { [weak self, weak request] buffer in
            guard let self, let request, request === self.request else { return nil }
            guard let (next, end) = sending else { return 0 }
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[..<min(buffer.count, end - next)])
            guard let count = try? sendingFile?.read(fromAbsoluteOffset: next, into: slice) else { return nil }
            sending = (next + count, end)
            bytesMoved += count
            return count
        }
        request.onInterim = { [weak self, weak request] head in
            guard let self, let request, request === self.request else { return false }
            bytesMoved += 1
            perform(machine.interimHead(head))
            return request === self.request
        }
        request.onHead = { [weak self, weak request] head in
            guard let self, let request, request === self.request else { return false }
            bytesMoved += 1
            finished = true
            perform(machine.responseHead(head))
            return true
        }
        request.onEnd = { [weak self, weak request] result in
            guard let self, let request, request === self.request else { return }
            self.request = nil
            closeFile()
            pace.stop()
            guard !finished else { return }
            switch result {
            case .success: perform(machine.connectionFailed("the server closed the connection before answering"))
            case .failure(let failure) where failure.tls: perform(machine.requestFailed("TLS: \(failure.message)"))
            case .failure(let failure): perform(machine.connectionFailed(failure.message))
            }
        }
        finished = false
        self.request = request
        request.start()
    }

    private func closeFile() {
        sendingFile = nil
        sending = nil
    }

    private func closeConnection() {
        pace.stop()
        closeFile()
        guard let request else { return }
        self.request = nil
        request.cancel()
    }
}
