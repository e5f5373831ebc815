// What netlifectl prints of replies and watch events, from the protocol's types: the background time says
// what the JSON says (none while no code can run), a port-0 listener never opened is not shown as bound, a
// refused task begin carries its reason, and a data socket's quiet mode shows in watch events.

import NetLifeControl
import Testing

@Suite struct ReplyTextTests {
    @Test func backgroundTimeIsUnlimitedInTheForegroundAndNoneWhileNoCodeCanRun() {
        #expect(BackgroundTimeText.line(seconds: nil, state: .active) == "background time remaining: unlimited")
        #expect(BackgroundTimeText.line(seconds: nil, state: .inactive) == "background time remaining: unlimited")
        #expect(BackgroundTimeText.line(seconds: 29.4121, state: .background) == "background time remaining: 29s")
        #expect(BackgroundTimeText.line(seconds: 2.5, state: .background) == "background time remaining: 2.5s")
        #expect(BackgroundTimeText.line(seconds: 0, state: .background) == "background time remaining: 0s")
        #expect(BackgroundTimeText.line(seconds: 0, state: .suspended) == "background time remaining: 0s (suspended)")
        #expect(BackgroundTimeText.line(seconds: 0, state: .notRunning) == "background time remaining: 0s (not running)")
        // A daemon that said null for a not-running app: the app still has no time.
        #expect(BackgroundTimeText.value(seconds: nil, state: .notRunning) == "0s (not running)")
    }

    @Test func taskListCarriesTheStateSoThatItsTextMatchesStatus() throws {
        let list = TaskListReply(app: "mail", state: .notRunning, tasks: [], backgroundTimeRemaining: 0)
        let json = try JSON.parse(list.json.serialized)
        #expect(json["state"]?.stringValue == "not-running")
        #expect(json["backgroundTimeRemaining"]?.doubleValue == 0)
        let read = try TaskListReply(json: json)
        #expect(read == list)
        #expect(read.backgroundTimeText == "background time remaining: 0s (not running)")
        let app = AppStatus(name: "mail", state: .suspended, backgroundTimeRemaining: 0)
        #expect(app.backgroundTimeText == "background time remaining: 0s (suspended)")
    }

    @Test func aListenerNeverOpenedOnPortZeroIsNotShownAsBound() {
        func listener(_ address: String, open: Bool = false) -> ListenerStatus {
            ListenerStatus(name: "main", address: address, service: "echo", open: open, error: nil, connections: 0)
        }
        #expect(listener("127.0.0.1:0").addressText == "127.0.0.1:0 (not bound yet: the port is chosen at the first open)")
        #expect(listener("[::1]:0").addressText == "[::1]:0 (not bound yet: the port is chosen at the first open)")
        #expect(listener("127.0.0.1:40123", open: true).addressText == "127.0.0.1:40123")
        #expect(listener("127.0.0.1:40123").addressText == "127.0.0.1:40123", "closed after its first open: its port stays")
        #expect(listener("127.0.0.1:10").addressText == "127.0.0.1:10")
        #expect(listener("/run/app/s:0").addressText == "/run/app/s:0", "a Unix socket's path, whatever it ends with")
    }

    @Test func aRefusedTaskBeginCarriesItsReasonAndABegunOneNone() throws {
        let refused = TaskBeginReply(app: "mail", id: 0, reason: "app mail is not running")
        let json = try JSON.parse(refused.json.serialized)
        #expect(json["ok"]?.boolValue == true, "still a reply, as UIBackgroundTaskInvalid is still a value")
        #expect(json["id"]?.intValue == 0)
        #expect(json["reason"]?.stringValue == "app mail is not running")
        #expect(try TaskBeginReply(json: json) == refused)
        #expect(refused.refusal == "task refused: app mail is not running")

        let begun = TaskBeginReply(app: "mail", id: 7)
        #expect(begun.json["reason"] == nil)
        #expect(begun.refusal == nil)
        #expect(TaskBeginReply(app: "mail", id: 0).refusal?.hasPrefix("task refused: ") == true, "even without a reason")
    }

    @Test func enteringAndLeavingQuietModeAreSocketEventsWithFromAndTo() throws {
        let entered = WatchEvent(.socket(socket: "imap", from: .connected, to: .quiet, error: nil), at: 1, app: "mail")
        let json = try JSON.parse(entered.json.serialized)
        #expect(json["event"]?.stringValue == "socket")
        #expect(json["from"]?.stringValue == "connected" && json["to"]?.stringValue == "quiet")
        #expect(try WatchEvent(json: json) == entered)
        #expect(entered.text == "mail: socket imap entered quiet mode")

        let left = WatchEvent(.socket(socket: "imap", from: .quiet, to: .connected, error: nil), at: 1, app: "mail")
        #expect(left.text == "mail: socket imap left quiet mode")

        let connected = WatchEvent(.socket(socket: "imap", from: nil, to: .connected, error: nil), at: 1, app: "mail")
        #expect(connected.text == "mail: socket imap connected", "a connect is not a return from quiet mode")
    }

    @Test func everyKindOfWatchEventReadsBackAsWrittenWithOnlyItsOwnMembers() throws {
        let payloads: [WatchEvent.Payload] = [
            .state(from: .active, to: .inactive),
            .transition(command: "interrupt-begin", to: .inactive, stages: [StageTiming(event: .willResignActive, milliseconds: 0.5)]),
            .taskBegan(id: 3, name: "sync"), .taskBegan(id: 4, name: nil), .taskEnded(id: 3), .taskExpiring(id: 4),
            .watchdog(stage: "did-enter-background", budget: 5, elapsed: 5.001),
            .stopped(reason: .terminated, by: .command), .stopped(reason: .memoryPressure, by: nil),
            .stopped(reason: .memoryPressure, by: nil, pressure: Self.pressure),
            .stopped(reason: .memoryPressure, by: nil, pressure: PressureStall(file: "/proc/pressure/memory", some: Self.pressure.some)),
            .listenerOpened(listener: "web", address: "127.0.0.1:80"), .listenerClosed(listener: "web"),
            .listenerFailed(listener: "web", error: "Address already in use"),
            .socket(socket: "imap", from: nil, to: .closed, error: "Connection refused"),
            .woken(.voipData(socket: "voip")), .woken(.connection(listener: "web")),
            .reclaimed(sockets: ["imap"], connections: 2), .notify(message: "READY=1"),
            .reload(added: ["a"], removed: [], restarted: ["b"], updated: []),
            .request(command: "interrupt-begin", uid: 1000, pid: 42), .idle(unused: 300.012), .end(error: "stopping"),
        ]
        for payload in payloads {
            let event = WatchEvent(payload, at: 1.5, app: "mail")
            let json = try JSON.parse(event.json.serialized)
            #expect(try WatchEvent(json: json) == event, "\(payload)")
            guard case .object(let object) = json else { continue }
            #expect(object.members.prefix(3).map(\.key) == ["event", "at", "app"])
            #expect(object["event"]?.stringValue == payload.kind)
        }
        // A transition and a request name the command by its wire name; the text by netlifectl's words.
        let interrupt = WatchEvent(.transition(command: "interrupt-begin", to: .inactive, stages: []), at: 1, app: "mail")
        #expect(interrupt.json["command"] == "interrupt-begin")
        #expect(interrupt.text == "mail: interrupt begin done: inactive")
        #expect(WatchEvent(.request(command: "task-begin", uid: 7, pid: 9), at: 1, app: "mail").text == "mail: task begin asked by uid 7 (pid 9)")
    }

    static let pressure = PressureStall(file: "/sys/fs/cgroup/unified/nl/memory.pressure",
                                        some: PressureFigures(avg10: 5.79, avg60: 1.04, total: 659_348),
                                        full: PressureFigures(avg10: 4.5, avg60: 0.8, total: 512_000))

    @Test func anAppEndedForTheKernelsPressureSaysWhatThePressureFileSaid() throws {
        let event = WatchEvent(.stopped(reason: .memoryPressure, by: nil, pressure: Self.pressure), at: 1, app: "mail")
        #expect(event.text == "mail: stopped: memory-pressure (/sys/fs/cgroup/unified/nl/memory.pressure: some avg10=5.79 avg60=1.04 total=659348, full avg10=4.50 avg60=0.80 total=512000)")
        #expect(event.json.serialized.contains(#""pressure":{"file":"/sys/fs/cgroup/unified/nl/memory.pressure","some":{"avg10":5.79,"avg60":1.04,"total":659348},"full":{"avg10":4.5,"avg60":0.8,"total":512000}}"#), "\(event.json.serialized)")
        // `netlifectl memory-pressure` ends an app without figures: the member is left out.
        #expect(!WatchEvent(.stopped(reason: .memoryPressure, by: nil), at: 1, app: "mail").json.serialized.contains("pressure\":"))
        let termination = TerminationStatus(reason: .memoryPressure, at: 1, pressure: Self.pressure)
        #expect(try TerminationStatus(json: JSON.parse(termination.json.serialized)) == termination)
        #expect(TerminationStatus(reason: .memoryPressure, at: 1).json["pressure"] == nil)
    }

    @Test func aWatchEventWithoutWhatItsKindNeedsIsAnError() throws {
        #expect(throws: JSONRecordError("a watch event needs \"to\"")) {
            try WatchEvent(json: JSON.parse(#"{"event":"state","at":1,"app":"a","from":"active"}"#))
        }
        #expect(throws: JSONRecordError("unknown watch event 'teleported'")) {
            try WatchEvent(json: JSON.parse(#"{"event":"teleported","at":1}"#))
        }
        #expect(throws: JSONRecordError("a woken event with reason 'voip-data' needs the socket or listener it names")) {
            try WatchEvent(json: JSON.parse(#"{"event":"woken","at":1,"app":"a","reason":"voip-data"}"#))
        }
    }
}
