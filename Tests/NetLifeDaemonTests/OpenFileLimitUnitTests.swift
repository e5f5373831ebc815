// The open-file limit's pure parts: when it is raised, what the log says, and how the `version` reply
// carries it.

@testable import NetLifeDaemon
import NetLife
import NetLifeControl
import NetLifeEvent
import Testing

@Suite(.timeLimit(.minutes(1)))
struct OpenFileLimitUnitTests {
    @Test func theSoftLimitIsRaisedToTheHardOneOnlyWhenLower() {
        #expect(OpenFileLimit(soft: 64, hard: 4096).raised == OpenFileLimit(soft: 4096, hard: 4096))
        #expect(OpenFileLimit(soft: 4096, hard: 4096).raised == nil)
        #expect(OpenFileLimit(soft: 1024, hard: OpenFileLimit.unlimited).raised?.soft == OpenFileLimit.unlimited)
    }

    @Test func theLogSaysTheLimitAndWhatHappened() {
        let low = OpenFileLimit(soft: 64, hard: 4096), high = OpenFileLimit(soft: 4096, hard: 4096)
        #expect(OpenFileLimit.logRecord(.raised(from: low, to: high)) == (.notice, "open files: limit 4096 (hard limit 4096), raised from 64"))
        #expect(OpenFileLimit.logRecord(.unchanged(high)) == (.notice, "open files: limit 4096 (hard limit 4096)"))
        let refused = OpenFileLimit.logRecord(.refused(low, SystemError("setrlimit", Errno(rawValue: 1))))
        #expect(refused.0 == .warning)
        #expect(refused.1.hasPrefix("open files: limit 64 (hard limit 4096); raising it to the hard limit failed: setrlimit: "))
        #expect(OpenFileLimit.after(.raised(from: low, to: high)) == high)
    }

    @Test func theVersionReplyCarriesTheLimitUnlimitedAsNull() throws {
        let reported = OpenFileLimit.reported(OpenFileLimit(soft: 4096, hard: OpenFileLimit.unlimited))
        #expect(reported.limit == 4096)
        #expect(reported.hardLimit == nil)
        #expect((reported.open ?? 0) > 0, "this process has descriptors open")
        let reply = VersionReply(version: "1", protocolVersion: 1, openFiles: reported)
        #expect(try VersionReply(json: JSON.parse(reply.json.serialized)) == reply)
        #expect(try VersionReply(json: JSON.parse(#"{"ok":true,"version":"1","protocol":1}"#)).openFiles == nil,
                "an older daemon says nothing of it")
        #expect(VersionReply.OpenFiles(limit: 64, hardLimit: nil, open: 3).text == "open files: 3 of 64 (hard limit unlimited)")
    }
}
