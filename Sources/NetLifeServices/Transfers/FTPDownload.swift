// One resumable FTP or FTPS download on the event loop: the thin shell of ResumableFTPDownload. Each step
// runs on libcurl (passive mode, SIZE and MDTM for the probe, REST and RETR for the retrieval; FTPS implicit
// with `ftps://`, explicit AUTH TLS with `--ssl-reqd`); the files are the HTTP downloader's (PartFile), each
// request is held to the transfer limits. libcurl waits, blocking, for a server's answers at the end of an
// FTP transfer (the 226 after the data, the answer to QUIT): so netlifed ends each request itself, the probe
// once the size is known and the retrieval once the whole file is on disk, and libcurl then closes the
// control connection without waiting. (Only a server that tells no SIZE is left to libcurl's end.)

import NetLife
import NetLifeEvent
internal import CCurl

/// A download from an `ftp://` or `ftps://` URL into a file.
public final class FTPDownload: Transfer {
    public let url: URLParts
    public let output: String
    public var resumeFiles: [String] { [part.path, part.recordPath] }
    public var onChange: ((any Transfer) -> Void)?
    public let tls: TransferTLS
    /// Whose rights its files are used with (nil: the daemon's own).
    public var owner: FileCredentials? { part.owner }
    public let limits: TransferLimits

    private var machine: ResumableFTPDownload
    private let curl: CurlMulti
    private let logger: Logger
    private let part: PartFile
    private var request: CurlRequest?
    /// Whether the finished part's fsync and rename are under way off the loop.
    private var renaming = false
    private let pace: TransferPaceTimer
    private var bytesReceived = 0

    public init(url: URLParts, output: String, tls: TransferTLS = .verified, owner: FileCredentials? = nil, curl: CurlMulti, loop: EventLoop, logger: Logger,
                limits: TransferLimits = .defaults) {
        self.url = url
        self.output = output
        self.tls = tls
        self.curl = curl
        self.limits = limits
        pace = TransferPaceTimer(loop: loop)
        self.logger = logger.labeled("\(logger.label) download \(output)")
        part = PartFile(output: output, owner: owner)
        let (partSize, existing) = part.leftOver()
        machine = ResumableFTPDownload(url: url, existing: existing, partSize: partSize)
    }

    public var state: TransferState { machine.state }
    public var direction: TransferDirection { .download }
    public var bytesDone: Int { machine.bytesDone }
    public var total: Int? { machine.total }

    public func start() { perform(machine.start()) }

    public func pause(_ reason: String) {
        // The part is going into place (its fsync and rename off the loop): the download is as good as done.
        guard !renaming else { return }
        perform(machine.pause(reason))
    }

    /// Resets the connections a request holds (RST to the server), as a reclaim does.
    public func resetConnections() { request?.resetSockets() }

    private func perform(_ actions: [ResumableFTPDownload.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: ResumableFTPDownload.Action) {
        switch action {
        case .probe:
            send(probe: true, from: 0)
        case .retrieve(let offset):
            send(probe: false, from: offset)
        case .closeConnection:
            closeConnection()
        case .truncatePart(let length):
            if let error = part.truncate(to: length) { failIO(error) }
        case .writeRecord(let record):
            // fsync and the record's write off the loop (TransferDisk), at the disk's pace; an error pauses the
            // download then.
            part.keep(record, mustWrite: machine.state != .running, on: curl.disk, loop: curl.loop) { [weak self] error in self?.failIO(error) }
        case .renameIntoPlace:
            if let mismatch = part.lengthMismatch(expectedLength: machine.total) { return perform(machine.pause(mismatch)) }
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
            }
            onChange?(self)
        }
    }

    private func send(probe: Bool, from offset: Int) {
        closeConnection()
        logger.debug(probe ? "SIZE and MDTM \(url)" : "RETR \(url) from \(offset)")
        let spec = CurlRequestSpec(method: .get, url: url, resumeFrom: offset, probeOnly: probe, tls: tls)
        let request: CurlRequest
        switch CurlRequest.make(spec, on: curl) {
        case .success(let made): request = made
        case .failure(let failure): return perform(machine.connectionFailed(failure.message))
        }
        bytesReceived = 0
        pace.start(limits: limits, bytes: { [weak self] in self?.bytesReceived ?? 0 }) { [weak self] stall in
            guard let self else { return }
            closeConnection()
            perform(machine.connectionFailed("\(stall)"))
        }
        // The probe ends once the size is known (MDTM comes before SIZE): ended by netlifed, libcurl closes
        // the control connection without a QUIT whose answer it would wait for, holding the loop.
        var facts: (size: Int?, modified: Int64?)?
        request.onProgress = { [weak request] in
            guard let request else { return false }
            let known = request.fileFacts()
            guard known.size != nil else { return true }
            facts = known
            return false
        }
        request.onBody = { [weak self, weak request] bytes in
            guard let self, let request, request === self.request else { return false }
            // libcurl writes a probe's facts as header-like lines (`Content-Length: N`): not the file's bytes.
            if probe { return true }
            bytesReceived += bytes.count
            if let error = part.append(bytes) {
                failIO(error)
                return false
            }
            perform(machine.bodyBytes(bytes.count))
            guard request === self.request else { return false }
            // The whole file is here: the retrieval ends now rather than at libcurl's end, which waits for the
            // server's 226 (and a QUIT's answer) holding the loop, however long a server takes.
            if let total = machine.total, machine.bytesDone == total {
                closeConnection()
                perform(machine.retrieved())
                return false
            }
            return true
        }
        request.onEnd = { [weak self, weak request] result in
            guard let self, let request, request === self.request else { return }
            self.request = nil
            pace.stop()
            switch result {
            case .success where probe:
                let (size, modified) = request.fileFacts()
                if let size, let problem = request.sizeAnswerProblem(size: size) { return perform(machine.requestFailed(problem)) }
                perform(machine.probed(size: size, modified: modified))
            case .failure(let failure) where probe && failure.code == CURLE_ABORTED_BY_CALLBACK.rawValue && facts != nil:
                if let size = facts?.size, let problem = request.sizeAnswerProblem(size: size) { return perform(machine.requestFailed(problem)) }
                perform(machine.probed(size: facts?.size, modified: facts?.modified))
            case .success:
                perform(machine.retrieved())
            case .failure(let failure) where failure.code == CURLE_FTP_COULDNT_USE_REST.rawValue:
                logger.info("the server refused REST \(offset): \(failure.message)")
                perform(machine.restRefused())
            case .failure(let failure) where failure.tls:
                perform(machine.requestFailed("TLS: \(failure.message)"))
            case .failure(let failure) where failure.code == CURLE_REMOTE_FILE_NOT_FOUND.rawValue || failure.code == CURLE_LOGIN_DENIED.rawValue:
                perform(machine.requestFailed(failure.message))
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

    private func failIO(_ error: SystemError) {
        closeConnection()
        perform(machine.pause("\(error)"))
    }
}
