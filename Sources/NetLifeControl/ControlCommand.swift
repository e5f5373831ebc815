// A control command as one entry, as tmux's `cmd_entry`: its wire name, its arguments (the request members
// with their types, whether each is required, and where netlifectl's command line puts it), and its help.
// Everything else is derived from the entries: the request's JSON both ways (ControlRequest.swift),
// netlifectl's words, argument parser, usage and help, and the daemon's dispatch, which keys its handlers by
// entry. The entries themselves are in ControlCommandTable.swift.

@preconcurrency import Glibc

/// A member of a request: its key, spelled here once, and the type of its value.
public struct ControlMember: Hashable, Sendable {
    /// The types a request member may have.
    public enum Kind: Sendable {
        case string, bool
        /// A whole number from 0 to 2^53.
        case count
    }

    public let key: String
    public let kind: Kind

    init(_ key: String, _ kind: Kind) {
        self.key = key
        self.kind = kind
    }

    public static let app = ControlMember("app", .string)
    public static let background = ControlMember("background", .bool)
    public static let name = ControlMember("name", .string)
    public static let id = ControlMember("id", .count)
    public static let mode = ControlMember("mode", .string)
    public static let url = ControlMember("url", .string)
    public static let output = ControlMember("output", .string)
    public static let outputDirectory = ControlMember("outputDirectory", .string)
    public static let file = ControlMember("file", .string)
    public static let duration = ControlMember("duration", .string)
    public static let free = ControlMember("free", .count)
    /// A transfer's TLS choices, as curl spells them: a CA file, no verification, TLS required on ftp://.
    public static let caFile = ControlMember("cacert", .string)
    public static let insecure = ControlMember("insecure", .bool)
    public static let sslRequired = ControlMember("sslRequired", .bool)
}

/// One argument of a command: a member, whether it is required, what values it may take, and where it comes
/// from on netlifectl's command line.
public struct ControlArgument: Sendable {
    /// Where netlifectl finds the argument.
    public enum Source: Sendable {
        /// A word after the command words, shown as `metavar` in the usage.
        case positional(String)
        /// `--background`: present is true.
        case flag(String)
        /// `--name N` or `--name=N`.
        case option(String, metavar: String)
        /// The device and inode ("DEV:INO") of the directory of the path that another member holds, as
        /// netlifectl sees it (`fileIdentity(directoryOf:)`).
        case directoryIdentity(of: ControlMember)
    }

    public let member: ControlMember
    public let required: Bool
    public let source: Source
    /// The values it may take (nil: any of its type).
    public var values: [String]?
    /// The longest string it may be, in bytes of UTF-8.
    public var maxBytes: Int?
    /// netlifectl makes a relative path absolute against its own directory (the daemon's is another).
    public var isPath = false
    /// The smallest number netlifectl accepts, and what its message says of a number it refuses ("must be a
    /// whole number" unless this says otherwise).
    public var minimum: UInt64 = 0
    public var meaning: String?

    public init(_ member: ControlMember, required: Bool = true, _ source: Source) {
        self.member = member
        self.required = required
        self.source = source
    }

    /// The argument as the usage shows it: `APP`, `[APP]`, `[--name N]`; nil when it is not typed.
    var usage: String? {
        switch source {
        case .positional(let metavar):
            let shown = values?.joined(separator: "|") ?? metavar
            return required ? shown : "[\(shown)]"
        case .flag(let flag): return "[\(flag)]"
        case .option(let option, let metavar): return required ? "\(option) \(metavar)" : "[\(option) \(metavar)]"
        case .directoryIdentity: return nil
        }
    }
}

/// An option of a command's netlifectl command line: one that takes a value (`--output PATH`) or a flag
/// (`--insecure`, `--no-wait`). The completion script and the tests of the pages list them from here.
public struct ControlOption: Sendable {
    /// `--output`.
    public let name: String
    /// What its value stands for in the usage (`PATH`); nil for a flag, which takes none.
    public let metavar: String?
    /// The argument it sets; nil for a flag that netlifectl reads itself (`--no-wait`).
    public let argument: ControlArgument?
}

/// A command line that netlifectl cannot turn into a request: the message says what is wrong.
public struct ControlUsageError: Error, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// Who may run a command (the daemon's access policy decides, per requester):
public enum ControlAccess: String, Sendable {
    /// Reads only (`status`, `watch`, `transfers`, `version`, `task list`): every peer the socket lets in.
    case readOnly = "read-only"
    /// Changes one app (its state, tasks, mode, transfers): root, the daemon's uid, and the users and groups
    /// the app's `allow-users` and `allow-groups` name (every member of `control-group` when it names none).
    case app
    /// Changes the daemon as a whole (`reload`, `lock`, `memory-pressure`, `debug stall`): root, the daemon's
    /// uid, and members of `[daemon] admin-group`.
    case daemon
}

/// A control command: one entry of the table.
public struct ControlCommand: Hashable, Sendable, CustomStringConvertible {
    /// The wire name, as `cmd` carries it.
    public let name: String
    public let arguments: [ControlArgument]
    /// One line for netlifectl's help.
    public let summary: String
    /// The words that name it on netlifectl's command line: the name's parts (`task-begin` is `task begin`).
    public let words: [String]
    /// Flags netlifectl reads itself, not sent (`--no-wait`).
    public let localFlags: [String]
    /// Whether the daemon resolves `app` to a configured app before running it. Not for `transfers-cancel`:
    /// a reload may have removed the app whose transfer is cancelled.
    public let resolvesApp: Bool
    /// Whether at least one of its optional members must be given.
    public let needsOne: Bool
    /// Who may run it.
    public let access: ControlAccess

    init(_ name: String, _ arguments: [ControlArgument] = [], oneWord: Bool = false, localFlags: [String] = [],
         resolvesApp: Bool = true, needsOne: Bool = false, access: ControlAccess = .app, summary: String) {
        self.name = name
        self.arguments = arguments
        self.summary = summary
        words = oneWord ? [name] : name.split(separator: "-").map(String.init)
        self.localFlags = localFlags
        self.resolvesApp = resolvesApp
        self.needsOne = needsOne
        self.access = access
    }

    public var description: String { name }
    public static func == (a: ControlCommand, b: ControlCommand) -> Bool { a.name == b.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// The entry named `name` on the wire.
    public static func named(_ name: String) -> ControlCommand? { byName[name] }
    private static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// netlifectl's usage line, without the program name: `task begin APP [--name N]`.
    public var usage: String {
        (words + arguments.compactMap(\.usage) + localFlags.map { "[\($0)]" }).joined(separator: " ")
    }

    /// The options of its command line, in the order of its usage: its arguments' options and flags, then the
    /// flags netlifectl reads itself.
    public var options: [ControlOption] {
        arguments.compactMap { argument in
            switch argument.source {
            case .option(let name, let metavar): ControlOption(name: name, metavar: metavar, argument: argument)
            case .flag(let name): ControlOption(name: name, metavar: nil, argument: argument)
            case .positional, .directoryIdentity: nil
            }
        } + localFlags.map { ControlOption(name: $0, metavar: nil, argument: nil) }
    }

    /// The words after the command words that are no option, in order (`APP`, `URL`).
    public var positionals: [ControlArgument] {
        arguments.filter { if case .positional = $0.source { true } else { false } }
    }

    /// The command named by the first words of `words` (the longest match: `transfers cancel`, not `transfers`).
    public static func find(_ words: [String]) -> ControlCommand? {
        all.filter { words.starts(with: $0.words) }.max { $0.words.count < $1.words.count }
    }

    /// The usage of the command (or the family of commands, such as `task`) that `words` names, or nil.
    public static func usage(of words: [String]) -> String? {
        if let command = find(words) { return "USAGE: netlifectl \(command.usage)\n\n\(command.summary)" }
        let family = all.filter { $0.words.starts(with: words) }
        guard !family.isEmpty else { return nil }
        return "USAGE:\n" + family.map { "  netlifectl \($0.usage)\n      \($0.summary)" }.joined(separator: "\n")
    }

    /// The request that netlifectl's `arguments` (the words after the command's) ask for.
    public func request(arguments words: [String]) throws(ControlUsageError) -> ControlRequest {
        let parsed = try CommandLineArguments(words, for: self)
        var values: [ControlMember: JSON] = [:]
        for argument in arguments {
            guard let text = parsed.text(of: argument) else {
                if case .directoryIdentity(let path) = argument.source,
                   let identity = values[path]?.stringValue.flatMap(fileIdentity(directoryOf:)) {
                    values[argument.member] = .string(identity)
                }
                continue
            }
            values[argument.member] = try argument.value(of: text)
        }
        if needsOne, !arguments.contains(where: { values[$0.member] != nil }) {
            let choices = arguments.compactMap(\.usage).map { $0.hasPrefix("[") ? String($0.dropFirst().dropLast()) : $0 }
            throw ControlUsageError("name at least one of \(choices.joined(separator: ", "))")
        }
        do {
            return try ControlRequest(self, values)
        } catch {
            throw ControlUsageError(error.message)
        }
    }
}

extension ControlArgument {
    /// The value of one typed argument.
    func value(of text: String) throws(ControlUsageError) -> JSON {
        let label: String = switch source {
        case .positional(let metavar): metavar
        case .option(let option, _): option
        case .flag(let flag): flag
        case .directoryIdentity: member.key
        }
        switch member.kind {
        case .bool:
            return .bool(true)
        case .count:
            // Digits only: Swift's UInt64("+5") is 5, which no user means. Up to 2^64 - 1; past 2^53 the JSON
            // number is the nearest a double holds, and the daemon reads it as at least that much.
            guard text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let number = UInt64(text),
                  number >= minimum else {
                throw ControlUsageError("\(label) \(meaning ?? "must be a whole number"), got '\(text)'")
            }
            // The double nearest 2^64 - 1 is 2^64, one past every count: the largest double below it instead.
            return .number(min(Double(number), (0x1p64 as Double).nextDown))
        case .string:
            guard isPath else { return .string(text) }
            guard !text.isEmpty else { throw ControlUsageError("\(label) needs a \(metavar ?? "PATH")") }
            return .string(absolutePath(text))
        }
    }

    var metavar: String? {
        switch source {
        case .positional(let metavar), .option(_, let metavar): metavar
        case .flag, .directoryIdentity: nil
        }
    }
}

/// A command's words after the command words: positional words, flags and options with a value.
struct CommandLineArguments {
    private var positional: [String] = []
    private var flags: Set<String> = []
    private var options: [String: String] = [:]
    private let command: ControlCommand

    init(_ words: [String], for command: ControlCommand) throws(ControlUsageError) {
        self.command = command
        var knownFlags = Set(command.localFlags)
        var knownOptions: Set<String> = []
        var positionals = 0...0
        for argument in command.arguments {
            switch argument.source {
            case .positional:
                positionals = (positionals.lowerBound + (argument.required ? 1 : 0))...(positionals.upperBound + 1)
            case .flag(let flag): knownFlags.insert(flag)
            case .option(let option, _): knownOptions.insert(option)
            case .directoryIdentity: break
            }
        }
        var iterator = words.makeIterator()
        while let word = iterator.next() {
            if knownFlags.contains(word) {
                flags.insert(word)
            } else if knownOptions.contains(word) {
                guard let value = iterator.next() else { throw ControlUsageError("\(word) needs a value") }
                options[word] = value
            } else if let equals = word.firstIndex(of: "="), knownOptions.contains(String(word[..<equals])) {
                options[String(word[..<equals])] = String(word[word.index(after: equals)...])
            } else if word.hasPrefix("-") && word.count > 1 {
                throw ControlUsageError("unknown option '\(word)'")
            } else {
                positional.append(word)
            }
        }
        guard positionals.contains(positional.count) else {
            throw ControlUsageError(positional.count < positionals.lowerBound ? "missing arguments" : "too many arguments")
        }
    }

    /// The text given for `argument`, or nil.
    func text(of argument: ControlArgument) -> String? {
        switch argument.source {
        case .positional:
            let index = command.arguments.prefix { $0.member != argument.member }.filter {
                if case .positional = $0.source { return true } else { return false }
            }.count
            return index < positional.count ? positional[index] : nil
        case .flag(let flag): return flags.contains(flag) ? "" : nil
        case .option(let option, _): return options[option]
        case .directoryIdentity: return nil
        }
    }
}

/// `path` made absolute against the current directory (the daemon's is another).
public func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    guard let cwd = getcwd(nil, 0) else { return path }
    defer { free(cwd) }
    return String(cString: cwd) + "/" + path
}
