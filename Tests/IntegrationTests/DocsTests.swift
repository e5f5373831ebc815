// The operator's pages: docs/configuration.md has a row for every config key and none for a key that does not
// exist, each under its section's heading with the values and default of its entry of the key table, and the
// annotated Config/netlifed.conf shows every key and no other (the keys: the daemon's key table and the
// built-in services' and protocols' option keys); docs/control-protocol.md names every netlifectl command
// (every option of its command table's entry in its row), every exit status and every request of the protocol;
// every relative link of README.md and docs/*.md leads to a path of the repository, and an anchor to a heading
// of the page it names; the netlifectl command lines the pages show are commands of the current netlifectl;
// README.md stays a short front page that keeps the two commands (.ci/run runs the second), a tour alias that
// is an absolute path, and links to the reference pages; and no file of the repository cites a document its
// reader cannot open (a contract, a style guide or source notes kept elsewhere, an issue tracker): each file
// states the rule it relies on, or points to the page of docs/ that does.

import Foundation
import NetLifeControl
import NetLifeDaemon
import Testing
import NetLifeTestSupport

private let root = URL(fileURLWithPath: repositoryDirectory)

/// The text of a file of the repository ("" when it cannot be read).
private func page(_ path: String) -> String {
    (try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)) ?? ""
}

/// README.md and every docs/*.md, as paths relative to the repository.
private func markdownPages() -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)) ?? []
    return ["README.md"] + names.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
}

/// A Markdown text split into what lies outside fenced code blocks (each such line kept, code lines made
/// empty, so that line numbers stay) and the fenced blocks themselves, with their info strings.
private func split(_ markdown: String) -> (prose: [String], blocks: [(info: String, lines: [String])]) {
    var prose: [String] = []
    var blocks: [(info: String, lines: [String])] = []
    var open: (info: String, lines: [String])?
    for line in markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if var block = open {
            if trimmed == "```" {
                blocks.append(block)
                open = nil
            } else {
                block.lines.append(line)
                open = block
            }
            prose.append("")
        } else if trimmed.hasPrefix("```") {
            open = (String(trimmed.dropFirst(3)), [])
            prose.append("")
        } else {
            prose.append(line)
        }
    }
    return (prose, blocks)
}

/// The first cell of each table row of `lines` (`| first | ...`), trimmed.
private func firstCells(_ lines: [String]) -> [String] {
    lines.filter { $0.hasPrefix("| ") }.compactMap { line in
        line.dropFirst(2).components(separatedBy: " |").first?.trimmingCharacters(in: .whitespaces)
    }
}

/// The lines under the heading `heading`, up to the next heading.
private func section(_ lines: [String], _ heading: String) -> [String] {
    guard let start = lines.firstIndex(of: heading) else { return [] }
    let end = lines[(start + 1)...].firstIndex { line in
        let hashes = line.prefix { $0 == "#" }.count
        return (1...6).contains(hashes) && line.dropFirst(hashes).hasPrefix(" ")
    } ?? lines.endIndex
    return Array(lines[(start + 1)..<end])
}

/// A table row's cells (`| a | b \| c |`: "a" and "b \| c"), trimmed; an escaped `|` stays in its cell.
private func cells(_ row: String) -> [String] {
    var cells: [String] = []
    var current = ""
    var escaped = false
    for character in row.drop(while: { $0 == " " }).dropFirst() {
        if character == "|", !escaped {
            cells.append(current.trimmingCharacters(in: .whitespaces))
            current = ""
        } else {
            current.append(character)
        }
        escaped = character == "\\"
    }
    return cells
}

/// The code spans of `text`: `a`, `b` in "`a` or `b`".
private func codeSpans(_ text: String) -> [String] {
    text.components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
}

/// The key rows of docs/configuration.md (a first cell that is one code span), each with its line, its cells
/// and the section whose heading (`## [daemon]`, `## [app NAME]`, ...) it is under (nil: another heading).
private func configurationKeyRows() -> [(line: Int, section: ConfigSection?, key: String, cells: [String])] {
    var rows: [(line: Int, section: ConfigSection?, key: String, cells: [String])] = []
    var section: ConfigSection?
    for (index, line) in split(page("docs/configuration.md")).prose.enumerated() {
        if line.hasPrefix("## ") {
            section = ConfigSection.allCases.first { "## " + $0.header == line }
        } else if line.hasPrefix("| `"), let first = cells(line).first, codeSpans(first).count == 1, first.hasPrefix("`"), first.hasSuffix("`") {
            rows.append((index + 1, section, codeSpans(first)[0], cells(line)))
        }
    }
    return rows
}

/// Why a values cell of docs/configuration.md does not say what `key` takes (nil: it does). A duration's or a
/// number's range (`10ms to 1h`, `0 to 24h, or \`never\``, `\`keepalive-min\` to 24h`, `a positive whole
/// number`), a boolean (`boolean`) and choices (each one a code span) are compared; the other values are prose.
private func valuesMismatch(_ key: ConfigKey, _ cell: String) -> String? {
    switch key.type {
    case .boolean:
        return cell == "boolean" ? nil : "'boolean'"
    case .choice(let words):
        return Set(codeSpans(cell)) == Set(words) ? nil : words.map { "`\($0)`" }.joined(separator: ", ")
    case .duration(let range, let off, let floor):
        let expected = (floor.map { "`\($0)`" } ?? format(range.lowerBound)) + " to " + format(range.upperBound)
            + (off.map { ", or `\($0)`" } ?? "")
        return cell == expected ? nil : "'\(expected)'"
    case .wholeNumber(let range, _, _):
        let expected = range.lowerBound == 1 ? "a positive whole number" : "\(range.lowerBound) to \(range.upperBound)"
        return cell == expected ? nil : "'\(expected)'"
    default:
        return nil
    }
}

/// Why a default cell of docs/configuration.md does not state `key`'s default (nil: it does). A cell that is one
/// code span must be the table's default; a cell in prose must name the table's default as a code span (task-time
/// names the one of each profile), and names none when the table has none (the default depends on the host or
/// the app: `netlifed's user`, `the app's name`, `none`).
private func defaultMismatch(_ key: ConfigKey, _ cell: String) -> String? {
    let spans = codeSpans(cell)
    let lone = spans.count == 1 && cell == "`\(spans[0])`"
    guard let expected = key.defaultValue else {
        return lone ? "none in the table" : nil
    }
    if lone { return spans[0] == expected ? nil : "`\(expected)`" }
    return spans.contains(expected) ? nil : "`\(expected)` among its words"
}

/// A duration as the config writes it: the largest unit that divides it (`1h`, `90s`, `250ms`, `0`).
private func format(_ duration: Duration) -> String {
    let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    if milliseconds == 0 { return "0" }
    for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)] where milliseconds % size == 0 {
        return "\(milliseconds / size)\(unit)"
    }
    return "\(milliseconds)ms"
}

enum MarkdownLinks {
    /// The targets of the inline links `[text](target)` of a page's prose, code spans left out.
    static func targets(_ markdown: String) -> [String] {
        var text = split(markdown).prose.joined(separator: "\n")
        // Code spans may hold `](`; a span may run over a line break.
        text = text.replacingOccurrences(of: "`[^`]*`", with: "``", options: .regularExpression)
        let expression = try! NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#)
        let range = NSRange(text.startIndex..., in: text)
        return expression.matches(in: text, range: range).compactMap { match in
            Range(match.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    /// The anchor GitHub gives a heading: lowercased, every character but letters, digits, spaces, `-` and `_`
    /// dropped, spaces made `-`.
    static func anchor(_ heading: String) -> String {
        let kept = heading.lowercased().unicodeScalars.filter {
            CharacterSet.alphanumerics.contains($0) || $0 == " " || $0 == "-" || $0 == "_"
        }
        return String(String.UnicodeScalarView(kept)).replacingOccurrences(of: " ", with: "-")
    }

    /// The anchors of a page's headings; a repeated one gets `-1`, `-2`, ... as on GitHub.
    static func anchors(_ markdown: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        for line in split(markdown).prose {
            let hashes = line.prefix { $0 == "#" }.count
            guard (1...6).contains(hashes), line.dropFirst(hashes).hasPrefix(" ") else { continue }
            let base = anchor(String(line.dropFirst(hashes + 1)).trimmingCharacters(in: .whitespaces))
            let count = seen[base, default: 0]
            seen[base] = count + 1
            anchors.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return anchors
    }
}

/// The repository's files, as paths relative to it: those git tracks, or, where git cannot say (no git, a copy
/// without its history), every file but git's and the build's own.
private func repositoryFiles() -> [String] {
    let listed = run(["/usr/bin/git", "-C", repositoryDirectory, "ls-files"])
    if listed.status == 0 {
        return listed.stdout.split(separator: "\n").map(String.init)
    }
    guard let walker = FileManager.default.enumerator(atPath: repositoryDirectory) else { return [] }
    var files: [String] = []
    while let path = walker.nextObject() as? String {
        if [".git", ".build", ".swiftpm"].contains((path as NSString).lastPathComponent) {
            walker.skipDescendants()
        } else if walker.fileAttributes?[.type] as? FileAttributeType == .typeRegular {
            files.append(path)
        }
    }
    return files
}

enum OutsideCitations {
    /// What cites a document outside the repository: the contract, the style guide and the recipes by file
    /// name; the contract by its name in capitals, as a whole word (a section of it, a number or an order of
    /// it, a table column named after it), so that AF_UNSPEC, AVAHI_IF_UNSPEC and IMAP's SPECIAL-USE are not
    /// taken for it; the source notes by their name followed by an apostrophe or a slash, so that random seeds
    /// and a fuzzer's seed inputs are not; and an issue by its number. Each pattern's first letter is in
    /// brackets, so that this file does not match itself.
    static func expression() -> NSRegularExpression {
        let patterns = [#"\b[S]PEC\b"#, #"(?i:\b[s]pec sections? [0-9])"#, #"\b[S]TYLE\.md"#, #"\b[R]ECIPES\.md"#,
                        #"\b[s]eeds['/]"#, #"\b[Ii]ssues? #?[0-9]"#]
        return try! NSRegularExpression(pattern: patterns.joined(separator: "|"))
    }

    /// The numbers (from 1) of the lines of `text` that cite a document outside the repository.
    static func lines(_ text: String, _ expression: NSRegularExpression) -> [Int] {
        text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().compactMap { index, line in
            let line = String(line)
            let found = expression.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil
            return found ? index + 1 : nil
        }
    }
}

@Suite(.timeLimit(.minutes(2)))
struct DocsTests {
    @Test func theConfigurationPageHasARowForEveryKeyAndOnlyForKeys() {
        let keys = configKeys()
        #expect(keys.count >= 60, "\(keys.sorted())")
        let rows = Set(firstCells(split(page("docs/configuration.md")).prose).filter { $0.hasPrefix("`") && $0.hasSuffix("`") }
            .map { String($0.dropFirst().dropLast()) })
        for key in keys.sorted() {
            #expect(rows.contains(key), "docs/configuration.md has no row for the key \(key)")
        }
        for row in rows.sorted() {
            #expect(keys.contains(row), "docs/configuration.md has a row for \(row), which is no config key")
        }
    }

    @Test func theConfigurationPageListsEachKeyInItsSectionWithItsValuesAndDefault() {
        let sections = configKeySections()
        let rows = configurationKeyRows()
        #expect(rows.count >= 60, "\(rows.map(\.key))")
        for row in rows {
            let place = "docs/configuration.md:\(row.line)"
            guard let section = row.section else {
                Issue.record("\(place): the row of \(row.key) is under no section's heading")
                continue
            }
            let belongs = sections[row.key, default: []]
            #expect(belongs.contains(section), "\(place): \(row.key) is listed under \(section.header), but it is a key of \(belongs.map(\.header).sorted())")
            guard let key = ConfigKey.named(row.key, in: section) else { continue }
            guard row.cells.count == 4 else {
                Issue.record("\(place): the row of \(row.key) has \(row.cells.count) cells, not key, meaning, values and default")
                continue
            }
            if let expected = valuesMismatch(key, row.cells[2]) {
                Issue.record("\(place): \(row.key) takes \(expected), not '\(row.cells[2])'")
            }
            if let expected = defaultMismatch(key, row.cells[3]) {
                Issue.record("\(place): \(row.key)'s default is \(expected), not '\(row.cells[3])'")
            }
        }
        for key in ConfigKey.all where !rows.contains(where: { $0.key == key.name && $0.section == key.section }) {
            Issue.record("docs/configuration.md has no row for \(key.name) under \(key.section.header)")
        }
    }

    @Test func theAnnotatedConfigShowsEveryKey() {
        let keys = configKeys()
        #expect(keys.isSuperset(of: ["control", "launch", "on-did-enter-background", "task-time", "exec", "adopt", "connect", "root", "mailbox"]),
                "\(keys.sorted())")
        let shown = annotatedConfigKeys()
        for key in keys.sorted() {
            #expect(shown.contains(key), "Config/netlifed.conf shows no line '\(key) =' nor '#\(key) ='")
        }
        for key in shown.subtracting(keys).sorted() {
            Issue.record("Config/netlifed.conf shows '\(key) =', which is no config key")
        }
    }

    @Test func theControlProtocolPageNamesEveryCommandExitStatusAndRequest() {
        let lines = split(page("docs/control-protocol.md")).prose
        let commands = netlifectlCommands()
        #expect(commands.count >= 20, "\(commands)")
        let cells = firstCells(lines)
        for words in commands {
            let name = "`netlifectl " + words.joined(separator: " ")
            #expect(cells.contains { $0.hasPrefix(name + " ") || $0.hasPrefix(name + "`") },
                    "docs/control-protocol.md has no row for netlifectl \(words.joined(separator: " "))")
        }
        let statuses = firstCells(section(lines, "### Exit statuses"))
        for status in 0...6 {
            #expect(statuses.contains(String(status)), "docs/control-protocol.md has no exit status \(status)")
        }
        // The requests as the daemon reads them: the wire names of the command table's entries.
        let source = page("Sources/NetLifeControl/ControlCommandTable.swift")
        let requests = source.components(separatedBy: "ControlCommand(\"").dropFirst().map { String($0.prefix { $0 != "\"" }) }
        #expect(requests.count >= 20, "\(requests)")
        let requestCells = firstCells(section(lines, "## Requests and replies"))
        for request in requests {
            #expect(requestCells.contains { $0.contains("`\(request)`") }, "docs/control-protocol.md has no request \(request)")
        }
    }

    @Test func theControlProtocolPageNamesEveryOptionOfEveryCommandInItsRow() {
        let rows = split(page("docs/control-protocol.md")).prose.filter { $0.hasPrefix("| `netlifectl ") }
        for command in ControlCommand.all {
            // The row whose first cell's command words are the command's (`transfers [APP]`, not `transfers cancel`).
            let row = rows.first { commandWords(String($0.dropFirst("| `netlifectl ".count).prefix { $0 != "`" })) == command.words }
            #expect(row != nil, "docs/control-protocol.md has no row for netlifectl \(command.words.joined(separator: " "))")
            for option in command.options {
                #expect(mentions(row ?? "", option: option.name),
                        "docs/control-protocol.md does not name \(option.name) in the row of netlifectl \(command.words.joined(separator: " "))")
            }
        }
    }

    @Test(arguments: markdownPages())
    func everyRelativeLinkLeadsToAPathOfTheRepository(_ path: String) {
        let markdown = page(path)
        #expect(!markdown.isEmpty)
        let directory = root.appendingPathComponent(path).deletingLastPathComponent()
        for target in MarkdownLinks.targets(markdown) where !target.contains("://") && !target.hasPrefix("mailto:") {
            let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let file = parts[0].isEmpty ? root.appendingPathComponent(path)
                : directory.appendingPathComponent(parts[0]).standardizedFileURL
            #expect(file.path.hasPrefix(root.standardizedFileURL.path + "/"), "\(path): \(target) leads out of the repository")
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory), "\(path): \(target) does not exist")
            if parts.count == 2, file.pathExtension == "md", !isDirectory.boolValue {
                let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
                #expect(MarkdownLinks.anchors(text).contains(parts[1]), "\(path): \(target): no heading with the anchor #\(parts[1])")
            }
        }
    }

    @Test func headingsGiveTheAnchorsGitHubGives() {
        #expect(MarkdownLinks.anchor("[listener APP.NAME]") == "listener-appname")
        #expect(MarkdownLinks.anchor("The control protocol's types") == "the-control-protocols-types")
        #expect(MarkdownLinks.anchor("The sandbox and ReadWritePaths") == "the-sandbox-and-readwritepaths")
        #expect(MarkdownLinks.anchors("# A\n\n## Notes\n```\n# not a heading\n```\n## Notes\n") == ["a", "notes", "notes-1"])
        #expect(MarkdownLinks.targets("[a](b.md) `[c](d.md)` [e](f.md#g)\n```\n[h](i.md)\n```\n") == ["b.md", "f.md#g"])
    }

    @Test(arguments: markdownPages())
    func theNetlifectlCommandLinesShownAreCommandsOfTheCurrentNetlifectl(_ path: String) {
        let commands = netlifectlCommands()
        #expect(!commands.isEmpty)
        for block in split(page(path)).blocks where ["console", "sh"].contains(block.info) {
            for line in block.lines where line.hasPrefix("$ ") {
                // Each command of the line: `sleep 1; netlifectl status echo | head -1`.
                let segments = line.dropFirst(2).components(separatedBy: "#")[0]
                    .components(separatedBy: CharacterSet(charactersIn: ";|&"))
                for segment in segments {
                    var words = segment.split(separator: " ").map(String.init)
                    guard words.first == "netlifectl" else { continue }
                    words.removeFirst()
                    while let first = words.first, first.hasPrefix("-") {
                        words.removeFirst(first == "--control" ? min(2, words.count) : 1)
                    }
                    #expect(commands.contains { words.starts(with: $0) }, "\(path): '\(line)' is no netlifectl command")
                }
            }
        }
    }

    @Test func theReadmeIsAShortFrontPageWithTheTwoCommandsAndAnAbsoluteAlias() {
        let readme = page("README.md")
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count < 250, "README.md has \(lines.count) lines")
        let code = split(readme).blocks.filter { $0.info == "sh" }.flatMap(\.lines)
        for command in ["scripts/install-deps && swift build && .build/debug/netlifed", "scripts/test"] {
            #expect(code.contains(command), "README.md has no line '\(command)' in a sh block")
        }
        let aliases = split(readme).blocks.flatMap(\.lines).filter { $0.hasPrefix("$ alias netlifectl=") }
        #expect(!aliases.isEmpty)
        for alias in aliases {
            let value = alias.dropFirst("$ alias netlifectl=".count)
            #expect(value.hasPrefix("\"$PWD/") || value.hasPrefix("/"), "not an absolute path: \(alias)")
        }
        for link in ["docs/configuration.md", "docs/control-protocol.md", "docs/operations.md", "docs/process-apps.md",
                     "docs/design.md", "docs/performance.md"] {
            #expect(MarkdownLinks.targets(readme).contains(link), "README.md does not link \(link)")
        }
    }

    @Test func noFileCitesADocumentOutsideTheRepository() {
        let expression = OutsideCitations.expression()
        // Each citation is written in two pieces, so that this file does not match itself.
        let cited = ["(SP" + "EC section 12)", "past SP" + "EC's 10 ms", "in SP" + "EC order", "| SP" + "EC p99 |",
                     "as RECI" + "PES.md suggests", "STY" + "LE.md", "the see" + "ds' path 2", "(see" + "ds/README.md)",
                     "Iss" + "ue 11's target", "(iss" + "ue 26)", "the sp" + "ec section 7"]
        for line in cited {
            #expect(OutsideCitations.lines(line, expression) == [1], "not taken for a citation: \(line)")
        }
        let spared = ["connect(fd, AF_UNSPEC)", "AVAHI_IF_UNSPEC", "AVAHI_PROTO_UNSPEC", "NOTIFY SPECIAL-USE]",
                      "patternBytes(100, seed: 3)", "valid seeds, random bytes", "the seeds in Fuzz/Corpus/TARGET",
                      "RFC 9110 section 14.2", "one range-spec resolved", "tissue 3"]
        for line in spared {
            #expect(OutsideCitations.lines(line, expression).isEmpty, "taken for a citation: \(line)")
        }
        let files = repositoryFiles()
        #expect(files.count > 300, "\(files.count) files found in \(repositoryDirectory)")
        var citations: [String] = []
        for file in files.sorted() {
            // A file that is not UTF-8 text (a fuzzer's binary input) reads as "".
            let text = page(file)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            for number in OutsideCitations.lines(text, expression) {
                citations.append("\(file):\(number): \(lines[number - 1].trimmingCharacters(in: .whitespaces))")
            }
        }
        if !citations.isEmpty {
            let listed = citations.joined(separator: "\n")
            Issue.record("state the rule instead, or point to the page of docs/ that states it:\n\(listed)")
        }
    }
}
