// The control protocol (docs/control-protocol.md): one JSON object per line each way. This module holds what the
// daemon and netlifectl share: the version, the limits, the error codes, and the typed requests and replies
// (ControlRequest.swift, ControlReply.swift). It depends on no event loop: netlifectl links only this.

@preconcurrency import Glibc

/// The protocol's constants.
public enum ControlProtocol {
    /// The protocol version this daemon speaks. A request may carry `"protocol": N`; a larger N is refused.
    public static let version = 1
    /// The daemon's version.
    public static let daemonVersion = "0.1.0"
    /// The longest request line accepted.
    public static let maxRequestBytes = 64 * 1024
    /// The deepest nesting and the most members per object or array a request may have.
    public static let maxRequestDepth = 16
    public static let maxRequestElements = 256
    /// The most control connections open at once.
    public static let maxConnections = 32
    /// How long an idle control connection is kept.
    public static let idleTimeout: Duration = .seconds(60)
    /// How long a client may take to complete a request it has begun (or its first one).
    public static let requestTimeout: Duration = .seconds(5)
    /// The most replies a session may leave unread before it is no longer read.
    public static let maxUnreadReplyBytes = 1 << 20
    /// How long a session may leave more than `maxUnreadReplyBytes` of replies unread (its requests are not
    /// read meanwhile) before it is told `slow-reader` and closed. A client that takes its replies within
    /// this time loses none, however long it took to send its requests.
    public static let unreadRepliesTimeout: Duration = .seconds(60)
    /// The most open background tasks per app.
    public static let maxTasksPerApp = 1024
    /// The longest background task name, in bytes of UTF-8.
    public static let maxTaskNameBytes = 256
}

/// An error reply's `code`.
public enum ControlErrorCode: String, Sendable {
    case badRequest = "bad-request"
    case requestTooLarge = "request-too-large"
    case unknownCommand = "unknown-command"
    case unsupported
    case unknownApp = "unknown-app"
    /// No transfer has the id (or the app or URL) a `transfers-cancel` names.
    case unknownTransfer = "unknown-transfer"
    case invalidTransition = "invalid-transition"
    case watchdog
    case permissionDenied = "permission-denied"
    case tooManyConnections = "too-many-connections"
    case protocolVersion = "protocol-version"
    case shuttingDown = "shutting-down"
    case configError = "config-error"
    case busy
    case timeout
    /// The client left its replies unread for `ControlProtocol.unreadRepliesTimeout`.
    case slowReader = "slow-reader"
    case limit
    case reloaded
    /// A code this client does not know (a newer daemon).
    case unknown
}

/// An error reply: its code and a message for a person.
public struct ControlError: Error, Equatable, Sendable, CustomStringConvertible {
    public var code: ControlErrorCode
    public var message: String

    public init(_ code: ControlErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    /// A member of a request or reply that is missing or of the wrong type: `bad-request`.
    public init(_ error: JSONRecordError) {
        self.init(.badRequest, error.message)
    }

    /// What `body` returns; a record error it throws becomes `bad-request`.
    public static func reading<Value>(_ body: () throws(JSONRecordError) -> Value) throws(ControlError) -> Value {
        do { return try body() } catch { throw ControlError(error) }
    }

    /// The reply line's value: `{"ok": false, "error": {"code": ..., "message": ...}}`.
    public var json: JSON {
        .object(["ok": false, "error": .object(["code": .string(code.rawValue), "message": .string(message)])])
    }

    /// Reads an error reply (`nil` when `json` is not one).
    public init?(reply json: JSON) {
        guard json["ok"]?.boolValue == false, let error = json["error"] else { return nil }
        code = error["code"]?.stringValue.flatMap(ControlErrorCode.init(rawValue:)) ?? .unknown
        message = error["message"]?.stringValue ?? "the request failed"
    }
}

extension ControlProtocol {
    /// The control socket path when neither the config nor the command line names one:
    /// /run/netlifed/control.sock for root, $XDG_RUNTIME_DIR/netlifed/control.sock otherwise
    /// (/tmp/netlifed-UID/control.sock without it).
    public static func defaultSocketPath(environment: [String: String]) -> String {
        defaultSocketPath(environment: environment, euid: geteuid())
    }

    static func defaultSocketPath(environment: [String: String], euid: uid_t) -> String {
        if euid == 0 { return systemSocketPath }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/netlifed/control.sock" }
        return "/tmp/netlifed-\(euid)/control.sock"
    }

    /// The system daemon's control socket (systemd's RuntimeDirectory=netlifed): root's default.
    public static let systemSocketPath = "/run/netlifed/control.sock"

    /// The sockets a client tries when neither `--control` nor `$NETLIFE_CONTROL` names one, in order: this
    /// user's default, then the system daemon's, which a member of its `control-group` may use.
    public static func clientSocketPaths(environment: [String: String], euid: uid_t = geteuid()) -> [String] {
        let own = defaultSocketPath(environment: environment, euid: euid)
        return own == systemSocketPath ? [own] : [own, systemSocketPath]
    }

    /// The socket to connect to among `candidates`: the first that `exists`, or nil when none does. A path
    /// that cannot be looked at (EACCES) should count as existing: connecting then says why.
    public static func socketToUse(_ candidates: [String], exists: (String) -> Bool) -> String? {
        candidates.first(where: exists)
    }

    /// Whether something is at `path` (anything but ENOENT and ENOTDIR counts). The corresponding C function
    /// is `lstat`.
    public static func pathMayExist(_ path: String) -> Bool {
        var info = stat()
        if lstat(path, &info) == 0 { return true }
        return errno != ENOENT && errno != ENOTDIR
    }

    /// The longest path a Unix socket address holds (sun_path less its terminating zero).
    public static let maxSocketPathBytes = 107
}

/// The environment of this process as a dictionary.
public func processEnvironment() -> [String: String] {
    var result: [String: String] = [:]
    var pointer = environ
    while let entry = pointer.pointee {
        let text = String(cString: entry)
        if let equals = text.firstIndex(of: "=") {
            result[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        pointer += 1
    }
    return result
}

/// The device and inode ("DEV:INO") of the directory that holds `path` (an absolute path), as this process
/// sees it; nil when it cannot be read. netlifectl sends it with a download's `--output`, and netlifed
/// compares it with its own view of that directory.
public func fileIdentity(directoryOf path: String) -> String? {
    guard let slash = path.lastIndex(of: "/") else { return nil }
    let directory = slash == path.startIndex ? "/" : String(path[..<slash])
    var info = stat()
    guard stat(directory, &info) == 0 else { return nil }
    return "\(info.st_dev):\(info.st_ino)"
}
