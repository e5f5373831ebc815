// Replies are written and read from one field list per type: what is written reads back the same, members
// are in the order readers rely on, and absent optionals are left out or null as the protocol says.

import NetLifeControl
import Testing

@Suite struct ReplyFieldTests {
    static var app: AppStatus {
        let socket = DataSocketStatus(name: "s", peer: "p:1", policy: .close, voip: true, state: .connected, error: nil,
                                      protocolName: "imap", connects: 2,
                                      protocolStatus: DataProtocolStatus([DataProtocolDetail("lastLine", .text("x")), DataProtocolDetail("idle", .flag(false))]))
        var app = AppStatus(name: "a", state: .background, suspendPending: true, backgroundTimeRemaining: nil, backgroundMode: .continuous,
                            listeners: [ListenerStatus(name: "l", address: "1.2.3.4:5", service: "echo", open: false, error: "e", connections: 2)],
                            sockets: [socket], tasks: [TaskStatus(id: 3, name: nil, age: 1.25)],
                            lastTermination: TerminationStatus(reason: .watchdog, at: 12.5, stage: "x", budget: 5, elapsed: 6),
                            lastStages: [StageTiming(event: .didEnterBackground, milliseconds: 1.5)])
        app.program = ProgramStatus(pid: nil, cgroup: "/c", containment: .cgroupV2, frozen: true, memoryBytes: 5, speaksProtocol: true, members: 2,
                                    ready: true, statusText: "up")
        return app
    }

    @Test func aStatusReplyReadsBackAsWrittenWithItsMembersInOrder() throws {
        let reply = StatusReply(apps: [Self.app], degradedReasons: ["r"])
        let line = reply.json.serialized
        #expect(line.hasPrefix(#"{"ok":true,"apps":[{"name":"a","state":"background","suspendPending":true,"backgroundTimeRemaining":null,"#))
        #expect(line.hasSuffix(#""degraded":true,"degradedReasons":["r"]}"#))
        #expect(line.contains(#""error":null,"protocol":"imap","connects":2,"lastLine":"x","idle":false}"#))
        #expect(try StatusReply(json: JSON.parse(line)) == reply)
        #expect(line.contains(#""protocol":true,"members":2,"ready":true,"statusText":"up"}"#))
    }

    @Test func theMetricsAddressIsInTheStatusOfADaemonThatServesThemAndLeftOutOtherwise() throws {
        let serving = StatusReply(apps: [], metrics: "127.0.0.1:9464")
        let line = serving.json.serialized
        #expect(line == #"{"ok":true,"apps":[],"degraded":false,"degradedReasons":[],"metrics":"127.0.0.1:9464"}"#)
        #expect(try StatusReply(json: JSON.parse(line)) == serving)
        #expect(StatusReply(apps: []).json["metrics"] == nil)
        #expect(try StatusReply(json: JSON.parse(#"{"ok":true,"apps":[],"degraded":false,"degradedReasons":[]}"#)).metrics == nil)
    }

    @Test func absentOptionalsAreNullOrLeftOutAsTheProtocolSays() throws {
        var app = Self.app
        app.program = nil
        app.lastTermination = nil
        let json = app.json
        #expect(json["program"] == nil)
        #expect(json["lastTermination"] == .null)
        #expect(TransitionReply(app: "a", state: .suspended).json.serialized == #"{"ok":true,"app":"a","state":"suspended","already":false,"stages":[]}"#)
        #expect(TransitionReply(app: "a", state: .background, suspendPending: true).json.serialized
                == #"{"ok":true,"app":"a","state":"background","already":false,"suspendPending":true,"reason":null,"stages":[]}"#)
    }

    @Test func anAdoptedListenersPidsAreWrittenOnlyWhenItHasSome() throws {
        let plain = ListenerStatus(name: "l", address: "1.2.3.4:5", service: "program", open: true, error: nil, connections: 0)
        #expect(plain.json["pids"] == nil)
        let adopted = ListenerStatus(name: "l", address: "1.2.3.4:5", service: "program", open: true, error: nil, connections: 0, pids: [7, 8])
        #expect(adopted.json.serialized.hasSuffix(#""connections":0,"pids":[7,8]}"#))
        #expect(try ListenerStatus(json: JSON.parse(adopted.json.serialized)) == adopted)
        #expect(throws: JSONRecordError("\"pids\" must be an array of whole numbers")) {
            try ListenerStatus(json: JSON.parse(#"{"name":"l","address":"a","service":"s","connections":1,"pids":[1.5]}"#))
        }
    }

    @Test func aMemberOfTheWrongTypeIsNamed() throws {
        #expect(throws: JSONRecordError("\"connections\" must be a whole number")) {
            try ListenerStatus(json: JSON.parse(#"{"name":"l","address":"a","service":"s","connections":1.5}"#))
        }
        #expect(throws: JSONRecordError("an app needs \"state\"")) { try AppStatus(json: JSON.parse(#"{"name":"a"}"#)) }
    }
}
