// One FTP download on the event loop: the thin shell of FTPDownloadSession. It keeps the control connection
// (replies cut by FTPReplyParser, commands written with CRLF) and the passive data connection (connected to
// the control connection's peer at the port the server names, its bytes appended to `OUTPUT.part`), and the
// part and its record through PartFile, as the HTTP shell does. Bytes on either connection count towards the
// transfer limits (TransferPace), watched from connecting to the final reply. The decisions (REST or not,
// EPSV or PASV, when the file is complete) are the session's.

import NetLife
import NetLifeEvent

/// A download from an `ftp://` URL (anonymous login, passive mode) into a file.
public final class FTPDownload: Transfer, ConnectionDelegate {
    public let url: URLParts
    /// Where the finished file goes; the part and its record sit next to it.
    public let output: String
    /// Told after every change of state or progress worth showing.
    public var onChange: ((any Transfer) -> Void)?

    private var machine: FTPDownloadSession
    private unowned let loop: EventLoop
    private let logger: Logger
    private let part: PartFile
    private var controlConnector: HostConnector?
    private var control: Connection?
    /// The address the control connection reached: the data connection goes there too.
    private var controlAddress: SocketAddress?
    private var replies = FTPReplyParser()
    private var dataConnector: OutboundConnector?
    private var data: Connection?
    /// Whether the data connection's bytes go to the part (from RETR until the session closes it).
    private var receiving = false
    /// The idle and low-speed limits the session is held to, from connecting to the final reply: a server
    /// that never greets, says `150` and falls silent, or never sends `226`, pauses the download.
    public let limits: TransferLimits
    private let pace: TransferPaceTimer
    /// Bytes received on the control and data connections of this session.
    private var bytesReceived = 0

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
        machine = FTPDownloadSession(url: url, existing: existing, partSize: partSize)
    }

    public var state: TransferState { machine.state }
    public var resumeFiles: [String] { [part.path, part.recordPath] }
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

    /// Performs the actions in order; a file action that fails ends the list and pauses the download.
    private func perform(_ actions: [FTPDownloadSession.Action]) {
        for action in actions {
            if let error = perform(action) {
                closeData()
                closeControl()
                return perform(machine.fileFailed("\(error)"))
            }
        }
    }

    private func perform(_ action: FTPDownloadSession.Action) -> SystemError? {
        switch action {
        case .connectControl:
            connectControl()
        case .sendCommand(let command):
            logger.debug("> \(command)")
            guard let control else { return nil }
            control.output.append(command + "\r\n")
            control.flush()
        case .connectData(let port):
            connectData(port: port)
        case .receiveData:
            receiving = true
        case .closeData:
            closeData()
        case .closeControl:
            closeControl()
        case .truncatePart(let length):
            return part.truncate(to: length)
        case .writeRecord(let record):
            return part.writeRecord(record)
        case .renameIntoPlace:
            if let mismatch = part.lengthMismatch(expectedLength: machine.total) {
                perform(machine.fileFailed(mismatch))
                return nil
            }
            if let error = part.renameIntoPlace() { return error }
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
        return nil
    }

    // MARK: Connections

    private func connectControl() {
        closeControl()
        replies = FTPReplyParser()
        bytesReceived = 0
        pace.start(limits: limits, bytes: { [weak self] in self?.bytesReceived ?? 0 }) { [weak self] stall in
            guard let self else { return }
            closeData()
            closeControl()
            perform(machine.controlFailed("\(stall)"))
        }
        controlConnector = HostConnector(loop: loop, host: url.host.connectName, port: UInt16(clamping: url.port)) { [weak self] result in
            guard let self else {
                if case .success(let fd) = result { SocketCalls.close(fd) }
                return
            }
            let address = controlConnector?.address
            controlConnector = nil
            switch result {
            case .success(let fd):
                switch adopt(fd) {
                case .success(let connection):
                    logger.debug("control connection to \(address.map { "\($0)" } ?? url.authority)")
                    control = connection
                    controlAddress = address
                case .failure(let error):
                    perform(machine.controlFailed("\(error)"))
                }
            case .failure(let error):
                perform(machine.controlFailed(error.message))
            }
        }
    }

    /// Connects the data connection to the control connection's peer, at `port`: never to an address the
    /// server names.
    private func connectData(port: Int) {
        closeData()
        let address: SocketAddress
        switch controlAddress {
        case .ipv4(let host, _)?: address = .ipv4(host, port: UInt16(clamping: port))
        case .ipv6(let host, _)?: address = .ipv6(host, port: UInt16(clamping: port))
        case .unix?, nil: return perform(machine.dataFailed("no address for the data connection"))
        }
        dataConnector = OutboundConnector(loop: loop, address: address) { [weak self] result in
            guard let self else {
                if case .success(let fd) = result { SocketCalls.close(fd) }
                return
            }
            dataConnector = nil
            switch result.flatMap(adopt) {
            case .success(let connection):
                data = connection
                perform(machine.dataConnected())
            case .failure(let error):
                perform(machine.dataFailed("data connection: \(error)"))
            }
        }
    }

    /// A connection on the connected descriptor `fd`, whose delegate is this download.
    private func adopt(_ fd: CInt) -> Result<Connection, SystemError> {
        do throws(SystemError) {
            let connection = try Connection(loop: loop, fd: fd)
            connection.delegate = self
            return .success(connection)
        } catch {
            return .failure(error)
        }
    }

    private func closeControl() {
        controlConnector?.cancel()
        controlConnector = nil
        // Without the control connection the session waits on nothing more from the network.
        pace.stop()
        guard let control else { return }
        self.control = nil
        control.delegate = nil
        control.close(.afterFlush)   // a QUIT may be waiting to go out
    }

    private func closeData() {
        receiving = false
        dataConnector?.cancel()
        dataConnector = nil
        guard let data else { return }
        self.data = nil
        data.delegate = nil
        data.close(.now)
    }

    public func connectionDidRead(_ connection: Connection) {
        if connection === control {
            readReplies(connection)
        } else if connection === data, receiving {
            readData(connection)
        }
    }

    public func connectionDidReachEnd(_ connection: Connection) {
        if connection === control {
            readReplies(connection)
            if connection === control { perform(machine.controlFailed("the server closed the control connection")) }
        } else if connection === data {
            if receiving { readData(connection) }
            if connection === data, receiving { perform(machine.dataEnded()) }
        }
        // Whatever the session made of it, a connection at its end is of no more use.
        if connection === control { closeControl() }
        if connection === data { closeData() }
    }

    public func connectionDidClose(_ connection: Connection, error: SystemError?) {
        let reason = error.map { "\($0)" }
        if connection === control {
            control = nil
            perform(machine.controlFailed(reason ?? "the control connection closed"))
        } else if connection === data {
            data = nil
            perform(machine.dataFailed(reason.map { "data connection: \($0)" } ?? "the data connection closed"))
        }
    }

    /// Feeds what the control connection holds (at most one read's worth) to the parser, and each reply to
    /// the session, stopping when the session lets the connection go.
    private func readReplies(_ connection: Connection) {
        let bytes = connection.input.peekBytes()
        connection.input.drain(bytes.count)
        bytesReceived += bytes.count
        var found: [FTPReply] = []
        var failure: FTPReplyError?
        do {
            try replies.feed(bytes, into: &found)
        } catch {
            failure = error
        }
        for reply in found where connection === control {
            logger.debug("< \(reply.shown)")
            perform(machine.reply(reply))
        }
        if let failure, connection === control { perform(machine.controlFailed("bad reply: \(failure.message)")) }
    }

    /// Appends what the data connection holds to the part, 1 MiB at a time.
    private func readData(_ connection: Connection) {
        while receiving, connection === data, !connection.input.isEmpty {
            let count = min(connection.input.count, 1 << 20)
            bytesReceived += count
            if let error = part.append(connection.input, count) {
                closeData()
                closeControl()
                return perform(machine.fileFailed("\(error)"))
            }
            perform(machine.dataBytes(count))
        }
    }
}
