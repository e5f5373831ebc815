// The status records read back what they wrote, name a value outside their vocabulary, and carry a protocol's
// own figures under the protocol's names.

import Testing
import NetLifeJSON
import NetLifeStatus

@Suite struct StatusRecordTests {
    static let sample = AppStatus(
        name: "mail", state: .background, suspendPending: true, backgroundTimeRemaining: 12.5, backgroundMode: .continuous,
        listeners: [ListenerStatus(name: "web", address: "127.0.0.1:8080", service: "http", open: false, error: "taken",
                                   connections: 2, pids: [10, 11])],
        sockets: [DataSocketStatus(name: "inbox", peer: "127.0.0.1:143", policy: .quiet, voip: true, state: .quiet, error: nil,
                                   protocolName: "imap", connects: 3,
                                   protocolStatus: DataProtocolStatus([DataProtocolDetail("exists", .count(4)),
                                                                       DataProtocolDetail("idle", .flag(true)),
                                                                       DataProtocolDetail("folder", .text("INBOX"))]))],
        tasks: [TaskStatus(id: 7, name: "sync", age: 1.25)],
        lastTermination: TerminationStatus(reason: .terminatedWhileSuspended, at: 1_700_000_000.5, by: .command),
        lastStages: [StageTiming(event: .didEnterBackground, milliseconds: 0.75)],
        program: ProgramStatus(pid: 42, cgroup: "/sys/fs/cgroup/x", containment: .cgroupV2, frozen: true, memoryBytes: 4096,
                               speaksProtocol: true, members: 3, ready: true, statusText: "serving"))

    @Test func anAppReadsBackAsTheValueThatWasWritten() throws {
        let text = AppStatus.sample.json.serialized
        #expect(try AppStatus(json: JSON.parse(text)) == Self.sample)
    }

    @Test func aProtocolsFiguresAreMembersUnderItsOwnNames() throws {
        guard case .object(let socket) = Self.sample.sockets[0].json else { Issue.record("not an object"); return }
        #expect(socket.members.map(\.key) == ["name", "peer", "policy", "voip", "state", "error", "protocol", "connects",
                                                "exists", "idle", "folder"])
        #expect(socket["exists"] == .number(4) && socket["idle"] == .bool(true) && socket["folder"] == .string("INBOX"))
    }

    @Test func aNameOutsideTheVocabularyIsAnErrorThatListsTheNames() {
        var app = Self.sample.json
        if case .object(var object) = app { object["state"] = "sleeping"; app = .object(object) }
        #expect(throws: JSONRecordError("\"state\" must be one of not-running, inactive, active, background, suspended, not 'sleeping'")) {
            try AppStatus(json: app)
        }
    }

    @Test func aFigureThatIsNeitherCountTextNorFlagIsAnError() throws {
        let socket = try JSON.parse(#"{"name": "s", "peer": "p", "policy": "keep", "voip": false, "state": "closed", "error": null, "odd": [1]}"#)
        #expect(throws: JSONRecordError("\"odd\" must be a whole number, a string or true or false")) { try DataSocketStatus(json: socket) }
    }

    @Test func durationsAreCarriedAsRoundedSecondsAndMilliseconds() {
        #expect(StatusTime.seconds(.milliseconds(1234.4)) == 1.234)
        #expect(StatusTime.milliseconds(.microseconds(1500.4)) == 1.5)
        #expect(StatusTime.seconds(.seconds(90)) == 90)
    }
}

extension AppStatus {
    static var sample: AppStatus { StatusRecordTests.sample }
}
