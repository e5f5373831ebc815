// netlifectl: sends one command to netlifed's control socket and prints the reply, as readable text or
// (--json) as the daemon wrote it. Exit status: 0 ok, 1 the daemon refused, 2 usage error, 3 no daemon;
// `download` and `upload` add 4 (paused by an error), 5 (failed) and 6 (paused by the app's lifecycle).
// Without --control or $NETLIFE_CONTROL it tries this user's socket, then the system daemon's.

@preconcurrency import Glibc
import NetLifeControl

/// netlifectl's entry point.
enum ControlTool {
    /// Exit statuses.
    enum Exit {
        static let ok: Int32 = 0, refused: Int32 = 1, usage: Int32 = 2, unreachable: Int32 = 3
        /// The daemon refused the requester (`permission-denied`): the command is not one it may run on that
        /// app or daemon. As the LSB's init scripts' 4 (user had insufficient privilege).
        static let notPermitted: Int32 = 4
        /// `status` of a degraded daemon (a listener that could not open, a failed app): the reply is printed
        /// as always; a health check can use the status alone, as `systemctl is-failed` is used.
        static let degraded: Int32 = 5
        /// A transfer that ended paused by an error of the network or the server (refused, reset, timed out,
        /// a transient FTP answer): its part is kept and it is tried again at the app's next foreground.
        static let transferError: Int32 = 7
        /// A transfer that failed: the server's answer (404, a bad redirect) or the file (a digest mismatch)
        /// rules out a retry. As wget's 8 (the server issued an error response).
        static let transferFailed: Int32 = 5
        /// A transfer paused by its app's lifecycle (suspended, background time spent, stopped): it resumes
        /// at the app's next foreground.
        static let transferPausedByApp: Int32 = 6
    }

    /// netlifectl's own version (it speaks the protocol of the same release).
    static let version = ControlProtocol.daemonVersion

    /// Runs netlifectl with `arguments` (the program name first) and returns its exit status.
    static func main(arguments: [String] = CommandLine.arguments) -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        var controlPath: String?
        var host: String?
        var bridge = false
        var json = false
        var showVersion = false
        var wantsHelp = false
        var words: [String] = []
        var iterator = arguments.dropFirst().makeIterator()
        // --json and --control are netlifectl's wherever they stand (`status --json`); other options after
        // the command belong to it.
        while let argument = iterator.next() {
            guard words.isEmpty || ["--json", "--control", "-H", "--host"].contains(argument) || argument.hasPrefix("--control=")
                    || argument.hasPrefix("--host=") else {
                if argument == "-h" || argument == "--help" { wantsHelp = true } else { words.append(argument) }
                continue
            }
            switch argument {
            case "--json": json = true
            case "--control":
                guard let path = iterator.next() else { return usage("--control needs a path") }
                controlPath = path
            case _ where argument.hasPrefix("--control="):
                controlPath = String(argument.dropFirst("--control=".count))
            case _ where argument == "-H" || argument == "--host" || argument.hasPrefix("--host="):
                let value = argument.hasPrefix("--host=") ? String(argument.dropFirst("--host=".count)) : iterator.next()
                guard let value else { return usage("\(argument) needs a host: [USER@]HOST") }
                guard ControlTarget.isHost(value) else { return usage("'\(value.prefix(64))' is not a host: [USER@]HOST") }
                host = value
            case "--bridge": bridge = true
            case "-h", "--help": wantsHelp = true
            case "--version": showVersion = true
            case _ where argument.hasPrefix("-") && argument.count > 1:
                return usage("unknown option '\(argument)'")
            default:
                words.append(argument)
            }
        }
        if bridge {
            guard words.isEmpty, host == nil else { return usage("--bridge takes no command and no host") }
            return Self.bridge(controlPath: controlPath)
        }
        let target = ControlTarget(controlPath: controlPath, host: host)
        if showVersion { return printVersions(target: target) }
        if words.first == "help" {
            wantsHelp = true
            words.removeFirst()
        }
        if wantsHelp {
            print(words.isEmpty ? help : (ControlCommand.usage(of: words) ?? ownUsage(of: words) ?? help))
            return Exit.ok
        }
        if words.first == "completion" { return printCompletion(Array(words.dropFirst())) }
        guard !words.isEmpty else { return usage("no command given") }
        guard let command = ControlCommand.find(words) else {
            if let family = ControlCommand.usage(of: [words[0]]) {
                // A family (`interrupt`, `task`, `transfers`) whose second word is missing or not one of its own.
                let choices = ControlCommand.all.filter { $0.words.count > 1 && $0.words[0] == words[0] }.map { $0.words[1] }
                let given = words.count > 1 ? ", got '\(words[1].prefix(64))'" : ""
                let list = choices.count == 2 ? "\(choices[0]) or \(choices[1])" : choices.dropLast().joined(separator: ", ") + " or " + (choices.last ?? "")
                return usage("\(words[0]) needs \(list)\(given)\n\(family)")
            }
            return usage("unknown command '\(words[0])'")
        }
        let request: ControlRequest
        do {
            request = try command.request(arguments: Array(words.dropFirst(command.words.count)))
        } catch {
            return usage("\(error.message)\nUSAGE: netlifectl \(command.usage)")
        }
        if command == .watch { return watch(request, target: target, json: json) }
        if command.localFlags.contains("--no-wait"), !words.contains("--no-wait") {
            // The file the transfer writes (a download's --output) or reads (an upload's FILE).
            let file = request.optionalString(command == .upload ? .file : .output)
            return follow(request, app: request.string(.app), file: file, target: target, json: json)
        }
        switch exchange(request, target: target) {
        case .failure(let status):
            return status.code
        case .success(let reply):
            if let error = ControlError(reply: reply) { return refused(error, reply: reply, json: json) }
            let text = ReplyText.of(command)
            if let refusal = text.refusal(reply) {
                // As a refused command: the reply itself with --json, the reason on stderr, exit status 1.
                if json { print(reply.serialized) }
                printError("netlifectl: \(refusal)")
                return Exit.refused
            }
            // A degraded daemon's status: printed as always, exit status 5.
            let done = command == .status && reply["degraded"]?.boolValue == true ? Exit.degraded : Exit.ok
            if json {
                print(reply.serialized)
                return done
            }
            if let warning = reply["warning"]?.stringValue { printError("netlifectl: warning: \(warning)") }
            do {
                let printed = try text.render(reply)
                if !printed.isEmpty { print(printed) }
                return done
            } catch {
                printError("netlifectl: netlifed sent a reply this netlifectl cannot read: \(error.message)")
                return Exit.unreachable
            }
        }
    }

    /// The commands netlifectl runs itself, with no daemon: in the help after the table's.
    static let ownCommands: [(name: String, usage: String, summary: String)] = [
        ("completion", "completion bash", "Print the bash completion script, made from these commands (needs no daemon)."),
        ("help", "help [COMMAND]", "Show this help, or a command's usage."),
    ]

    /// The usage of one of netlifectl's own commands, or nil.
    static func ownUsage(of words: [String]) -> String? {
        ownCommands.first { $0.name == words.first }.map { "USAGE: netlifectl \($0.usage)\n\n\($0.summary)" }
    }

    /// `completion SHELL`: the completion script for SHELL, made from the command table, on stdout.
    static func printCompletion(_ arguments: [String]) -> Int32 {
        let usageLine = "USAGE: netlifectl completion \(BashCompletion.shells.joined(separator: "|"))"
        guard let shell = arguments.first else { return usage("completion needs a shell\n\(usageLine)") }
        if shell.hasPrefix("-") { return usage("unknown option '\(shell.prefix(64))'\n\(usageLine)") }
        guard BashCompletion.shells.contains(shell) else {
            return usage("no completion for the shell '\(shell.prefix(64))'\n\(usageLine)")
        }
        guard arguments.count == 1 else { return usage("too many arguments\n\(usageLine)") }
        print(BashCompletion.script, terminator: "")
        return Exit.ok
    }

    /// Connects to the control socket: `--control`, else $NETLIFE_CONTROL (set for hooks), else the default
    /// for this user, or when that does not exist the system daemon's (/run/netlifed/control.sock), which a
    /// member of its `control-group` may use.
    static func connect(_ controlPath: String?) throws(ControlClient.Failure) -> ControlClient {
        let environment = processEnvironment()
        if let named = controlPath ?? environment["NETLIFE_CONTROL"].flatMap({ $0.isEmpty ? nil : $0 }) {
            return try ControlClient(path: named)
        }
        let candidates = ControlProtocol.clientSocketPaths(environment: environment)
        guard let path = ControlProtocol.socketToUse(candidates, exists: ControlProtocol.pathMayExist) else {
            throw .unreachable("netlifed is not running (no socket at \(candidates.joined(separator: " nor at ")))")
        }
        return try ControlClient(path: path)
    }

    /// Sends one request and returns the reply, or the exit status after reporting why there is none.
    static func exchange(_ request: ControlRequest, target: ControlTarget) -> Result<JSON, ExitStatus> {
        do throws(ControlClient.Failure) {
            let client = try target.connect()
            do throws(ControlClient.Failure) {
                try client.send(request)
            } catch {
                // The daemon may have refused the connection at once (permissions, too many connections)
                // and closed it: its reason is waiting to be read.
                guard case .broken = error, let reply = try? client.receive(), ControlError(reply: reply) != nil else { throw error }
                return .success(reply)
            }
            guard let reply = try client.receive() else {
                printError("netlifectl: " + (target.host.map { "no reply came from \($0) (ssh or its netlifectl said why above)" }
                                                ?? "netlifed closed the connection without a reply"))
                return .failure(ExitStatus(Exit.unreachable))
            }
            return .success(reply)
        } catch {
            switch error {
            case .unreachable(let message), .broken(let message):
                printError("netlifectl: \(message)")
                return .failure(ExitStatus(Exit.unreachable))
            }
        }
    }

    /// `download` or `upload` without --no-wait: starts the transfer, then follows it (every 200 ms, sooner
    /// near its end: `followDelay`; with a progress bar when stderr is a terminal) until it is done (exit 0),
    /// paused by an error (exit 7), failed (exit 5) or paused by its app (exit 6), saying why on stderr. The transfer is followed by the id the
    /// first reply gives (by `file` from a daemon that gives none): a new transfer to the same file is another.
    /// `file` nil: the file the daemon chose (a download without --output), as its first reply says.
    static func follow(_ request: ControlRequest, app: String, file: String?, target: ControlTarget, json: Bool) -> Int32 {
        var reply: JSON
        switch exchange(request, target: target) {
        case .failure(let status): return status.code
        case .success(let first): reply = first
        }
        let terminal = isatty(2) == 1
        var id: UInt64?
        var output = file
        var last: (bytes: Int, seconds: Double)?
        var overdue = 0
        while true {
            if let error = ControlError(reply: reply) { return refused(error, reply: reply, json: json) }
            guard let transfer = (try? TransfersReply(json: reply))?.transfers.first(where: {
                (output == nil || $0.output == output) && (id == nil || $0.id == id)
            }) else {
                printError("netlifectl: the transfer to \(output ?? "its file") is gone (cancelled, or replaced by another)")
                return Exit.refused
            }
            id = transfer.id
            output = transfer.output
            if transfer.state != .running {
                if terminal { printError("") }
                print(json ? TransfersReply(transfers: [transfer]).json.serialized : transfer.text)
                let status = transferExit(transfer)
                if status != Exit.ok { printError("netlifectl: \(transfer.direction) \(transfer.state): \(transfer.reason ?? "no reason given")") }
                return status
            }
            if terminal { printProgress(transfer) }
            let now = monotonicSeconds()
            let rate = last.flatMap { last in
                transfer.bytes > last.bytes && now > last.seconds ? Double(transfer.bytes - last.bytes) / (now - last.seconds) : nil
            }
            let delay = followDelay(bytes: transfer.bytes, total: transfer.total, rate: rate, overdue: overdue)
            overdue = transfer.total.map { transfer.bytes >= $0 } == true ? overdue + 1 : 0
            last = (transfer.bytes, now)
            usleep(delay)
            let request: ControlRequest
            do { request = try ControlRequest(.transfers, [.app: .string(app)]) } catch {
                printError("netlifectl: \(error.message)")
                return 2
            }
            switch exchange(request, target: target) {
            case .failure(let status): return status.code
            case .success(let next): reply = next
            }
        }
    }

    /// Microseconds `follow` waits before asking again: 200 ms, or, when the transfer should end sooner at
    /// `rate` (bytes per second since the last reply), until just after that, so that the command returns
    /// within milliseconds of the end rather than up to 200 ms after it. Once all `total` bytes are there
    /// (the file is being synced and renamed; `overdue` replies in a row said so), 20 ms, doubled per reply
    /// up to 200 ms.
    static func followDelay(bytes: Int, total: Int?, rate: Double?, overdue: Int) -> UInt32 {
        let longest: UInt32 = 200_000
        guard let total else { return longest }
        if bytes >= total { return min(longest, 20_000 << min(overdue, 4)) }
        guard let rate, rate > 0 else { return longest }
        let remaining = Double(total - bytes) / rate * 1e6 + 5_000
        return remaining < Double(longest) ? UInt32(remaining) : longest
    }

    /// The exit status for a transfer that is no longer running.
    static func transferExit(_ transfer: TransferStatus) -> Int32 {
        switch transfer.state {
        case .done: return Exit.ok
        case .failed: return Exit.transferFailed
        case .running, .paused, .cancelled: return transfer.error ? Exit.transferError : Exit.transferPausedByApp
        }
    }

    /// `[#####.....]  42%  1234567/2939393 bytes` on one line of stderr, redrawn in place.
    static func printProgress(_ transfer: TransferStatus) {
        let width = 30
        var line = "\r"
        if let total = transfer.total, total > 0 {
            let filled = min(width, transfer.bytes * width / total)
            line += "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
            line += " \(transfer.bytes * 100 / total)%  \(transfer.bytes)/\(total) bytes"
        } else {
            line += "\(transfer.bytes) bytes"
        }
        fputs(line, stderr)
        fflush(stderr)
    }

    /// `watch`: prints each event line as it comes (text, or the line as is with --json) until interrupted.
    /// When the daemon ends the watch (it stops or restarts), says so and exits 3.
    static func watch(_ request: ControlRequest, target: ControlTarget, json: Bool) -> Int32 {
        do throws(ControlClient.Failure) {
            let client = try target.connect()
            try client.send(request)
            guard let reply = try client.receive() else {
                printError("netlifectl: " + (target.host.map { "no reply came from \($0) (ssh or its netlifectl said why above)" }
                                                ?? "netlifed closed the connection without a reply"))
                return Exit.unreachable
            }
            if let error = ControlError(reply: reply) { return refused(error, reply: reply, json: json) }
            if json { emit(reply.serialized) }
            while let line = try client.receive() {
                if json {
                    emit(line.serialized)
                    continue
                }
                guard let event = try? WatchEvent(json: line) else {
                    emit(line.serialized)
                    continue
                }
                if case .end = event.payload {
                    printError("netlifectl: \(event.text)")
                    return Exit.unreachable
                }
                emit("\(formatClock(event.at)) \(event.text)")
            }
            printError("netlifectl: netlifed closed the watch (it stopped or restarted)")
            return Exit.unreachable
        } catch {
            switch error {
            case .unreachable(let message), .broken(let message):
                printError("netlifectl: \(message)")
                return Exit.unreachable
            }
        }
    }

    /// Prints one line at once, even when stdout is a pipe (a watcher reads it as it comes).
    static func emit(_ line: String) {
        print(line)
        fflush(stdout)
    }

    /// `--version`: netlifectl's version, then the daemon's (or why it cannot be had), each labelled.
    static func printVersions(target: ControlTarget) -> Int32 {
        print("netlifectl \(version) (control protocol \(ControlProtocol.version))")
        let request: ControlRequest
        do { request = try ControlRequest(.version) } catch {
            printError("netlifectl: \(error.message)")
            return 2
        }
        switch exchange(request, target: target) {
        case .failure:
            // netlifectl's own version is what was asked for; why the daemon's is missing is on stderr.
            return Exit.ok
        case .success(let reply):
            guard let daemon = try? VersionReply(json: reply) else {
                printError("netlifectl: netlifed did not say its version")
                return Exit.refused
            }
            print("netlifed \(daemon.version) (control protocol \(daemon.protocolVersion))")
            return Exit.ok
        }
    }

    /// Reports a refusal: the reply itself with --json, its message on stderr.
    static func refused(_ error: ControlError, reply: JSON, json: Bool) -> Int32 {
        if json { print(reply.serialized) }
        printError("netlifectl: \(error.message)")
        return error.code == .permissionDenied ? Exit.notPermitted : Exit.refused
    }

    static func usage(_ message: String) -> Int32 {
        printError("netlifectl: \(message)\nSee 'netlifectl --help'.")
        return Exit.usage
    }

    static func printError(_ text: String) {
        fputs(text + "\n", stderr)
    }

    static var help: String {
        let lines = ControlCommand.all.map { ($0.usage, $0.summary) } + ownCommands.map { ($0.usage, $0.summary) }
        let text = lines.map { usage, summary in HelpLayout.entry(usage: usage, summary: summary, width: HelpLayout.terminalWidth) }
        return """
            OVERVIEW: netlifectl - drive the apps of netlifed through its control socket

            USAGE: netlifectl [-H [USER@]HOST] [--control PATH] [--json] COMMAND [ARGUMENTS]
                   (-H, --control and --json may also follow the command)

            OPTIONS:
              -H, --host [USER@]HOST
                               Run the command on HOST's netlifed over ssh ($NETLIFE_SSH:
                               another ssh command); HOST's netlifectl bridges to its
                               socket, and HOST's daemon judges the ssh user's request.
              --control PATH   The control socket (default: $NETLIFE_CONTROL, else
                               /run/netlifed/control.sock for root, else
                               $XDG_RUNTIME_DIR/netlifed/control.sock, or when that does
                               not exist the system daemon's /run/netlifed/control.sock).
              --json           Print the daemon's JSON reply as is.
              --version        Print netlifectl's version and the daemon's (its own alone,
                               exit status 0, when no daemon answers).
              -h, --help       Show this help; after a command, that command's usage.

            SUBCOMMANDS:
            \(text.joined(separator: "\n"))

            EXIT STATUS: 0 ok, 1 the daemon refused, 2 usage error, 3 no daemon reachable,
              4 not permitted (this user may not run the command), 5 (status) the daemon is
              degraded. download and upload (unless --no-wait): 5 the transfer failed (the
              server's answer or the file rules out a retry), 6 the app's lifecycle paused
              it, 7 it paused on a network or server error (kept, retried at the app's next
              foreground).
            """
    }
}

/// An exit status, as a `Result` failure.
struct ExitStatus: Error {
    var code: Int32
    init(_ code: Int32) { self.code = code }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}

/// A wall-clock time as local `YYYY-MM-DD HH:MM:SS`. The corresponding C functions are `localtime_r` and
/// `strftime`.
func formatTime(_ secondsSinceEpoch: Double) -> String {
    var seconds = time_t(secondsSinceEpoch)
    var parts = tm()
    localtime_r(&seconds, &parts)
    var buffer = [CChar](repeating: 0, count: 32)
    let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// A wall-clock time as local `HH:MM:SS.mmm`, for watch lines.
func formatClock(_ secondsSinceEpoch: Double) -> String {
    var seconds = time_t(secondsSinceEpoch)
    var parts = tm()
    localtime_r(&seconds, &parts)
    let milliseconds = Int((secondsSinceEpoch - Double(seconds)) * 1000)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let ms = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
    return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)"
}

/// Seconds on the monotonic clock.
private func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
