// The value syntaxes of the config: durations (`250ms`, `5s`, `10m`, `1h`), booleans (`yes`/`no`), command
// lines split into words as a shell would, without any expansion, DNS-SD service types and users.

@preconcurrency import Glibc
import NetLife

/// Parses config values; each function returns nil or throws a message for a bad value.
enum ConfigValues {
    /// `250ms`, `5s`, `10m`, `1h` (a whole number and a unit; `0` alone is allowed).
    static func duration(_ text: String) -> Duration? {
        Duration(configText: text)
    }

    /// A duration as the config writes it: the largest unit that divides it (`1h`, `90s`, `250ms`).

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

    /// `a`, `a or b`, `a, b or c`.
    static func list(_ words: [String]) -> String {
        guard let last = words.last else { return "" }
        return words.count == 1 ? last : words.dropLast().joined(separator: ", ") + " or " + last
    }

    /// `_name._tcp`: a DNS-SD service type for a TCP listener (RFC 6335: 1 to 15 letters, digits and '-', not
    /// first or last).
    static func isServiceType(_ text: String) -> Bool {
        guard text.hasPrefix("_"), text.hasSuffix("._tcp") else { return false }
        let name = text.dropFirst().dropLast(5)
        return (1...15).contains(name.count) && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            && name.first != "-" && name.last != "-"
    }

    /// The user `name` in the user database, or nil. A uid or gid of -1 is refused: setresuid would read it
    /// as "unchanged".
    /// The corresponding C function is `getpwnam`.
    static func programUser(named name: String) -> ProgramUser? {
        guard !name.isEmpty, name.utf8.count <= 256, !name.contains("\0"), let entry = getpwnam(name),
              entry.pointee.pw_uid != uid_t.max, entry.pointee.pw_gid != gid_t.max else { return nil }
        return ProgramUser(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
    }
}
