// The unfinished-transfer journal as records: an entry reads back as written, an older journal's entries
// (no id, no TLS choices, no owner) still read, the TLS choices keep the request's member names, and an
// entry whose choices do not read is refused rather than run with weaker checks.

import NetLifeControl
@testable import NetLifeDaemon
import NetLifeServices
import Testing

@Suite struct TransferJournalTests {
    @Test func anEntryReadsBackAsWritten() throws {
        let entry = JournalEntry(id: 7, app: "files", direction: .upload, url: "https://example.org/up", output: "/srv/a.bin",
                                 tls: JournalEntry.TLSChoices(TransferTLS(caFile: "/etc/ca.pem", insecure: false, required: true)),
                                 owner: JournalEntry.Owner(uid: 1001, gid: 1001, groups: [27, 100]))
        let line = TransferJournal(entries: [entry.json]).json.serialized
        #expect(line.contains(#""tls":{"cacert":"/etc/ca.pem","sslRequired":true}"#))
        let read = try TransferJournal(json: JSON.parse(line)).entries.map { item throws(JSONRecordError) in try JournalEntry(json: item) }
        #expect(read == [entry])
    }

    @Test func anOlderJournalsEntryReadsWithTheDefaults() throws {
        let old = try JSON.parse(#"{"app":"files","url":"http://example.org/big.iso","output":"/srv/big.iso"}"#)
        let entry = try JournalEntry(json: old)
        #expect(entry.id == 0 && entry.direction == .download && entry.tls == nil && entry.owner == nil)
    }

    @Test func anEntryWhoseChoicesDoNotReadIsRefused() throws {
        for text in [#"{"app":"a","url":"u","output":"o","tls":"insecure"}"#,
                     #"{"app":"a","url":"u","output":"o","tls":{"cacert":5}}"#,
                     #"{"app":"a","url":"u","output":"o","direction":"sideways"}"#,
                     #"{"app":"a","url":"u","output":"o","owner":{"uid":-1,"gid":0}}"#] {
            #expect(throws: JSONRecordError.self, "\(text)") { try JournalEntry(json: JSON.parse(text)) }
        }
    }
}
