// What a config key is (its entry of ConfigKeyTable.swift: section, values, default, help) and the one reader
// that checks a value against its entry, with the error worded from the entry. What a value means is
// Configuration.swift's.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent

/// A section of the config.
public enum ConfigSection: String, Sendable, CaseIterable {
    case daemon, app, listener, socket

    /// The header as the pages write it: `[daemon]`, `[app NAME]`, `[listener APP.NAME]`, `[socket APP.NAME]`.
    public var header: String {
        switch self {
        case .daemon: "[daemon]"
        case .app: "[app NAME]"
        case .listener: "[listener APP.NAME]"
        case .socket: "[socket APP.NAME]"
        }
    }

    /// The keys that plug into this section from `registry`: a listener takes its service's (`service =`), a
    /// socket its protocol's (`protocol =`). Each service or protocol declares them (`optionKeys`) and checks
    /// their values itself.
    public func optionKeys(_ registry: ServiceRegistry) -> Set<String> {
        switch self {
        case .daemon, .app: []
        case .listener: registry.names.compactMap { registry[$0]?.optionKeys }.reduce([], { $0.union($1) })
        case .socket: registry.protocolNames.compactMap { registry.dataProtocol($0)?.optionKeys }.reduce([], { $0.union($1) })
        }
    }

    /// The option keys that may be given more than once, each value kept (a listener's http `header`).
    var repeatableOptionKeys: Set<String> { self == .listener ? ["header"] : [] }

    /// The [listener] keys that make a listener TLS: the http service takes them (its `optionKeys`); on any
    /// other listener they are refused with that explanation rather than as unknown.
    static let tlsListenerKeys: Set<String> = ["tls-certificate", "tls-key"]
}

/// The values a key takes.
public enum ConfigValueType: Sendable {
    /// `yes` or `no` (`true`/`false`, `on`/`off`, `1`/`0` read the same).
    case boolean
    /// One of these words.
    case choice([String])
    /// A duration in the range; `off`, when given, is the word that turns the setting off (`never`, `no`);
    /// `floor`, the key whose value raises the lower bound.
    case duration(ClosedRange<Duration>, off: String? = nil, floor: String? = nil)
    /// A whole number in the range; `unit` and what 0 means word the message.
    case wholeNumber(ClosedRange<Int>, unit: String? = nil, zero: String? = nil)
    /// A command line, split into words as a shell would; `needsCommand`: at least one word.
    case commandLine(needsCommand: Bool)
    /// An absolute path; with `maxBytes`, shorter than that and without NUL.
    case absolutePath(maxBytes: Int? = nil)
    /// A Unix socket's absolute path (or `unix:/path`) of at most 107 bytes.
    case socketPath
    /// A socket address: where to listen, or (`peer`) a numeric peer with a port.
    case address(peer: Bool)
    /// User names or uids, resolved when read.
    case users
    /// Group names or gids, resolved when read; `one`: exactly one.
    case groups(one: Bool)
    /// The name of a group that exists.
    case groupName
    /// A user of the user database (a program runs as it).
    case programUser
    /// A file or a glob.
    case glob
    /// A DNS-SD service type for TCP: `_name._tcp`.
    case serviceType
    /// Text of 1 to `maxBytes` bytes without control characters.
    case label(maxBytes: Int)
    /// A name the section looks up (a service, a protocol).
    case name
    /// A kernel memory pressure trigger, `some|full STALL WINDOW` (`some 150ms 2s`), or `off` for none.
    case pressureTrigger(off: String)
}

/// One key of the config.
public struct ConfigKey: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let section: ConfigSection
    public let type: ConfigValueType
    /// The key this one needs: `exec` (in the app), `mdns`, `voip`.
    public let requires: String?
    /// Whether it may be given more than once in a section.
    public let isRepeatable: Bool
    /// The default as the config would write it; nil: none, or one that depends on the host or the app.
    public let defaultValue: String?
    /// One line of help.
    public let help: String

    init(_ name: String, _ section: ConfigSection, _ type: ConfigValueType, requires: String? = nil, repeatable: Bool = false,
         default defaultValue: String? = nil, help: String) {
        self.name = name
        self.section = section
        self.type = type
        self.requires = requires
        self.isRepeatable = repeatable
        self.defaultValue = defaultValue
        self.help = help
    }

    public var description: String { "\(section.rawValue).\(name)" }
    public static func == (a: ConfigKey, b: ConfigKey) -> Bool { a.name == b.name && a.section == b.section }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(section)
    }

    /// The key `name` of `section`.
    public static func named(_ name: String, in section: ConfigSection) -> ConfigKey? { index[section.rawValue + " " + name] }

    private static let index = Dictionary(all.map { ($0.section.rawValue + " " + $0.name, $0) }, uniquingKeysWith: { first, _ in first })

    /// The keys whose value is a command line: quotes in it keep a `#` from starting a comment.
    static let commandLineKeys = Set(all.filter { if case .commandLine = $0.type { true } else { false } }.map(\.name))

    /// The duration range of the key, its lower bound raised to `floor` when it has one.
    public func range(floor: Duration? = nil) -> ClosedRange<Duration>? {
        guard case .duration(let range, _, _) = type else { return nil }
        guard let floor else { return range }
        return floor ... max(floor, range.upperBound)
    }

    /// What a value must be, as the error for a bad one says it (`between 10ms and 1h`, `yes or no`); nil for
    /// the values whose errors say why in their own words (a command line's quotes, a user that does not exist).
    public func mustBe(floor: Duration? = nil) -> String? {
        switch type {
        case .boolean: return "yes or no"
        case .choice(let words): return ConfigValues.list(words)
        case .duration:
            guard let range = range(floor: floor) else { return nil }
            return "between \(range.lowerBound.configText) and \(range.upperBound.configText)"
        case .wholeNumber(let range, let unit, let zero):
            // From 1, the upper bound is a machine limit, left unsaid.
            if range.lowerBound == 1 { return "a positive whole number" }
            return "a whole number" + (unit.map { " of " + $0 } ?? "") + " between \(range.lowerBound)"
                + (zero.map { " (\($0))" } ?? "") + " and \(range.upperBound)"
        case .absolutePath: return "an absolute path"
        case .socketPath: return "an absolute path of at most 107 bytes"
        case .serviceType: return "a DNS-SD service type like _http._tcp (1 to 15 letters, digits or '-' after the '_')"
        case .label(let maxBytes): return "1 to \(maxBytes) bytes without control characters"
        case .pressureTrigger(let off):
            return "some or full, a stall and a window, such as some 150ms 2s (or \(off))"
        case .commandLine, .address, .users, .groups, .groupName, .programUser, .glob, .name: return nil
        }
    }
}

/// A value read for its key.
enum ConfigValue: Equatable {
    case boolean(Bool)
    /// A choice, a path, a name, a glob.
    case word(String)
    /// nil: the key's word for off.
    case duration(Duration?)
    case number(Int)
    /// A command line's words.
    case words([String])
    case address(SocketAddress)
    case identities([NamedID])
    case user(ProgramUser)
    /// nil: the key's word for off.
    case pressureTrigger(PressureTrigger?)
}

/// Why a value does not fit its key, worded for the config's error.
struct ConfigValueError: Error, Equatable {
    var message: String
    init(_ message: String) { self.message = message }
}

extension ConfigKey {
    /// `text` read as this key's value. `floor` raises a duration's lower bound (the key's `floor` key's value).
    func value(_ text: String, floor: Duration? = nil) throws(ConfigValueError) -> ConfigValue {
        var refused: ConfigValueError { ConfigValueError("\(name) must be \(self.mustBe(floor: floor) ?? "valid"), got '\(text)'") }
        switch type {
        case .boolean:
            guard let value = ConfigValues.boolean(text) else { throw refused }
            return .boolean(value)
        case .choice(let words):
            guard words.contains(text) else { throw refused }
            return .word(text)
        case .duration(_, let off, _):
            if let off, text == off { return .duration(nil) }
            guard let value = ConfigValues.duration(text) else {
                throw ConfigValueError("\(name): '\(text)' is not a duration (write e.g. 250ms, 5s, 10m or 1h)")
            }
            guard range(floor: floor)?.contains(value) == true else { throw refused }
            return .duration(value)
        case .wholeNumber(let range, _, _):
            guard let value = Int(text), range.contains(value) else { throw refused }
            return .number(value)
        case .commandLine(let needsCommand):
            let words: [String]
            do { words = try ConfigValues.splitCommandLine(text) } catch { throw ConfigValueError("\(name): \(error.message)") }
            if needsCommand, words.isEmpty { throw ConfigValueError("\(name) needs a command") }
            return .words(words)
        case .absolutePath(let maxBytes):
            guard text.hasPrefix("/") else { throw refused }
            if let maxBytes, text.utf8.count > maxBytes || text.contains("\0") { throw refused }
            return .word(text)
        case .socketPath:
            guard case .unix = try? SocketAddress(parsing: text) else { throw refused }
            return .word(text.hasPrefix("unix:") ? String(text.dropFirst(5)) : text)
        case .address(let peer):
            let address: SocketAddress
            do { address = try SocketAddress(parsing: text) } catch {
                throw ConfigValueError(peer ? "\(name): \(error) (a numeric address such as 127.0.0.1:1143, [::1]:1143 or unix:/path)"
                                            : "\(name): \(error)")
            }
            if peer, address.port == 0 { throw ConfigValueError("\(name) needs a port other than 0, got '\(text)'") }
            return .address(address)
        case .users:
            return .identities(try identities(text, what: "user") { getpwnam($0).map { $0.pointee.pw_uid } })
        case .groups(let one):
            let groups = try identities(text, what: "group") { getgrnam($0).map { $0.pointee.gr_gid } }
            if one, groups.count > 1 { throw ConfigValueError("\(name) takes one group, got '\(text)'") }
            return .identities(groups)
        case .groupName:
            guard getgrnam(text) != nil else { throw ConfigValueError("\(name): no group named '\(text)'") }
            return .word(text)
        case .programUser:
            guard let user = ConfigValues.programUser(named: text) else { throw ConfigValueError("\(name): no user named '\(text.prefix(64))'") }
            return .user(user)
        case .glob:
            if text.isEmpty || text.contains("\0") { throw ConfigValueError("\(name) needs a file or a glob, such as /etc/netlifed/conf.d/*.conf") }
            return .word(text)
        case .serviceType:
            guard ConfigValues.isServiceType(text) else { throw refused }
            return .word(text)
        case .label(let maxBytes):
            let bytes = text.utf8.count
            if bytes == 0 || bytes > maxBytes || text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) { throw refused }
            return .word(text)
        case .name:
            return .word(text)
        case .pressureTrigger(let off):
            if text == off { return .pressureTrigger(nil) }
            do {
                return .pressureTrigger(try PressureTrigger(configText: text))
            } catch {
                let windows = PressureTrigger.windows
                switch error {
                case .syntax: throw refused
                case .window(let window):
                    throw ConfigValueError("\(name): the window must be between \(windows.lowerBound.configText) and \(windows.upperBound.configText), got \(window.configText) in '\(text)'")
                case .stall(let stall, let window):
                    throw ConfigValueError("\(name): the stall must be more than 0 and at most the window (\(window.configText)), got \(stall.configText) in '\(text)'")
                }
            }
        }
    }

    /// The users or groups `text` names (names, or numeric ids), each resolved now.
    private func identities(_ text: String, what: String, resolve: (String) -> UInt32?) throws(ConfigValueError) -> [NamedID] {
        let names = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard !names.isEmpty else { throw ConfigValueError("\(name) needs at least one \(what) name") }
        var resolved: [NamedID] = []
        for each in names {
            guard let id = UInt32(each) ?? resolve(each) else { throw ConfigValueError("\(name): no \(what) named '\(each)'") }
            resolved.append(NamedID(name: each, id: id))
        }
        return resolved
    }
}
