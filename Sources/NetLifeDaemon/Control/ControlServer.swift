// The control socket (docs/control-protocol.md): a Unix stream socket, mode 0600 in a 0700 directory created under a
// tight umask before bind, peers checked with SO_PEERCRED, at most 32 connections, requests of at most
// 64 KiB. Each connection is a ControlSession (ControlSession.swift) that reads JSON lines and answers them
// in order. When every slot is taken, a newcomer evicts the session that has waited longest without a
// request in progress, so that idle or stalled clients cannot lock the operator out.

@preconcurrency import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent

/// Why the control socket could not be set up.
struct ControlSocketError: Error, CustomStringConvertible {
    var description: String
}

/// Accepts control connections and hands their requests to `dispatch`.
final class ControlServer {
    /// Handles one request; calls `reply` exactly once, possibly later.
    typealias Dispatch = (_ request: JSON, _ session: ControlSession, _ reply: @escaping (JSON) -> Void) -> Void

    let path: String
    private unowned let loop: EventLoop
    private let logger: Logger
    private let group: gid_t?
    private let dispatch: Dispatch
    private var listener: Listener?
    private var sessions: [ObjectIdentifier: ControlSession] = [:]
    /// The socket's directory when `start()` made it (not when it was there before: systemd's
    /// RuntimeDirectory=, /tmp), for the daemon to remove at exit if it is empty then.
    private(set) var madeDirectory: String?
    /// Refused connections are logged within this limit (anyone on the host may connect).
    private var refusalLog = LogLimiter()
    /// The deadlines of sessions (shortened by unit tests).
    var timeouts = ControlSession.Timeouts()
    /// Told of every reply to a request, with the request when it was JSON (nil: it was not, or was too long).
    var onReply: ((_ request: JSON?, _ reply: JSON) -> Void)?

    init(path: String, group: gid_t?, loop: EventLoop, logger: Logger, dispatch: @escaping Dispatch) {
        self.path = path
        self.group = group
        self.loop = loop
        self.logger = logger.labeled("control")
        self.dispatch = dispatch
    }

    /// Creates the directory and binds the socket. Fails if another daemon answers on the path.
    func start() throws(ControlSocketError) {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        try prepareDirectory(directory.isEmpty ? "/" : directory)
        try removeStaleSocket()
        do {
            listener = try Listener(loop: loop, address: .unix(path), backlog: 64, unixMode: group == nil ? 0o600 : 0o660,
                                    onAccept: { [weak self] socket in
                                        guard let self else { return SocketCalls.close(socket.fd) }
                                        accepted(socket)
                                    },
                                    onError: { [weak self] error in
                                        guard let self else { return }
                                        logger.warning("\(error) on the control socket; pausing accept for 250ms")
                                        listener?.pause()
                                        loop.schedule(after: .milliseconds(250)) { [weak self] in self?.listener?.resume() }
                                    })
        } catch {
            throw ControlSocketError(description: "cannot listen on the control socket \(path): \(error)")
        }
        if let group {
            // The directory is still 0700, so nobody else can reach the socket while it changes group.
            // Under the hardened unit this needs a drop-in (SupplementaryGroups=, SystemCallFilter=@chown).
            if chown(path, uid_t.max, group) != 0 || chown(directory, uid_t.max, group) != 0 {
                logger.warning("control-group: cannot give the control socket to group \(group): \(Errno.current); only root and uid \(geteuid()) can use it")
            }
            chmod(directory, 0o750)
        }
        logger.info("listening on \(path)")
    }

    private func prepareDirectory(_ directory: String) throws(ControlSocketError) {
        let previous = umask(0o077)
        let made = mkdir(directory, 0o700)
        let error = Errno.current
        umask(previous)
        if made == 0 {
            madeDirectory = directory
            return
        }
        guard error.rawValue == EEXIST else {
            throw ControlSocketError(description: "cannot create the control socket directory \(directory): \(error)")
        }
        var info = stat()
        guard stat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw ControlSocketError(description: "\(directory) exists and is not a directory")
        }
        guard info.st_uid == geteuid() || geteuid() == 0 && info.st_uid == 0 else {
            throw ControlSocketError(description: "the control socket directory \(directory) belongs to uid \(info.st_uid), not to this daemon (uid \(geteuid()))")
        }
        guard info.st_mode & 0o022 == 0 || info.st_mode & S_ISVTX != 0 else {
            throw ControlSocketError(description: "the control socket directory \(directory) is writable by others (mode \(String(info.st_mode & 0o7777, radix: 8)))")
        }
    }

    private func removeStaleSocket() throws(ControlSocketError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw ControlSocketError(description: "\(path) exists and is not a socket")
        }
        if let fd = try? SocketCalls.connectUnixBlocking(path: path) {
            SocketCalls.close(fd)
            throw ControlSocketError(description: "another netlifed is already listening on \(path)")
        }
        unlink(path)
    }

    /// Closes the socket and every session.
    func close() {
        listener?.close()
        listener = nil
        for session in Array(sessions.values) { session.connection.close(.afterFlush) }
        sessions.removeAll()
    }

    // MARK: Sessions

    private func accepted(_ socket: AcceptedSocket) {
        let connection: Connection
        do {
            // Served before the apps' connections in each loop turn: `status` stays quick on a busy daemon.
            connection = try Connection(loop: loop, fd: socket.fd, priority: .control)
        } catch {
            logger.warning("dropped a control connection: \(error)")
            return
        }
        connection.outputHighWaterMark = ControlProtocol.maxUnreadReplyBytes
        let credentials = try? SocketCalls.peerCredentials(of: connection.fd)
        if let refusal = refusal(for: credentials) {
            refusalLog.log(logger, .warning, refusal)
            reject(connection, .permissionDenied, refusal)
            return
        }
        if sessions.count >= ControlProtocol.maxConnections {
            // Evict the session that has waited longest for a request; only sessions whose command is still
            // running are never evicted.
            guard let victim = sessions.values.filter({ !$0.isBusy }).min(by: { $0.waitingSince < $1.waitingSince }) else {
                logger.warning("refused a control connection: \(ControlProtocol.maxConnections) open, each with a command in progress")
                reject(connection, .tooManyConnections, "too many control connections (at most \(ControlProtocol.maxConnections), each with a command in progress)")
                return
            }
            logger.notice("closing the control connection that waited longest for a request: \(ControlProtocol.maxConnections) are open")
            sessions[ObjectIdentifier(victim)] = nil
            victim.end(.tooManyConnections, "closed to make room for another client: at most \(ControlProtocol.maxConnections) control connections are open at once")
        }
        let session = ControlSession(connection: connection, requester: credentials.map(Requester.init), server: self, loop: loop,
                                     timeouts: timeouts)
        sessions[ObjectIdentifier(session)] = session
    }

    private func reject(_ connection: Connection, _ code: ControlErrorCode, _ message: String) {
        connection.output.append(Reply.error(code, message).serializedLine)
        connection.close(.afterFlush)
    }

    /// Why a peer may not use the socket, or nil when it may: root, the daemon's own uid, and members of
    /// `control-group` (its primary group, or one of the supplementary groups it had when it connected) are
    /// allowed.
    private func refusal(for credentials: PeerCredentials?) -> String? {
        guard let credentials else { return "refused a control connection: SO_PEERCRED failed" }
        if credentials.uid == 0 || credentials.uid == geteuid() { return nil }
        if let group, credentials.gid == group || credentials.groups.contains(group) {
            return nil
        }
        return "refused a control connection from uid \(credentials.uid) (pid \(credentials.pid)): only root, uid \(geteuid())\(group.map { " and group \($0)" } ?? "") may use it"
    }

    func sessionClosed(_ session: ControlSession) {
        sessions[ObjectIdentifier(session)] = nil
    }

    func handle(_ request: JSON, from session: ControlSession, reply: @escaping (JSON) -> Void) {
        guard let onReply else { return dispatch(request, session, reply) }
        dispatch(request, session) { answer in
            onReply(request, answer)
            reply(answer)
        }
    }

    /// A request line that could not be read (not JSON, or too long) was answered with `reply`.
    func refusedUnreadable(_ reply: JSON) {
        onReply?(nil, reply)
    }
}
