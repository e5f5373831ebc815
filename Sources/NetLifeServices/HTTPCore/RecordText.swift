// The text of netlife's small records (a download's part, an upload's resource and client): `key=value`
// lines with `\` escapes, shared by the http service and the transfers.

/// The `key=value` text of the small records (download parts, upload resources, upload clients), with `\` escapes.
enum RecordText {
    static let maxBytes = 16384
    /// The most bytes read of a record's file (each kind of record refuses a longer text itself).
    static let maxFileBytes = 1 << 16

    static func escaped(_ value: String) -> String {
        var result = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    static func unescaped(_ value: Substring) -> String? {
        var result = ""
        var escaping = false
        for scalar in value.unicodeScalars {
            if escaping {
                switch scalar {
                case "\\": result += "\\"
                case "n": result += "\n"
                case "r": result += "\r"
                default: return nil
                }
                escaping = false
            } else if scalar == "\\" {
                escaping = true
            } else if scalar == "\r" {
                return nil
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return escaping ? nil : result
    }

    /// The fields after `version`, each key among `keys` at most once; nil for anything else.
    static func fields(_ text: String, version: String, keys: Set<String>) -> [String: String]? {
        guard text.utf8.count <= maxBytes else { return nil }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        guard lines.first == Substring(version) else { return nil }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let equals = line.firstIndex(of: "="), let value = unescaped(line[line.index(after: equals)...]) else { return nil }
            let key = String(line[..<equals])
            guard keys.contains(key), fields.updateValue(value, forKey: key) == nil else { return nil }
        }
        return fields
    }
}
