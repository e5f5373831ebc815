// One resumable HTTP or HTTPS download on the event loop: the thin shell of ResumableDownload. Each request
// the machine asks for runs on libcurl (CurlRequest on the daemon's CurlMulti: TLS verified against the
// system's trust store or `--cacert`, HTTP/2 when the server offers it, proxies from the environment); the
// final response head goes to the machine, the body is appended to `OUTPUT.part` and hashed as it arrives
// when the server announced a digest, the record is kept in `OUTPUT.part.meta` (write, fsync, rename), a part
// resumed from an earlier run is hashed in slices across loop turns, and the file is renamed into place
// only at the entity's length. Each request is held to the transfer limits (TransferPace) from its start to
// its end: a limit hit is a broken connection, a pause. The decisions (Range, If-Range, what a 200, 206 or
// 416 means, redirects) are the machine's.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// A download from an `http://` or `https://` URL into a file.
public final class Download: Transfer {
    public let url: URLParts
    /// Where the finished file goes; the part and its record sit next to it.
    public let output: String
    public var partPath: String { part.path }
    public var recordPath: String { part.recordPath }
    public var resumeFiles: [String] { [part.path, part.recordPath] }
    /// Told after every change of state or progress worth showing.
    public var onChange: ((any Transfer) -> Void)?
    /// How the server is checked over TLS.
    public let tls: TransferTLS
    /// Whose rights its files are used with (nil: the daemon's own).
    public var owner: FileCredentials? { part.owner }

    private var machine: ResumableDownload
    private let curl: CurlMulti
    private let logger: Logger
    private let part: PartFile
    private var request: CurlRequest?
    /// Whether the finished part's fsync and rename are under way off the loop.
    private var renaming = false
    /// The digest of the bytes appended since the part was last cut to 0 in this run, when the record
    /// announces one: it then needs no pass over the file at the end.
    private var hasher: ContentHasher?
    private let slices: DigestSlices
    /// The idle and low-speed limits each request is held to, from its start to its end.
    public let limits: TransferLimits
    private let pace: TransferPaceTimer
    /// Bytes received for this request; what the limits are judged on.
    private var bytesReceived = 0

    /// Reads what an earlier run left (`OUTPUT.part` and its record), ready to `start()`.
    public init(url: URLParts, output: String, tls: TransferTLS = .verified, owner: FileCredentials? = nil, curl: CurlMulti, loop: EventLoop, logger: Logger,
                limits: TransferLimits = .defaults) {
        self.url = url
        self.output = output
        self.tls = tls
        self.curl = curl
        self.limits = limits
        pace = TransferPaceTimer(loop: loop)
        slices = DigestSlices(loop: loop)
        self.logger = logger.labeled("\(logger.label) download \(output)")
        part = PartFile(output: output, owner: owner)
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
        // The part is going into place (its fsync and rename off the loop): the download is as good as done.
        guard !renaming else { return }
        perform(machine.pause(reason))
    }

    /// Resets the connection a request holds (RST to the server), as a reclaim does; the request then fails
    /// and the download pauses.
    public func resetConnections() {
        request?.resetSockets()
    }

    // MARK: Actions

    private func perform(_ actions: [ResumableDownload.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: ResumableDownload.Action) {
        switch action {
        case .sendRequest(let spec):
            send(spec)
        case .appendBody:
            break   // libcurl hands the body over as it comes
        case .closeConnection:
            closeConnection()
        case .truncatePart(let length):
            if let error = part.truncate(to: length) { return failIO(error) }
            // Cut to 0 for a 200, whose record (already the machine's) names the digest the bytes will have.
            hasher = length == 0 ? machine.record.digest.map { ContentHasher($0.algorithm) } : nil
        case .writeRecord(let record):
            // fsync and the record's write off the loop (TransferDisk), at the disk's pace; an error pauses the
            // download then.
            part.keep(record, mustWrite: machine.state != .running, on: curl.disk, loop: curl.loop) { [weak self] error in self?.failIO(error) }
        case .computeDigest(let algorithm):
            computeDigest(algorithm)
        case .renameIntoPlace:
            if let mismatch = part.lengthMismatch(expectedLength: machine.total) {
                closeConnection()
                return perform(machine.pause(mismatch))
            }
            renaming = true
            part.renameIntoPlace(on: curl.disk) { [weak self] error in
                guard let self else { return }
                renaming = false
                if let error { return failIO(error) }
                logger.info("done: \(machine.bytesDone) bytes")
                perform(machine.renamed())
            }
        case .removeRecord:
            // The file is in place: a record left behind only makes a later run of the same download find it done.
            part.removeRecord(on: curl.disk) { [logger] error in
                if let error { logger.warning("the finished download's record stays: \(error)") }
            }
        case .report(let state):
            if case .paused(let reason) = state { logger.info("paused: \(reason)") }
            if case .failed(let reason) = state { logger.warning("failed: \(reason)") }
            if state != .running {
                part.close()
                pace.stop()
                slices.stop()
                hasher = nil
            }
            onChange?(self)
        }
    }

    // MARK: The request

    private func send(_ spec: HTTPClientRequest) {
        closeConnection()
        let range = spec.value(of: "Range")
        logger.debug("\(spec.method) \(spec.url)\(range.map { " (\($0))" } ?? "")")
        let made = CurlRequest.make(CurlRequestSpec(method: spec.method == "HEAD" ? .head : .get, url: spec.url, headers: spec.headers, tls: tls), on: curl)
        let request: CurlRequest
        switch made {
        case .success(let value): request = value
        case .failure(let failure): return perform(machine.connectionFailed(failure.message))
        }
        bytesReceived = 0
        pace.start(limits: limits, bytes: { [weak self] in self?.bytesReceived ?? 0 }) { [weak self] stall in
            guard let self else { return }
            closeConnection()
            perform(machine.connectionFailed("\(stall)"))
        }
        request.onHead = { [weak self, weak request] head in
            guard let self, let request, request === self.request else { return false }
            perform(machine.responseHead(head))
            return request === self.request && !request.isFinished
        }
        request.onBody = { [weak self, weak request] bytes in
            guard let self, let request, request === self.request else { return false }
            return append(bytes) && request === self.request
        }
        request.onEnd = { [weak self, weak request] result in
            guard let self, let request, request === self.request else { return }
            self.request = nil
            pace.stop()
            switch result {
            case .success:
                perform(machine.bodyEnded())
            case .failure(let failure) where failure.tls:
                // A certificate that does not verify fails the same way on every retry: not a pause.
                perform(machine.requestFailed("TLS: \(failure.message)"))
            case .failure(let failure):
                perform(machine.connectionFailed(failure.message))
            }
        }
        self.request = request
        request.start()
    }

    private func closeConnection() {
        pace.stop()
        guard let request else { return }
        self.request = nil
        request.cancel()
    }

    /// Appends body bytes to the part; false (and paused) on an error.
    private func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytesReceived += bytes.count
        if let error = part.append(bytes) {
            failIO(error)
            return false
        }
        hasher?.update(bytes)
        perform(machine.bodyBytes(bytes.count))
        return true
    }

    // MARK: Files

    private func failIO(_ error: SystemError) {
        closeConnection()
        perform(machine.pause("\(error)"))
    }

    /// The digest of the part: the one computed as the bytes arrived when it covers them all, otherwise the
    /// part read back 1 MiB per loop turn, so that a large file does not hold the loop.
    private func computeDigest(_ algorithm: DigestAlgorithm) {
        if let hasher, hasher.algorithm == algorithm, hasher.count == machine.bytesDone {
            self.hasher = nil
            logger.info("\(algorithm.rawValue) digest computed as the bytes arrived")
            return perform(machine.digestComputed(hasher.finish()))
        }
        hasher = nil
        logger.info("\(algorithm.rawValue) digest of the resumed part read back in slices")
        let opened: FileDescriptor
        do throws(SystemError) {
            opened = try part.openForReading()
        } catch {
            slices.stop()
            return failIO(error)
        }
        slices.hash(opened, algorithm) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let digest): perform(machine.digestComputed(digest))
            case .failure(let error): failIO(error)
            }
        }
    }
}

/// Reads a file back 1 MiB per loop turn into a digest (about 0.6 ms of SHA-256 per turn).
final class DigestSlices {
    private unowned let loop: EventLoop
    private var work: EventTimer?
    private var file: FileDescriptor?

    init(loop: EventLoop) { self.loop = loop }

    /// Hashes what `opened` (the part, opened for reading) holds.
    func hash(_ opened: consuming FileDescriptor, _ algorithm: DigestAlgorithm,
              done: @escaping (Result<ContentDigest, SystemError>) -> Void) {
        stop()
        file = consume opened
        let hasher = ContentHasher(algorithm)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        work = EventTimer(loop: loop) { [weak self] in
            guard let self else { return }
            let read = buffer.withUnsafeMutableBytes { bytes -> Result<Int, SystemError> in
                do throws(SystemError) { return .success(try file?.read(into: bytes) ?? 0) } catch { return .failure(error) }
            }
            let count: Int
            switch read {
            case .success(let value): count = value
            case .failure(let error):
                stop()
                return done(.failure(error))
            }
            if count > 0 {
                buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                work?.arm(after: .zero)
                return
            }
            stop()
            done(.success(hasher.finish()))
        }
        work?.arm(after: .zero)
    }

    func stop() {
        work?.close()
        work = nil
        file = nil
    }

    deinit { stop() }
}
