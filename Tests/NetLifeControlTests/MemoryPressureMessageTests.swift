// The `memory-pressure` request and reply as both ends read them: the optional amount to free, and the apps
// ended with whether they were relaunched.

import NetLifeControl
import Testing

@Suite struct MemoryPressureMessageTests {
    @Test func theAmountToFreeIsOptionalAndSurvivesTheRoundTrip() throws {
        for free: JSON? in [nil, 0, 123_456_789] {
            let request = try ControlRequest(.memoryPressure, free.map { [.free: $0] } ?? [:])
            #expect(try ControlRequest(json: request.json) == request)
        }
        #expect(try ControlRequest(.memoryPressure).json["free"] == nil)
        #expect(try ControlRequest(.memoryPressure, [.free: 4096]).json["free"]?.intValue == 4096)
    }

    @Test(arguments: [(#"{"cmd":"memory-pressure","free":-1}"#, "a whole number"),
                      (#"{"cmd":"memory-pressure","free":1.5}"#, "a whole number"),
                      (#"{"cmd":"memory-pressure","free":"1M"}"#, "a number")])
    func anAmountThatIsNoWholeNumberOfBytesIsABadRequest(line: String, kind: String) throws {
        let json = try JSON.parse(line)
        #expect(throws: ControlError(.badRequest, "\"free\" must be \(kind)")) { try ControlRequest(json: json) }
    }

    @Test func theReplySaysWhichAppsWereEndedAndWhichRelaunched() throws {
        let reply = MemoryPressureReply(terminated: [JettisonInfo(app: "mail", bytes: 2_000),
                                                     JettisonInfo(app: "phone", bytes: 1, voip: true, relaunched: true)])
        #expect(try MemoryPressureReply(json: reply.json) == reply)
        #expect(reply.terminated.map(\.text) == ["mail: terminated (memory pressure), held 2000 bytes",
                                                 "phone: terminated (memory pressure), held 1 byte; relaunched into the background (VoIP)"])
        #expect(JettisonInfo(app: "phone", bytes: 0, voip: true).text.hasSuffix("; VoIP app not relaunched (see netlifed's log)"))
    }

    @Test func aReplyWithoutTheVoIPMembersReadsAsNotRelaunched() throws {
        let json = try JSON.parse(#"{"ok":true,"terminated":[{"app":"mail","bytes":10}]}"#)
        #expect(try MemoryPressureReply(json: json).terminated == [JettisonInfo(app: "mail", bytes: 10)])
    }
}
