// The unfinished-transfer journal (`transfers.json` in the state directory): what makes a transfer again
// after a restart, declared once as records. An entry that does not read is skipped alone, with the reason;
// the TLS choices keep the names of the request's members (`cacert`, `insecure`, `sslRequired`).

import NetLifeControl
import NetLifeServices

/// The journal file: `{"transfers": [ENTRY, ...]}`.
struct TransferJournal: JSONRecord {
    /// Each entry as it was written, read one by one so that a bad one costs only itself.
    var entries: [JSON]

    static let schema = JSONSchema<TransferJournal>("a transfer list", blank: TransferJournal(entries: []), [
        JSONField("transfers", write: { .array($0.entries) }) { fields, key, journal throws(JSONRecordError) in
            journal.entries = try fields.array(key)
        },
    ])
}

/// One unfinished transfer.
struct JournalEntry: Equatable, JSONRecord {
    /// Its id (0 in an older journal, which had none: it gets a new one).
    var id: UInt64
    var app: String
    var direction: TransferDirection
    var url: String
    /// The local file: where a download goes, what an upload sends.
    var output: String
    /// Absent in an older journal: the default checks.
    var tls: TLSChoices?
    /// Who asked (the identity its files are used with); nil: the daemon's own.
    var owner: Owner?

    static let schema = JSONSchema<JournalEntry>("a transfer", blank: JournalEntry(id: 0, app: "", direction: .download, url: "", output: ""), [
        .count("id", \.id, default: 0), .string("app", \.app), .name("direction", \.direction, default: .download),
        .string("url", \.url), .string("output", \.output), .record("tls", \.tls), .record("owner", \.owner, absent: .null),
    ])

    /// A transfer's TLS choices, as its request gave them.
    struct TLSChoices: Equatable, JSONRecord {
        var caFile: String?
        var insecure: Bool
        var required: Bool

        init(_ tls: TransferTLS) {
            caFile = tls.caFile
            insecure = tls.insecure
            required = tls.required
        }

        var tls: TransferTLS { TransferTLS(caFile: caFile, insecure: insecure, required: required) }

        static let schema = JSONSchema<TLSChoices>("tls", blank: TLSChoices(.verified), [
            .string(ControlMember.caFile.key, \.caFile, absent: .omitted),
            .when({ $0.insecure }, .bool(ControlMember.insecure.key, \.insecure)),
            .when({ $0.required }, .bool(ControlMember.sslRequired.key, \.required)),
        ])
    }

    /// The requester's uid, gid and groups when it asked.
    struct Owner: Equatable, JSONRecord {
        var uid: Int
        var gid: Int
        var groups: [Int]

        static let schema = JSONSchema<Owner>("owner", blank: Owner(uid: 0, gid: 0, groups: []), [
            .count("uid", \.uid), .count("gid", \.gid), .counts("groups", \.groups),
        ])
    }
}
