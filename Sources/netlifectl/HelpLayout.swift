// The SUBCOMMANDS list of netlifectl's help, laid out for the terminal as swift-argument-parser lays out its
// own: each usage in a column, its summary beside it and wrapped at the terminal's width (80 columns when
// standard output is not a terminal); a usage too wide for the column puts its summary on the lines below.

@preconcurrency import Glibc

enum HelpLayout {
    /// Where the summaries begin.
    static let summaryColumn = 30

    /// The width of the terminal on standard output: its columns, or 80 when it is not one (or is narrower
    /// than 60, where wrapping would help nobody).
    static var terminalWidth: Int {
        var size = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col >= 60 else { return 80 }
        return Int(size.ws_col)
    }

    /// One command: `  USAGE  SUMMARY`, the summary wrapped at `width` in its column.
    static func entry(usage: String, summary: String, width: Int) -> String {
        let indent = String(repeating: " ", count: summaryColumn)
        let lead = "  " + usage
        let summaryLines = wrap(summary, width: max(20, width - summaryColumn))
        if lead.count + 2 <= summaryColumn {
            let first = lead + String(repeating: " ", count: summaryColumn - lead.count) + (summaryLines.first ?? "")
            return ([first] + summaryLines.dropFirst().map { indent + $0 }).joined(separator: "\n")
        }
        // A usage wider than the terminal continues on lines indented under the command's name.
        let usageLines = wrap(usage, width: max(20, width - 6))
        let leads = ["  " + (usageLines.first ?? "")] + usageLines.dropFirst().map { "      " + $0 }
        return (leads + summaryLines.map { indent + $0 }).joined(separator: "\n")
    }

    /// `text` in lines of at most `width` characters, broken between words (a word longer than a line stands
    /// alone on its line).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }
}
