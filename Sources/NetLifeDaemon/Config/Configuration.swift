// The meaning of the config (docs/configuration.md): the [daemon] settings and each [app], [listener] and [socket]
// section turned into typed values, with every error reported as FILE:LINE: message. A key's section, values
// and default are its entry of ConfigKeyTable.swift, whose reader words the error for a bad value; here each
// value read is stored, and checked against the others. Unknown sections and keys are errors; a key that a
// later version brings says so.

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
    /// `memory-pressure-trigger`: the kernel pressure trigger whose events end suspended apps (nil: none).
    public var memoryPressureTrigger: PressureTrigger?
    /// `transfer-idle-timeout`, `transfer-low-speed-limit`, `transfer-low-speed-time`: what every download
    /// and upload is held to (curl's `--speed-limit`/`--speed-time`); a limit hit pauses the transfer.
    public var transferLimits: TransferLimits = .defaults
    /// `debug-commands`: enables `netlifectl debug ...` (off by default).
    public var debugCommands = false
    /// `log-level`: the least important log records written.
    public var logLevel: Logger.Level = .info
    /// `metrics`: where `/metrics` is served (nil: it is not).
    public var metrics: SocketAddress?
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
            let (parsed, syntaxErrors) = INIFile.parse(source.text, file: source.file, isCommandLine: ConfigKey.commandLineKeys.contains)
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
        for entry in uniqueEntries(section, .daemon) {
            guard let key = ConfigKey.named(entry.key, in: .daemon) else {
                unknownKey(entry, in: "daemon")
                continue
            }
            guard let value = value(entry, key) else { continue }
            switch (key, value) {
            case (.control, .word(let path)): configuration.control = path
            case (.stateDirectory, .word(let path)): configuration.stateDirectory = path
            case (.controlGroup, .word(let group)): configuration.controlGroup = group
            case (.include, _): break // read by ConfigLoader.parse before this section is
            case (.adminGroup, .identities(let groups)): configuration.adminGroup = groups.first
            case (.loopStall, .duration(let value?)): configuration.loopStall = value
            case (.keepaliveMinimum, .duration(let value?)): configuration.keepaliveMinimum = value
            case (.memoryPressureTrigger, .pressureTrigger(let trigger)): configuration.memoryPressureTrigger = trigger
            case (.transferIdleTimeout, .duration(let value?)): configuration.transferLimits.idleTimeout = value
            case (.transferLowSpeedTime, .duration(let value?)): configuration.transferLimits.lowSpeedTime = value
            case (.transferLowSpeedLimit, .number(let value)): configuration.transferLimits.lowSpeedLimit = value
            case (.debugCommands, .boolean(let value)): configuration.debugCommands = value
            case (.logLevel, .word(let name)): if let level = Logger.Level(name: name) { configuration.logLevel = level }
            case (.metrics, .address(let address)):
                if case .unix = address {
                    error(entry.line, "metrics needs a TCP address such as 127.0.0.1:9464 or [::1]:9464, got '\(entry.value)'")
                } else {
                    configuration.metrics = address
                }
            default: unstored(entry)
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
        let entries = uniqueEntries(section, .app)
        // The profile first, so that budget keys override it wherever they are written.
        if let entry = entries.first(where: { $0.key == ConfigKey.profile.name }), case .word(let word)? = value(entry, .profile),
           let profile = Budgets.Profile(rawValue: word) {
            app.budgets = profile.budgets
        }
        for entry in entries {
            guard let key = ConfigKey.named(entry.key, in: .app) else {
                if [ConfigKey.voip.name, ConfigKey.keepalive.name].contains(entry.key) {
                    error(entry.line, "\(entry.key) belongs to an outbound TCP [socket APP.NAME] section, not to [app]")
                } else {
                    unknownKey(entry, in: "app")
                }
                continue
            }
            // A program's keys are read once exec is (readProgramKeys).
            if key == .profile || key.requires == ConfigKey.exec.name { continue }
            guard let value = value(entry, key) else { continue }
            if let event = ConfigKey.hookEvents[key], case .words(let words) = value {
                app.hooks[event] = HookCommand(arguments: words)
                continue
            }
            switch (key, value) {
            case (.launch, .word(let word)): if let mode = LaunchMode(rawValue: word) { app.launch = mode }
            case (.launchBudget, .duration(let value?)): app.budgets.launch = value
            case (.backgroundBudget, .duration(let value?)): app.budgets.background = value
            case (.foregroundBudget, .duration(let value?)): app.budgets.foreground = value
            case (.terminateBudget, .duration(let value?)): app.budgets.terminate = value
            case (.expirationBudget, .duration(let value?)): app.budgets.expiration = value
            case (.taskTime, .duration(let value?)): app.budgets.taskTime = value
            case (.expirationLead, .duration(let value?)): app.budgets.expirationLead = value
            case (.expirationGrace, .duration(let value?)): app.budgets.expirationGrace = value
            case (.keepaliveBudget, .duration(let value?)): app.budgets.keepalive = value
            case (.onExpiration, .words(let words)): app.expirationHook = HookCommand(arguments: words)
            case (.onVoipData, .words(let words)): app.voipDataHook = HookCommand(arguments: words)
            case (.autoSuspend, .duration(let value)): app.autoSuspend = value
            case (.idleBackground, .duration(let value)): app.idleBackground = value
            case (.idleKeepsConnections, .boolean(let value)): app.idleKeepsConnections = value
            case (.exitsOnSuspend, .boolean(let value)): app.exitsOnSuspend = value
            case (.multitasking, .boolean(let value)): app.multitasking = value
            case (.reclaimOnSuspend, .boolean(let value)): app.reclaimOnSuspend = value
            case (.backgroundMode, .word(let word)): if let mode = BackgroundMode(rawValue: word) { app.backgroundMode = mode }
            case (.allowUsers, .identities(let users)): configuration.appAccess[name, default: AppAccess()].users = users
            case (.allowGroups, .identities(let groups)): configuration.appAccess[name, default: AppAccess()].groups = groups
            case (.exec, .words(let words)):
                app.program = ProgramConfiguration(arguments: words)
                if let program = words.first, let missing = Self.missingProgram(program) {
                    error(entry.line, "exec: \(missing)", isAboutThisHost: true)
                }
            default: unstored(entry)
            }
        }
        readProgramKeys(entries, into: &app)
        if app.launch == .background, app.exitsOnSuspend || !app.multitasking,
           let line = entries.first(where: { $0.key == ConfigKey.launch.name })?.line {
            let key = app.exitsOnSuspend ? "exits-on-suspend = yes" : "multitasking = no"
            error(line, "launch = background cannot be used with \(key): such an app never runs in the background (UIApplicationExitsOnSuspend)")
        }
        if app.budgets.expirationLead >= app.budgets.taskTime {
            let line = entries.first(where: { $0.key == ConfigKey.expirationLead.name || $0.key == ConfigKey.taskTime.name })?.line ?? section.line
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
    mutating func readProgramKeys(_ entries: [INIEntry], into app: inout AppConfiguration) {
        for entry in entries {
            guard let key = ConfigKey.named(entry.key, in: .app), key.requires == ConfigKey.exec.name else { continue }
            guard app.program != nil else {
                // An exec that is there but did not read has its own error: this one would follow from it.
                if !entries.contains(where: { $0.key == ConfigKey.exec.name }) {
                    error(entry.line, "\(entry.key) needs exec = PROGRAM in the same [app] section")
                }
                continue
            }
            guard let value = value(entry, key) else { continue }
            switch (key, value) {
            case (.workingDirectory, .word(let path)): app.program?.workingDirectory = path
            case (.environment, .words(let words)):
                for word in words {
                    guard let equals = word.firstIndex(of: "="), equals != word.startIndex,
                          word[..<equals].allSatisfy({ $0 == "_" || $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                        error(entry.line, "environment takes NAME=VALUE words, got '\(word.prefix(64))'")
                        continue
                    }
                    app.program?.environment[String(word[..<equals])] = String(word[word.index(after: equals)...])
                }
            case (.restart, .word(let word)): if let mode = RestartMode(rawValue: word) { app.program?.restart = mode }
            case (.ready, .word(let word)): if let mode = ReadinessMode(rawValue: word) { app.program?.ready = mode }
            case (.watchdog, .duration(let value)): app.program?.watchdog = value
            // Resolved now: a name missing from the user database is an error of the config, not a program
            // that fails at every launch.
            case (.user, .user(let user)): app.program?.user = user
            default: unstored(entry)
            }
        }
    }

    // MARK: [listener APP.NAME]

    mutating func readListener(_ section: INISection) {
        guard let (appName, name) = Self.appAndName(section.name) else {
            error(section.line, "[listener APP.NAME] needs an app name and a listener name, like [listener echo.main]")
            return
        }
        let fullName = "\(appName).\(name)"
        guard let appIndex = configuration.apps.firstIndex(where: { $0.name == appName }) else {
            error(section.line, "listener \(fullName) belongs to app '\(appName)', which has no [app \(appName)] section")
            return
        }
        let entries = uniqueEntries(section, .listener)
        var address: SocketAddress?
        var serviceName: String?
        // A process app's listeners are its program's: they name no service.
        let isProgram = configuration.apps[appIndex].program != nil
        for required in isProgram ? [ConfigKey.address] : [.address, .service] where !entries.contains(where: { $0.key == required.name }) {
            error(section.line, "listener \(fullName) needs '\(required.name) = ...'")
        }
        if isProgram {
            serviceName = ListenerConfiguration.programService
            if let entry = entries.first(where: { $0.key == ConfigKey.service.name }) {
                error(entry.line, "listener \(fullName) belongs to a process app (exec): its program serves it, so it names no service")
            }
        } else if let entry = entries.first(where: { $0.key == ConfigKey.service.name }) {
            if services[entry.value] != nil { serviceName = entry.value }
            else { error(entry.line, "unknown service '\(entry.value)'; known: \(services.names.joined(separator: ", "))") }
        }
        let serviceKeys = serviceName.flatMap { services[$0]?.optionKeys } ?? []
        var listener = ListenerConfiguration(name: name, address: .ipv4("127.0.0.1", port: 0), service: serviceName ?? "")
        for entry in entries {
            guard let key = ConfigKey.named(entry.key, in: .listener) else {
                if [ConfigKey.voip.name, ConfigKey.keepalive.name].contains(entry.key) {
                    error(entry.line, "\(entry.key) belongs to an outbound TCP [socket APP.NAME] section; a listener cannot be a VoIP socket")
                } else if serviceKeys.contains(entry.key) {
                    // A repeatable key (`header`) keeps every value, one a line.
                    let earlier = listener.serviceOptions.values[entry.key]
                    listener.serviceOptions.values[entry.key] = earlier.map { $0 + "\n" + entry.value } ?? entry.value
                } else if ConfigSection.tlsListenerKeys.contains(entry.key) {
                    let server = isProgram ? "a process app's program, which does its own TLS" : "service \(serviceName ?? "?")"
                    error(entry.line, "\(entry.key): netlifed serves TLS for listeners of service = http only; this listener is served by \(server)")
                } else {
                    unknownKey(entry, in: "listener", service: serviceName)
                }
                continue
            }
            switch key {
            case .service, .mdns, .mdnsName, .mdnsTxt:
                continue // read above, and by mdnsAnnouncement
            case .adopt where !isProgram:
                error(entry.line, "adopt belongs to a listener of a process app (exec): only a program binds its own listeners")
                continue
            default:
                break
            }
            guard let value = value(entry, key) else { continue }
            switch (key, value) {
            case (.address, .address(let parsed)): address = parsed
            case (.connections, .word(let word)): if let policy = ConnectionPolicy(rawValue: word) { listener.connections = policy }
            case (.maxConnections, .number(let value)): listener.maxConnections = value
            case (.backlog, .number(let value)): listener.backlog = Int32(clamping: value)
            case (.adopt, .word(let word)): listener.adopt = word == "yes"
            case (.onBackground, .word(let word)): if let rule = ListenerBackgroundRule(rawValue: word) { listener.onBackground = rule }
            default: unstored(entry)
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
                let line = entries.first(where: { $0.key == ConfigKey.address.name })?.line ?? section.line
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
        let entries = uniqueEntries(section, .socket)
        for required in [ConfigKey.connect, .protocol] where !entries.contains(where: { $0.key == required.name }) {
            error(section.line, "socket \(fullName) needs '\(required.name) = ...'")
        }
        var descriptor: DataProtocolDescriptor?
        if let entry = entries.first(where: { $0.key == ConfigKey.protocol.name }) {
            descriptor = services.dataProtocol(entry.value)
            if descriptor == nil {
                error(entry.line, "unknown protocol '\(entry.value)'; known: \(services.protocolNames.joined(separator: ", "))")
            }
        }
        var socket = DataSocketConfiguration(name: name, address: .ipv4("127.0.0.1", port: 1), protocolName: descriptor?.name ?? "")
        var address: SocketAddress?
        var valid = true
        for entry in entries {
            guard let key = ConfigKey.named(entry.key, in: .socket) else {
                if descriptor?.optionKeys.contains(entry.key) == true {
                    socket.protocolOptions.values[entry.key] = entry.value
                } else {
                    unknownKey(entry, in: "socket")
                    valid = false
                }
                continue
            }
            if key == .protocol { continue } // read above
            guard let value = value(entry, key, floor: key == .keepalive ? configuration.keepaliveMinimum : nil) else {
                valid = false
                continue
            }
            switch (key, value) {
            case (.connect, .address(let parsed)): address = parsed
            case (.policy, .word(let word)): if let policy = DataSocketPolicy(rawValue: word) { socket.policy = policy }
            case (.voip, .boolean(let value)): socket.voip = value
            case (.keepalive, .duration(let value)): socket.keepalive = value
            default:
                unstored(entry)
                valid = false
            }
        }
        // `keepalive` needs `voip = yes`: on iOS only a VoIP app has a keep-alive handler (setKeepAliveTimeout).
        if socket.keepalive != nil, !socket.voip, let line = entries.first(where: { $0.key == ConfigKey.keepalive.name })?.line {
            error(line, "keepalive belongs to a VoIP socket (voip = yes): on iOS only a VoIP app has a keep-alive handler")
            valid = false
        }
        if socket.voip, let line = entries.first(where: { $0.key == ConfigKey.voip.name })?.line {
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
    /// command lines are). Limits are DNS-SD's (RFC 6763): TXT strings of at most 255 bytes, 1300 in all.
    mutating func mdnsAnnouncement(_ entries: [INIEntry], address: SocketAddress?) -> MDNSAnnouncement? {
        let typeEntry = entries.first { $0.key == ConfigKey.mdns.name }
        let nameEntry = entries.first { $0.key == ConfigKey.mdnsName.name }
        let txtEntry = entries.first { $0.key == ConfigKey.mdnsTxt.name }
        guard let typeEntry else {
            for entry in [nameEntry, txtEntry].compactMap({ $0 }) {
                error(entry.line, "\(entry.key) needs 'mdns = _type._tcp' in the same listener")
            }
            return nil
        }
        var valid = value(typeEntry, .mdns) != nil
        if case .unix = address {
            error(typeEntry.line, "mdns announces TCP listeners only; this listener's address is a Unix socket")
            valid = false
        }
        var announcement = MDNSAnnouncement(type: typeEntry.value)
        if let nameEntry {
            if case .word(let name)? = value(nameEntry, .mdnsName) { announcement.name = name } else { valid = false }
        }
        if let txtEntry {
            guard case .words(let words)? = value(txtEntry, .mdnsTxt) else { return nil }
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
        }
        return valid ? announcement : nil
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

    /// The entry's value read for `key` (ConfigKey.value); nil after the error that the key words.
    mutating func value(_ entry: INIEntry, _ key: ConfigKey, floor: Duration? = nil) -> ConfigValue? {
        do {
            return try key.value(entry.value, floor: floor)
        } catch {
            self.error(entry.line, error.message)
            return nil
        }
    }

    /// A key of the table that its section's reader does not store: a fault of this reader, reported rather
    /// than ignored (the table's tests read every key).
    mutating func unstored(_ entry: INIEntry) {
        error(entry.line, "\(entry.key) is read but not stored by this version of netlifed")
    }

    /// The section's entries, a key given twice an error, except a repeatable one (each value kept).
    mutating func uniqueEntries(_ section: INISection, _ kind: ConfigSection) -> [INIEntry] {
        var first: [String: Int] = [:]
        var entries: [INIEntry] = []
        for entry in section.entries {
            if let line = first[entry.key],
               !(ConfigKey.named(entry.key, in: kind)?.isRepeatable ?? kind.repeatableOptionKeys.contains(entry.key)) {
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
}
