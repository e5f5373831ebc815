// Replies are written and read from one field list per type: what is written reads back the same, members
// are in the order readers rely on, and absent optionals are left out or null as the protocol says.

import NetLifeControl
import Testing

@Suite struct ReplyFieldTests {
    static var app: AppInfo {
        var socket = SocketInfo(name: "s", peer: "p:1", policy: "reconnect", voip: true, state: "connected", error: nil)
        socket.protocolName = "imap"
        socket.connects = 2
        socket.lastLine = "x"
        socket.idle = false
        var app = AppInfo(name: "a", state: "background", suspendPending: true, backgroundTimeRemaining: nil, backgroundMode: "continuous",
                          listeners: [ListenerInfo(name: "l", address: "1.2.3.4:5", service: "echo", open: false, error: "e", connections: 2)],
                          sockets: [socket], tasks: [TaskInfo(id: 3, name: nil, age: 1.25)],
                          lastTermination: TerminationInfo(reason: "watchdog", at: 12.5, stage: "x", budget: 5, elapsed: 6),
                          lastStages: [StageTiming(name: "x", milliseconds: 1.5)])
        app.program = ProgramInfo(pid: nil, cgroup: "/c", containment: "cgroup-v2", frozen: true, memory: 5, speaksProtocol: true, members: 2,
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

    @Test func absentOptionalsAreNullOrLeftOutAsTheProtocolSays() throws {
        var app = Self.app
        app.program = nil
        app.lastTermination = nil
        let json = app.json
        #expect(json["program"] == nil)
        #expect(json["lastTermination"] == .null)
        #expect(TransitionReply(app: "a", state: "s").json.serialized == #"{"ok":true,"app":"a","state":"s","already":false,"stages":[]}"#)
        #expect(TransitionReply(app: "a", state: "s", suspendPending: true).json.serialized
                == #"{"ok":true,"app":"a","state":"s","already":false,"suspendPending":true,"reason":null,"stages":[]}"#)
    }

    @Test func anAdoptedListenersPidsAreWrittenOnlyWhenItHasSome() throws {
        let plain = ListenerInfo(name: "l", address: "1.2.3.4:5", service: "program", open: true, error: nil, connections: 0)
        #expect(plain.json["pids"] == nil)
        let adopted = ListenerInfo(name: "l", address: "1.2.3.4:5", service: "program", open: true, error: nil, connections: 0, pids: [7, 8])
        #expect(adopted.json.serialized.hasSuffix(#""connections":0,"pids":[7,8]}"#))
        #expect(try ListenerInfo(json: JSON.parse(adopted.json.serialized)) == adopted)
        #expect(throws: ControlError(.badRequest, "\"pids\" must be an array of whole numbers")) {
            try ListenerInfo(json: JSON.parse(#"{"name":"l","address":"a","service":"s","connections":1,"pids":[1.5]}"#))
        }
    }

    @Test func aMemberOfTheWrongTypeIsNamed() throws {
        #expect(throws: ControlError(.badRequest, "\"connections\" must be a whole number")) {
            try ListenerInfo(json: JSON.parse(#"{"name":"l","address":"a","service":"s","connections":1.5}"#))
        }
        #expect(throws: ControlError(.badRequest, "this command needs \"state\"")) { try AppInfo(json: JSON.parse(#"{"name":"a"}"#)) }
    }
}
