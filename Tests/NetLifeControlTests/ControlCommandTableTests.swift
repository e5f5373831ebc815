// The command table is the one definition of each control command: every entry's request survives the trip
// through its JSON line, netlifectl's usage and argument parser come from the entries, and a bad request is
// refused with the error that names what is wrong.

@testable import NetLifeControl
import Testing

@Suite struct ControlCommandTableTests {
    /// A value for each member, of its type and allowed by every entry that takes it.
    static func sample(_ argument: ControlArgument) -> JSON {
        if let first = argument.values?.first { return .string(first) }
        switch argument.member.kind {
        case .string: return .string("/tmp/some \(argument.member.key)")
        case .bool: return .bool(true)
        case .count: return .number(7)
        }
    }

    @Test(arguments: ControlCommand.all)
    func everyEntrysRequestSurvivesItsJSONLine(_ command: ControlCommand) throws {
        var full: [ControlMember: JSON] = [:]
        var required: [ControlMember: JSON] = [:]
        for argument in command.arguments {
            full[argument.member] = Self.sample(argument)
            if argument.required { required[argument.member] = Self.sample(argument) }
        }
        for values in [full, required] where !(command.needsOne && values.isEmpty) {
            let request = try ControlRequest(command, values)
            let line = request.json.serialized
            #expect(line.hasPrefix("{\"cmd\":\"\(command.name)\",\"protocol\":\(ControlProtocol.version)"), "\(line)")
            #expect(try ControlRequest(json: JSON.parse(line)) == request, "\(line)")
        }
    }

    @Test func wireNamesAndNetlifectlWordsAreUnique() {
        #expect(Set(ControlCommand.all.map(\.name)).count == ControlCommand.all.count)
        #expect(Set(ControlCommand.all.map(\.words)).count == ControlCommand.all.count)
        for command in ControlCommand.all {
            #expect(ControlCommand.named(command.name) == command)
            #expect(ControlCommand.find(command.words + ["x"]) == command)
        }
    }

    @Test func theUsageOfEveryEntryComesFromItsWordsAndArguments() {
        let usages = Dictionary(uniqueKeysWithValues: ControlCommand.all.map { ($0.name, $0.usage) })
        #expect(usages["status"] == "status [APP]")
        #expect(usages["launch"] == "launch APP [--background]")
        #expect(usages["interrupt-begin"] == "interrupt begin APP")
        #expect(usages["memory-pressure"] == "memory-pressure [--free BYTES]")
        #expect(usages["task-begin"] == "task begin APP [--name N]")
        #expect(usages["task-end"] == "task end APP ID")
        #expect(usages["mode"] == "mode APP idle|continuous")
        #expect(usages["download"] == "download APP URL [--output PATH] [--cacert FILE] [--insecure] [--ssl-reqd] [--no-wait]")
        #expect(usages["upload"] == "upload APP FILE URL [--cacert FILE] [--insecure] [--no-wait]")
        #expect(usages["transfers-cancel"] == "transfers cancel [ID] [--app APP] [--url URL]")
        #expect(usages["debug-stall"] == "debug stall DURATION")
        for command in ControlCommand.all {
            #expect(ControlCommand.usage(of: command.words)?.hasPrefix("USAGE: netlifectl \(command.usage)\n\n\(command.summary)") == true)
        }
        let family = ControlCommand.usage(of: ["task"]) ?? ""
        #expect(["task begin", "task end", "task list"].allSatisfy { family.contains("netlifectl \($0) ") })
    }

    @Test func theOptionsOfEveryEntryAreItsOptionsAndFlagsInUsageOrder() {
        func names(_ command: ControlCommand) -> [String] { command.options.map { option in option.metavar.map { option.name + " " + $0 } ?? option.name } }
        #expect(names(.download) == ["--output PATH", "--cacert FILE", "--insecure", "--ssl-reqd", "--no-wait"])
        #expect(names(.upload) == ["--cacert FILE", "--insecure", "--no-wait"])
        #expect(names(.transfersCancel) == ["--app APP", "--url URL"])
        #expect(names(.launch) == ["--background"] && names(.status).isEmpty)
        #expect(ControlCommand.download.options.first?.argument?.isPath == true)
        #expect(ControlCommand.download.positionals.map(\.member) == [.app, .url])
        for command in ControlCommand.all {
            // Every option and flag of the usage, and only those.
            let shown = command.usage.split(separator: " ").filter { $0.hasPrefix("[--") || $0.hasPrefix("--") }
                .map { String($0.drop { $0 == "[" }.prefix { $0 != "]" }) }
            #expect(shown == command.options.map(\.name), "\(command)")
        }
    }

    @Test func netlifectlsArgumentsBecomeTheRequestTheyName() throws {
        #expect(try ControlCommand.launch.request(arguments: ["mail", "--background"]) == ControlRequest(.launch, [.app: "mail", .background: true]))
        #expect(try ControlCommand.launch.request(arguments: ["mail"]).json.serialized == #"{"cmd":"launch","protocol":1,"app":"mail","background":false}"#)
        #expect(try ControlCommand.status.request(arguments: []) == ControlRequest(.status))
        #expect(try ControlCommand.taskBegin.request(arguments: ["mail", "--name=sync"]) == ControlRequest(.taskBegin, [.app: "mail", .name: "sync"]))
        #expect(try ControlCommand.taskEnd.request(arguments: ["mail", "3"]) == ControlRequest(.taskEnd, [.app: "mail", .id: 3]))
        #expect(try ControlCommand.memoryPressure.request(arguments: ["--free", "4096"]) == ControlRequest(.memoryPressure, [.free: 4096]))
        #expect(try ControlCommand.transfersCancel.request(arguments: ["--url", "http://x/"]) == ControlRequest(.transfersCancel, [.url: "http://x/"]))
        let upload = try ControlCommand.upload.request(arguments: ["mail", "/srv/f", "http://x/", "--no-wait"])
        #expect(upload.json.serialized == #"{"cmd":"upload","protocol":1,"app":"mail","file":"/srv/f","url":"http://x/","insecure":false}"#)
        let download = try ControlCommand.download.request(arguments: ["mail", "http://x/", "--output", "/tmp/f"])
        #expect(download.optionalString(.output) == "/tmp/f")
        #expect(download.optionalString(.outputDirectory) == fileIdentity(directoryOf: "/tmp/f"))
        #expect(download.optionalString(.outputDirectory) != nil)
    }

    @Test(arguments: [
        (ControlCommand.taskEnd, ["mail"], "missing arguments"),
        (.status, ["a", "b"], "too many arguments"),
        (.launch, ["mail", "--later"], "unknown option '--later'"),
        (.taskBegin, ["mail", "--name"], "--name needs a value"),
        (.taskEnd, ["mail", "x"], "ID must be a whole number, got 'x'"),
        (.memoryPressure, ["--free", "1M"], "--free takes a whole number of bytes (no suffix), got '1M'"),
        (.transfersCancel, ["0"], "ID must be a transfer's id (a whole number, see 'netlifectl transfers'), got '0'"),
        (.transfersCancel, [], "name at least one of ID, --app APP, --url URL"),
        (.mode, ["mail", "busy"], "\"mode\" must be \"idle\" or \"continuous\""),
        (.download, ["mail", "http://x/", "--output="], "--output needs a PATH"),
    ])
    func aBadCommandLineSaysWhatIsWrong(command: ControlCommand, arguments: [String], message: String) {
        #expect(throws: ControlUsageError(message)) { try command.request(arguments: arguments) }
    }

    @Test(arguments: [
        (#"{"cmd":"fly"}"#, ControlError(.unknownCommand, "unknown command 'fly'")),
        (#"{"app":"mail"}"#, ControlError(.badRequest, "the request has no \"cmd\"")),
        (#"{"cmd":7}"#, ControlError(.badRequest, "\"cmd\" must be a string")),
        (#"{"cmd":"status","protocol":2}"#, ControlError(.protocolVersion, "protocol 2 is newer than this netlifed speaks (1); upgrade netlifed")),
        (#"{"cmd":"status","protocol":0}"#, ControlError(.badRequest, "\"protocol\" must be a positive whole number")),
        (#"{"cmd":"foreground"}"#, ControlError(.badRequest, "this command needs \"app\"")),
        (#"{"cmd":"foreground","app":null}"#, ControlError(.badRequest, "this command needs \"app\"")),
        (#"{"cmd":"foreground","app":3}"#, ControlError(.badRequest, "\"app\" must be a string")),
        (#"{"cmd":"launch","app":"a","background":"yes"}"#, ControlError(.badRequest, "\"background\" must be true or false")),
        (#"{"cmd":"task-end","app":"a","id":"3"}"#, ControlError(.badRequest, "\"id\" must be a number")),
        (#"{"cmd":"task-end","app":"a","id":1.5}"#, ControlError(.badRequest, "\"id\" must be a whole number")),
        (#"{"cmd":"mode","app":"a","mode":"busy"}"#, ControlError(.badRequest, "\"mode\" must be \"idle\" or \"continuous\"")),
        (#"{"cmd":"transfers-cancel"}"#, ControlError(.badRequest, "transfers-cancel needs \"id\", \"app\" or \"url\"")),
        ("[1]", ControlError(.badRequest, "a request must be a JSON object")),
    ])
    func aBadRequestIsRefusedWithTheErrorThatNamesWhatIsWrong(line: String, error: ControlError) throws {
        let json = try JSON.parse(line)
        #expect(throws: error) { try ControlRequest(json: json) }
    }

    @Test func aTaskNameLongerThanTheLimitIsRefused() throws {
        let name = String(repeating: "n", count: ControlProtocol.maxTaskNameBytes + 1)
        #expect(throws: ControlError(.badRequest, "\"name\" is at most \(ControlProtocol.maxTaskNameBytes) bytes long")) {
            try ControlRequest(json: JSON.parse(#"{"cmd":"task-begin","app":"a","name":"\#(name)"}"#))
        }
    }

    @Test func membersACommandDoesNotTakeAreIgnoredAsBefore() throws {
        let request = try ControlRequest(json: JSON.parse(#"{"cmd":"status","app":"mail","colour":"blue","id":"x"}"#))
        #expect(request == (try ControlRequest(.status, [.app: "mail"])))
        #expect(request.json.serialized == #"{"cmd":"status","protocol":1,"app":"mail"}"#)
    }

    @Test func theDaemonResolvesTheAppOfEveryCommandButTransfersCancel() throws {
        #expect(try ControlRequest(.download, [.app: "a", .url: "u"]).app == "a")
        #expect(try ControlRequest(.transfersCancel, [.app: "a"]).app == nil)
        #expect(try ControlRequest(.version).app == nil)
    }
}
