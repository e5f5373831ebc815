// One resumable FTP or FTPS download on the event loop: the thin shell of ResumableFTPDownload. Each step
// runs on libcurl (passive mode, SIZE and MDTM for the probe, REST and RETR for the retrieval; FTPS implicit
// with `ftps://`, explicit AUTH TLS with `--ssl-reqd`); the files are the HTTP downloader's (PartFile), each
// request is held to the transfer limits.

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
    public let limits: TransferLimits

    private var machine: ResumableFTPDownload
    private let curl: CurlMulti
    private let logger: Logger
    private let part: PartFile
    private var request: CurlRequest?
    private let pace: TransferPaceTimer
    private var bytesReceived = 0

    public init(url: URLParts, output: String, tls: TransferTLS = .verified, curl: CurlMulti, loop: EventLoop, logger: Logger,
                limits: TransferLimits = .defaults) {
        self.url = url
        self.output = output
        self.tls = tls
        self.curl = curl
        self.limits = limits
        pace = TransferPaceTimer(loop: loop)
        self.logger = logger.labeled("\(logger.label) download \(output)")
        part = PartFile(output: output)
        let (partSize, existing) = part.leftOver()
        machine = ResumableFTPDownload(url: url, existing: existing, partSize: partSize)
    }

    public var state: TransferState { machine.state }
    public var direction: TransferDirection { .download }
    public var bytesDone: Int { machine.bytesDone }
    public var total: Int? { machine.total }

    public func start() { perform(machine.start()) }

    public func pause(_ reason: String) { perform(machine.pause(reason)) }

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
            if let error = part.writeRecord(record) { failIO(error) }
        case .renameIntoPlace:
            if let mismatch = part.lengthMismatch(expectedLength: machine.total) { return perform(machine.pause(mismatch)) }
            if let error = part.renameIntoPlace() { return failIO(error) }
            logger.info("done: \(machine.bytesDone) bytes")
            perform(machine.renamed())
        case .removeRecord:
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
            return request === self.request
        }
        request.onEnd = { [weak self, weak request] result in
            guard let self, let request, request === self.request else { return }
            self.request = nil
            pace.stop()
            switch result {
            case .success where probe:
                let (size, modified) = request.fileFacts()
                perform(machine.probed(size: size, modified: modified))
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
