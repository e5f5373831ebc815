// How netlifectl prints each command's reply as text (every command prints text; --json prints the reply as
// is). The commands themselves, their words, arguments and usage, are NetLifeControl's command table.

@preconcurrency import Glibc
import NetLifeControl

/// How netlifectl prints a command's successful reply.
struct ReplyText: Sendable {
    /// Prints a successful reply as text.
    var render: @Sendable (JSON) throws(JSONRecordError) -> String
    /// Why a successful reply still means the command was refused (a task begin answered with the id 0), or
    /// nil: netlifectl then says why on stderr and exits 1.
    var refusal: @Sendable (JSON) -> String? = { _ in nil }

    init(_ render: @escaping @Sendable (JSON) throws(JSONRecordError) -> String, refusal: @escaping @Sendable (JSON) -> String? = { _ in nil }) {
        self.render = render
        self.refusal = refusal
    }

    /// The text of `command`'s reply: the transition commands' unless the table below says otherwise.
    static func of(_ command: ControlCommand) -> ReplyText { table[command] ?? ReplyText(renderTransition) }

    private static let table: [ControlCommand: ReplyText] = [
        .status: ReplyText(renderStatus),
        .reclaim: ReplyText(renderReclaim),
        .lock: ReplyText(renderReclaim),
        .memoryPressure: ReplyText(renderMemoryPressure),
        .taskBegin: ReplyText({ reply throws(JSONRecordError) in String(try TaskBeginReply(json: reply).id) },
                              refusal: { reply in (try? TaskBeginReply(json: reply))?.refusal }),
        .taskEnd: ReplyText { reply throws(JSONRecordError) in
            let ended = try TaskEndReply(json: reply)
            return ended.ended ? "ended task \(ended.id) of \(ended.app)" : ""
        },
        .taskList: ReplyText(renderTasks),
        .mode: ReplyText { reply throws(JSONRecordError) in
            let mode = try ModeReply(json: reply)
            return "\(mode.app): mode \(mode.mode)"
        },
        .download: ReplyText(renderTransfers),
        .upload: ReplyText(renderTransfers),
        .transfers: ReplyText(renderTransfers),
        .transfersCancel: ReplyText { reply throws(JSONRecordError) in try TransfersCancelReply(json: reply).text },
        .watch: ReplyText(renderDone),
        .reload: ReplyText { reply throws(JSONRecordError) in
            let reload = try ReloadReply(json: reply)
            return [("added", reload.added), ("removed", reload.removed), ("restarted", reload.restarted),
                    ("updated", reload.updated)].map { key, names in
                "\(key): \(names.isEmpty ? "none" : names.joined(separator: ", "))"
            }.joined(separator: "\n")
        },
        .version: ReplyText { reply throws(JSONRecordError) in
            let daemon = try VersionReply(json: reply)
            return "netlifectl \(ControlTool.version) (control protocol \(ControlProtocol.version))\nnetlifed \(daemon.version) (control protocol \(daemon.protocolVersion))"
                + (daemon.openFiles.map { "\n" + $0.text } ?? "")
        },
        .debugStall: ReplyText { reply throws(JSONRecordError) in "stalled the event loop for \(try StallReply(json: reply).stalled)" },
    ]
}

// MARK: Text output

func renderTransition(_ reply: JSON) throws(JSONRecordError) -> String {
    let transition = try TransitionReply(json: reply)
    if transition.already { return "\(transition.app): already \(transition.state)" }
    if transition.queued {
        return "\(transition.app): queued: \(transition.reason ?? "it runs once the transition in progress is done") (now \(transition.state))"
    }
    if transition.suspendPending {
        return "\(transition.app): suspend pending: stays \(transition.state) because \(transition.reason ?? "it is not suspend-eligible yet")"
    }
    let stages = transition.stages.map { "\($0.event) \(formatMilliseconds($0.milliseconds))" }
    return stages.isEmpty ? "\(transition.app): \(transition.state)" : "\(transition.app): \(transition.state) (\(stages.joined(separator: ", ")))"
}

/// For commands whose reply carries nothing to show.
func renderDone(_ reply: JSON) throws(JSONRecordError) -> String { "ok" }

func renderStatus(_ reply: JSON) throws(JSONRecordError) -> String {
    let status = try StatusReply(json: reply)
    // What degrades the daemon comes first, where an operator looks.
    var lines = status.degradedReasons.isEmpty ? [] : ["netlifed: degraded: " + status.degradedReasons.joined(separator: "; ")]
    if let metrics = status.metrics { lines.append("netlifed: metrics at http://\(metrics)/metrics") }
    if let trigger = status.memoryPressureTrigger { lines.append("netlifed: " + trigger.text) }
    for app in status.apps {
        var header = "\(app.name): \(app.state)"
        if app.suspendPending { header += " (suspend pending)" }
        if app.backgroundMode == .continuous { header += " [continuous background mode]" }
        lines.append(header)
        lines.append("  " + app.backgroundTimeText)
        if let after = app.idleBackground {
            lines.append("  idle-background: \(formatSeconds(after))" + (app.unusedFor.map { ", unused for \(formatSeconds($0))" } ?? ""))
        }
        if let program = app.program {
            var line = "  program: " + (program.pid.map { "pid \($0)" } ?? "not running")
            line += ", \(program.containment)" + (program.cgroup.map { " \($0)" } ?? "")
            if program.frozen { line += ", frozen" }
            if program.members > 1 { line += ", \(program.members) processes" }
            if let memory = program.memoryBytes { line += ", \(memory / 1024) KiB" }
            if program.speaksProtocol { line += ", speaks the lifecycle protocol" }
            if program.ready { line += ", ready" }
            lines.append(line)
            if let text = program.statusText { lines.append("  program status: \(text)") }
        }
        for listener in app.listeners {
            var line = "  listener \(listener.name) \(listener.addressText) (\(listener.service)): \(listener.open ? "open" : "closed")"
            if let error = listener.error { line += " (\(error))" }
            line += ", \(listener.connections) connection\(listener.connections == 1 ? "" : "s")"
            if !listener.pids.isEmpty { line += ", held by pid \(listener.pids.map(String.init).joined(separator: ", "))" }
            lines.append(line)
        }
        for socket in app.sockets {
            var line = "  socket \(socket.name) \(socket.peer) (\(socket.protocolName.isEmpty ? "" : socket.protocolName + ", ")\(socket.policy)\(socket.voip ? ", voip" : "")): \(socket.state)"
            if let error = socket.error { line += " (last error: \(error))" }
            let figures = socket.protocolStatus
            if let lines = figures.count("lines") { line += ", \(lines) line\(lines == 1 ? "" : "s") received" }
            if let exists = figures.count("exists") { line += ", \(exists) message\(exists == 1 ? "" : "s")" }
            if let idle = figures.flag("idle") { line += idle ? ", idling" : ", not idling" }
            lines.append(line)
        }
        for task in app.tasks { lines.append("  " + describe(task)) }
        if let last = app.lastTermination { lines.append("  last termination: " + describe(last)) }
    }
    return lines.joined(separator: "\n")
}

func renderReclaim(_ reply: JSON) throws(JSONRecordError) -> String {
    let reclaimed = try ReclaimReply(json: reply).reclaimed
    return reclaimed.isEmpty ? "no suspended app: nothing reclaimed" : reclaimed.map(\.text).joined(separator: "\n")
}

func renderMemoryPressure(_ reply: JSON) throws(JSONRecordError) -> String {
    let terminated = try MemoryPressureReply(json: reply).terminated
    guard !terminated.isEmpty else { return "nothing terminated: no suspended app, or nothing to free" }
    return terminated.map(\.text).joined(separator: "\n")
}

func renderTransfers(_ reply: JSON) throws(JSONRecordError) -> String {
    let transfers = try TransfersReply(json: reply).transfers
    return transfers.isEmpty ? "no transfers" : transfers.map(\.text).joined(separator: "\n")
}

func renderTasks(_ reply: JSON) throws(JSONRecordError) -> String {
    let list = try TaskListReply(json: reply)
    var lines = [list.backgroundTimeText]
    if list.tasks.isEmpty { lines.append("no open background tasks") }
    lines += list.tasks.map(describe)
    return lines.joined(separator: "\n")
}

func describe(_ task: TaskStatus) -> String {
    "task \(task.id)\(task.name.map { " '\($0)'" } ?? ""): \(formatSeconds(task.age)) old"
}

func describe(_ termination: TerminationStatus) -> String {
    var text = termination.reason.rawValue
    if let by = termination.by?.rawValue { text += " (by \(by))" }
    if let detail = termination.detail { text += " (\(detail))" }
    if let pressure = termination.pressure { text += " (\(pressure.file): \(pressure.text))" }
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
