// What netlifectl prints of replies and watch events, from the protocol's types: the background time says
// what the JSON says (none while no code can run), a port-0 listener never opened is not shown as bound, a
// refused task begin carries its reason, and a data socket's quiet mode shows in watch events.

import NetLifeControl
import Testing

@Suite struct ReplyTextTests {
    @Test func backgroundTimeIsUnlimitedInTheForegroundAndNoneWhileNoCodeCanRun() {
        #expect(BackgroundTimeText.line(seconds: nil, state: "active") == "background time remaining: unlimited")
        #expect(BackgroundTimeText.line(seconds: nil, state: "inactive") == "background time remaining: unlimited")
        #expect(BackgroundTimeText.line(seconds: 29.4121, state: "background") == "background time remaining: 29s")
        #expect(BackgroundTimeText.line(seconds: 2.5, state: "background") == "background time remaining: 2.5s")
        #expect(BackgroundTimeText.line(seconds: 0, state: "background") == "background time remaining: 0s")
        #expect(BackgroundTimeText.line(seconds: 0, state: "suspended") == "background time remaining: 0s (suspended)")
        #expect(BackgroundTimeText.line(seconds: 0, state: "not-running") == "background time remaining: 0s (not running)")
        // A daemon that said null for a not-running app: the app still has no time.
        #expect(BackgroundTimeText.value(seconds: nil, state: "not-running") == "0s (not running)")
    }

    @Test func taskListCarriesTheStateSoThatItsTextMatchesStatus() throws {
        let list = TaskListReply(app: "mail", state: "not-running", tasks: [], backgroundTimeRemaining: 0)
        let json = try JSON.parse(list.json.serialized)
        #expect(json["state"]?.stringValue == "not-running")
        #expect(json["backgroundTimeRemaining"]?.doubleValue == 0)
        let read = try TaskListReply(json: json)
        #expect(read == list)
        #expect(read.backgroundTimeText == "background time remaining: 0s (not running)")
        let app = AppInfo(name: "mail", state: "suspended", suspendPending: false, backgroundTimeRemaining: 0,
                          backgroundMode: "idle", listeners: [], sockets: [], tasks: [], lastTermination: nil, lastStages: [])
        #expect(app.backgroundTimeText == "background time remaining: 0s (suspended)")
    }

    @Test func aListenerNeverOpenedOnPortZeroIsNotShownAsBound() {
        func listener(_ address: String, open: Bool = false) -> ListenerInfo {
            ListenerInfo(name: "main", address: address, service: "echo", open: open, error: nil, connections: 0)
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
        var entered = WatchEvent(kind: .socket, at: 1, app: "mail")
        entered.socket = "imap"
        entered.from = "connected"
        entered.to = "quiet"
        let json = try JSON.parse(entered.json.serialized)
        #expect(json["event"]?.stringValue == "socket")
        #expect(json["from"]?.stringValue == "connected" && json["to"]?.stringValue == "quiet")
        #expect(try WatchEvent(json: json) == entered)
        #expect(entered.text == "mail: socket imap entered quiet mode")

        var left = entered
        left.from = "quiet"
        left.to = "connected"
        #expect(left.text == "mail: socket imap left quiet mode")

        var connected = WatchEvent(kind: .socket, at: 1, app: "mail")
        connected.socket = "imap"
        connected.to = "connected"
        #expect(connected.text == "mail: socket imap connected", "a connect is not a return from quiet mode")
    }
}
