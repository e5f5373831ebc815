// netlifectl's command table: for each subcommand its words, usage, how its arguments become a request,
// and how a reply is printed as text.

/// A netlifectl subcommand.
struct CtlCommand: Sendable {
    /// The words that name it: `["status"]`, `["task", "begin"]`.
    let words: [String]
    let usage: String
    let summary: String
    /// Turns the arguments after the command words into the request (without `protocol`).
    let build: @Sendable ([String]) throws(ControlTool.UsageError) -> JSONObject
    /// Prints a successful reply as text.
    var render: @Sendable (JSON) -> String = renderTransition

    /// The command named by the first words of `words`.
    static func find(_ words: [String]) -> CtlCommand? {
        all.filter { words.starts(with: $0.words) }.max { $0.words.count < $1.words.count }
    }

    static let all: [CtlCommand] = [
        CtlCommand(words: ["status"], usage: "status [APP]", summary: "Show the state of every app, or of APP.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 0...1)
                       var request: JSONObject = ["cmd": "status"]
                       if let app = parsed.positional.first { request["app"] = .string(app) }
                       return request
                   }, render: renderStatus),
        CtlCommand(words: ["launch"], usage: "launch APP [--background]",
                   summary: "Launch a not-running app (into the background with --background).",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 1...1, flags: ["--background"])
                       return ["cmd": "launch", "app": .string(parsed.positional[0]),
                               "background": .bool(parsed.flags.contains("--background"))]
                   }),
        appCommand("foreground", "Bring a background or suspended app to the foreground; reopens its listeners."),
        appCommand("background", "Send an active app to the background; closes its listeners."),
        appCommand("suspend", "Suspend a background app (pending while it holds background tasks)."),
        appCommand("reclaim", "Reclaim the sockets of a suspended app."),
        plainCommand("lock", "Reclaim the sockets of every suspended app."),
        appCommand("terminate", "Terminate an app (will-terminate runs)."),
        plainCommand("memory-pressure", "Terminate suspended apps, largest first."),
        CtlCommand(words: ["task", "begin"], usage: "task begin APP [--name N]",
                   summary: "Begin a background task; prints its id (0 = refused).",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 1...1, options: ["--name"])
                       var request: JSONObject = ["cmd": "task-begin", "app": .string(parsed.positional[0])]
                       if let name = parsed.options["--name"] { request["name"] = .string(name) }
                       return request
                   }, render: { reply in String(reply["id"]?.intValue ?? 0) }),
        CtlCommand(words: ["task", "end"], usage: "task end APP ID", summary: "End a background task.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 2...2)
                       guard let id = UInt64(parsed.positional[1]) else {
                           throw ControlTool.UsageError(message: "ID must be a whole number, got '\(parsed.positional[1])'")
                       }
                       return ["cmd": "task-end", "app": .string(parsed.positional[0]), "id": .number(Double(id))]
                   }, render: { reply in
                       reply["ended"]?.boolValue == true ? "ended task \(reply["id"]?.intValue ?? 0) of \(reply["app"]?.stringValue ?? "?")" : ""
                   }),
        CtlCommand(words: ["task", "list"], usage: "task list APP", summary: "List an app's open background tasks.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 1...1)
                       return ["cmd": "task-list", "app": .string(parsed.positional[0])]
                   }, render: renderTasks),
        CtlCommand(words: ["mode"], usage: "mode APP idle|continuous",
                   summary: "Set an app's background execution mode.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 2...2)
                       guard ["idle", "continuous"].contains(parsed.positional[1]) else {
                           throw ControlTool.UsageError(message: "mode must be idle or continuous")
                       }
                       return ["cmd": "mode", "app": .string(parsed.positional[0]), "mode": .string(parsed.positional[1])]
                   }, render: { reply in "\(reply["app"]?.stringValue ?? ""): mode \(reply["mode"]?.stringValue ?? "")" }),
        CtlCommand(words: ["download"], usage: "download APP URL --output PATH",
                   summary: "Hand a resumable download to an app.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 2...2, options: ["--output"])
                       guard let output = parsed.options["--output"] else { throw ControlTool.UsageError(message: "--output PATH is required") }
                       return ["cmd": "download", "app": .string(parsed.positional[0]), "url": .string(parsed.positional[1]),
                               "output": .string(output)]
                   }, render: { $0.serialized }),
        CtlCommand(words: ["upload"], usage: "upload APP FILE URL", summary: "Hand a resumable upload to an app.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 3...3)
                       return ["cmd": "upload", "app": .string(parsed.positional[0]), "file": .string(parsed.positional[1]),
                               "url": .string(parsed.positional[2])]
                   }, render: { $0.serialized }),
        CtlCommand(words: ["transfers"], usage: "transfers [APP]", summary: "Show downloads and uploads.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 0...1)
                       var request: JSONObject = ["cmd": "transfers"]
                       if let app = parsed.positional.first { request["app"] = .string(app) }
                       return request
                   }, render: { $0.serialized }),
        CtlCommand(words: ["watch"], usage: "watch [APP]", summary: "Print lifecycle events as they happen.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 0...1)
                       var request: JSONObject = ["cmd": "watch"]
                       if let app = parsed.positional.first { request["app"] = .string(app) }
                       return request
                   }, render: { $0.serialized }),
        CtlCommand(words: ["reload"], usage: "reload", summary: "Reload the config file (nothing changes if it has errors).",
                   build: { arguments throws(ControlTool.UsageError) in
                       _ = try Arguments(arguments, positional: 0...0)
                       return ["cmd": "reload"]
                   }, render: { reply in
                       ["added", "removed", "restarted", "updated"].map { key in
                           let names = (reply[key]?.arrayValue ?? []).compactMap(\.stringValue)
                           return "\(key): \(names.isEmpty ? "none" : names.joined(separator: ", "))"
                       }.joined(separator: "\n")
                   }),
        CtlCommand(words: ["version"], usage: "version", summary: "Print netlifectl's and netlifed's versions.",
                   build: { arguments throws(ControlTool.UsageError) in
                       _ = try Arguments(arguments, positional: 0...0)
                       return ["cmd": "version"]
                   }, render: { reply in
                       "netlifectl \(ControlProtocol.daemonVersion), netlifed \(reply["version"]?.stringValue ?? "?") (protocol \(reply["protocol"]?.intValue ?? 0))"
                   }),
        CtlCommand(words: ["debug", "stall"], usage: "debug stall DURATION",
                   summary: "Block the event loop (needs [daemon] debug-commands = yes).",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 1...1)
                       return ["cmd": "debug-stall", "duration": .string(parsed.positional[0])]
                   }, render: { $0.serialized }),
        CtlCommand(words: ["help"], usage: "help [COMMAND]", summary: "Show this help, or a command's usage.",
                   build: { _ throws(ControlTool.UsageError) in [:] }),
    ]

    static func appCommand(_ name: String, _ summary: String) -> CtlCommand {
        CtlCommand(words: [name], usage: "\(name) APP", summary: summary,
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 1...1)
                       return ["cmd": .string(name), "app": .string(parsed.positional[0])]
                   })
    }

    static func plainCommand(_ name: String, _ summary: String) -> CtlCommand {
        CtlCommand(words: [name], usage: name, summary: summary,
                   build: { arguments throws(ControlTool.UsageError) in
                       _ = try Arguments(arguments, positional: 0...0)
                       return ["cmd": .string(name)]
                   }, render: { $0.serialized })
    }
}

/// A command's arguments: positional words, boolean flags and options with a value.
struct Arguments {
    var positional: [String] = []
    var flags: Set<String> = []
    var options: [String: String] = [:]

    init(_ arguments: [String], positional count: ClosedRange<Int>, flags knownFlags: Set<String> = [],
         options knownOptions: Set<String> = []) throws(ControlTool.UsageError) {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if knownFlags.contains(argument) {
                flags.insert(argument)
            } else if knownOptions.contains(argument) {
                guard let value = iterator.next() else { throw ControlTool.UsageError(message: "\(argument) needs a value") }
                options[argument] = value
            } else if let equals = argument.firstIndex(of: "="), knownOptions.contains(String(argument[..<equals])) {
                options[String(argument[..<equals])] = String(argument[argument.index(after: equals)...])
            } else if argument.hasPrefix("-") && argument.count > 1 {
                throw ControlTool.UsageError(message: "unknown option '\(argument)'")
            } else {
                positional.append(argument)
            }
        }
        guard count.contains(positional.count) else {
            throw ControlTool.UsageError(message: positional.count < count.lowerBound ? "missing arguments" : "too many arguments")
        }
    }
}

// MARK: Text output

func renderTransition(_ reply: JSON) -> String {
    let app = reply["app"]?.stringValue ?? "?"
    let state = reply["state"]?.stringValue ?? "?"
    if reply["already"]?.boolValue == true { return "\(app): already \(state)" }
    if reply["suspendPending"]?.boolValue == true {
        return "\(app): suspend pending: stays \(state) because \(reply["reason"]?.stringValue ?? "it is not suspend-eligible yet")"
    }
    let stages = (reply["stages"]?.arrayValue ?? []).map { stage in
        "\(stage["name"]?.stringValue ?? "?") \(formatMilliseconds(stage["ms"]?.doubleValue ?? 0))"
    }
    return stages.isEmpty ? "\(app): \(state)" : "\(app): \(state) (\(stages.joined(separator: ", ")))"
}

func renderStatus(_ reply: JSON) -> String {
    var lines: [String] = []
    for app in reply["apps"]?.arrayValue ?? [] {
        var header = "\(app["name"]?.stringValue ?? "?"): \(app["state"]?.stringValue ?? "?")"
        if app["suspendPending"]?.boolValue == true { header += " (suspend pending)" }
        if app["backgroundMode"]?.stringValue == "continuous" { header += " [continuous background mode]" }
        lines.append(header)
        if let remaining = app["backgroundTimeRemaining"]?.doubleValue {
            lines.append("  background time remaining: \(formatSeconds(remaining))")
        } else if app["state"]?.stringValue != "not-running" {
            lines.append("  background time remaining: unlimited")
        }
        for listener in app["listeners"]?.arrayValue ?? [] {
            let open = listener["open"]?.boolValue == true
            var line = "  listener \(listener["name"]?.stringValue ?? "?") \(listener["address"]?.stringValue ?? "?") (\(listener["service"]?.stringValue ?? "?")): "
            line += open ? "open" : "closed"
            if let error = listener["error"]?.stringValue { line += " (\(error))" }
            let connections = listener["connections"]?.intValue ?? 0
            line += ", \(connections) connection\(connections == 1 ? "" : "s")"
            lines.append(line)
        }
        for task in app["tasks"]?.arrayValue ?? [] {
            lines.append("  task \(task["id"]?.intValue ?? 0)\(task["name"]?.stringValue.map { " '\($0)'" } ?? ""): \(formatSeconds(task["age"]?.doubleValue ?? 0)) old")
        }
        if let last = app["lastTermination"], case .object = last {
            var line = "  last termination: \(last["reason"]?.stringValue ?? "?")"
            if let stage = last["stage"]?.stringValue {
                line += " in \(stage) (\(formatSeconds(last["elapsed"]?.doubleValue ?? 0)), budget \(formatSeconds(last["budget"]?.doubleValue ?? 0)))"
            }
            lines.append(line)
        }
    }
    return lines.joined(separator: "\n")
}

func renderTasks(_ reply: JSON) -> String {
    let tasks = reply["tasks"]?.arrayValue ?? []
    let remaining = reply["backgroundTimeRemaining"]?.doubleValue.map(formatSeconds) ?? "unlimited"
    var lines = ["background time remaining: \(remaining)"]
    if tasks.isEmpty { lines.append("no open background tasks") }
    lines += tasks.map { task in
        "task \(task["id"]?.intValue ?? 0)\(task["name"]?.stringValue.map { " '\($0)'" } ?? ""): \(formatSeconds(task["age"]?.doubleValue ?? 0)) old"
    }
    return lines.joined(separator: "\n")
}

func formatMilliseconds(_ ms: Double) -> String {
    ms < 10 ? "\((ms * 100).rounded() / 100)ms" : "\(Int(ms.rounded()))ms"
}

func formatSeconds(_ seconds: Double) -> String {
    seconds < 10 ? "\((seconds * 1000).rounded() / 1000)s" : "\(Int(seconds.rounded()))s"
}
