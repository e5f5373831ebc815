// The built-in `http` service: the files under `root`, served with GET and HEAD, strong ETags, byte ranges
// and If-Range, so that clients resume interrupted downloads byte-exactly (SPEC section 7, TN2277 "Beyond
// the basics"). The protocol's rules are the pure HTTPRequestParser and HTTPFileResponder; this class opens
// the file, checks that it lies under `root`, and queues the body as a libevent file segment (sendfile: the
// bytes never pass through Swift).
//
// libevent's evhttp is not used: it owns its connections, and netlifed must pause a suspended app's
// connections, reclaim them in place and close or keep them by policy, which needs netlife's own Connection
// (and a connection accepted by netlife's listener cannot be handed to evhttp through its public API).

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// Serves the regular files under a root directory over HTTP/1.1.
public final class HTTPService: Service, ConnectionDelegate {
    /// The descriptor that registers the service as `service = http`.
    public static let descriptor = ServiceDescriptor(name: "http", optionKeys: ["root", "max-ranges", "request-timeout"]) {
        options throws(ServiceOptionError) in
        guard let root = options["root"] else {
            throw ServiceOptionError(key: nil, "service http needs root = DIRECTORY")
        }
        guard root.hasPrefix("/"), let resolved = realPath(root), isDirectory(resolved) else {
            throw ServiceOptionError(key: "root", "root must be an existing directory given by its absolute path, got '\(root)'")
        }
        var maxRanges = 1
        if let text = options["max-ranges"] {
            guard let value = Int(text), (0...100).contains(value) else {
                throw ServiceOptionError(key: "max-ranges", "max-ranges must be a whole number from 0 to 100, got '\(text)'")
            }
            maxRanges = value
        }
        var timeout: Duration = .seconds(10)
        if let text = options["request-timeout"] {
            guard let value = Duration(configText: text), value >= .milliseconds(100), value <= .seconds(3600) else {
                throw ServiceOptionError(key: "request-timeout", "request-timeout must be a duration between 100ms and 1h, got '\(text)'")
            }
            timeout = value
        }
        return HTTPService(root: resolved, maxRanges: maxRanges, requestTimeout: timeout)
    }

    /// The resolved root, without a trailing slash.
    let root: String
    let maxRanges: Int
    /// How long a connection may take to send a request head (from its accept, or from the end of the last
    /// response), and how long a response may go without the peer taking a byte.
    let requestTimeout: Duration
    private weak var app: App?
    private var states: [ObjectIdentifier: ConnectionState] = [:]

    /// What the service remembers of one connection.
    private final class ConnectionState {
        var parser = HTTPRequestParser()
        var timer: AppTimer?
        /// While a response is being sent: the bytes still to send at the last check.
        var unsentAtLastCheck = Int.max
        var closeWhenSent = false
    }

    public init(root: String, maxRanges: Int = 1, requestTimeout: Duration = .seconds(10)) {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        self.maxRanges = maxRanges
        self.requestTimeout = requestTimeout
    }

    public func didAttach(to app: App) {
        self.app = app
    }

    public func serve(_ connection: Connection) {
        let state = ConnectionState()
        states[ObjectIdentifier(connection)] = state
        connection.delegate = self
        // Reading stops while a response is queued (one request at a time, as nginx does), so that a client
        // that pipelines without reading holds one open file, not thousands.
        connection.outputHighWaterMark = 0
        armTimer(connection, state)
    }

    // MARK: ConnectionDelegate

    public func connectionDidRead(_ connection: Connection) {
        process(connection)
    }

    public func connectionDidDrainOutput(_ connection: Connection) {
        guard let state = states[ObjectIdentifier(connection)] else { return }
        if state.closeWhenSent { return connection.close(.afterFlush) }
        armTimer(connection, state)
        process(connection)
    }

    public func connectionDidReachEnd(_ connection: Connection) {
        // The client sent everything it will send: answer what is complete, then close.
        process(connection)
        connection.close(.afterFlush)
    }

    public func connectionDidClose(_ connection: Connection, error: SystemError?) {
        states[ObjectIdentifier(connection)]?.timer?.cancel()
        states[ObjectIdentifier(connection)] = nil
    }

    // MARK: Requests

    /// Answers the complete requests in the connection's input, one at a time: after each response that is
    /// not sent at once, reading waits until it is.
    private func process(_ connection: Connection) {
        guard let state = states[ObjectIdentifier(connection)] else { return }
        while connection.state == .open && connection.output.isEmpty && !connection.input.isEmpty {
            let bytes = connection.input.peekBytes(limit: HTTPRequestParser.maxHeadBytes + 1)
            let parsed: (head: HTTPRequestHead, consumed: Int)?
            do {
                parsed = try state.parser.parse(bytes)
            } catch {
                return fail(connection, state, status: error.status)
            }
            guard let (head, consumed) = parsed else { return }
            connection.input.drain(consumed)
            state.parser.reset()
            respond(to: head, on: connection, state)
            if connection.pauseReadingIfOutputIsHigh() {
                state.timer?.cancel()
                state.unsentAtLastCheck = Int.max
                armSendTimer(connection, state)
                return
            }
            // Sent at once: the time for the next request head starts now.
            armTimer(connection, state)
        }
    }

    private func respond(to head: HTTPRequestHead, on connection: Connection, _ state: ConnectionState) {
        guard head.method == "GET" || head.method == "HEAD" else {
            return fail(connection, state, status: 405)
        }
        guard head.contentLength ?? 0 == 0, !head.isChunked else {
            return fail(connection, state, status: 400)
        }
        guard let path = head.path, case let (fd, info)? = openFile(path) else {
            return fail(connection, state, status: 404)
        }
        let response = HTTPFileResponder.respond(to: head, file: info, contentType: HTTPFileResponder.contentType(forPath: path),
                                                 maxRanges: maxRanges, now: Int64(WallClock.now()))
        connection.output.append(HTTPFileResponder.serialize(response, keepAlive: head.keepAlive, minorVersion: head.minorVersion))
        if head.method == "GET", let body = response.body {
            do {
                try connection.output.appendFile(fd, offset: body.first, length: body.last - body.first + 1)
            } catch {
                connection.close(.now)
                return
            }
        } else {
            close(fd)
        }
        if !head.keepAlive { state.closeWhenSent = true }
        connection.flush()
        if connection.output.isEmpty && state.closeWhenSent { connection.close(.afterFlush) }
    }

    /// An error page, then the connection closes.
    private func fail(_ connection: Connection, _ state: ConnectionState, status: Int) {
        guard let page = HTTPFileResponder.errorResponse(status: status, now: Int64(WallClock.now())) else {
            return connection.close(.now)
        }
        connection.output.append(page.head)
        connection.output.append(page.body)
        state.closeWhenSent = true
        connection.close(.afterFlush)
    }

    /// Opens `path` under the root: a regular file whose real path (symlinks resolved, read back from the
    /// open descriptor, so that nothing can change between the check and the use) lies under the root.
    private func openFile(_ path: String) -> (CInt, FileInfo)? {
        let fd = open(root + path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
              let real = realPath("/proc/self/fd/\(fd)"), real.hasPrefix(root == "/" ? "/" : root + "/") else {
            close(fd)
            return nil
        }
        return (fd, FileInfo(size: Int(info.st_size), modifiedSeconds: Int64(info.st_mtim.tv_sec),
                             modifiedNanoseconds: Int(info.st_mtim.tv_nsec), inode: UInt64(info.st_ino)))
    }

    // MARK: Timeouts (app timers: they wait while the app is suspended)

    /// Waiting for a request head: after `requestTimeout` the connection is closed.
    private func armTimer(_ connection: Connection, _ state: ConnectionState) {
        state.timer?.cancel()
        guard let app else { return }
        state.timer = app.schedule(after: requestTimeout) { [weak connection] in
            guard let connection, connection.output.isEmpty else { return }
            connection.close(.now)
        }
    }

    /// Sending a response: each `requestTimeout` the peer must have taken bytes, or it is reset.
    private func armSendTimer(_ connection: Connection, _ state: ConnectionState) {
        guard let app else { return }
        state.timer = app.schedule(after: requestTimeout) { [weak self, weak connection, weak state] in
            guard let self, let connection, let state, !connection.output.isEmpty else { return }
            let unsent = connection.output.count
            if unsent >= state.unsentAtLastCheck {
                connection.close(.reset)
            } else {
                state.unsentAtLastCheck = unsent
                armSendTimer(connection, state)
            }
        }
    }
}

/// The canonical absolute path of `path` (symlinks resolved), or nil. The corresponding C function is
/// `realpath`.
func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}

func isDirectory(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
}
