// The built-in `imap` protocol of data sockets: a mail client's connection as TN2277 describes it. It logs
// in (`user`, `password-file`), selects `mailbox` (INBOX), and idles while the app is in the foreground
// (RFC 2177), counting the untagged EXISTS and EXPUNGE the server pushes; in the background (`policy =
// quiet`) it ends IDLE with DONE and holds a background task until the server's reply; on foreground it
// idles again; on terminate it logs out. The protocol's rules are the pure IMAPResponseParser and
// IMAPClientSession; this class only moves bytes between them and the socket.

import NetLife
import NetLifeEvent
@preconcurrency import Glibc

/// An IMAP client that idles in the foreground and is quiet in the background.
public final class IMAPProtocol: DataSocketHandler {
    /// The descriptor that registers the protocol as `protocol = imap`.
    public static let descriptor = DataProtocolDescriptor(name: "imap", optionKeys: ["user", "password-file", "mailbox"]) {
        configuration throws(ServiceOptionError) in
        let options = configuration.protocolOptions
        guard let user = options["user"], !user.isEmpty else {
            throw ServiceOptionError("protocol imap needs user = NAME")
        }
        guard let path = options["password-file"] else {
            throw ServiceOptionError("protocol imap needs password-file = PATH (a file whose first line is the password)")
        }
        let password = try readPassword(path)
        return IMAPProtocol(user: user, password: password, mailbox: options["mailbox"] ?? "INBOX")
    }

    /// The first line of the file at `path`, without its line ending. The file is small by nature: at most
    /// 4 KiB are read.
    static func readPassword(_ path: String) throws(ServiceOptionError) -> String {
        // Read as every file a config names: without blocking on a FIFO, a regular file, bounded.
        let bytes: [UInt8]
        switch RegularFile.read(path, limit: 65536) {
        case .success(let read): bytes = read
        case .failure(let failure):
            let missing = failure == .system(SystemError("open \(path)", Errno(rawValue: ENOENT)))
            throw ServiceOptionError(key: "password-file", "cannot read password-file '\(path)': \(failure)", isAboutThisHost: missing)
        }
        let count = bytes.count
        let line = bytes[0..<count].prefix { $0 != 10 && $0 != 13 }
        guard !line.isEmpty else {
            throw ServiceOptionError(key: "password-file", "password-file '\(path)' is empty")
        }
        return String(decoding: line, as: UTF8.self)
    }

    private let user: String
    private let password: String
    private let mailbox: String
    private var session: IMAPClientSession
    private var parser = IMAPResponseParser()

    public init(user: String, password: String, mailbox: String = "INBOX") {
        self.user = user
        self.password = password
        self.mailbox = mailbox
        session = IMAPClientSession(user: user, password: password, mailbox: mailbox)
    }

    /// A new connection starts a new session, not quiet: when the app is in the background the socket asks
    /// for quiet mode right after this (`dataSocketEnterQuiet`).
    public func dataSocketDidConnect(_ socket: DataSocket) {
        session = IMAPClientSession(user: user, password: password, mailbox: mailbox)
        parser = IMAPResponseParser()
    }

    public func dataSocketDidRead(_ socket: DataSocket) {
        guard let input = socket.input else { return }
        let bytes = input.peekBytes()
        input.drain(bytes.count)
        // Responses completed before a parse error still count (a BYE that explains the error, say).
        var responses: [IMAPResponse] = []
        var failure: IMAPParseError?
        do {
            try parser.feed(bytes, into: &responses)
        } catch {
            failure = error
        }
        for response in responses { perform(session.receive(response), on: socket) }
        if let failure { socket.fail("IMAP: \(failure)") }
    }

    public func dataSocketEnterQuiet(_ socket: DataSocket) -> QuietEntry {
        perform(session.setQuiet(true), on: socket)
        return session.awaitingQuietReply ? .awaitingReply : .entered
    }

    public func dataSocketLeaveQuiet(_ socket: DataSocket) {
        perform(session.setQuiet(false), on: socket)
    }

    public func dataSocketKeepAlive(_ socket: DataSocket) {
        perform(session.keepAlive(), on: socket)
    }

    public func dataSocketSayGoodbye(_ socket: DataSocket) {
        perform(session.logout(), on: socket)
    }

    public var protocolStatus: DataProtocolStatus {
        var details: [DataProtocolDetail] = []
        if let exists = session.exists { details.append(DataProtocolDetail("exists", .count(exists))) }
        details += [DataProtocolDetail("existsUpdates", .count(session.existsUpdates)),
                    DataProtocolDetail("expunges", .count(session.expunges)),
                    DataProtocolDetail("idle", .flag(session.phase == .idling))]
        return DataProtocolStatus(details)
    }

    private func perform(_ actions: [IMAPAction], on socket: DataSocket) {
        for action in actions {
            switch action {
            case .send(let line):
                socket.send(line)
            case .quietReached:
                socket.quietReplyArrived()
            case .loggedIn:
                break
            case .fail(let message):
                socket.fail("IMAP: \(message)")
                return
            case .close:
                // LOGOUT was answered; the socket is already closing after its flush.
                break
            }
        }
    }
}
