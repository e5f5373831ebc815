// netlifed's main program: command-line options, the config, the event loop with its signal watchers, the
// apps, the control socket, and the orderly shutdown on SIGTERM. A custom daemon (see Examples/) calls
// `Daemon.main(arguments:services:delegates:)` with its own services and app delegates.

@preconcurrency import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeServices

/// netlifed's entry point.
public enum Daemon {
    /// netlifed's exit statuses.
    public enum ExitStatus {
        /// Stopped cleanly (SIGTERM, SIGINT), or --check-config found no error.
        public static let ok: Int32 = 0
        /// A failure that a restart may cure (the control socket could not be bound, the loop failed), or
        /// --check-config found errors.
        public static let failure: Int32 = 1
        /// A bad command line.
        public static let usage: Int32 = 2
        /// The config has errors (EX_CONFIG of sysexits.h): a restart would fail the same way, so the unit
        /// names it in RestartPreventExitStatus=.
        public static let configError: Int32 = 78
    }

    /// Runs the daemon and returns its exit status.
    ///
    /// - Parameters:
    ///   - services: the services `service =` can name (the built-in ones by default).
    ///   - delegates: Swift app delegates by app name; each app of the config with a delegate here gets one.
    public static func main(arguments: [String] = CommandLine.arguments,
                            services: ServiceRegistry = .builtin,
                            delegates: [String: () -> AppDelegate] = [:]) -> Int32 {
        let options: DaemonOptions
        do {
            options = try DaemonOptions(arguments: Array(arguments.dropFirst()))
        } catch {
            printError("netlifed: \(error.message)\nSee 'netlifed --help'.")
            return ExitStatus.usage
        }
        switch options.action {
        case .help:
            print(DaemonOptions.help)
            return 0
        case .version:
            print("netlifed \(ControlProtocol.daemonVersion) (control protocol \(ControlProtocol.version))")
            return 0
        case .checkConfig(let path):
            // Every check the start runs, faults of this host included (a directory not made yet, a program
            // not installed, a file not readable): "ok" means that netlifed starts with this config here.
            do {
                let configuration = try ConfigLoader.load(path: path, services: services)
                // The kernel must take the trigger from this process (its rights and its cgroup).
                if let trigger = configuration.memoryPressureTrigger, let refusal = DaemonRuntime.checkPressureTrigger(trigger) {
                    printError("\(path): \(refusal)")
                    return ExitStatus.failure
                }
                // Under the systemd unit that runs this file, the places it must write must be writable there.
                if let sandbox = UnitSandbox.current(configPath: path) {
                    let refusals = UnitSandbox.writtenPaths(configuration).compactMap { written in
                        sandbox.refusal(written.path).map { "\(path): \(written.key): \($0)" }
                    }
                    if !refusals.isEmpty {
                        for refusal in refusals { printError(refusal) }
                        return ExitStatus.failure
                    }
                }
                print("\(path): ok")
                return ExitStatus.ok
            } catch {
                printError(error.description)
                return ExitStatus.failure
            }
        case .run:
            break
        }

        prepareProcessSignals()
        ProcessHeap.keepBufferMemory()
        // Under systemd, records go to journald with their fields (NETLIFE_APP=...) when stderr is the
        // journal's stream; elsewhere they are <N>-prefixed lines on stderr.
        Journal.enableIfStderrIsTheJournal(journalStream: processEnvironment()["JOURNAL_STREAM"], identifier: "netlifed")
        // Until the runtime's logger exists, start-up errors go through this one: with their <N> priority,
        // as every line netlifed writes to stderr while it runs.
        let startLogger = Logger(label: "netlifed", minimumLevel: options.logLevel ?? .info)
        let configPath = options.configPath ?? DaemonOptions.defaultConfigPath()
        let configuration: DaemonConfiguration
        do {
            configuration = options.applyOverrides(to: try ConfigLoader.load(path: configPath, services: services))
        } catch {
            for line in error.errors { startLogger.error(line.description) }
            startLogger.error("the config has errors; not starting (exit status \(ExitStatus.configError))")
            return ExitStatus.configError
        }
        startLogger.minimumLevel = configuration.logLevel
        var openFileLimit: OpenFileLimit?
        do {
            let outcome = try OpenFileLimit.raiseToHardLimit()
            let (level, message) = OpenFileLimit.logRecord(outcome)
            startLogger.log(level, message)
            openFileLimit = OpenFileLimit.after(outcome)
        } catch {
            startLogger.warning("open files: cannot read the limit: \(error)")
        }
        let runtime: DaemonRuntime
        do {
            runtime = try DaemonRuntime(configuration: configuration, options: options, services: services, delegates: delegates)
        } catch {
            startLogger.error(error.description)
            return error.isConfigError ? ExitStatus.configError : ExitStatus.failure
        }
        runtime.openFileLimit = openFileLimit
        return runtime.run()
    }

    static func printError(_ text: String) {
        var line = text
        if !line.hasSuffix("\n") { line += "\n" }
        fputs(line, stderr)
    }
}

/// The command line of netlifed.
struct DaemonOptions {
    enum Action: Equatable { case run, help, version, checkConfig(String) }

    struct UsageError: Error { var message: String }

    var action: Action = .run
    var configPath: String?
    var controlPath: String?
    var logLevel: Logger.Level?

    static let help = """
        OVERVIEW: netlifed - the iOS application lifecycle for Linux network services

        USAGE: netlifed [--config FILE] [--control PATH] [--log-level LEVEL]
               netlifed --check-config FILE

        OPTIONS:
          --config FILE         The config to run (default: ./Config/netlifed.conf if it exists,
                                else /etc/netlifed/netlifed.conf).
          --control PATH        The control socket (overrides [daemon] control).
          --log-level LEVEL     debug, info, notice, warning, error or critical.
          --check-config FILE   Check FILE, print every error as FILE:LINE: message, exit 1 if any
                                (every check the start runs: a path missing here is an error).
          --version             Print the version.
          -h, --help            Show this help.

        EXIT STATUS: 0 stopped cleanly (or the config checked is valid), 1 a failure (or the config checked
        has errors), 2 usage error, 78 the config has errors (at start: a restart would fail the same way).
        """

    init(arguments: [String]) throws(UsageError) {
        var iterator = arguments.makeIterator()
        func value(_ option: String) throws(UsageError) -> String {
            guard let value = iterator.next() else { throw UsageError(message: "\(option) needs a value") }
            return value
        }
        while let argument = iterator.next() {
            var argument = argument
            var inlineValue: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                inlineValue = String(argument[argument.index(after: equals)...])
                argument = String(argument[..<equals])
            }
            func take() throws(UsageError) -> String {
                if let inlineValue { return inlineValue }
                return try value(argument)
            }
            switch argument {
            case "--config": configPath = try take()
            case "--control":
                let path = try take()
                guard path.hasPrefix("/") else { throw UsageError(message: "--control must be an absolute path, got '\(path)'") }
                guard path.utf8.count <= ControlProtocol.maxSocketPathBytes else {
                    throw UsageError(message: "--control: the path is \(path.utf8.count) bytes long; a Unix socket path holds at most \(ControlProtocol.maxSocketPathBytes)")
                }
                controlPath = path
            case "--check-config": action = .checkConfig(try take())
            case "--log-level":
                let name = try take()
                guard let level = Logger.Level(name: name) else { throw UsageError(message: "unknown log level '\(name)'") }
                logLevel = level
            case "--version": action = .version
            case "-h", "--help": action = .help
            default: throw UsageError(message: "unknown argument '\(argument)'")
            }
        }
    }

    /// The config with the command line's overrides (`--control`, `--log-level`) applied, at start-up and
    /// after every reload.
    func applyOverrides(to configuration: DaemonConfiguration) -> DaemonConfiguration {
        var configuration = configuration
        if let controlPath { configuration.control = controlPath }
        if let logLevel { configuration.logLevel = logLevel }
        return configuration
    }

    /// ./Config/netlifed.conf when run from the repository, else /etc/netlifed/netlifed.conf.
    static func defaultConfigPath() -> String {
        access("Config/netlifed.conf", R_OK) == 0 ? "Config/netlifed.conf" : "/etc/netlifed/netlifed.conf"
    }

    /// The control socket path when the config names none (the protocol's default for this user).
    static func defaultControlPath(environment: [String: String]) -> String {
        ControlProtocol.defaultSocketPath(environment: environment)
    }
}
