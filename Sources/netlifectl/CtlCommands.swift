// netlifectl's command table: for each subcommand its words, usage, how its arguments become a request,
// and how its reply is printed as text (every command prints text; --json prints the reply as is).

@preconcurrency import Glibc
import NetLifeControl

/// A netlifectl subcommand.
struct CtlCommand: Sendable {
    /// The words that name it: `["status"]`, `["task", "begin"]`.
    let words: [String]
    let usage: String
    let summary: String
    /// Turns the arguments after the command words into the request.
    let build: @Sendable ([String]) throws(ControlTool.UsageError) -> ControlRequest
    /// Prints a successful reply as text.
    var render: @Sendable (JSON) throws(ControlError) -> String = renderTransition
    /// Why a successful reply still means the command was refused (a task begin answered with the id 0), or
    /// nil: netlifectl then says why on stderr and exits 1.
    var refusal: @Sendable (JSON) -> String? = { _ in nil }

    /// The command named by the first words of `words`.
    static func find(_ words: [String]) -> CtlCommand? {
        all.filter { words.starts(with: $0.words) }.max { $0.words.count < $1.words.count }
    }

    /// The usage of the command (or the family of commands, such as `task`) that `words` names, or nil.
    static func usage(of words: [String]) -> String? {
        if let command = find(words) { return "USAGE: netlifectl \(command.usage)\n\n\(command.summary)" }
        let family = all.filter { $0.words.starts(with: words) }
        guard !family.isEmpty else { return nil }
        return "USAGE:\n" + family.map { "  netlifectl \($0.usage)\n      \($0.summary)" }.joined(separator: "\n")
    }

    static let all: [CtlCommand] = [
        CtlCommand(words: ["status"], usage: "status [APP]", summary: "Show the state of every app, or of APP.",
                   build: { arguments throws(ControlTool.UsageError) in
                       .status(app: try Arguments(arguments, positional: 0...1).positional.first)
                   }, render: renderStatus),
        CtlCommand(words: ["launch"], usage: "launch APP [--background]",
                   summary: "Launch a not-running app (into the background with --background).",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 1...1, flags: ["--background"])
                       return .launch(app: parsed.positional[0], background: parsed.flags.contains("--background"))
                   }),
        appCommand("foreground", "Bring a background or suspended app to the foreground; reopens its listeners.", ControlRequest.foreground),
        appCommand("background", "Send an active app to the background; closes its listeners.", ControlRequest.background),
        appCommand("suspend", "Suspend a background app (pending until it is suspend-eligible).", ControlRequest.suspend),
        appCommand("reclaim", "Reclaim the sockets of a suspended app: its peers see a reset (VoIP sockets excepted).",
                   ControlRequest.reclaim, render: renderReclaim),
        plainCommand("lock", "Lock the screen: the foreground apps go to the background, then every suspended app's sockets are reclaimed.", .lock, render: renderReclaim),
        appCommand("terminate", "Terminate an app (will-terminate runs, unless it is suspended).", ControlRequest.terminate),
        appCommand(["interrupt", "begin"], "Interrupt an active app (an incoming call, a system sheet): will-resign-active; it rests inactive, listeners open.",
                   ControlRequest.interruptBegin),
        appCommand(["interrupt", "end"], "End an app's interruption: did-become-active.", ControlRequest.interruptEnd),
        CtlCommand(words: ["memory-pressure"], usage: "memory-pressure [--free BYTES]",
                   summary: "Terminate suspended apps without callbacks, largest first, until BYTES (a plain number of bytes) are freed, or all of them; VoIP apps last, and relaunched into the background.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 0...0, options: ["--free"])
                       guard let text = parsed.options["--free"] else { return .memoryPressure(free: nil) }
                       // Plain bytes: the config's K/M/G suffixes are read by the daemon's parser, which
                       // netlifectl does not link.
                       guard let free = Int(text), free >= 0, free < 9_000_000_000_000_000 else {
                           throw ControlTool.UsageError(message: "--free takes a whole number of bytes (no suffix), got '\(text)'")
                       }
                       return .memoryPressure(free: free)
                   }, render: renderMemoryPressure),
        CtlCommand(words: ["task", "begin"], usage: "task begin APP [--name N]",
                   summary: "Begin a background task; prints its id (refused: the reason on stderr, exit status 1).",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 1...1, options: ["--name"])
                       return .taskBegin(app: parsed.positional[0], name: parsed.options["--name"])
                   }, render: { reply throws(ControlError) in String(try TaskBeginReply(json: reply).id) },
                   refusal: { reply in (try? TaskBeginReply(json: reply))?.refusal }),
        CtlCommand(words: ["task", "end"], usage: "task end APP ID", summary: "End a background task.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 2...2)
                       guard let id = UInt64(parsed.positional[1]) else {
                           throw ControlTool.UsageError(message: "ID must be a whole number, got '\(parsed.positional[1])'")
                       }
                       return .taskEnd(app: parsed.positional[0], id: id)
                   }, render: { reply throws(ControlError) in
                       let ended = try TaskEndReply(json: reply)
                       return ended.ended ? "ended task \(ended.id) of \(ended.app)" : ""
                   }),
        CtlCommand(words: ["task", "list"], usage: "task list APP", summary: "List an app's open background tasks.",
                   build: { arguments throws(ControlTool.UsageError) in
                       .taskList(app: try Arguments(arguments, positional: 1...1).positional[0])
                   }, render: renderTasks),
        CtlCommand(words: ["mode"], usage: "mode APP idle|continuous",
                   summary: "Set an app's background execution mode.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 2...2)
                       guard ["idle", "continuous"].contains(parsed.positional[1]) else {
                           throw ControlTool.UsageError(message: "mode must be idle or continuous")
                       }
                       return .mode(app: parsed.positional[0], mode: parsed.positional[1])
                   }, render: { reply throws(ControlError) in
                       let mode = try ModeReply(json: reply)
                       return "\(mode.app): mode \(mode.mode)"
                   }),
        CtlCommand(words: ["download"], usage: "download APP URL [--output PATH] [--no-wait]",
                   summary: "Hand a resumable download to an app (into the state directory's downloads/APP/ without --output); waits (with a progress bar on a terminal) until it finishes or pauses, unless --no-wait.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 2...2, flags: ["--no-wait"], options: ["--output"])
                       if let output = parsed.options["--output"], output.isEmpty {
                           throw ControlTool.UsageError(message: "--output needs a PATH")
                       }
                       let output = parsed.options["--output"].map(absolutePath)
                       return .download(app: parsed.positional[0], url: parsed.positional[1], output: output,
                                        outputDirectory: output.flatMap { fileIdentity(directoryOf: $0) })
                   }, render: renderTransfers),
        CtlCommand(words: ["upload"], usage: "upload APP FILE URL [--no-wait]",
                   summary: "Hand a resumable upload to an app; waits (with a progress bar on a terminal) until it finishes or pauses, unless --no-wait.",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 3...3, flags: ["--no-wait"])
                       return .upload(app: parsed.positional[0], file: absolutePath(parsed.positional[1]), url: parsed.positional[2])
                   }, render: renderTransfers),
        CtlCommand(words: ["transfers"], usage: "transfers [APP]", summary: "Show downloads and uploads.",
                   build: { arguments throws(ControlTool.UsageError) in
                       .transfers(app: try Arguments(arguments, positional: 0...1).positional.first)
                   }, render: renderTransfers),
        CtlCommand(words: ["transfers", "cancel"], usage: "transfers cancel [ID] [--app APP] [--url URL]",
                   summary: "Stop transfers and forget them: their part files and records are removed (a finished file stays).",
                   build: { arguments throws(ControlTool.UsageError) in
                       let parsed = try Arguments(arguments, positional: 0...1, options: ["--app", "--url"])
                       var id: UInt64?
                       if let text = parsed.positional.first {
                           guard let number = UInt64(text), number > 0 else {
                               throw ControlTool.UsageError(message: "ID must be a transfer's id (a whole number, see 'netlifectl transfers'), got '\(text)'")
                           }
                           id = number
                       }
                       guard id != nil || parsed.options["--app"] != nil || parsed.options["--url"] != nil else {
                           throw ControlTool.UsageError(message: "name the transfers to cancel: an ID, --app APP or --url URL")
                       }
                       return .transfersCancel(id: id, app: parsed.options["--app"], url: parsed.options["--url"])
                   }, render: { reply throws(ControlError) in try TransfersCancelReply(json: reply).text }),
        CtlCommand(words: ["watch"], usage: "watch [APP]", summary: "Print lifecycle events as they happen.",
                   build: { arguments throws(ControlTool.UsageError) in
                       .watch(app: try Arguments(arguments, positional: 0...1).positional.first)
                   }, render: renderDone),
        CtlCommand(words: ["reload"], usage: "reload", summary: "Reload the config file (nothing changes if it has errors).",
                   build: { arguments throws(ControlTool.UsageError) in
                       _ = try Arguments(arguments, positional: 0...0)
                       return .reload
                   }, render: { reply throws(ControlError) in
                       let reload = try ReloadReply(json: reply)
                       return [("added", reload.added), ("removed", reload.removed), ("restarted", reload.restarted),
                               ("updated", reload.updated)].map { key, names in
                           "\(key): \(names.isEmpty ? "none" : names.joined(separator: ", "))"
                       }.joined(separator: "\n")
                   }),
        CtlCommand(words: ["version"], usage: "version", summary: "Print netlifectl's and netlifed's versions.",
                   build: { arguments throws(ControlTool.UsageError) in
                       _ = try Arguments(arguments, positional: 0...0)
                       return .version
                   }, render: { reply throws(ControlError) in
                       let daemon = try VersionReply(json: reply)
                       return "netlifectl \(ControlTool.version) (control protocol \(ControlProtocol.version))\nnetlifed \(daemon.version) (control protocol \(daemon.protocolVersion))"
                           + (daemon.openFiles.map { "\n" + $0.text } ?? "")
                   }),
        CtlCommand(words: ["debug", "stall"], usage: "debug stall DURATION",
                   summary: "Block the event loop (needs [daemon] debug-commands = yes).",
                   build: { arguments throws(ControlTool.UsageError) in
                       .debugStall(duration: try Arguments(arguments, positional: 1...1).positional[0])
                   }, render: { reply throws(ControlError) in "stalled the event loop for \(try StallReply(json: reply).stalled)" }),
        CtlCommand(words: ["help"], usage: "help [COMMAND]", summary: "Show this help, or a command's usage.",
                   build: { _ throws(ControlTool.UsageError) in .version }),
    ]

    static func appCommand(_ name: String, _ summary: String, _ request: @escaping @Sendable (String) -> ControlRequest,
                           render: @escaping @Sendable (JSON) throws(ControlError) -> String = renderTransition) -> CtlCommand {
        appCommand([name], summary, request, render: render)
    }

    /// A command of one or more words whose one argument is an app (`interrupt begin APP`).
    static func appCommand(_ words: [String], _ summary: String, _ request: @escaping @Sendable (String) -> ControlRequest,
                           render: @escaping @Sendable (JSON) throws(ControlError) -> String = renderTransition) -> CtlCommand {
        CtlCommand(words: words, usage: "\(words.joined(separator: " ")) APP", summary: summary,
                   build: { arguments throws(ControlTool.UsageError) in
                       request(try Arguments(arguments, positional: 1...1).positional[0])
                   }, render: render)
    }

    static func plainCommand(_ name: String, _ summary: String, _ request: ControlRequest,
                             render: @escaping @Sendable (JSON) throws(ControlError) -> String = renderDone) -> CtlCommand {
        CtlCommand(words: [name], usage: name, summary: summary,
                   build: { arguments throws(ControlTool.UsageError) in
                       _ = try Arguments(arguments, positional: 0...0)
                       return request
                   }, render: render)
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

func renderTransition(_ reply: JSON) throws(ControlError) -> String {
    let transition = try TransitionReply(json: reply)
    if transition.already { return "\(transition.app): already \(transition.state)" }
    if transition.suspendPending {
        return "\(transition.app): suspend pending: stays \(transition.state) because \(transition.reason ?? "it is not suspend-eligible yet")"
    }
    let stages = transition.stages.map { "\($0.name) \(formatMilliseconds($0.milliseconds))" }
    return stages.isEmpty ? "\(transition.app): \(transition.state)" : "\(transition.app): \(transition.state) (\(stages.joined(separator: ", ")))"
}

/// For commands whose reply carries nothing to show.
func renderDone(_ reply: JSON) throws(ControlError) -> String { "ok" }

func renderStatus(_ reply: JSON) throws(ControlError) -> String {
    let status = try StatusReply(json: reply)
    // What degrades the daemon comes first, where an operator looks.
    var lines = status.degradedReasons.isEmpty ? [] : ["netlifed: degraded: " + status.degradedReasons.joined(separator: "; ")]
    for app in status.apps {
        var header = "\(app.name): \(app.state)"
        if app.suspendPending { header += " (suspend pending)" }
        if app.backgroundMode == "continuous" { header += " [continuous background mode]" }
        lines.append(header)
        lines.append("  " + app.backgroundTimeText)
        if let program = app.program {
            var line = "  program: " + (program.pid.map { "pid \($0)" } ?? "not running")
            line += ", \(program.containment)" + (program.cgroup.map { " \($0)" } ?? "")
            if program.frozen { line += ", frozen" }
            if program.members > 1 { line += ", \(program.members) processes" }
            if let memory = program.memory { line += ", \(memory / 1024) KiB" }
            if program.speaksProtocol { line += ", speaks the lifecycle protocol" }
            lines.append(line)
        }
        for listener in app.listeners {
            var line = "  listener \(listener.name) \(listener.addressText) (\(listener.service)): \(listener.open ? "open" : "closed")"
            if let error = listener.error { line += " (\(error))" }
            line += ", \(listener.connections) connection\(listener.connections == 1 ? "" : "s")"
            lines.append(line)
        }
        for socket in app.sockets {
            var line = "  socket \(socket.name) \(socket.peer) (\(socket.protocolName.map { $0 + ", " } ?? "")\(socket.policy)\(socket.voip ? ", voip" : "")): \(socket.state)"
            if let error = socket.error { line += " (last error: \(error))" }
            if let lines = socket.lines { line += ", \(lines) line\(lines == 1 ? "" : "s") received" }
            if let exists = socket.exists { line += ", \(exists) message\(exists == 1 ? "" : "s")" }
            if let idle = socket.idle { line += idle ? ", idling" : ", not idling" }
            lines.append(line)
        }
        for task in app.tasks { lines.append("  " + describe(task)) }
        if let last = app.lastTermination { lines.append("  last termination: " + describe(last)) }
    }
    return lines.joined(separator: "\n")
}

func renderReclaim(_ reply: JSON) throws(ControlError) -> String {
    let reclaimed = try ReclaimReply(json: reply).reclaimed
    return reclaimed.isEmpty ? "no suspended app: nothing reclaimed" : reclaimed.map(\.text).joined(separator: "\n")
}

func renderMemoryPressure(_ reply: JSON) throws(ControlError) -> String {
    let terminated = try MemoryPressureReply(json: reply).terminated
    guard !terminated.isEmpty else { return "nothing terminated: no suspended app, or nothing to free" }
    return terminated.map(\.text).joined(separator: "\n")
}

func renderTransfers(_ reply: JSON) throws(ControlError) -> String {
    let transfers = try TransfersReply(json: reply).transfers
    return transfers.isEmpty ? "no transfers" : transfers.map(\.text).joined(separator: "\n")
}

/// `path` made absolute against the current directory (the daemon's is another).
func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    guard let cwd = getcwd(nil, 0) else { return path }
    defer { free(cwd) }
    return String(cString: cwd) + "/" + path
}

func renderTasks(_ reply: JSON) throws(ControlError) -> String {
    let list = try TaskListReply(json: reply)
    var lines = [list.backgroundTimeText]
    if list.tasks.isEmpty { lines.append("no open background tasks") }
    lines += list.tasks.map(describe)
    return lines.joined(separator: "\n")
}

func describe(_ task: TaskInfo) -> String {
    "task \(task.id)\(task.name.map { " '\($0)'" } ?? ""): \(formatSeconds(task.age)) old"
}

func describe(_ termination: TerminationInfo) -> String {
    var text = termination.reason
    if let by = termination.by { text += " (by \(by))" }
    if let detail = termination.detail { text += " (\(detail))" }
    if let stage = termination.stage {
        text += " in \(stage) (\(formatSeconds(termination.elapsed ?? 0)), budget \(formatSeconds(termination.budget ?? 0)))"
    }
    if termination.at > 0 { text += " at \(formatTime(termination.at))" }
    return text
}

func formatMilliseconds(_ ms: Double) -> String {
    ms < 10 ? "\((ms * 100).rounded() / 100)ms" : "\(Int(ms.rounded()))ms"
}

func formatSeconds(_ seconds: Double) -> String {
    seconds < 10 ? "\((seconds * 1000).rounded() / 1000)s" : "\(Int(seconds.rounded()))s"
}
