// The lexical layer of the config: INI sections and `key = value` lines with their line numbers, like a
// systemd unit. Meaning is given in Configuration.swift.
//
// Comments, one rule for every value: a line whose first non-blank character is `#` or `;` is a comment, and
// so is the rest of a line from a `#` or `;` that follows whitespace (`budget = 5s   # why`). A `#` or `;`
// that follows anything else is part of the value (`_http._tcp#x`, a URL's fragment). `\#` and `\;` are a
// literal `#` and `;`. In a command-line value (hooks, `exec`, `environment`, `mdns-txt`) quotes and
// backslashes are the command line's own: a `#` inside '...' or "..." stays literal, and the words are split
// afterwards. systemd takes only whole-line comments; this is the rule most INI readers and the examples use.

/// A config error, printed as `FILE:LINE: message`.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var message: String
    /// The fault is in this host, not in the text (`ServiceOptionError.isAboutThisHost`).
    public var isAboutThisHost: Bool

    public init(file: String, line: Int, _ message: String, isAboutThisHost: Bool = false) {
        self.file = file
        self.line = line
        self.message = message
        self.isAboutThisHost = isAboutThisHost
    }

    public var description: String { "\(file):\(line): \(message)" }
}

/// One `key = value` line.
struct INIEntry: Equatable {
    var key: String
    var value: String
    var line: Int
}

/// One `[kind name]` section and its entries.
struct INISection: Equatable {
    /// The first word of the header: `daemon`, `app`, `listener`, `socket`.
    var kind: String
    /// The rest of the header, if any: `echo`, `echo.main`.
    var name: String?
    var line: Int
    var entries: [INIEntry] = []
    /// The file it is in (the main config, or one it includes).
    var file = ""
}

/// Splits a config text into sections, reporting every malformed line.
enum INIFile {
    /// - Parameter isCommandLine: whether a key's value is a command line (its quotes then protect a `#`).
    static func parse(_ text: String, file: String,
                      isCommandLine: (String) -> Bool = { _ in false }) -> (sections: [INISection], errors: [ConfigError]) {
        var sections: [INISection] = []
        var errors: [ConfigError] = []
        var lineNumber = 0
        // "\r\n" is one Character in Swift: a CRLF file splits on it too.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                let line = withoutComment(line[...], commandLine: false)
                guard line.hasSuffix("]") else {
                    errors.append(ConfigError(file: file, line: lineNumber, "section header without closing ']': \(line)"))
                    continue
                }
                let words = line.dropFirst().dropLast().split(separator: " ", omittingEmptySubsequences: true)
                guard let kind = words.first, words.count <= 2 else {
                    errors.append(ConfigError(file: file, line: lineNumber, "bad section header \(line): expected [KIND] or [KIND NAME]"))
                    continue
                }
                sections.append(INISection(kind: String(kind), name: words.count == 2 ? String(words[1]) : nil, line: lineNumber))
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                errors.append(ConfigError(file: file, line: lineNumber, "expected 'key = value' or a [section], got '\(line)'"))
                continue
            }
            let key = line[..<equals].trimmingWhitespace()
            let value = withoutComment(line[line.index(after: equals)...], commandLine: isCommandLine(key))
            guard !key.isEmpty else {
                errors.append(ConfigError(file: file, line: lineNumber, "missing key before '='"))
                continue
            }
            guard !sections.isEmpty else {
                errors.append(ConfigError(file: file, line: lineNumber, "'\(key)' is outside any section; start with [daemon] or [app NAME]"))
                continue
            }
            sections[sections.count - 1].entries.append(INIEntry(key: key, value: value, line: lineNumber))
        }
        for index in sections.indices { sections[index].file = file }
        return (sections, errors)
    }

    /// `text` (what follows a key's `=`, or a section header) up to its comment, trimmed. Outside a command
    /// line, `\#` and `\;` lose their backslash; in a command line every backslash and quote is kept for the
    /// splitter, which gives them their meaning. Linear in the text.
    static func withoutComment(_ text: Substring, commandLine: Bool) -> String {
        var result = ""
        var afterWhitespace = false
        var quote: Character?
        var iterator = text.makeIterator()
        while let character = iterator.next() {
            if let open = quote {
                result.append(character)
                if character == open {
                    quote = nil
                } else if open == "\"" && character == "\\", let escaped = iterator.next() {
                    result.append(escaped)
                }
                afterWhitespace = false
                continue
            }
            if (character == "#" || character == ";") && afterWhitespace { return result.trimmingWhitespace() }
            if character == "\\", let escaped = iterator.next() {
                if commandLine || (escaped != "#" && escaped != ";") { result.append(character) }
                result.append(escaped)
                afterWhitespace = false
                continue
            }
            if commandLine && (character == "'" || character == "\"") { quote = character }
            result.append(character)
            afterWhitespace = character.isWhitespace
        }
        return result.trimmingWhitespace()
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = lastIndex(where: { !$0.isWhitespace })!
        return String(self[first...last])
    }
}
