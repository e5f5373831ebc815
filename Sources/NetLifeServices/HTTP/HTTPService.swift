// The built-in `http` service: the files under `root`, served with GET and HEAD, strong ETags, byte ranges
// and If-Range, so that clients resume interrupted downloads byte-exactly (docs/http.md, TN2277 "Beyond
// the basics"); and, with `upload-root`, resumable uploads into that directory (the IETF resumable-upload
// draft: POST or PUT creates an upload resource, HEAD gives its offset, PATCH appends, DELETE cancels). The
// protocol's rules are the pure HTTPRequestParser, HTTPFileResponder and ResumableUploadServer; this class
// opens the file, checks that it lies under `root`, and queues the body as a libevent file segment
// (sendfile: the bytes never pass through Swift); for an upload it writes the request body to the
// resource's temporary file as it arrives (never holding more than the connection's input buffer) and lets
// UploadStore rename it into place once complete.
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
    public static let descriptor = ServiceDescriptor(name: "http", optionKeys: [
        "root", "max-ranges", "request-timeout", "upload-root", "max-upload-size", "max-uploads", "upload-expiry",
        "access-log", "tls-certificate", "tls-key", "header",
    ]) { options throws(ServiceOptionError) in
        // Each option is checked on its own, so that every error is reported at once (a bad root does not
        // hide a missing tls-key).
        var errors: [ServiceOptionError] = []
        var resolved = ""
        if let root = options["root"] {
            if root.hasPrefix("/"), let real = realPath(root), isDirectory(real) {
                resolved = real
            } else {
                errors.append(ServiceOptionError(key: "root", "root must be an existing directory given by its absolute path, got '\(root)'",
                                                 isAboutThisHost: root.hasPrefix("/")))
            }
        } else {
            errors.append(ServiceOptionError(key: nil, "service http needs root = DIRECTORY"))
        }
        var maxRanges = 1
        if let text = options["max-ranges"] {
            if let value = Int(text), (0...100).contains(value) { maxRanges = value }
            else { errors.append(ServiceOptionError(key: "max-ranges", "max-ranges must be a whole number from 0 to 100, got '\(text)'")) }
        }
        var timeout: Duration = .seconds(10)
        if let text = options["request-timeout"] {
            if let value = Duration(configText: text), value >= .milliseconds(100), value <= .seconds(3600) { timeout = value }
            else { errors.append(ServiceOptionError(key: "request-timeout", "request-timeout must be a duration between 100ms and 1h, got '\(text)'")) }
        }
        var accessLog: AccessLogDestination?
        if let text = options["access-log"] {
            do throws(ServiceOptionError) { accessLog = try AccessLogDestination.parse(text) } catch { errors.append(error) }
        }
        var uploads: (root: String, limits: UploadLimits)?
        do throws(ServiceOptionError) { uploads = try uploadOptions(options) } catch { errors.append(error) }
        var tls: TLSCertificate?
        do throws(ServiceOptionError) { tls = try TLSCertificate.parse(options) } catch { errors.append(error) }
        var headers: [HTTPHeader] = []
        for line in options["header"]?.split(separator: "\n").map(String.init) ?? [] {
            switch ResponseHeaders.parse(line) {
            case .success(let header): headers.append(header)
            case .failure(let error): errors.append(error)
            }
        }
        try ServiceOptionError.throwAll(errors)
        let service = HTTPService(root: resolved, maxRanges: maxRanges, requestTimeout: timeout, uploads: uploads,
                                  accessLog: accessLog, tls: tls)
        service.extraHeaders = headers
        return service
    }

    /// The upload options: nil without `upload-root`; the others need it.
    private static func uploadOptions(_ options: ServiceOptions) throws(ServiceOptionError) -> (root: String, limits: UploadLimits)? {
        guard let root = options["upload-root"] else {
            if let key = ["max-upload-size", "max-uploads", "upload-expiry"].first(where: { options[$0] != nil }) {
                throw ServiceOptionError(key: key, "\(key) needs upload-root = DIRECTORY")
            }
            return nil
        }
        guard root.hasPrefix("/"), let resolved = realPath(root), isDirectory(resolved) else {
            throw ServiceOptionError(key: "upload-root", "upload-root must be an existing directory given by its absolute path, got '\(root)'",
                                     isAboutThisHost: root.hasPrefix("/"))
        }
        // Checked where the daemon runs, so that a sandbox's read-only view is found at start, with its
        // remedy, rather than at the first upload.
        guard access(resolved, W_OK) == 0 else {
            throw ServiceOptionError(key: "upload-root", "upload-root \(root) is not writable here (\(Errno.current)); under systemd's ProtectSystem=strict a drop-in with ReadWritePaths=\(root) makes it so",
                                     isAboutThisHost: true)
        }
        var limits = UploadLimits()
        if let text = options["max-upload-size"] {
            guard let value = byteCount(text), value >= 0 else {
                throw ServiceOptionError(key: "max-upload-size", "max-upload-size must be a number of bytes (suffix K, M, G or T for KiB to TiB), got '\(text)'")
            }
            limits.maxSize = value
        }
        if let text = options["max-uploads"] {
            guard let value = Int(text), (1...100_000).contains(value) else {
                throw ServiceOptionError(key: "max-uploads", "max-uploads must be a whole number from 1 to 100000, got '\(text)'")
            }
            limits.maxUploads = value
        }
        if let text = options["upload-expiry"] {
            guard let value = Duration(configText: text), value >= .seconds(1), value <= .seconds(366 * 86_400) else {
                throw ServiceOptionError(key: "upload-expiry", "upload-expiry must be a duration between 1s and 8784h, got '\(text)'")
            }
            limits.expirySeconds = value.components.seconds
        }
        return (resolved, limits)
    }

    /// `1073741824`, `512K`, `100M`, `1G`, `2T` (powers of 1024; `KiB`... and `KB`... read the same); nil for
    /// anything else or past `Int`.
    static func byteCount(_ text: String) -> Int? {
        var digits = Substring(text)
        var unit = 1
        for (suffixes, size) in [(["K", "KB", "KiB"], 1 << 10), (["M", "MB", "MiB"], 1 << 20), (["G", "GB", "GiB"], 1 << 30), (["T", "TB", "TiB"], 1 << 40)] {
            if let suffix = suffixes.first(where: { text.hasSuffix($0) }) {
                digits = text.dropLast(suffix.count)
                unit = size
            }
        }
        guard let number = ASCIIDigits.value(digits.utf8) else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: unit)
        return overflow ? nil : bytes
    }

    /// The resolved root, without a trailing slash.
    let root: String
    let maxRanges: Int
    /// How long a connection may take to send a request head (from its accept, or from the end of the last
    /// response), how long a response may go without the peer taking a byte, and how long a request body
    /// may go without a new byte.
    let requestTimeout: Duration
    /// The listener's `header` keys: added to every final response (not to 1xx).
    var extraHeaders: [HTTPHeader] = []
    /// The upload side: nil without `upload-root`.
    let uploads: ResumableUploadServer?
    let store: UploadStore?
    private weak var app: App?
    private var states: [ObjectIdentifier: ConnectionState] = [:]
    /// The connection appending to each upload resource, while it does.
    private var writers: [String: Connection] = [:]
    private var sweepTimer: AppTimer?
    /// Where each response is logged (`access-log`); nil for nowhere.
    let accessLog: AccessLogDestination?
    private var accessLogFile: AccessLogFile?
    /// With `tls-certificate` and `tls-key`: every connection is TLS, made with this certificate.
    let tls: TLSCertificate?

    /// What the service remembers of one connection.
    private final class ConnectionState {
        var parser = HTTPRequestParser()
        var timer: AppTimer?
        /// While a response is being sent: the fewest bytes seen still to send, and when that was seen.
        var sendProgress: (unsent: Int, at: MonotonicTime)
        var closeWhenSent = false
        /// The request body being read, if one is.
        var body: BodyReader?
        /// The peer's host, as the access log writes it (read once per connection).
        var peerHost: String?
        /// The access log line of the response being sent, written once its bytes are out (or the connection
        /// closes): the line, without its byte count, and its body's length.
        var pendingLog: (line: (Int) -> String, bodyBytes: Int)?

        init(now: MonotonicTime) { sendProgress = (Int.max, now) }
    }

    /// A request body being read: onto an upload's temporary file, or thrown away after an answer.
    private final class BodyReader {
        let head: HTTPRequestHead
        var remaining: Int
        /// Bytes read so far.
        var received = 0
        /// When the last of them was read (or the head, before any): the body timer's deadline runs from it.
        var lastByteAt: MonotonicTime
        /// Where they go: nil to throw them away.
        var upload: UploadWrite?
        var lastProgress: MonotonicTime

        init(head: HTTPRequestHead, remaining: Int, upload: UploadWrite?, now: MonotonicTime) {
            self.head = head
            self.remaining = remaining
            self.upload = upload
            lastByteAt = now
            lastProgress = now
        }
    }

    /// An upload being written: its resource (offset counting what is written) and its part, open for
    /// appending until the body ends.
    private final class UploadWrite {
        var resource: UploadResource
        var part: FileDescriptor?
        let created: Bool
        let completes: Bool

        init(resource: UploadResource, part: consuming FileDescriptor, created: Bool, completes: Bool) {
            self.resource = resource
            self.part = consume part
            self.created = created
            self.completes = completes
        }
    }

    /// Bodies of rejected requests up to this size are read and dropped, so that the connection can go on and
    /// the answer is not lost to a reset; larger ones (or one the client waits to send) close the connection.
    static let maxDiscardedBody = 1 << 20

    public init(root: String, maxRanges: Int = 1, requestTimeout: Duration = .seconds(10),
                uploads: (root: String, limits: UploadLimits)? = nil, accessLog: AccessLogDestination? = nil,
                tls: TLSCertificate? = nil) {
        self.accessLog = accessLog
        self.tls = tls
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        self.maxRanges = maxRanges
        self.requestTimeout = requestTimeout
        self.uploads = uploads.map { ResumableUploadServer(limits: $0.limits) }
        store = uploads.map { UploadStore(root: $0.root.count > 1 && $0.root.hasSuffix("/") ? String($0.root.dropLast()) : $0.root) }
    }

    public func didAttach(to app: App) {
        self.app = app
        if case .file(let path) = accessLog { accessLogFile = AccessLogFile.shared(path, logger: app.serviceLogger) }
        if let tls { TLSCertificate.attach(tls) }
        scheduleSweep()
    }

    public func serve(_ connection: Connection) {
        if let tls {
            // The handshake is the first read's work; it must be done, and the request head read, within
            // `requestTimeout` (the timer armed below).
            do {
                connection.use(try TLSTransport(context: tls.context, fd: connection.fd))
            } catch {
                app?.serviceLogger.warning("cannot start TLS on a connection: \(error)")
                return connection.close(.now)
            }
        }
        let state = ConnectionState(now: connection.loop.now)
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
        writePendingLog(state, sent: nil)
        if state.closeWhenSent { return connection.close(.afterFlush) }
        // An interim response drained while a body is read: the body's timer goes on.
        if state.body == nil { armTimer(connection, state) }
        process(connection)
    }

    public func connectionDidReachEnd(_ connection: Connection) {
        // The client sent everything it will send: answer what is complete, then close.
        process(connection)
        connection.close(.afterFlush)
    }

    public func connectionDidClose(_ connection: Connection, error: SystemError?) {
        guard let state = states.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        // Closed cleanly, everything was sent; broken, the fewest bytes seen unsent were not.
        writePendingLog(state, sent: error == nil ? nil : state.sendProgress.unsent)
        state.timer?.cancel()
        // A body cut off: what was written stays (the resource's offset moved on), the part is closed.
        if let upload = state.body?.upload {
            upload.part = nil
            if writers[upload.resource.id] === connection { writers[upload.resource.id] = nil }
        }
        state.body = nil
    }

    // MARK: Requests

    /// Answers the complete requests in the connection's input, one at a time: after each response that is
    /// not sent at once, reading waits until it is. A request body is read as it comes, across loop turns.
    private func process(_ connection: Connection) {
        guard let state = states[ObjectIdentifier(connection)] else { return }
        while connection.state == .open {
            if let body = state.body {
                readBody(body, connection, state)
                if state.body != nil { return }
            } else {
                guard connection.output.isEmpty && !connection.input.isEmpty else { return }
                let bytes = connection.input.peekBytes(limit: HTTPRequestParser.maxHeadBytes + 1)
                let parsed: (head: HTTPRequestHead, consumed: Int)?
                do {
                    parsed = try state.parser.parse(bytes)
                } catch {
                    return fail(connection, state, status: error.status, method: state.parser.requestMethod)
                }
                guard let (head, consumed) = parsed else { return }
                connection.input.drain(consumed)
                state.parser.reset()
                respond(to: head, on: connection, state)
                if state.body != nil {
                    armBodyTimer(connection, state)
                    continue
                }
            }
            if connection.pauseReadingIfOutputIsHigh() {
                state.sendProgress = (connection.output.count, connection.loop.now)
                armSendTimer(connection, state)
                return
            }
            // Sent at once: the time for the next request head starts now.
            writePendingLog(state, sent: nil)
            armTimer(connection, state)
        }
    }

    private func respond(to head: HTTPRequestHead, on connection: Connection, _ state: ConnectionState) {
        let bodyLength: Int
        do {
            bodyLength = try head.bodyLength()
        } catch {
            return fail(connection, state, status: error.status, method: head.method, head: head)
        }
        if let uploads {
            switch uploads.route(head) {
            case .creation(let target): return create(target, head, bodyLength, connection, state)
            case .resource(let id): return resourceRequest(id, head, bodyLength, connection, state)
            case .options: return send(uploads.options(now: now), to: head, bodyLength: bodyLength, connection, state)
            case .files: break
            }
        }
        guard head.method == "GET" || head.method == "HEAD" else {
            return fail(connection, state, status: 405, method: head.method, head: head)
        }
        guard bodyLength == 0 else {
            return fail(connection, state, status: 400, method: head.method, head: head)
        }
        guard let path = head.path, let opened = openFile(path) else {
            return fail(connection, state, status: 404, method: head.method, head: head)
        }
        let response = HTTPFileResponder.respond(to: head, file: opened.info, contentType: HTTPFileResponder.contentType(forPath: path),
                                                 maxRanges: maxRanges, now: now)
        connection.output.append(ResponseHeaders.adding(extraHeaders, to: HTTPFileResponder.serialize(response, keepAlive: head.keepAlive, minorVersion: head.minorVersion)))
        let bodyBytes = head.method == "GET" ? response.body.map { $0.last - $0.first + 1 } ?? 0 : 0
        noteResponse(head, status: response.status, bodyBytes: bodyBytes, connection, state)
        if head.method == "GET", let body = response.body {
            do {
                // The descriptor goes to libevent, which sends the bytes with sendfile and closes it.
                try connection.output.appendFile(opened.file, offset: body.first, length: body.last - body.first + 1)
            } catch {
                connection.close(.now)
                return
            }
        }
        if !head.keepAlive { state.closeWhenSent = true }
        connection.flush()
        if connection.output.isEmpty && state.closeWhenSent { connection.close(.afterFlush) }
    }

    /// An error page, then the connection closes. `method` is the request's, when its request line was read;
    /// `head` the whole request head, when it was read.
    private func fail(_ connection: Connection, _ state: ConnectionState, status: Int, method: String?, head: HTTPRequestHead? = nil) {
        guard let page = HTTPFileResponder.errorResponse(status: status, now: now) else {
            return connection.close(.now)
        }
        noteResponse(head, status: status, bodyBytes: method == "HEAD" ? 0 : page.body.utf8.count, connection, state)
        append(head: ResponseHeaders.adding(extraHeaders, to: page.head), body: Array(page.body.utf8), method: method, connection)
        state.closeWhenSent = true
        connection.close(.afterFlush)
    }

    private var now: Int64 { Int64(WallClock.now()) }

    // MARK: The access log

    /// Notes a response just queued for the access log; its line is written once it is sent.
    private func noteResponse(_ head: HTTPRequestHead?, status: Int, bodyBytes: Int, _ connection: Connection, _ state: ConnectionState) {
        guard accessLog != nil else { return }
        // A response queued while the last one's line waits (an upload's answer after its interim) writes that one.
        writePendingLog(state, sent: nil)
        if state.peerHost == nil {
            state.peerHost = switch try? SocketCalls.peerAddress(of: connection.fd) {
            case .ipv4(let host, _)?, .ipv6(let host, _)?: host
            case .unix?: "unix:"
            case nil: "-"
            }
        }
        let host = state.peerHost ?? "-"
        let time = now
        state.sendProgress = (Int.max, connection.loop.now)
        state.pendingLog = ({ bytes in AccessLogLine.format(host: host, time: time, request: head, status: status, bodyBytes: bytes) }, bodyBytes)
    }

    /// Writes the line of the response sent (or cut short with `sent` bytes still unsent: the body is the
    /// last of the output, so its bytes sent are its length less those).
    private func writePendingLog(_ state: ConnectionState, sent unsent: Int?) {
        guard let pending = state.pendingLog else { return }
        state.pendingLog = nil
        let bytes = unsent.map { $0 == Int.max ? 0 : max(0, pending.bodyBytes - $0) } ?? pending.bodyBytes
        let line = pending.line(bytes)
        switch accessLog {
        case .file?: accessLogFile?.append(line)
        case .journal?: app?.serviceLogger.info(line)
        case nil: break
        }
    }

    /// A file to serve, open, and what the responder needs to know of it.
    private struct OpenedFile: ~Copyable {
        let file: FileDescriptor
        let info: FileInfo
    }

    /// Opens `path` under the root: a regular file (opened without blocking, so a FIFO is refused, not waited
    /// on) whose real path (symlinks resolved, read back from the open descriptor, so that nothing can change
    /// between the check and the use) lies under the root and not in an upload staging directory (whichever
    /// listener's it is: its partial uploads are never served).
    private func openFile(_ path: String) -> OpenedFile? {
        guard let opened = try? RegularFile.openWithStatus(root + path, .readOnly),
              let real = realPath("/proc/self/fd/\(opened.file.rawValue)"), real.hasPrefix(root == "/" ? "/" : root + "/"),
              !real.split(separator: "/").contains(Substring(ResumableUploadServer.stagingDirectoryName)) else {
            return nil
        }
        let info = opened.status
        return OpenedFile(file: opened.file, info: FileInfo(size: Int(info.st_size), modifiedSeconds: Int64(info.st_mtim.tv_sec),
                                                            modifiedNanoseconds: Int(info.st_mtim.tv_nsec), inode: UInt64(info.st_ino)))
    }

    // MARK: Uploads

    private func create(_ target: String, _ head: HTTPRequestHead, _ bodyLength: Int, _ connection: Connection, _ state: ConnectionState) {
        guard let uploads, let store else { return }
        // The target is checked on disk before anything is made (and again at the rename).
        if ResumableUploadServer.isTargetPath(target) {
            do throws(UploadStore.TargetProblem) {
                _ = try store.openTarget(target)
            } catch {
                switch error {
                case .noDirectory: return send(uploads.error(404, "no directory for \(target)", head, now: now), to: head, bodyLength: bodyLength, connection, state)
                case .outsideRoot: return send(uploads.error(403, "\(target) leads out of the upload root", head, now: now), to: head, bodyLength: bodyLength, connection, state)
                case .isDirectory: return send(uploads.error(409, "\(target) is a directory", head, now: now), to: head, bodyLength: bodyLength, connection, state)
                }
            }
        }
        let decision = uploads.creation(head, target: target, bodyLength: bodyLength, roomForAnother: sweep(needRoom: true), now: now)
        guard case .create(let target, let length, let bodyLength, let completes) = decision else {
            return perform(decision, head, bodyLength, connection, state)
        }
        let created: UploadStore.Created
        do throws(SystemError) {
            created = try store.create(target: target, length: length, now: now)
        } catch {
            return send(uploads.error(500, "cannot create the upload: \(error)", head, now: now), to: head, bodyLength: bodyLength, connection, state)
        }
        let resource = created.resource
        let write = UploadWrite(resource: resource, part: created.part, created: true, completes: completes)
        if bodyLength > 0 && head.minorVersion >= 1 {
            sendContinue(head, connection)
            sendInterim(uploads.interim(resource, now: now), connection)
        }
        startBody(head, bodyLength, write, connection, state)
    }

    private func resourceRequest(_ id: String?, _ head: HTTPRequestHead, _ bodyLength: Int, _ connection: Connection, _ state: ConnectionState) {
        guard let uploads, let store else { return }
        var resource: UploadResource?
        if let id {
            // A request that finds an earlier one still writing to this resource ends it first (the draft's
            // recommended approach): the client has given it up, and its bytes so far are on disk.
            if let writer = writers[id], writer !== connection { writer.close(.now) }
            resource = store.load(id)
            if let found = resource, !writers.keys.contains(found.id), now - found.lastActivity >= uploads.limits.expirySeconds {
                store.remove(found.id)
                resource = nil
            }
        }
        let decision = uploads.resourceRequest(head, resource: resource, bodyLength: bodyLength, now: now)
        guard let resource, case .append(let bodyLength, let completes, let length) = decision else {
            return perform(decision, head, bodyLength, connection, state, resource: resource)
        }
        var updated = resource
        if let length {
            updated.length = length
            if let error = store.writeRecord(resource.id, UploadResourceRecord(target: resource.target, length: length)) {
                return send(uploads.error(500, "cannot record the length: \(error)", head, now: now), to: head, bodyLength: bodyLength, connection, state)
            }
        }
        let part: FileDescriptor
        do throws(SystemError) {
            part = try store.openPart(resource.id)
        } catch {
            return send(uploads.error(500, "cannot open the upload: \(error)", head, now: now), to: head, bodyLength: bodyLength, connection, state)
        }
        if bodyLength > 0 && head.minorVersion >= 1 { sendContinue(head, connection) }
        startBody(head, bodyLength, UploadWrite(resource: updated, part: part, created: false, completes: completes), connection, state)
    }

    /// Performs a decision that reads no body into an upload.
    private func perform(_ decision: ResumableUploadServer.Decision, _ head: HTTPRequestHead, _ bodyLength: Int, _ connection: Connection,
                         _ state: ConnectionState, resource: UploadResource? = nil) {
        switch decision {
        case .respond(let response):
            send(response, to: head, bodyLength: bodyLength, connection, state)
        case .cancel(let response):
            if let resource { store?.remove(resource.id) }
            send(response, to: head, bodyLength: bodyLength, connection, state)
        case .create, .append:
            // Made by the callers above; here only if a decision came without what it needs.
            fail(connection, state, status: 500, method: head.method)
        }
    }

    /// Sends `response` to a request whose body (if any) is not wanted: a small one is read and dropped,
    /// a large one, or one the client waits to send (`Expect: 100-continue`), closes the connection.
    private func send(_ response: UploadResponse, to head: HTTPRequestHead, bodyLength: Int, _ connection: Connection, _ state: ConnectionState) {
        let expectsContinue = head.value(of: "expect") != nil
        if !head.keepAlive || (bodyLength > 0 && (expectsContinue || bodyLength > Self.maxDiscardedBody)) { state.closeWhenSent = true }
        write(response, keepAlive: !state.closeWhenSent, head: head, connection)
        if bodyLength > 0 && !state.closeWhenSent { state.body = BodyReader(head: head, remaining: bodyLength, upload: nil, now: connection.loop.now) }
        connection.flush()
        if connection.output.isEmpty && state.closeWhenSent { connection.close(.afterFlush) }
    }

    private func write(_ response: UploadResponse, keepAlive: Bool, head: HTTPRequestHead, _ connection: Connection) {
        if let state = states[ObjectIdentifier(connection)] {
            noteResponse(head, status: response.status, bodyBytes: head.method == "HEAD" ? 0 : response.body.count, connection, state)
        }
        let fileResponse = HTTPFileResponse(status: response.status, headers: response.headers, body: nil)
        append(head: ResponseHeaders.adding(extraHeaders, to: HTTPFileResponder.serialize(fileResponse, keepAlive: keepAlive, minorVersion: head.minorVersion)),
               body: response.body, method: head.method, connection)
    }

    /// Queues a response whose body is in memory (an error page, an upload's answer): the head, then the body
    /// unless the request was a HEAD. RFC 9110 section 9.3.2: the answer to a HEAD has the head a GET would
    /// get, Content-Length included, and no content. (A file's body is the responder's: nil for a HEAD.)
    private func append(head: String, body: [UInt8], method: String?, _ connection: Connection) {
        connection.output.append(head)
        if method != "HEAD" { connection.output.append(body) }
    }

    /// `100 Continue` to a client that waits for it before sending the body.
    private func sendContinue(_ head: HTTPRequestHead, _ connection: Connection) {
        guard let expect = head.value(of: "expect"), HTTPSyntax.lowercased(expect) == "100-continue" else { return }
        sendInterim(UploadResponse(status: 100, headers: []), connection)
    }

    /// An interim (1xx) response: never to an HTTP/1.0 client (RFC 9110 section 15.2).
    private func sendInterim(_ response: UploadResponse, _ connection: Connection) {
        let head = HTTPFileResponse(status: response.status, headers: response.headers, body: nil)
        connection.output.append(HTTPFileResponder.serialize(head, keepAlive: true, minorVersion: 1))
        connection.flush()
    }

    private func startBody(_ head: HTTPRequestHead, _ bodyLength: Int, _ write: UploadWrite, _ connection: Connection, _ state: ConnectionState) {
        writers[write.resource.id] = connection
        state.body = BodyReader(head: head, remaining: bodyLength, upload: write, now: connection.loop.now)
        if !head.keepAlive { state.closeWhenSent = true }
    }

    /// Moves what the input holds of the body to its file (or drops it); at its end, the answer.
    private func readBody(_ body: BodyReader, _ connection: Connection, _ state: ConnectionState) {
        let input = connection.input
        while body.remaining > 0 && !input.isEmpty {
            let count = min(input.count, body.remaining, 1 << 20)
            if let upload = body.upload {
                do throws(SystemError) {
                    try upload.part?.write(all: input.peekBytes(limit: count))
                } catch {
                    // What the part holds now: the bytes of this write that it took count.
                    if let size = try? upload.part?.status().st_size { upload.resource.offset = Int(size) }
                    return bodyFailed(body, "cannot write the upload: \(error.errno)", connection, state)
                }
                upload.resource.offset += count
            }
            input.drain(count)
            body.remaining -= count
            body.received += count
            body.lastByteAt = connection.loop.now
        }
        if body.remaining > 0 {
            sendProgress(body, connection)
            return
        }
        state.body = nil
        state.timer?.cancel()
        guard let upload = body.upload, let uploads, let store else { return }
        writers[upload.resource.id] = nil
        var response: UploadResponse
        if upload.completes {
            switch store.complete(upload.resource, part: upload.part.take()) {
            case .success(let replaced):
                var resource = upload.resource
                resource.isComplete = true
                response = uploads.completed(resource, replaced: replaced, now: now)
            case .failure(let failure):
                response = uploads.failed(upload.resource, failure.reason, now: now)
            }
        } else {
            upload.part = nil
            var resource = upload.resource
            resource.lastActivity = now
            response = uploads.appended(resource, created: upload.created, now: now)
        }
        write(response, keepAlive: !state.closeWhenSent, head: body.head, connection)
        connection.flush()
        if connection.output.isEmpty && state.closeWhenSent { connection.close(.afterFlush) }
    }

    /// A 500 for a body that cannot be stored; the connection closes (the rest of the body is not read).
    private func bodyFailed(_ body: BodyReader, _ reason: String, _ connection: Connection, _ state: ConnectionState) {
        guard let upload = body.upload, let uploads else { return connection.close(.now) }
        upload.part = nil
        writers[upload.resource.id] = nil
        state.body = nil
        state.closeWhenSent = true
        write(uploads.failed(upload.resource, reason, now: now), keepAlive: false, head: body.head, connection)
        connection.close(.afterFlush)
    }

    /// A 104 with the offset reached, at most once a second, and only when nothing else waits to be sent (a
    /// client that reads none of them never makes them pile up).
    private func sendProgress(_ body: BodyReader, _ connection: Connection) {
        guard let upload = body.upload, let uploads, body.head.minorVersion >= 1, connection.output.isEmpty,
              connection.loop.now - body.lastProgress >= .seconds(1) else { return }
        body.lastProgress = connection.loop.now
        sendInterim(uploads.progress(upload.resource), connection)
    }

    /// Removes expired resources and stray files; with `needRoom`, also finished ones kept for a late HEAD
    /// when there is no room for another. Returns whether one more resource fits.
    @discardableResult
    private func sweep(needRoom: Bool) -> Bool {
        guard let uploads, let store else { return false }
        let (resources, strays) = store.list()
        for name in strays { store.removeStray(name) }
        let (remove, remaining) = uploads.sweep(resources, busy: Set(writers.keys), needRoom: needRoom, now: now)
        for id in remove { store.remove(id) }
        return remaining < uploads.limits.maxUploads
    }

    /// Sweeps every hour (or every `upload-expiry` when shorter), as app work: not while suspended.
    private func scheduleSweep() {
        guard let app, let uploads else { return }
        sweepTimer = app.schedule(after: .seconds(min(uploads.limits.expirySeconds, 3600))) { [weak self] in
            self?.sweep(needRoom: false)
            self?.scheduleSweep()
        }
    }

    // MARK: Timeouts (app timers: they wait while the app is suspended; every deadline counts from the
    // loop's `now`, so that a loop with a manual clock drives them exactly)

    /// Waiting for a request head: after `requestTimeout` the connection is closed.
    private func armTimer(_ connection: Connection, _ state: ConnectionState) {
        state.timer?.cancel()
        guard let app else { return }
        state.timer = app.schedule(after: requestTimeout) { [weak connection] in
            guard let connection, connection.output.isEmpty else { return }
            connection.close(.now)
        }
    }

    /// Reading a body: the connection is closed `requestTimeout` after the last byte of it arrived (the bytes
    /// it did send stay in the upload). The timer is armed for that moment, and when it fires after newer
    /// bytes, for the moment they give. (A check every `requestTimeout` that found bytes since the last one
    /// gave a stalled body up to twice the time.)
    private func armBodyTimer(_ connection: Connection, _ state: ConnectionState) {
        state.timer?.cancel()
        guard let app, let body = state.body else { return }
        let remaining = requestTimeout - (connection.loop.now - body.lastByteAt)
        guard remaining > .zero else { return connection.close(.now) }
        state.timer = app.schedule(after: remaining) { [weak self, weak connection, weak state] in
            guard let self, let connection, let state, state.body != nil else { return }
            armBodyTimer(connection, state)
        }
    }

    /// How often a response that waits for the peer is looked at, in parts of `requestTimeout`.
    static let sendChecksPerTimeout = 10

    /// Sending a response: the peer is reset once it has taken no byte for `requestTimeout`. Nothing tells the
    /// service of a partial write, so the unsent bytes are looked at every tenth of the timeout, and the
    /// deadline runs from the check that saw them fall: the reset comes between 1 and 1.1 timeouts after
    /// the last byte taken. (A check every `requestTimeout` that only compared with the last check gave up
    /// to twice the time, and the first check, against no count, always passed.)
    private func armSendTimer(_ connection: Connection, _ state: ConnectionState) {
        state.timer?.cancel()
        guard let app else { return }
        let now = connection.loop.now
        let unsent = connection.output.count
        if unsent < state.sendProgress.unsent { state.sendProgress = (unsent, now) }
        let remaining = requestTimeout - (now - state.sendProgress.at)
        guard remaining > .zero else { return connection.close(.reset) }
        state.timer = app.schedule(after: min(remaining, requestTimeout / Self.sendChecksPerTimeout)) { [weak self, weak connection, weak state] in
            guard let self, let connection, let state, !connection.output.isEmpty else { return }
            armSendTimer(connection, state)
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
