// netlifectl: sends one command to netlifed's control socket and prints the reply, as readable text or
// (--json) as the daemon wrote it. Exit status: 0 ok, 1 the daemon refused, 2 usage error, 3 no daemon.

@preconcurrency import Glibc

/// netlifectl's entry point.
public enum ControlTool {
    /// Exit statuses.
    enum Exit {
        static let ok: Int32 = 0, refused: Int32 = 1, usage: Int32 = 2, unreachable: Int32 = 3
    }

    struct UsageError: Error { var message: String }

    /// Runs netlifectl with `arguments` (the program name first) and returns its exit status.
    public static func main(arguments: [String] = CommandLine.arguments) -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        var controlPath: String?
        var json = false
        var words: [String] = []
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--json": json = true
            case "--control":
                guard let path = iterator.next() else { return usage("--control needs a path") }
                controlPath = path
            case _ where argument.hasPrefix("--control="):
                controlPath = String(argument.dropFirst("--control=".count))
            case "-h", "--help":
                print(help)
                return Exit.ok
            case "--version":
                words = ["version"]
            default:
                words.append(argument)
            }
        }
        guard let name = words.first else { return usage("no command given") }
        if name == "help" {
            if words.count > 1, let command = CtlCommand.find(Array(words.dropFirst())) {
                print("USAGE: netlifectl \(command.usage)\n\n\(command.summary)")
            } else {
                print(help)
            }
            return Exit.ok
        }
        guard let command = CtlCommand.find(words) else {
            return usage("unknown command '\(words.prefix(2).joined(separator: " "))'")
        }
        let request: JSON
        do {
            var object = try command.build(Array(words.dropFirst(command.words.count)))
            object["protocol"] = .number(Double(ControlProtocol.version))
            request = .object(object)
        } catch {
            return usage("\(error.message)\nUSAGE: netlifectl \(command.usage)")
        }
        let environment = processEnvironment()
        let path = controlPath ?? environment["NETLIFE_CONTROL"].flatMap { $0.isEmpty ? nil : $0 }
            ?? DaemonOptions.defaultControlPath(environment: environment)
        do throws(ControlClient.Failure) {
            let client = try ControlClient(path: path)
            do throws(ControlClient.Failure) {
                try client.send(request)
            } catch {
                // The daemon may have refused the connection at once (permissions, too many connections)
                // and closed it: its reason is waiting to be read.
                guard case .broken = error, let reply = try? client.receive(), reply["ok"]?.boolValue == false else { throw error }
                return refused(reply, json: json)
            }
            guard let reply = try client.receive() else {
                printError("netlifectl: netlifed closed the connection without a reply")
                return Exit.unreachable
            }
            guard reply["ok"]?.boolValue == true else { return refused(reply, json: json) }
            if json {
                print(reply.serialized)
            } else {
                if let warning = reply["warning"]?.stringValue { printError("netlifectl: warning: \(warning)") }
                let text = command.render(reply)
                if !text.isEmpty { print(text) }
            }
            return Exit.ok
        } catch {
            switch error {
            case .unreachable(let message):
                printError("netlifectl: \(message)")
                return Exit.unreachable
            case .broken(let message):
                printError("netlifectl: \(message)")
                return Exit.unreachable
            }
        }
    }

    /// Reports a reply with `ok: false`: the reply itself with --json, its message on stderr.
    static func refused(_ reply: JSON, json: Bool) -> Int32 {
        if json { print(reply.serialized) }
        printError("netlifectl: \(reply["error"]?["message"]?.stringValue ?? "the request failed: \(reply.serialized)")")
        return Exit.refused
    }

    static func usage(_ message: String) -> Int32 {
        printError("netlifectl: \(message)\nSee 'netlifectl --help'.")
        return Exit.usage
    }

    static func printError(_ text: String) {
        fputs(text + "\n", stderr)
    }

    static var help: String {
        let width = (CtlCommand.all.map(\.usage.count).max() ?? 0) + 2
        let lines = CtlCommand.all.map { command in
            "  " + command.usage.padding(to: width) + command.summary
        }
        return """
            OVERVIEW: netlifectl - drive the apps of netlifed through its control socket

            USAGE: netlifectl [--control PATH] [--json] COMMAND [ARGUMENTS]

            OPTIONS:
              --control PATH   The control socket (default: $NETLIFE_CONTROL, else
                               /run/netlifed/control.sock for root, else
                               $XDG_RUNTIME_DIR/netlifed/control.sock).
              --json           Print the daemon's JSON reply as is.
              --version        Print the daemon's version.
              -h, --help       Show this help.

            SUBCOMMANDS:
            \(lines.joined(separator: "\n"))

            EXIT STATUS: 0 ok, 1 the daemon refused, 2 usage error, 3 no daemon reachable.
            """
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
