// The requests of the control protocol, typed once for both ends: netlifectl builds one and sends its
// `json`; the daemon reads a line with `init(json:)`, which names exactly what is wrong with a request
// (an unknown command, a missing member, a member of the wrong type, a newer protocol).

/// A request to the daemon.
public enum ControlRequest: Equatable, Sendable {
    case version
    case status(app: String?)
    case launch(app: String, background: Bool)
    case foreground(app: String)
    case background(app: String)
    case suspend(app: String)
    case terminate(app: String)
    /// An interruption of an active app begins (will-resign-active; it rests inactive) or ends.
    case interruptBegin(app: String)
    case interruptEnd(app: String)
    case reclaim(app: String)
    case lock
    /// `free`: the bytes to free (suspended apps are ended largest first until they are); nil: end every
    /// suspended app.
    case memoryPressure(free: Int?)
    case taskBegin(app: String, name: String?)
    case taskEnd(app: String, id: UInt64)
    case taskList(app: String)
    case mode(app: String, mode: String)
    /// `output` nil: the daemon's state directory (downloads/APP/NAME). `outputDirectory`: the device and
    /// inode ("DEV:INO") of the directory `output` names as the client sees it, so that a daemon which sees
    /// another directory at that path (systemd's PrivateTmp=, ProtectHome=) refuses rather than write where
    /// the client will never look.
    case download(app: String, url: String, output: String?, outputDirectory: String?)
    case upload(app: String, file: String, url: String)
    case transfers(app: String?)
    /// Stops and forgets the transfers chosen by id, app or URL (at least one; all given must match).
    case transfersCancel(id: UInt64?, app: String?, url: String?)
    case watch(app: String?)
    case reload
    case debugStall(duration: String)

    /// The member names of requests.
    public enum Key: String {
        case cmd, `protocol`, app, background, name, id, mode, url, output, outputDirectory, file, duration, free
    }

    /// The command names, as `cmd` carries them.
    public static let commandNames = ["version", "status", "launch", "foreground", "background", "suspend",
                                      "terminate", "interrupt-begin", "interrupt-end", "reclaim", "lock", "memory-pressure", "task-begin", "task-end",
                                      "task-list", "mode", "download", "upload", "transfers", "transfers-cancel", "watch", "reload",
                                      "debug-stall"]

    /// The `cmd` of this request.
    public var command: String {
        switch self {
        case .version: return "version"
        case .status: return "status"
        case .launch: return "launch"
        case .foreground: return "foreground"
        case .background: return "background"
        case .suspend: return "suspend"
        case .terminate: return "terminate"
        case .interruptBegin: return "interrupt-begin"
        case .interruptEnd: return "interrupt-end"
        case .reclaim: return "reclaim"
        case .lock: return "lock"
        case .memoryPressure: return "memory-pressure"
        case .taskBegin: return "task-begin"
        case .taskEnd: return "task-end"
        case .taskList: return "task-list"
        case .mode: return "mode"
        case .download: return "download"
        case .upload: return "upload"
        case .transfers: return "transfers"
        case .transfersCancel: return "transfers-cancel"
        case .watch: return "watch"
        case .reload: return "reload"
        case .debugStall: return "debug-stall"
        }
    }

    /// The app the request is about, if any.
    public var app: String? {
        switch self {
        case .status(let app), .transfers(let app), .watch(let app): return app
        case .launch(let app, _), .foreground(let app), .background(let app), .suspend(let app),
             .terminate(let app), .interruptBegin(let app), .interruptEnd(let app), .reclaim(let app), .taskBegin(let app, _), .taskEnd(let app, _),
             .taskList(let app), .mode(let app, _), .download(let app, _, _, _), .upload(let app, _, _):
            return app
        // Not resolved to a configured app: a reload may have removed the app whose transfer is cancelled.
        case .version, .lock, .memoryPressure, .reload, .debugStall, .transfersCancel:
            return nil
        }
    }

    /// The request line's value, with the protocol version this client speaks.
    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.cmd, .string(command))
        members.set(.protocol, .number(Double(ControlProtocol.version)))
        switch self {
        case .version, .lock, .reload:
            break
        case .memoryPressure(let free):
            if let free { members.set(.free, .number(Double(free))) }
        case .status(let app), .transfers(let app), .watch(let app):
            if let app { members.set(.app, app) }
        case .foreground(let app), .background(let app), .suspend(let app), .terminate(let app),
             .interruptBegin(let app), .interruptEnd(let app), .reclaim(let app), .taskList(let app):
            members.set(.app, app)
        case .launch(let app, let background):
            members.set(.app, app)
            members.set(.background, background)
        case .taskBegin(let app, let name):
            members.set(.app, app)
            if let name { members.set(.name, name) }
        case .taskEnd(let app, let id):
            members.set(.app, app)
            members.set(.id, .number(Double(id)))
        case .mode(let app, let mode):
            members.set(.app, app)
            members.set(.mode, mode)
        case .download(let app, let url, let output, let outputDirectory):
            members.set(.app, app)
            members.set(.url, url)
            if let output { members.set(.output, output) }
            if let outputDirectory { members.set(.outputDirectory, outputDirectory) }
        case .upload(let app, let file, let url):
            members.set(.app, app)
            members.set(.file, file)
            members.set(.url, url)
        case .transfersCancel(let id, let app, let url):
            if let id { members.set(.id, .number(Double(id))) }
            if let app { members.set(.app, app) }
            if let url { members.set(.url, url) }
        case .debugStall(let duration):
            members.set(.duration, duration)
        }
        return members.json
    }

    /// Reads a request line's value.
    public init(json: JSON) throws(ControlError) {
        let fields = try JSONFields<Key>(json, what: "a request")
        if fields.value(.protocol) != nil {
            let number = try fields.number(.protocol)
            guard number >= 1, number.rounded() == number, number < 1e9 else {
                throw ControlError(.badRequest, "\"protocol\" must be a positive whole number")
            }
            guard Int(number) <= ControlProtocol.version else {
                throw ControlError(.protocolVersion, "protocol \(Int(number)) is newer than this netlifed speaks (\(ControlProtocol.version)); upgrade netlifed")
            }
        }
        guard fields.value(.cmd) != nil else { throw ControlError(.badRequest, "the request has no \"cmd\"") }
        let command = try fields.string(.cmd)
        switch command {
        case "version": self = .version
        case "status": self = .status(app: try fields.optionalString(.app))
        case "launch": self = .launch(app: try fields.string(.app), background: try fields.bool(.background, default: false))
        case "foreground": self = .foreground(app: try fields.string(.app))
        case "background": self = .background(app: try fields.string(.app))
        case "suspend": self = .suspend(app: try fields.string(.app))
        case "terminate": self = .terminate(app: try fields.string(.app))
        case "interrupt-begin": self = .interruptBegin(app: try fields.string(.app))
        case "interrupt-end": self = .interruptEnd(app: try fields.string(.app))
        case "reclaim": self = .reclaim(app: try fields.string(.app))
        case "lock": self = .lock
        case "memory-pressure":
            let free = fields.value(.free) == nil ? nil : try fields.count(.free)
            self = .memoryPressure(free: free.map { Int($0) })
        case "task-begin":
            let app = try fields.string(.app)
            let name = try fields.optionalString(.name)
            if let name, name.utf8.count > ControlProtocol.maxTaskNameBytes {
                throw ControlError(.badRequest, "a task name is at most \(ControlProtocol.maxTaskNameBytes) bytes long")
            }
            self = .taskBegin(app: app, name: name)
        case "task-end": self = .taskEnd(app: try fields.string(.app), id: try fields.count(.id))
        case "task-list": self = .taskList(app: try fields.string(.app))
        case "mode":
            let app = try fields.string(.app)
            let mode = try fields.string(.mode)
            guard mode == "idle" || mode == "continuous" else {
                throw ControlError(.badRequest, "\"mode\" must be \"idle\" or \"continuous\"")
            }
            self = .mode(app: app, mode: mode)
        case "download":
            self = .download(app: try fields.string(.app), url: try fields.string(.url), output: try fields.optionalString(.output),
                             outputDirectory: try fields.optionalString(.outputDirectory))
        case "upload":
            self = .upload(app: try fields.string(.app), file: try fields.string(.file), url: try fields.string(.url))
        case "transfers": self = .transfers(app: try fields.optionalString(.app))
        case "transfers-cancel":
            let id = fields.value(.id) == nil ? nil : try fields.count(.id)
            let app = try fields.optionalString(.app)
            let url = try fields.optionalString(.url)
            guard id != nil || app != nil || url != nil else {
                throw ControlError(.badRequest, "transfers-cancel needs \"id\", \"app\" or \"url\"")
            }
            self = .transfersCancel(id: id, app: app, url: url)
        case "watch": self = .watch(app: try fields.optionalString(.app))
        case "reload": self = .reload
        case "debug-stall": self = .debugStall(duration: try fields.string(.duration))
        default:
            throw ControlError(.unknownCommand, "unknown command '\(command.prefix(64))'")
        }
    }
}
