// The http service's access log (listener key `access-log = PATH|journal|no`, default `no`): one line per
// response in the combined log format, as nginx writes it:
//   HOST - - [dd/Mon/yyyy:HH:MM:SS +0000] "METHOD TARGET HTTP/1.x" STATUS BYTES "REFERER" "USER-AGENT"
// BYTES counts the body bytes sent (nginx's $body_bytes_sent); what a peer sent is escaped as nginx escapes
// it (`"`, `\`, control bytes and bytes from 0x7F as \xHH), so a line is always one line and its quotes
// cannot be forged. The line is pure (`AccessLogLine`); `AccessLogFile` appends lines to a file opened with
// O_APPEND, shared by every listener naming that path and reopened by `reopenAll()` (the daemon calls it on
// SIGHUP and reload: logrotate renames the file, sends HUP, and the next line makes a new file).

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// Where an http listener's access log goes.
public enum AccessLogDestination: Equatable, Sendable {
    /// Appended to a file.
    case file(String)
    /// Each line a record of the app's logger, at info.
    case journal

    /// Reads the key's value: nil for `no`; an error for anything but `journal`, `no` or an absolute path in
    /// an existing directory.
    static func parse(_ text: String) throws(ServiceOptionError) -> AccessLogDestination? {
        switch text {
        case "no": return nil
        case "journal": return .journal
        default:
            guard text.hasPrefix("/"), !text.hasSuffix("/"), text.utf8.count < 4000 else {
                throw ServiceOptionError(key: "access-log", "access-log must be an absolute file path, journal or no, got '\(text.prefix(256))'")
            }
            let slash = text.lastIndex(of: "/") ?? text.startIndex
            let directory = slash == text.startIndex ? "/" : String(text[..<slash])
            guard isDirectory(directory) else {
                throw ServiceOptionError(key: "access-log", "access-log's directory \(directory) does not exist", isAboutThisHost: true)
            }
            guard access(directory, W_OK) == 0 else {
                throw ServiceOptionError(key: "access-log", "access-log's directory \(directory) is not writable here (\(Errno.current)); under systemd's ProtectSystem=strict a drop-in with ReadWritePaths=\(directory) makes it so",
                                         isAboutThisHost: true)
            }
            return .file(text)
        }
    }
}

/// One line of the combined log format.
public enum AccessLogLine {
    /// The line, without its newline. `host` is the peer's address; `request` nil when no request line
    /// could be read (logged as `-`); `time` in seconds since the epoch.
    public static func format(host: String, time: Int64, request: HTTPRequestHead?, status: Int, bodyBytes: Int) -> String {
        let requestLine = request.map { "\($0.method) \($0.target) HTTP/1.\($0.minorVersion)" } ?? "-"
        let referer = request?.value(of: "referer") ?? "-"
        let agent = request?.value(of: "user-agent") ?? "-"
        return "\(host) - - [\(timestamp(time))] \"\(escaped(requestLine))\" \(status) \(bodyBytes) \"\(escaped(referer))\" \"\(escaped(agent))\""
    }

    /// `dd/Mon/yyyy:HH:MM:SS +0000`, in UTC. The corresponding C function is `gmtime_r`.
    public static func timestamp(_ time: Int64) -> String {
        var seconds = time_t(time)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(parts.tm_mday))/\(months[Int(parts.tm_mon) % 12])/\(parts.tm_year + 1900):\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) +0000"
    }

    /// `text` with `"`, `\`, bytes below 0x20 and bytes from 0x7F written `\xHH`, as nginx's log escaping.
    public static func escaped(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                out += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// An access log file, shared by the listeners that name its path. Loop-confined, as the services are.
public final class AccessLogFile {
    /// The open files by path, held weakly: a file closes when the last listener naming it goes.
    nonisolated(unsafe) private static var files: [String: WeakFile] = [:]
    private struct WeakFile { weak var file: AccessLogFile? }

    public let path: String
    /// The log, open for appending. Shared by listeners and held by them only, it has no one owner to close
    /// it: it closes with the last listener that names it.
    private var file: FileDescriptor?
    private let logger: Logger
    /// Bytes of lines a write could not take yet, retried before the next line; at most `maxPending`.
    private var pending: [UInt8] = []
    static let maxPending = 64 * 1024
    /// Lines lost since the last successful write (the file could not be opened or written, and the pending
    /// bytes were at their bound); reported once when the trouble starts and once when it ends.
    private var dropped = 0
    private var troubled = false

    /// The file for `path`, opened if no listener has it open.
    static func shared(_ path: String, logger: Logger) -> AccessLogFile {
        if let file = files[path]?.file { return file }
        let file = AccessLogFile(path: path, logger: logger)
        files[path] = WeakFile(file: file)
        return file
    }

    /// Closes and reopens every open access log (after logrotate renamed them: the next line makes the file).
    public static func reopenAll() {
        files = files.filter { $0.value.file != nil }
        for entry in files.values { entry.file?.reopen() }
    }

    private init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
        open()
    }

    /// Opens the log for appending. A log netlifed creates is mode 0640, whatever the umask (systemd's
    /// UMask=0077 made it 0600): in a directory of group adm with the set-group-id bit (as Debian's
    /// /var/log/nginx), the adm group reads it, as Debian's nginx logs are read. An existing file keeps its
    /// mode and owner (logrotate's `create` decides them). The corresponding C functions are `open` and
    /// `fchmod`.
    private func open() {
        let options: FileDescriptor.OpenOptions = [.append, .nonBlocking]
        do throws(SystemError) {
            let created = try FileDescriptor.open(path, .writeOnly, options: options.union([.create, .exclusiveCreate]), permissions: 0o640)
            _ = try? created.setPermissions(0o640)
            file = consume created
            return
        } catch {
            guard error.errno.rawValue == EEXIST else { return trouble("cannot open: \(error.errno)") }
        }
        do throws(SystemError) {
            file = try FileDescriptor.open(path, .writeOnly, options: options)
        } catch {
            trouble("cannot open: \(error.errno)")
        }
    }

    func reopen() {
        flush()
        file = nil
        open()
        flush()
    }

    /// Appends one line (a newline is added). A regular file's write goes to the page cache, so the loop
    /// waits for a copy, not for the disk; what a write does not take waits, bounded, for the next line.
    func append(_ line: String) {
        let bytes = Array(line.utf8) + [UInt8(ascii: "\n")]
        guard pending.count + bytes.count <= Self.maxPending else {
            dropped += 1
            trouble("\(pending.count) bytes wait to be written")
            flush()
            return
        }
        pending += bytes
        flush()
    }

    private func flush() {
        guard !pending.isEmpty, file != nil else { return }
        let result = pending.withUnsafeBytes { bytes -> Result<Int, SystemError> in
            do throws(SystemError) { return .success(try file?.write(bytes) ?? 0) } catch { return .failure(error) }
        }
        let written: Int
        switch result {
        case .success(let count): written = count
        case .failure(let error):
            if error.errno != .wouldBlock { trouble("write: \(error.errno)") }
            return
        }
        pending.removeFirst(written)
        guard pending.isEmpty, troubled else { return }
        logger.notice("access log \(path): writing again; \(dropped) line\(dropped == 1 ? "" : "s") lost meanwhile")
        troubled = false
        dropped = 0
    }

    /// Reports the first trouble of a spell once; the lines lost are counted.
    private func trouble(_ what: String) {
        guard !troubled else { return }
        troubled = true
        logger.warning("access log \(path): \(what); lines are kept up to \(Self.maxPending / 1024) KiB, then counted and dropped")
    }
}
