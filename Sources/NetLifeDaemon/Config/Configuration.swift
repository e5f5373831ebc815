// The meaning of the config (docs/configuration.md): the [daemon] settings and each [app], [listener] and [socket]
// section turned into typed values, with every error reported as FILE:LINE: message. Unknown sections and
// keys are errors; a key that a later version brings says so.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent
import NetLifeServices
import NetLifeControl

/// The whole configuration of a daemon.
public struct DaemonConfiguration: Sendable, Equatable {
    /// The file it was read from.
    public var file: String
    /// `control`: the control socket path (nil: the default for the user).
    public var control: String?
    /// `state-directory`: where the daemon keeps what must outlive it (the list of unfinished transfers);
    /// nil: the control socket's directory.
    public var stateDirectory: String?
    /// `control-group`: a group whose members may use the control socket.
    public var controlGroup: String?
    /// `admin-group`: a group whose members may run the daemon-wide commands (`reload`, `lock`,
    /// `memory-pressure`, `debug stall`).
    public var adminGroup: NamedID?
    /// Each app's `allow-users` and `allow-groups` (apps that set neither are not listed).
    public var appAccess: [String: AppAccess] = [:]
    /// `loop-stall`: how long the event loop may stall before the daemon aborts.
    public var loopStall: Duration = .seconds(2)
    /// `keepalive-min`: the shortest VoIP keep-alive interval allowed.
    public var keepaliveMinimum: Duration = .seconds(600)
    /// `transfer-idle-timeout`, `transfer-low-speed-limit`, `transfer-low-speed-time`: what every download
    /// and upload is held to (curl's `--speed-limit`/`--speed-time`); a limit hit pauses the transfer.
    public var transferLimits: TransferLimits = .defaults
    /// `debug-commands`: enables `netlifectl debug ...` (off by default).
    public var debugCommands = false
    /// `log-level`: the least important log records written.
    public var logLevel: Logger.Level = .info
    /// The apps, in config order.
    public var apps: [AppConfiguration] = []

    public init(file: String) { self.file = file }
}

/// Every error found in a config, in line order.
public struct ConfigErrors: Error, Equatable, Sendable, CustomStringConvertible {
    public var errors: [ConfigError]
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

/// Reads config files.
public enum ConfigLoader {
    /// Keys a later version brings: using one is an error that says so, not "unknown key".
    static let notYetSupported: [String: Set<String>] = [:]

    /// Reads and checks the config at `path`.
    public static func load(path: String, services: ServiceRegistry) throws(ConfigErrors) -> DaemonConfiguration {
        let text: String
        switch RegularFile.read(path, limit: maxConfigBytes) {
        case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
        case .failure(let failure):
            throw ConfigErrors(errors: [ConfigError(file: path, line: 0, "cannot read: \(failure)")])
        }
        return try parse(text, file: path, services: services)
    }

    /// The largest config file read: a config of 1,000 apps is about 100 KiB. It is read as every file a
    /// config names: opened without blocking (a FIFO is refused, not waited on), a regular file, bounded.
    static let maxConfigBytes = 16 << 20

    /// Checks a config text and the files its `[daemon] include = GLOB` names (read in name order, as
    /// Debian daemons read their conf.d); every error is returned, each naming its own file and line, in file
    /// and line order.
    public static func parse(_ text: String, file: String, services: ServiceRegistry) throws(ConfigErrors) -> DaemonConfiguration {
        var sources = [(file: file, text: text)]
        var unread: [ConfigError] = []
        for (line, pattern) in includePatterns(text, file: file) {
            for path in expand(pattern, relativeTo: directoryName(file)) {
                switch RegularFile.read(path, limit: maxConfigBytes) {
                case .success(let bytes): sources.append((path, String(decoding: bytes, as: UTF8.self)))
                case .failure(let failure): unread.append(ConfigError(file: file, line: line, "include: cannot read \(path): \(failure)"))
                }
            }
        }
        var reader = ConfigReader(file: file, services: services)
        reader.read(sources)
        let order = Dictionary(sources.enumerated().map { ($1.file, $0) }, uniquingKeysWith: { first, _ in first })
        let errors = (unread + reader.errors).enumerated().sorted { a, b in
            let (fileA, fileB) = (order[a.element.file] ?? 0, order[b.element.file] ?? 0)
            if fileA != fileB { return fileA < fileB }
            if a.element.line != b.element.line { return a.element.line < b.element.line }
            return a.offset < b.offset
        }.map(\.element)
        guard errors.isEmpty else { throw ConfigErrors(errors: errors) }
        return reader.configuration
    }

    /// The `include = GLOB` entries of the text's `[daemon]` section, with their lines.
    static func includePatterns(_ text: String, file: String) -> [(line: Int, pattern: String)] {
        INIFile.parse(text, file: file).sections.filter { $0.kind == "daemon" }
            .flatMap(\.entries).filter { $0.key == "include" }.map { ($0.line, $0.value) }
    }

    /// The files a glob names, in name order; a relative pattern is taken from the config's directory. The
    /// corresponding C function is `glob` (no match: no file, as an empty conf.d is).
    static func expand(_ pattern: String, relativeTo directory: String) -> [String] {
        let absolute = pattern.hasPrefix("/") ? pattern : directory + "/" + pattern
        var matches = glob_t()
        defer { globfree(&matches) }
        guard glob(absolute, 0, nil, &matches) == 0 else { return [] }
        return (0..<Int(matches.gl_pathc)).compactMap { index in matches.gl_pathv[index].map { String(cString: $0) } }
    }
}

/// One pass over a config text.
private struct ConfigReader {
    /// The file being read: the main config, or one it includes (errors name it).
    var file: String
    let services: ServiceRegistry
    var configuration: DaemonConfiguration
    var errors: [ConfigError] = []

    init(file: String, services: ServiceRegistry) {
        self.file = file
        self.services = services
        self.configuration = DaemonConfiguration(file: file)
    }

    mutating func error(_ line: Int, _ message: String, isAboutThisHost: Bool = false) {
        errors.append(ConfigError(file: file, line: line, message, isAboutThisHost: isAboutThisHost))
    }

    /// Reads the main config and the files it includes (after it), as one config: an included file may hold
    /// apps, listeners and sockets, each error naming its own file and line; [daemon] is the main file's.
    mutating func read(_ sources: [(file: String, text: String)]) {
        var sections: [INISection] = []
        for (index, source) in sources.enumerated() {
            let (parsed, syntaxErrors) = INIFile.parse(source.text, file: source.file, isCommandLine: ConfigKeys.isCommandLine)
            errors += syntaxErrors
            for section in parsed {
                if index > 0, section.kind == "daemon" {
                    file = section.file
                    error(section.line, "[daemon] belongs to the main config (\(sources[0].file)), not to a file it includes")
                    continue
                }
                sections.append(section)
            }
        }
        file = sources[0].file
        read(sections)
    }

    private mutating func read(_ sections: [INISection]) {
        var seen: [String: (file: String, line: Int)] = [:]
        var listenerSections: [INISection] = []
        var socketSections: [INISection] = []
        for section in sections {
            file = section.file
            let identity = section.kind + " " + (section.name ?? "")
            if let first = seen[identity] {
                let place = first.file == section.file ? "line \(first.line)" : "\(first.file):\(first.line)"
                error(section.line, "duplicate section [\(identity.trimmingWhitespace())] (first at \(place))")
                continue
            }
            seen[identity] = (section.file, section.line)
            switch section.kind {
            case "daemon":
                if section.name != nil { error(section.line, "[daemon] takes no name") }
                readDaemon(section)
            case "app":
                readApp(section)
            case "listener":
                listenerSections.append(section)
            case "socket":
                socketSections.append(section)
            default:
                error(section.line, "unknown section [\(section.kind)]; expected [daemon], [app NAME], [listener APP.NAME] or [socket APP.NAME]")
            }
        }
        for section in listenerSections {
            file = section.file
            readListener(section)
        }
        for section in socketSections {
            file = section.file
            readSocket(section)
        }
        checkAddressesAreDistinct(listenerSections)
    }

    // MARK: [daemon]

    mutating func readDaemon(_ section: INISection) {
        for entry in uniqueEntries(section) {
            switch entry.key {
            case "control":
                if case .unix = (try? SocketAddress(parsing: entry.value)) {
                    configuration.control = entry.value.hasPrefix("unix:") ? String(entry.value.dropFirst(5)) : entry.value
                } else {
                    error(entry.line, "control must be an absolute path of at most 107 bytes, got '\(entry.value)'")
                }
            case "state-directory":
                if entry.value.hasPrefix("/"), entry.value.utf8.count < 4000, !entry.value.contains("\0") {
                    configuration.stateDirectory = entry.value
                } else {
                    error(entry.line, "state-directory must be an absolute path, got '\(entry.value)'")
                }
            case "control-group":
                if getgrnam(entry.value) == nil {
                    error(entry.line, "control-group: no group named '\(entry.value)'")
                } else {
                    configuration.controlGroup = entry.value
                }
            case "include":
                // Read by ConfigLoader.parse before this section is: only the pattern's form is checked here.
                if entry.value.isEmpty || entry.value.contains("\0") { error(entry.line, "include needs a file or a glob, such as /etc/netlifed/conf.d/*.conf") }
            case "admin-group":
                if let group = groups(entry)?.first {
                    if entry.value.split(separator: " ").count > 1 { error(entry.line, "admin-group takes one group, got '\(entry.value)'") }
                    configuration.adminGroup = group
                }
            case "loop-stall":
                if let value = duration(entry, OtherDurationKeys.loopStall) { configuration.loopStall = value }
            case "keepalive-min":
                if let value = duration(entry, OtherDurationKeys.keepaliveMinimum) { configuration.keepaliveMinimum = value }
            case "transfer-idle-timeout":
                if let value = duration(entry, OtherDurationKeys.transferIdleTimeout) { configuration.transferLimits.idleTimeout = value }
            case "transfer-low-speed-time":
                if let value = duration(entry, OtherDurationKeys.transferLowSpeedTime) { configuration.transferLimits.lowSpeedTime = value }
            case "transfer-low-speed-limit":
                if let value = Int(entry.value), OtherDurationKeys.transferLowSpeedLimitRange.contains(value) {
                    configuration.transferLimits.lowSpeedLimit = value
                } else {
                    error(entry.line, "transfer-low-speed-limit must be a whole number of bytes per second between 0 (no limit) and \(OtherDurationKeys.transferLowSpeedLimitRange.upperBound), got '\(entry.value)'")
                }
            case "debug-commands":
                if let value = boolean(entry) { configuration.debugCommands = value }
            case "log-level":
                if let level = Logger.Level(name: entry.value) { configuration.logLevel = level }
                else { error(entry.line, "log-level must be debug, info, notice, warning, error or critical, got '\(entry.value)'") }
            default:
                unknownKey(entry, in: "daemon")
            }
        }
    }

    // MARK: [app NAME]

    mutating func readApp(_ section: INISection) {
        guard let name = section.name, ConfigValues.isValidName(name) else {
            error(section.line, "[app NAME] needs a name of letters, digits, '-' and '_'")
            return
        }
        var app = AppConfiguration(name: name)
        let entries = uniqueEntries(section)
        // The profile first, so that budget keys override it wherever they are written.
        if let entry = entries.first(where: { $0.key == "profile" }) {
            if let profile = Budgets.Profile(rawValue: entry.value) {
                app.budgets = profile.budgets
            } else {
                error(entry.line, "profile must be one of \(Budgets.Profile.allCases.map(\.rawValue).joined(separator: ", ")), got '\(entry.value)'")
            }
        }
        let hookEvents = Dictionary(uniqueKeysWithValues: LifecycleEvent.allCases.map { (ConfigKeys.hook(for: $0), $0) })
        for entry in entries {
            switch entry.key {
            case "profile":
                break
            case "launch":
                if let mode = LaunchMode(rawValue: entry.value) { app.launch = mode }
                else { error(entry.line, "launch must be foreground, background or no, got '\(entry.value)'") }
            case _ where BudgetKeys.named(entry.key) != nil:
                if let budget = BudgetKeys.named(entry.key), let value = duration(entry, budget.key) {
                    app.budgets[keyPath: budget.path] = value
                }
            case _ where hookEvents[entry.key] != nil:
                if let command = hook(entry) { app.hooks[hookEvents[entry.key]!] = command }
            case "on-expiration":
                app.expirationHook = hook(entry)
            case "auto-suspend":
                if entry.value == "never" { app.autoSuspend = nil }
                else if let value = duration(entry, OtherDurationKeys.autoSuspend) { app.autoSuspend = value }
            case "exits-on-suspend":
                if let value = boolean(entry) { app.exitsOnSuspend = value }
            case "multitasking":
                if let value = boolean(entry) { app.multitasking = value }
            case "background-mode":
                if let mode = BackgroundMode(rawValue: entry.value) { app.backgroundMode = mode }
                else { error(entry.line, "background-mode must be idle or continuous, got '\(entry.value)'") }
            case "reclaim-on-suspend":
                if let value = boolean(entry) { app.reclaimOnSuspend = value }
            case "on-voip-data":
                app.voipDataHook = hook(entry)
            case "voip", "keepalive":
                error(entry.line, "\(entry.key) belongs to an outbound TCP [socket APP.NAME] section, not to [app]")
            case "allow-users":
                if let users = users(entry) { configuration.appAccess[name, default: AppAccess()].users = users }
            case "allow-groups":
                if let groups = groups(entry) { configuration.appAccess[name, default: AppAccess()].groups = groups }
            case "exec":
                if let command = hook(entry) {
                    app.program = ProgramConfiguration(arguments: command.arguments)
                    if let missing = Self.missingProgram(command.arguments[0]) { error(entry.line, "exec: \(missing)", isAboutThisHost: true) }
                }
            case _ where Self.programKeys.contains(entry.key):
                break
            default:
                unknownKey(entry, in: "app")
            }
        }
        readProgramKeys(entries, into: &app)
        if app.launch == .background, app.exitsOnSuspend || !app.multitasking,
           let line = entries.first(where: { $0.key == "launch" })?.line {
            let key = app.exitsOnSuspend ? "exits-on-suspend = yes" : "multitasking = no"
            error(line, "launch = background cannot be used with \(key): such an app never runs in the background (UIApplicationExitsOnSuspend)")
        }
        if app.budgets.expirationLead >= app.budgets.taskTime {
            let line = entries.first(where: { $0.key == "expiration-lead" || $0.key == "task-time" })?.line ?? section.line
            error(line, "expiration-lead (\(app.budgets.expirationLead)) must be shorter than task-time (\(app.budgets.taskTime))")
        }
        configuration.apps.append(app)
    }

    /// Why `program` cannot be run here (nil when it can): by its path when it has a slash, else looked for
    /// in PATH as posix_spawnp looks for it. The launch would fail the same way.
    static func missingProgram(_ program: String) -> String? {
        if program.contains("/") {
            return access(program, X_OK) == 0 ? nil : "\(program) cannot be run: \(Errno.current)"
        }
        let path = processEnvironment()["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where access("\(directory)/\(program)", X_OK) == 0 { return nil }
        return "no program \(program) in PATH (\(path))"
    }

    /// The keys of a process app's program besides `exec` (they need it).
    static let programKeys: Set<String> = ["working-directory", "environment", "restart", "user", "ready", "watchdog"]

    /// The keys of a process app's program (they need `exec`).
    mutating func readProgramKeys(_ entries: [INIEntry], into app: inout AppConfiguration) {
        for entry in entries {
            guard Self.programKeys.contains(entry.key) else { continue }
            guard app.program != nil else {
                // An exec that is there but did not read has its own error: this one would follow from it.
                if !entries.contains(where: { $0.key == "exec" }) {
                    error(entry.line, "\(entry.key) needs exec = PROGRAM in the same [app] section")
                }
                continue
            }
            switch entry.key {
            case "working-directory":
                if entry.value.hasPrefix("/") { app.program?.workingDirectory = entry.value }
                else { error(entry.line, "working-directory must be an absolute path, got '\(entry.value)'") }
            case "environment":
                do {
                    for word in try ConfigValues.splitCommandLine(entry.value) {
                        guard let equals = word.firstIndex(of: "="), equals != word.startIndex,
                              word[..<equals].allSatisfy({ $0 == "_" || $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                            error(entry.line, "environment takes NAME=VALUE words, got '\(word.prefix(64))'")
                            continue
                        }
                        app.program?.environment[String(word[..<equals])] = String(word[word.index(after: equals)...])
                    }
                } catch {
                    self.error(entry.line, "environment: \(error.message)")
                }
            case "restart":
                if let mode = RestartMode(rawValue: entry.value) { app.program?.restart = mode }
                else { error(entry.line, "restart must be no, on-failure or always, got '\(entry.value)'") }
            case "ready":
                if let mode = ReadinessMode(rawValue: entry.value) { app.program?.ready = mode }
                else { error(entry.line, "ready must be start or notify, got '\(entry.value)'") }
            case "watchdog":
                if entry.value == "no" { app.program?.watchdog = nil }
                else if let value = duration(entry, OtherDurationKeys.programWatchdog) { app.program?.watchdog = value }
            case "user":
                // Resolved now: a name missing from the user database is an error of the config, not a
                // program that fails at every launch.
                if let user = Self.programUser(named: entry.value) { app.program?.user = user }
                else { error(entry.line, "user: no user named '\(entry.value.prefix(64))'") }
            default:
                break
            }
        }
    }

    /// The user `name` in the user database, or nil. A uid or gid of -1 is refused: setresuid would read it
    /// as "unchanged".
    /// The corresponding C function is `getpwnam`.
    static func programUser(named name: String) -> ProgramUser? {
        guard !name.isEmpty, name.utf8.count <= 256, !name.contains("\0"), let entry = getpwnam(name),
              entry.pointee.pw_uid != uid_t.max, entry.pointee.pw_gid != gid_t.max else { return nil }
        return ProgramUser(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
    }

    // MARK: [listener APP.NAME]

    mutating func readListener(_ section: INISection) {
        guard let fullName = section.name, let dot = fullName.firstIndex(of: "."),
              ConfigValues.isValidName(String(fullName[..<dot])),
              ConfigValues.isValidName(String(fullName[fullName.index(after: dot)...])) else {
            error(section.line, "[listener APP.NAME] needs an app name and a listener name, like [listener echo.main]")
            return
        }
        let appName = String(fullName[..<dot])
        let name = String(fullName[fullName.index(after: dot)...])
        guard let appIndex = configuration.apps.firstIndex(where: { $0.name == appName }) else {
            error(section.line, "listener \(fullName) belongs to app '\(appName)', which has no [app \(appName)] section")
            return
        }
        let entries = uniqueEntries(section, repeatable: ["header"])
        var address: SocketAddress?
        var serviceName: String?
        // A process app's listeners are its program's: they name no service.
        let isProgram = configuration.apps[appIndex].program != nil
        for required in isProgram ? ["address"] : ["address", "service"] where !entries.contains(where: { $0.key == required }) {
            error(section.line, "listener \(fullName) needs '\(required) = ...'")
        }
        if isProgram {
            serviceName = ListenerConfiguration.programService
            if let entry = entries.first(where: { $0.key == "service" }) {
                error(entry.line, "listener \(fullName) belongs to a process app (exec): its program serves it, so it names no service")
            }
        } else if let entry = entries.first(where: { $0.key == "service" }) {
            if services[entry.value] != nil { serviceName = entry.value }
            else { error(entry.line, "unknown service '\(entry.value)'; known: \(services.names.joined(separator: ", "))") }
        }
        let serviceKeys = serviceName.flatMap { services[$0]?.optionKeys } ?? []
        var listener = ListenerConfiguration(name: name, address: .ipv4("127.0.0.1", port: 0), service: serviceName ?? "")
        for entry in entries {
            switch entry.key {
            case "service":
                break
            case "address":
                do { address = try SocketAddress(parsing: entry.value) }
                catch { self.error(entry.line, "address: \(error)") }
            case "connections":
                if let policy = ConnectionPolicy(rawValue: entry.value) { listener.connections = policy }
                else { error(entry.line, "connections must be keep or close, got '\(entry.value)'") }
            case "max-connections":
                if let value = Int(entry.value), value > 0 { listener.maxConnections = value }
                else { error(entry.line, "max-connections must be a positive whole number, got '\(entry.value)'") }
            case "backlog":
                if let value = Int32(entry.value), value > 0 { listener.backlog = value }
                else { error(entry.line, "backlog must be a positive whole number, got '\(entry.value)'") }
            case "mdns", "mdns-name", "mdns-txt":
                break
            case "adopt":
                guard isProgram else {
                    error(entry.line, "adopt belongs to a listener of a process app (exec): only a program binds its own listeners")
                    break
                }
                switch entry.value {
                case "yes": listener.adopt = true
                case "no": listener.adopt = false
                default: error(entry.line, "adopt must be yes or no, got '\(entry.value)'")
                }
            case "on-background":
                guard isProgram else {
                    error(entry.line, "on-background belongs to a listener of a process app (exec): a built-in service's listener closes on did-enter-background")
                    break
                }
                if let rule = ListenerBackgroundRule(rawValue: entry.value) { listener.onBackground = rule }
                else { error(entry.line, "on-background must be close or wake, got '\(entry.value)'") }
            case "voip", "keepalive":
                error(entry.line, "\(entry.key) belongs to an outbound TCP [socket APP.NAME] section; a listener cannot be a VoIP socket")
            case _ where serviceKeys.contains(entry.key):
                // A repeatable key (`header`) keeps every value, one a line.
                if let earlier = listener.serviceOptions.values[entry.key] {
                    listener.serviceOptions.values[entry.key] = earlier + "\n" + entry.value
                } else {
                    listener.serviceOptions.values[entry.key] = entry.value
                }
            case _ where ConfigKeys.tlsListenerKeys.contains(entry.key):
                let server = isProgram ? "a process app's program, which does its own TLS" : "service \(serviceName ?? "?")"
                error(entry.line, "\(entry.key): netlifed serves TLS for listeners of service = http only; this listener is served by \(server)")
            default:
                unknownKey(entry, in: "listener", service: serviceName)
            }
        }
        listener.mdns = mdnsAnnouncement(entries, address: address)
        if isProgram, let address {
            if case .unix = address {
                error(section.line, "listener \(fullName): a process app's listeners are TCP (address HOST:PORT)")
                return
            }
            // An adopted socket is the program's: its port must be known to be found, and a port-0 socket
            // would give its port up at the first background.
            if listener.adopt, address.port == 0 {
                let line = entries.first(where: { $0.key == "address" })?.line ?? section.line
                error(line, "listener \(fullName): adopt = yes needs an explicit port (the port the program binds), not \(address)")
                return
            }
            listener.address = address
            configuration.apps[appIndex].listeners.append(listener)
            return
        }
        guard let address, let serviceName, let descriptor = services[serviceName] else { return }
        listener.address = address
        do {
            _ = try descriptor.make(listener.serviceOptions)
        } catch {
            for each in error.all {
                let line = each.key.flatMap { key in entries.first(where: { $0.key == key })?.line } ?? section.line
                self.error(line, "service \(serviceName): \(each.message)", isAboutThisHost: each.isAboutThisHost)
            }
        }
        configuration.apps[appIndex].listeners.append(listener)
    }

    // MARK: [socket APP.NAME]

    mutating func readSocket(_ section: INISection) {
        guard let (appName, name) = Self.appAndName(section.name) else {
            error(section.line, "[socket APP.NAME] needs an app name and a socket name, like [socket mail.imap]")
            return
        }
        let fullName = "\(appName).\(name)"
        guard let appIndex = configuration.apps.firstIndex(where: { $0.name == appName }) else {
            error(section.line, "socket \(fullName) belongs to app '\(appName)', which has no [app \(appName)] section")
            return
        }
        let entries = uniqueEntries(section)
        for required in ["connect", "protocol"] where !entries.contains(where: { $0.key == required }) {
            error(section.line, "socket \(fullName) needs '\(required) = ...'")
        }
        var descriptor: DataProtocolDescriptor?
        if let entry = entries.first(where: { $0.key == "protocol" }) {
            descriptor = services.dataProtocol(entry.value)
            if descriptor == nil {
                error(entry.line, "unknown protocol '\(entry.value)'; known: \(services.protocolNames.joined(separator: ", "))")
            }
        }
        var socket = DataSocketConfiguration(name: name, address: .ipv4("127.0.0.1", port: 1), protocolName: descriptor?.name ?? "")
        var address: SocketAddress?
        var valid = true
        for entry in entries {
            switch entry.key {
            case "protocol":
                break
            case "connect":
                do {
                    let parsed = try SocketAddress(parsing: entry.value)
                    if parsed.port == 0 {
                        error(entry.line, "connect needs a port other than 0, got '\(entry.value)'")
                        valid = false
                    } else {
                        address = parsed
                    }
                } catch {
                    self.error(entry.line, "connect: \(error) (a numeric address such as 127.0.0.1:1143, [::1]:1143 or unix:/path)")
                    valid = false
                }
            case "policy":
                if let policy = DataSocketPolicy(rawValue: entry.value) { socket.policy = policy }
                else { error(entry.line, "policy must be close, quiet or keep, got '\(entry.value)'"); valid = false }
            case "voip":
                if let value = boolean(entry) { socket.voip = value } else { valid = false }
            case "keepalive":
                let key = DurationKey(key: "keepalive", range: configuration.keepaliveMinimum ... max(configuration.keepaliveMinimum, .seconds(86_400)))
                if let value = duration(entry, key) { socket.keepalive = value } else { valid = false }
            case _ where descriptor?.optionKeys.contains(entry.key) == true:
                socket.protocolOptions.values[entry.key] = entry.value
            default:
                unknownKey(entry, in: "socket")
                valid = false
            }
        }
        // `keepalive` needs `voip = yes`: on iOS only a VoIP app has a keep-alive handler (setKeepAliveTimeout).
        if socket.keepalive != nil, !socket.voip, let line = entries.first(where: { $0.key == "keepalive" })?.line {
            error(line, "keepalive belongs to a VoIP socket (voip = yes): on iOS only a VoIP app has a keep-alive handler")
            valid = false
        }
        if socket.voip, let line = entries.first(where: { $0.key == "voip" })?.line {
            if case .unix = address {
                error(line, "voip = yes needs an outbound TCP socket; \(fullName) connects to a Unix socket")
                valid = false
            }
            if socket.policy == .close {
                error(line, "voip = yes keeps the socket open in the background, which policy = close contradicts (use keep or quiet)")
                valid = false
            }
        }
        // The protocol's own options are checked whatever else is wrong: their errors are independent.
        guard let address, let descriptor else { return }
        socket.address = address
        do {
            _ = try descriptor.make(socket)
        } catch {
            for each in error.all {
                let line = each.key.flatMap { key in entries.first(where: { $0.key == key })?.line } ?? section.line
                self.error(line, "protocol \(descriptor.name): \(each.message)", isAboutThisHost: each.isAboutThisHost)
            }
            return
        }
        guard valid else { return }
        configuration.apps[appIndex].sockets.append(socket)
    }

    /// `APP.NAME` split in two, when both are valid names.
    static func appAndName(_ fullName: String?) -> (String, String)? {
        guard let fullName, let dot = fullName.firstIndex(of: ".") else { return nil }
        let app = String(fullName[..<dot])
        let name = String(fullName[fullName.index(after: dot)...])
        guard ConfigValues.isValidName(app), ConfigValues.isValidName(name) else { return nil }
        return (app, name)
    }

    /// `mdns = _type._tcp`, with the optional `mdns-name` and `mdns-txt = key=value ...` (split as hook
    /// command lines are). Limits are DNS-SD's (RFC 6763, RFC 6335): a type's name of 1 to 15 letters, digits
    /// and '-'; an instance name of 1 to 63 bytes; TXT strings of at most 255 bytes, 1300 in all.
    mutating func mdnsAnnouncement(_ entries: [INIEntry], address: SocketAddress?) -> MDNSAnnouncement? {
        let typeEntry = entries.first { $0.key == "mdns" }
        let nameEntry = entries.first { $0.key == "mdns-name" }
        let txtEntry = entries.first { $0.key == "mdns-txt" }
        guard let typeEntry else {
            for entry in [nameEntry, txtEntry].compactMap({ $0 }) {
                error(entry.line, "\(entry.key) needs 'mdns = _type._tcp' in the same listener")
            }
            return nil
        }
        var valid = true
        if !ConfigReader.isServiceType(typeEntry.value) {
            error(typeEntry.line, "mdns must be a DNS-SD service type like _http._tcp (1 to 15 letters, digits or '-' after the '_'), got '\(typeEntry.value)'")
            valid = false
        }
        if case .unix = address {
            error(typeEntry.line, "mdns announces TCP listeners only; this listener's address is a Unix socket")
            valid = false
        }
        var announcement = MDNSAnnouncement(type: typeEntry.value)
        if let nameEntry {
            let bytes = nameEntry.value.utf8.count
            if bytes == 0 || bytes > 63 || nameEntry.value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                error(nameEntry.line, "mdns-name must be 1 to 63 bytes without control characters, got '\(nameEntry.value)'")
                valid = false
            } else {
                announcement.name = nameEntry.value
            }
        }
        if let txtEntry {
            do {
                let words = try ConfigValues.splitCommandLine(txtEntry.value)
                for word in words {
                    let key = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                    if key.isEmpty || !word.contains("=") || word.utf8.count > 255
                        || !key.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) {
                        error(txtEntry.line, "mdns-txt: '\(word)' is not key=value (a printable ASCII key, at most 255 bytes in all)")
                        valid = false
                    }
                }
                if words.reduce(0, { $0 + $1.utf8.count + 1 }) > 1300 {
                    error(txtEntry.line, "mdns-txt: more than 1300 bytes in all")
                    valid = false
                }
                announcement.txt = words
            } catch {
                self.error(txtEntry.line, "mdns-txt: \(error.message)")
                valid = false
            }
        }
        return valid ? announcement : nil
    }

    /// `_name._tcp`: a DNS-SD service type for a TCP listener.
    static func isServiceType(_ text: String) -> Bool {
        guard text.hasPrefix("_"), text.hasSuffix("._tcp") else { return false }
        let name = text.dropFirst().dropLast(5)
        return (1...15).contains(name.count) && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            && name.first != "-" && name.last != "-"
    }

    mutating func checkAddressesAreDistinct(_ sections: [INISection]) {
        var owners: [SocketAddress: String] = [:]
        for app in configuration.apps {
            for listener in app.listeners where listener.address.port != 0 {
                let fullName = "\(app.name).\(listener.name)"
                if let other = owners[listener.address] {
                    let section = sections.first(where: { $0.name == fullName })
                    file = section?.file ?? file
                    error(section?.line ?? 0, "listener \(fullName) uses \(listener.address), as listener \(other) does")
                } else {
                    owners[listener.address] = fullName
                }
            }
        }
    }

    // MARK: Values

    /// The entries of a section, reporting repeated keys.
    /// The section's entries, a key given twice an error, except those in `repeatable` (each value kept).
    mutating func uniqueEntries(_ section: INISection, repeatable: Set<String> = []) -> [INIEntry] {
        var first: [String: Int] = [:]
        var entries: [INIEntry] = []
        for entry in section.entries {
            if let line = first[entry.key], !repeatable.contains(entry.key) {
                error(entry.line, "duplicate key '\(entry.key)' (first at line \(line))")
                continue
            }
            first[entry.key] = entry.line
            entries.append(entry)
        }
        return entries
    }

    mutating func unknownKey(_ entry: INIEntry, in kind: String, service: String? = nil) {
        if ConfigLoader.notYetSupported[kind, default: []].contains(entry.key) {
            error(entry.line, "'\(entry.key)' is not supported by this version of netlifed yet")
        } else if let service {
            error(entry.line, "unknown key '\(entry.key)' in [\(kind)] (service \(service))")
        } else {
            error(entry.line, "unknown key '\(entry.key)' in [\(kind)]")
        }
    }

    /// The users an entry names (`alice bob 1001`: names, or numeric uids), each resolved now; nil after an
    /// error naming the one that does not exist.
    mutating func users(_ entry: INIEntry) -> [NamedID]? {
        identities(entry, what: "user") { name in
            if let id = UInt32(name) { return id }
            return getpwnam(name).map { $0.pointee.pw_uid }
        }
    }

    /// The groups an entry names (names, or numeric gids), each resolved now.
    mutating func groups(_ entry: INIEntry) -> [NamedID]? {
        identities(entry, what: "group") { name in
            if let id = UInt32(name) { return id }
            return getgrnam(name).map { $0.pointee.gr_gid }
        }
    }

    private mutating func identities(_ entry: INIEntry, what: String, resolve: (String) -> UInt32?) -> [NamedID]? {
        let names = entry.value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard !names.isEmpty else {
            error(entry.line, "\(entry.key) needs at least one \(what) name")
            return nil
        }
        var resolved: [NamedID] = []
        for name in names {
            guard let id = resolve(name) else {
                error(entry.line, "\(entry.key): no \(what) named '\(name)'")
                return nil
            }
            resolved.append(NamedID(name: name, id: id))
        }
        return resolved
    }

    /// The entry's duration, if it is one and lies in the key's range; otherwise an error naming the range.
    mutating func duration(_ entry: INIEntry, _ key: DurationKey) -> Duration? {
        guard let value = ConfigValues.duration(entry.value) else {
            error(entry.line, "\(entry.key): '\(entry.value)' is not a duration (write e.g. 250ms, 5s, 10m or 1h)")
            return nil
        }
        guard key.range.contains(value) else {
            error(entry.line, "\(entry.key) must be \(key.rangeDescription), got '\(entry.value)'")
            return nil
        }
        return value
    }

    mutating func boolean(_ entry: INIEntry) -> Bool? {
        if let value = ConfigValues.boolean(entry.value) { return value }
        error(entry.line, "\(entry.key) must be yes or no, got '\(entry.value)'")
        return nil
    }

    mutating func hook(_ entry: INIEntry) -> HookCommand? {
        do {
            let words = try ConfigValues.splitCommandLine(entry.value)
            guard !words.isEmpty else {
                error(entry.line, "\(entry.key) needs a command")
                return nil
            }
            return HookCommand(arguments: words)
        } catch {
            self.error(entry.line, "\(entry.key): \(error.message)")
            return nil
        }
    }
}
