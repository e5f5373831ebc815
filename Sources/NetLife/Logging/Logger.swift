// Logging as journald reads it from a service's stderr: one line per record, prefixed with the syslog
// priority in angle brackets (`<4>` for a warning). A value type, like swift-log's Logger. Under systemd
// (Journal.enableIfStderrIsTheJournal), records go to journald itself, with the logger's fields.

@preconcurrency import Glibc
import NetLifeEvent
import Synchronization

/// A logger with a label (for example `app echo`) and a minimum level.
public struct Logger: Sendable {
    /// The minimum level, shared by a logger and every copy made from it, so that a reload can change it.
    private final class Threshold: Sendable {
        let level: Atomic<Int32>
        init(_ level: Level) { self.level = Atomic(level.rawValue) }
    }

    /// Where log lines go: a file descriptor, stderr by default.
    public var fd: Int32 = 2
    public var label: String
    /// Fields of each record in the journal (`NETLIFE_APP`), kept by the loggers made from this one.
    public private(set) var fields: [JournalField] = []
    private let threshold: Threshold

    /// The least important level written. Setting it changes this logger and every copy made from it.
    public var minimumLevel: Level {
        get { Level(rawValue: threshold.level.load(ordering: .relaxed)) ?? .info }
        nonmutating set { threshold.level.store(newValue.rawValue, ordering: .relaxed) }
    }

    public init(label: String, minimumLevel: Level = .info) {
        self.label = label
        self.threshold = Threshold(minimumLevel)
    }

    /// The same logger with another label.
    public func labeled(_ label: String) -> Logger {
        var copy = self
        copy.label = label
        return copy
    }

    /// The same logger with one more journal field (replacing one of the same name); an invalid name is
    /// ignored.
    public func adding(field name: String, _ value: String) -> Logger {
        guard let field = JournalField(name, value) else { return self }
        var copy = self
        copy.fields.removeAll { $0.name == name }
        copy.fields.append(field)
        return copy
    }

    /// Writes one record. Newlines in `message` become spaces, so a record is always one line.
    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level >= minimumLevel else { return }
        var text = "\(label): \(message())"
        if text.contains("\n") { text = text.replacingNewlines() }
        if fd == 2, Journal.isEnabled, Journal.send(priority: level.rawValue, message: text, fields: fields) { return }
        var line = (fd == 2 && Self.stderrIsTerminal ? Self.timestamp() + " " : "") + "<\(level.rawValue)>" + text
        line.append("\n")
        // A line that cannot be written is lost: there is nowhere else to say so.
        line.withUTF8 { bytes in try? FileDescriptor.write(all: UnsafeRawBufferPointer(bytes), toUnowned: fd, name: "the log") }
    }

    /// Whether stderr is a terminal: netlifed run by hand, where a person reads the lines and wants their
    /// time. Under journald (which stamps every record itself) and into files and pipes (a supervisor's own
    /// log, the tests) the lines stay `<N>label: message`.
    static let stderrIsTerminal = isatty(2) == 1

    /// The local time, to the millisecond: `2026-12-06 22:49:11.123`.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var local = tm()
        localtime_r(&seconds, &local)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &local)
        let milliseconds = Int(now.tv_nsec / 1_000_000)
        let text = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text + "." + (milliseconds < 10 ? "00" : milliseconds < 100 ? "0" : "") + String(milliseconds)
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
    public func critical(_ message: @autoclosure () -> String) { log(.critical, message()) }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(map { $0 == "\n" || $0 == "\r\n" ? " " : $0 })
    }
}
