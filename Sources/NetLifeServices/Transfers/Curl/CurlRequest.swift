// One libcurl easy handle: the request a transfer's machine asked for (method, URL, header fields, an offset
// to resume FTP from, a body to send), with libcurl's callbacks turned into calls on the shell: a response
// head when it is complete (read through libcurl's header API, curl_easy_nextheader), body bytes, upload
// bytes wanted, the end. The shell owns the connection's sockets (CURLOPT_OPENSOCKETFUNCTION and
// CLOSESOCKETFUNCTION), so that a reclaim can reset them; no connection outlives its request
// (CURLOPT_FORBID_REUSE), so that a paused transfer keeps none open.
//
// What is still read here by hand: the reason phrase of a status line (libcurl keeps only the code), one
// split of one line.

@preconcurrency import Glibc
internal import CCurl
import NetLife
import NetLifeEvent

/// How a transfer checks the server it talks to over TLS.
public struct TransferTLS: Equatable, Sendable {
    /// A file of CA certificates (PEM) to verify the server against, instead of the system's trust store.
    public var caFile: String?
    /// The contents of `caFile`, read with the requester's rights when the transfer was asked for or
    /// resumed: libcurl is given these bytes, never the path (which it would open with the daemon's rights).
    public var caCertificates: [UInt8]?
    /// No verification of the server's certificate or name (`--insecure`): anyone on the path can read
    /// and change the transfer.
    public var insecure: Bool
    /// For `ftp://`: TLS is required on the control and data connections (AUTH TLS, explicit FTPS), as
    /// curl's `--ssl-reqd`.
    public var required: Bool

    public init(caFile: String? = nil, insecure: Bool = false, required: Bool = false) {
        self.caFile = caFile
        self.insecure = insecure
        self.required = required
    }

    /// The default: the system's trust store, verification on.
    public static let verified = TransferTLS()
}

/// What a shell asks of one request.
struct CurlRequestSpec {
    enum Method: Equatable {
        case get
        case head
        /// `method` (PATCH, POST) with a body of `length` bytes (0: none), read through `onSend`.
        case send(String, length: Int)
    }
    var method: Method
    var url: URLParts
    /// Header fields beyond libcurl's own (Host, User-Agent, Accept, the HTTP/2 pseudo-headers).
    var headers: [HTTPHeader] = []
    /// FTP: the offset to resume from (REST); nil from the start.
    var resumeFrom: Int?
    /// FTP: only the size and the modification time (SIZE, MDTM), no data. The probe ends as soon as the
    /// size is known (`onProgress`), before libcurl's own end would send QUIT and wait for its answer.
    var probeOnly = false
    var tls: TransferTLS
}

/// One request on a `CurlMulti`. Loop-confined. Its handlers are called on the loop, inside libcurl's
/// callbacks: they may ask the multi to stop it (`cancel()`), never call libcurl themselves.
final class CurlRequest {
    let easy: UnsafeMutableRawPointer
    /// Held strongly: the multi lets go of a request once it is off the handle, so no cycle outlives it.
    private let multi: CurlMulti
    private var fields: UnsafeMutablePointer<curl_slist>?
    private let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    /// The sockets libcurl opened through us and has not closed.
    private(set) var sockets: Set<CInt> = []
    /// The status line of the head being read (the first line after an end of head).
    private var statusLine: String?
    /// FTP: the last `213` reply the server sent (libcurl asks MDTM, then SIZE): what SIZE said, checked
    /// against libcurl's reading of it, which turns a number it cannot hold into 0.
    private var lastFTP213: String?
    private(set) var isFinished = false
    private var cancelled = false
    /// Held while libcurl has a socket of ours open.
    private var keepAlive: Unmanaged<CurlRequest>?

    /// A complete response head (not a 1xx). Returns false to stop the request (nothing more is read).
    var onHead: (HTTPResponseHead) -> Bool = { _ in true }
    /// An interim (1xx) head, such as a 104 with upload progress. Returns false to stop the request.
    var onInterim: (HTTPResponseHead) -> Bool = { _ in true }
    /// Body bytes. Returns false to stop the request.
    var onBody: (UnsafeRawBufferPointer) -> Bool = { _ in true }
    /// Fill the buffer with upload bytes; the count written (0 at the end), nil to stop the request.
    var onSend: (UnsafeMutableRawBufferPointer) -> Int? = { _ in 0 }
    /// libcurl's progress (on a probe): returns false to end the request now.
    var onProgress: () -> Bool = { true }
    /// The end: success, or libcurl's reason. Not called after `cancel()`.
    var onEnd: (Result<Void, CurlFailure>) -> Void = { _ in }

    /// Makes the easy handle for `spec`; nil (with the reason) when libcurl refuses an option.
    static func make(_ spec: CurlRequestSpec, on multi: CurlMulti) -> Result<CurlRequest, CurlFailure> {
        guard let easy = curl_easy_init() else { return .failure(CurlFailure("out of memory")) }
        let request = CurlRequest(easy: easy, multi: multi)
        if let refused = request.configure(spec) { return .failure(refused) }
        return .success(request)
    }

    private init(easy: UnsafeMutableRawPointer, multi: CurlMulti) {
        self.easy = easy
        self.multi = multi
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(fields)
        errorText.deallocate()
    }

    /// Puts it on the multi handle.
    func start() { multi.add(self) }

    /// Stops it: its connection closes, no handler is called again.
    func cancel() {
        guard !isFinished else { return }
        cancelled = true
        isFinished = true
        multi.remove(self)
    }

    /// Resets its connections (RST, as a reclaim does): each socket's reading side is shut (libcurl reads
    /// an end and gives up the request), and a linger of 0 makes libcurl's close send an RST rather than a
    /// FIN.
    func resetSockets() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        for socket in sockets {
            _ = setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            _ = shutdown(socket, CInt(SHUT_RD))
        }
    }

    /// Called by the multi when libcurl is done with it.
    func finish(_ result: Result<Void, CurlFailure>) {
        guard !isFinished else { return }
        isFinished = true
        onEnd(result)
    }

    /// What libcurl says of `code`: its error buffer when it wrote one, otherwise the code's text, and the
    /// system's error when there was one (`Connection refused`).
    func message(for code: CURLcode) -> CurlFailure {
        let detail = String(cString: errorText)
        var text = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        var osError = 0
        if nl_info_long(easy, CURLINFO_OS_ERRNO, &osError) == CURLE_OK, osError != 0 {
            let system = String(cString: strerror(CInt(truncatingIfNeeded: osError)))
            if !text.contains(system) { text += " (\(system))" }
        }
        return CurlFailure(text, code: code.rawValue, tls: Self.tlsCodes.contains(code.rawValue))
    }

    /// After an FTP probe: the file's size and modification time (seconds since 1970), nil where the server
    /// told nothing.
    func fileFacts() -> (size: Int?, modified: Int64?) {
        var size: curl_off_t = -1
        var time: curl_off_t = -1
        _ = nl_info_offset(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &size)
        _ = nl_info_offset(easy, CURLINFO_FILETIME_T, &time)
        return (size >= 0 ? Int(size) : nil, time >= 0 ? Int64(time) : nil)
    }

    /// After an FTP probe whose server told a size: why that size is not one (nil when it is). libcurl reads a
    /// SIZE answer it cannot hold (`213 99999999999999999999999999`) as 0, which would make any file an
    /// empty one; the answer itself must be the decimal digits of exactly the size libcurl reports.
    func sizeAnswerProblem(size: Int) -> String? {
        guard let answer = lastFTP213 else { return nil }
        if answer.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), Int(answer) == size { return nil }
        return "the server's SIZE answer '213 \(answer.prefix(40))' is not a size this file can have"
    }

    /// The codes of a TLS failure: the server's certificate or the handshake.
    private static let tlsCodes: Set<UInt32> = [CURLE_PEER_FAILED_VERIFICATION.rawValue, CURLE_SSL_CONNECT_ERROR.rawValue,
                                                CURLE_SSL_CACERT_BADFILE.rawValue, CURLE_SSL_CERTPROBLEM.rawValue,
                                                CURLE_USE_SSL_FAILED.rawValue]

    // MARK: Options

    private func configure(_ spec: CurlRequestSpec) -> CurlFailure? {
        let context = Unmanaged.passUnretained(self).toOpaque()
        var codes: [CURLcode] = [
            nl_easy_string(easy, CURLOPT_URL, spec.url.text),
            nl_easy_pointer(easy, CURLOPT_PRIVATE, context),
            nl_easy_pointer(easy, CURLOPT_ERRORBUFFER, errorText),
            nl_easy_long(easy, CURLOPT_NOSIGNAL, 1),
            nl_easy_long(easy, CURLOPT_FORBID_REUSE, 1),
            nl_easy_string(easy, CURLOPT_USERAGENT, "netlifed"),
            // The transfer's machine follows redirects itself (a range request stays one; credentials stay
            // on their server).
            nl_easy_long(easy, CURLOPT_FOLLOWLOCATION, 0),
            nl_easy_string(easy, CURLOPT_PROTOCOLS_STR, "http,https,ftp,ftps"),
            nl_easy_long(easy, CURLOPT_CONNECTTIMEOUT_MS, 30_000),
            nl_easy_long(easy, CURLOPT_TCP_KEEPALIVE, 1),
            // Fewer, larger writes to the part (libcurl's default is 16 KiB); still well under a millisecond
            // of work per callback.
            nl_easy_long(easy, CURLOPT_BUFFERSIZE, 256 * 1024),
            nl_easy_data_callback(easy, CURLOPT_WRITEFUNCTION, curlWrite),
            nl_easy_pointer(easy, CURLOPT_WRITEDATA, context),
            nl_easy_data_callback(easy, CURLOPT_HEADERFUNCTION, curlHeader),
            nl_easy_pointer(easy, CURLOPT_HEADERDATA, context),
            nl_easy_open_socket_callback(easy, curlOpenSocket),
            nl_easy_pointer(easy, CURLOPT_OPENSOCKETDATA, context),
            nl_easy_close_socket_callback(easy, curlCloseSocket),
            nl_easy_pointer(easy, CURLOPT_CLOSESOCKETDATA, context),
            nl_easy_long(easy, CURLOPT_SSL_VERIFYPEER, spec.tls.insecure ? 0 : 1),
            nl_easy_long(easy, CURLOPT_SSL_VERIFYHOST, spec.tls.insecure ? 0 : 2),
        ]
        if let certificates = spec.tls.caCertificates {
            codes.append(certificates.withUnsafeBytes { nl_easy_blob(easy, CURLOPT_CAINFO_BLOB, $0.baseAddress, $0.count) })
        } else if let caFile = spec.tls.caFile {
            codes.append(nl_easy_string(easy, CURLOPT_CAINFO, caFile))
        }
        if spec.url.scheme.isHTTP {
            codes.append(nl_easy_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
        } else {
            codes.append(nl_easy_long(easy, CURLOPT_FTP_USE_EPSV, 1))
            codes.append(nl_easy_long(easy, CURLOPT_FILETIME, 1))
            if spec.tls.required { codes.append(nl_easy_long(easy, CURLOPT_USE_SSL, Int(CURLUSESSL_ALL.rawValue))) }
            if let offset = spec.resumeFrom, offset > 0 { codes.append(nl_easy_offset(easy, CURLOPT_RESUME_FROM_LARGE, curl_off_t(offset))) }
        }
        switch spec.method {
        case .get:
            if spec.probeOnly {
                codes.append(nl_easy_long(easy, CURLOPT_NOBODY, 1))
                codes.append(nl_easy_long(easy, CURLOPT_NOPROGRESS, 0))
                codes.append(nl_easy_progress_callback(easy, curlProgress))
                codes.append(nl_easy_pointer(easy, CURLOPT_XFERINFODATA, context))
            }
        case .head:
            codes.append(nl_easy_long(easy, CURLOPT_NOBODY, 1))
        case .send(let method, let length):
            codes.append(nl_easy_long(easy, CURLOPT_UPLOAD, 1))
            codes.append(nl_easy_string(easy, CURLOPT_CUSTOMREQUEST, method))
            codes.append(nl_easy_offset(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(length)))
            codes.append(nl_easy_data_callback(easy, CURLOPT_READFUNCTION, curlRead))
            codes.append(nl_easy_pointer(easy, CURLOPT_READDATA, context))
        }
        for field in spec.headers {
            fields = curl_slist_append(fields, "\(field.name): \(field.value)")
        }
        // libcurl's `Expect: 100-continue` would hold a body for a second on a server that ignores it.
        if case .send = spec.method { fields = curl_slist_append(fields, "Expect:") }
        if let fields { codes.append(nl_easy_list(easy, CURLOPT_HTTPHEADER, fields)) }
        if let refused = codes.first(where: { $0 != CURLE_OK }) {
            return CurlFailure("libcurl refused an option: \(String(cString: curl_easy_strerror(refused)))")
        }
        return nil
    }

    // MARK: libcurl's calls

    fileprivate func header(_ line: UnsafeRawBufferPointer) -> Bool {
        if cancelled { return false }
        if line.starts(with: Array("213 ".utf8)) {
            lastFTP213 = String(decoding: line.dropFirst(4).prefix(64).filter { $0 != 0x0D && $0 != 0x0A && $0 != 0x20 }, as: UTF8.self)
        }
        let isEnd = line.count <= 2 && line.allSatisfy { $0 == 0x0D || $0 == 0x0A }
        guard isEnd else {
            if statusLine == nil { statusLine = String(decoding: line.prefix(512), as: UTF8.self) }
            return true
        }
        defer { statusLine = nil }
        var code = 0
        guard nl_info_long(easy, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK, code >= 100 else { return true }
        let origin = UInt32(code < 200 ? CURLH_1XX : CURLH_HEADER)
        var headers: [HTTPHeader] = []
        var previous: UnsafeMutablePointer<curl_header>?
        while let next = curl_easy_nextheader(easy, origin, -1, previous) {
            headers.append(HTTPHeader(name: HTTPSyntax.lowercased(String(cString: next.pointee.name)), value: String(cString: next.pointee.value)))
            previous = next
        }
        let head = HTTPResponseHead(status: code, reason: Self.reason(statusLine), headers: headers)
        return code < 200 ? onInterim(head) : onHead(head)
    }

    /// The reason phrase of `HTTP/1.1 206 Partial Content` (HTTP/2 has none).
    private static func reason(_ line: String?) -> String {
        guard let line else { return "" }
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return "" }
        return String(parts[2].filter { $0 != "\r" && $0 != "\n" })
    }

    fileprivate func progress() -> Bool {
        !cancelled && onProgress()
    }

    /// What the write callback returns: the bytes taken, 0 to stop, or CURL_WRITEFUNC_PAUSE when this
    /// loop turn's budget is spent (libcurl then holds the bytes and hands them over again once resumed).
    fileprivate func body(_ bytes: UnsafeRawBufferPointer) -> Int {
        if cancelled { return 0 }
        if multi.turnIsSpent && !bytes.isEmpty {
            multi.resumeNextTurn(self)
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        guard onBody(bytes) else { return 0 }
        multi.spend(bytes.count)
        return bytes.count
    }

    fileprivate func send(_ buffer: UnsafeMutableRawBufferPointer) -> Int? {
        cancelled ? nil : onSend(buffer)
    }

    fileprivate func openSocket(family: CInt, type: CInt, protocol: CInt) -> curl_socket_t {
        let socket = Glibc.socket(family, type | CInt(SOCK_CLOEXEC.rawValue), `protocol`)
        guard socket >= 0 else { return CURL_SOCKET_BAD }
        // libcurl closes a socket through the context it was opened with: the request stays alive until
        // its last socket is closed, even if its shell lets go of it first.
        if sockets.isEmpty { keepAlive = Unmanaged.passRetained(self) }
        sockets.insert(socket)
        return socket
    }

    fileprivate func closeSocket(_ socket: curl_socket_t) -> CInt {
        sockets.remove(socket)
        if sockets.isEmpty {
            keepAlive?.release()
            keepAlive = nil
        }
        SocketCalls.close(socket)
        return 0
    }
}

/// Why libcurl ended a request, in its words.
struct CurlFailure: Error, Equatable, CustomStringConvertible {
    var message: String
    /// libcurl's CURLcode; 0 when the failure is not one of libcurl's results.
    var code: UInt32
    /// Whether it is a TLS failure (the certificate, the handshake): not one a retry would fix.
    var tls: Bool

    init(_ message: String, code: UInt32 = 0, tls: Bool = false) {
        self.message = message
        self.code = code
        self.tls = tls
    }

    var description: String { message }
}

private func request(_ context: UnsafeMutableRawPointer?) -> CurlRequest? {
    context.map { Unmanaged<CurlRequest>.fromOpaque($0).takeUnretainedValue() }
}

private func curlWrite(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    let length = size * count
    guard let request = request(context) else { return 0 }
    return request.body(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : length))
}

private func curlHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    let length = size * count
    guard let request = request(context), request.header(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : length)) else { return 0 }
    return length
}

private func curlProgress(_ context: UnsafeMutableRawPointer?, _ downloadTotal: curl_off_t, _ downloaded: curl_off_t,
                          _ uploadTotal: curl_off_t, _ uploaded: curl_off_t) -> CInt {
    guard let request = request(context), request.progress() else { return 1 }
    return 0
}

private func curlRead(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let request = request(context), let data else { return Int(CURL_READFUNC_ABORT) }
    return request.send(UnsafeMutableRawBufferPointer(start: data, count: size * count)) ?? Int(CURL_READFUNC_ABORT)
}

private func curlOpenSocket(_ context: UnsafeMutableRawPointer?, _ purpose: curlsocktype, _ address: UnsafeMutablePointer<curl_sockaddr>?) -> curl_socket_t {
    guard let request = request(context), let address else { return CURL_SOCKET_BAD }
    return request.openSocket(family: address.pointee.family, type: address.pointee.socktype, protocol: address.pointee.protocol)
}

private func curlCloseSocket(_ context: UnsafeMutableRawPointer?, _ socket: curl_socket_t) -> CInt {
    guard let request = request(context) else {
        SocketCalls.close(socket)
        return 0
    }
    return request.closeSocket(socket)
}
