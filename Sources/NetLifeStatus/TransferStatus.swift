// The transfers as `transfers` reports them, typed once for the daemon, netlifectl and the daemon's journal:
// which way the bytes go, where a transfer is, and the record `transfers` shows of each.

import NetLifeJSON

/// Which way the bytes go.
public enum TransferDirection: String, Sendable, CaseIterable, CustomStringConvertible {
    case download
    case upload

    public var description: String { rawValue }
}

/// A download or upload in `transfers`.
public struct TransferStatus: Equatable, Sendable, JSONRecord {
    /// Where a transfer is, as `transfers` names it.
    public enum State: String, Sendable, CaseIterable, CustomStringConvertible {
        /// Connecting, sending, receiving or verifying.
        case running
        /// Stopped with what it has kept (by its app's lifecycle, an error a retry may mend, or not run yet).
        case paused
        /// Finished: the file is in place (download) or the server has all of it (upload).
        case done
        /// Stopped for a reason a retry at once would not fix.
        case failed
        /// Stopped and forgotten by `transfers cancel` (only in its reply).
        case cancelled

        public var description: String { rawValue }
    }

    /// The transfer's id: given when it is made, kept in the journal across restarts, never reused by the
    /// daemon that gave it; what `transfers cancel ID` names. 0 from a daemon that gives none.
    public var id: UInt64
    public var app: String
    public var direction: TransferDirection
    public var url: String
    /// The local file: where a download goes, what an upload sends.
    public var output: String
    /// Bytes on disk (download) or acknowledged by the server (upload) so far.
    public var bytes: Int
    /// The whole length, when known.
    public var total: Int?
    public var state: State
    /// Why it is paused or failed.
    public var reason: String?
    /// Whether it stopped (paused or failed) on an error of the network, the server or the file, rather than
    /// by its app's lifecycle (suspended, background time spent, stopped) or not yet run.
    public var error: Bool

    public init(id: UInt64 = 0, app: String, direction: TransferDirection = .download, url: String, output: String, bytes: Int,
                total: Int?, state: State, reason: String?, error: Bool = false) {
        self.id = id
        self.app = app
        self.direction = direction
        self.url = url
        self.output = output
        self.bytes = bytes
        self.total = total
        self.state = state
        self.reason = reason
        self.error = error
    }

    /// Older daemons gave no ids and had downloads only; a reply without `error` has one when it failed.
    public static let schema = JSONSchema<TransferStatus>("a transfer", blank: TransferStatus(app: "", url: "", output: "", bytes: 0, total: nil, state: .paused, reason: nil), [
        .count("id", \.id, default: 0), .string("app", \.app), .name("direction", \.direction, default: .download),
        .string("url", \.url), .string("output", \.output), .count("bytes", \.bytes), .count("total", \.total),
        .name("state", \.state), .string("reason", \.reason),
        JSONField("error", write: { .bool($0.error) }) { fields, key, transfer throws(JSONRecordError) in
            transfer.error = try fields.bool(key, default: transfer.state == .failed)
        },
    ])

    /// One line of text for netlifectl.
    public var text: String {
        let size = total.map { "\(bytes)/\($0) bytes" } ?? "\(bytes) bytes"
        let route = direction == .upload ? "\(output) -> \(url)" : "\(url) -> \(output)"
        return "\(id == 0 ? "" : "[\(id)] ")\(app): \(route): \(state)\(reason.map { " (\($0))" } ?? ""), \(size)"
    }
}
