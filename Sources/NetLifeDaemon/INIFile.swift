// The lexical layer of the config: INI sections and `key = value` lines with their line numbers, like a
// systemd unit. Comments are whole lines starting with `#` or `;`. Meaning is given in Configuration.swift.

/// A config error, printed as `FILE:LINE: message`.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var message: String

    public init(file: String, line: Int, _ message: String) {
        self.file = file
        self.line = line
        self.message = message
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
}

/// Splits a config text into sections, reporting every malformed line.
enum INIFile {
    static func parse(_ text: String, file: String) -> (sections: [INISection], errors: [ConfigError]) {
        var sections: [INISection] = []
        var errors: [ConfigError] = []
        var lineNumber = 0
        // "\r\n" is one Character in Swift: a CRLF file splits on it too.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
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
            let value = line[line.index(after: equals)...].trimmingWhitespace()
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
        return (sections, errors)
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = lastIndex(where: { !$0.isWhitespace })!
        return String(self[first...last])
    }
}
