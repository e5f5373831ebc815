// The value syntaxes of the config: durations (`250ms`, `5s`, `10m`, `1h`), booleans (`yes`/`no`), and
// command lines split into words as a shell would, without any expansion.

/// Parses config values; each function returns nil or throws a message for a bad value.
enum ConfigValues {
    /// `250ms`, `5s`, `10m`, `1h` (a whole number and a unit; `0` alone is allowed).
    static func duration(_ text: String) -> Duration? {
        Duration(configText: text)
    }

    /// A duration as the config writes it: the largest unit that divides it (`1h`, `90s`, `250ms`).
    static func format(_ duration: Duration) -> String {
        let milliseconds = duration.nanoseconds / 1_000_000
        if milliseconds == 0 { return "0" }
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)] where milliseconds % size == 0 {
            return "\(milliseconds / size)\(unit)"
        }
        return "\(milliseconds)ms"
    }

    /// `yes`/`no` (and, as systemd accepts them, `true`/`false`, `on`/`off`, `1`/`0`).
    static func boolean(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "yes", "true", "on", "1": return true
        case "no", "false", "off", "0": return false
        default: return nil
        }
    }

    /// Why a command line cannot be split.
    struct SplitError: Error, Equatable { var message: String }

    /// Splits a command line into words: blanks separate words; '...' is literal; "..." is literal except
    /// that a backslash escapes `"`, `\`, `$` and `` ` ``; outside quotes a backslash escapes any character.
    /// No variable expansion, no globbing.
    static func splitCommandLine(_ text: String) throws(SplitError) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var iterator = Array(text).makeIterator()
        while let character = iterator.next() {
            switch character {
            case " ", "\t":
                if inWord { words.append(current); current = ""; inWord = false }
            case "'":
                inWord = true
                var closed = false
                while let next = iterator.next() {
                    if next == "'" { closed = true; break }
                    current.append(next)
                }
                if !closed { throw SplitError(message: "unterminated single quote") }
            case "\"":
                inWord = true
                var closed = false
                while let next = iterator.next() {
                    if next == "\"" { closed = true; break }
                    if next == "\\" {
                        guard let escaped = iterator.next() else { break }
                        if !"\"\\$`".contains(escaped) { current.append("\\") }
                        current.append(escaped)
                        continue
                    }
                    current.append(next)
                }
                if !closed { throw SplitError(message: "unterminated double quote") }
            case "\\":
                guard let escaped = iterator.next() else { throw SplitError(message: "backslash at the end of the line") }
                inWord = true
                current.append(escaped)
            default:
                inWord = true
                current.append(character)
            }
        }
        if inWord { words.append(current) }
        return words
    }

    /// Whether `name` is usable as an app, listener or socket name: letters, digits, `-` and `_`.
    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") }
    }
}
