// journald's native protocol, through libsystemd: when a service's stderr is connected to the journal
// (systemd sets JOURNAL_STREAM to that stream's "DEVICE:INODE", which the process compares with its fd 2,
// as systemd.exec(5) advises), each record goes to journald with sd_journal_sendv, carrying its priority and
// the logger's fields (NETLIFE_APP=echo, so that `journalctl NETLIFE_APP=echo` finds one app's records).
// Otherwise records stay `<N>`-prefixed lines on stderr, which journald also reads, without fields.

@preconcurrency import Glibc
import CSystemd
import Synchronization

/// A field of a journal record: NAME is upper-case letters, digits and `_`, not starting with `_`.
public struct JournalField: Sendable, Equatable {
    public let name: String
    public let value: String

    public init?(_ name: String, _ value: String) {
        guard let first = name.utf8.first, first != UInt8(ascii: "_"), name.utf8.count <= 64,
              name.utf8.allSatisfy({ ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || $0 == UInt8(ascii: "_") })
        else { return nil }
        self.name = name
        self.value = value
    }
}

public enum Journal {
    private static let enabled = Atomic<Bool>(false)
    private static let identifier = Mutex<String>("netlifed")

    /// Whether records written to fd 2 go to journald.
    public static var isEnabled: Bool { enabled.load(ordering: .relaxed) }

    /// Sends the records of every logger that writes to fd 2 to journald when `journalStream` (the value of
    /// JOURNAL_STREAM) names the stream fd 2 is; returns whether it does. `identifier` becomes each record's
    /// SYSLOG_IDENTIFIER.
    @discardableResult
    public static func enableIfStderrIsTheJournal(journalStream: String?, identifier: String) -> Bool {
        let matches = streamMatches(journalStream, fd: 2)
        self.identifier.withLock { $0 = identifier }
        enabled.store(matches, ordering: .relaxed)
        return matches
    }

    /// Whether `value` ("DEVICE:INODE", both decimal) names the file `fd` is open on.
    public static func streamMatches(_ value: String?, fd: Int32) -> Bool {
        guard let value else { return false }
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var information = stat()
        guard fstat(fd, &information) == 0 else { return false }
        return UInt64(information.st_dev) == device && UInt64(information.st_ino) == inode
    }

    /// One record to journald; false when it could not be sent (the caller then writes the line).
    static func send(priority: Int32, message: String, fields: [JournalField]) -> Bool {
        var entries = ["MESSAGE=" + message, "PRIORITY=\(priority)", "SYSLOG_IDENTIFIER=" + identifier.withLock { $0 }]
        for field in fields { entries.append(field.name + "=" + field.value) }
        // One buffer for every entry, and an iovec for each slice of it.
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for entry in entries {
            let start = bytes.count
            bytes.append(contentsOf: entry.utf8)
            ranges.append(start..<bytes.count)
        }
        return bytes.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return false }
            let vectors = ranges.map { iovec(iov_base: base + $0.lowerBound, iov_len: $0.count) }
            return vectors.withUnsafeBufferPointer { sd_journal_sendv($0.baseAddress, Int32($0.count)) >= 0 }
        }
    }
}
