// Every configuration example shipped passes the real `netlifed --check-config` as an operator copies it:
// each ```ini block of README.md and docs/*.md, and each Config/*.conf, as written. The paths an example
// names that the check needs to exist (an http root, an upload root, an IMAP password file, a certificate)
// are made by the document's own commands, a ```sh setup block before the example, run as written in a
// private mount namespace, on overlays of the paths' top directories, so that the host's /etc and /srv stay
// as they are: an example whose setup is missing or wrong fails here as it would for the operator.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1)))
struct ConfigExamplesTests {
    static let repository = URL(fileURLWithPath: repositoryDirectory)

    /// The line that opens a setup block: a ```sh block whose first line it is holds the commands that make
    /// what the ```ini examples after it (in the same file) name.
    static let setupMarker = "# What the example"

    /// Each ```ini block of a Markdown file, with the line it starts on and the setup block before it, if any.
    static func iniBlocks(of markdown: String) -> [(line: Int, text: String, setup: String?)] {
        var blocks: [(line: Int, text: String, setup: String?)] = []
        var setup: String?
        var current: (line: Int, kind: Substring, lines: [String])?
        for (index, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if var block = current {
                if trimmed == "```" {
                    let text = block.lines.joined(separator: "\n") + "\n"
                    if block.kind == "ini" {
                        blocks.append((block.line, text, setup))
                    } else if block.lines.first?.hasPrefix(setupMarker) == true {
                        setup = text
                    }
                    current = nil
                } else {
                    block.lines.append(String(line))
                    current = block
                }
            } else if trimmed == "```ini" || trimmed == "```sh" {
                current = (index + 1, trimmed.dropFirst(3), [])
            }
        }
        return blocks
    }

    /// The examples: (a name for messages, the text, the commands that make what it names).
    static func examples() -> [(name: String, text: String, setup: String?)] {
        var examples: [(name: String, text: String, setup: String?)] = []
        var markdown = [repository.appendingPathComponent("README.md")]
        let docs = repository.appendingPathComponent("docs")
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []).sorted() where name.hasSuffix(".md") {
            markdown.append(docs.appendingPathComponent(name))
        }
        for file in markdown {
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            for block in iniBlocks(of: text) {
                examples.append(("\(file.lastPathComponent):\(block.line)", block.text, block.setup))
            }
        }
        let config = repository.appendingPathComponent("Config")
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: config.path)) ?? []).sorted() where name.hasSuffix(".conf") {
            examples.append(("Config/\(name)", (try? String(contentsOf: config.appendingPathComponent(name), encoding: .utf8)) ?? "", nil))
        }
        return examples
    }

    /// Runs the document's own setup commands, as an operator copies them, and then `netlifed --check-config`
    /// on `text`, in a mount namespace of its own: the top directories of the paths the example names are
    /// overlays there, so that what the commands make never reaches the host. `sudo` runs the command as is
    /// (the test is root).
    static func check(_ text: String, setup: String?, in directory: TemporaryDirectory, name: String) -> ProcessResult {
        let file = directory.file(name.replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: ":", with: "_"))
        _ = FileManager.default.createFile(atPath: file, contents: Data(text.utf8))
        var paths: [String] = []
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let path = parts[1].split(separator: " ").first.map(String.init), path.hasPrefix("/") else { continue }
            if ["root", "upload-root", "working-directory", "access-log", "password-file", "tls-certificate", "tls-key"].contains(parts[0]) {
                paths.append(path)
            }
        }
        // And what the setup commands name (they may make more than the example names, such as a
        // certificate's directory): every absolute path in them under a top directory of the host but
        // devices (`/CN=localhost`, a certificate's subject, is not one).
        for word in (setup ?? "").split(whereSeparator: { " \n\\".contains($0) }) where word.hasPrefix("/") && !word.hasPrefix("/dev/") {
            var isDirectory: ObjCBool = false
            if let top = word.split(separator: "/").first, FileManager.default.fileExists(atPath: "/" + top, isDirectory: &isDirectory), isDirectory.boolValue {
                paths.append(String(word))
            }
        }
        let tops = Set(paths.compactMap { $0.split(separator: "/").first.map { "/" + $0 } }).sorted()
        let scratch = directory.file("ns")
        try? FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        var script = "set -e\nmount -t tmpfs tmpfs '\(scratch)'\n"
        for (index, top) in tops.enumerated() {
            script += "mkdir -p '\(scratch)/\(index)/up' '\(scratch)/\(index)/work'\n"
            script += "mount -t overlay overlay -o 'lowerdir=\(top),upperdir=\(scratch)/\(index)/up,workdir=\(scratch)/\(index)/work' '\(top)'\n"
        }
        script += "sudo() { \"$@\"; }\n"
        script += setup ?? ""
        script += "exec '\(product("netlifed"))' --check-config '\(file)'\n"
        return run(["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script])
    }

    @Test func everyShippedExamplePassesCheckConfig() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let examples = Self.examples()
        #expect(examples.count >= 5, "README's ini blocks and Config/netlifed.conf: \(examples.map(\.name))")
        for example in examples {
            let result = Self.check(example.text, setup: example.setup, in: directory, name: example.name)
            #expect(result.status == 0, """
                \(example.name) fails as an operator copies it (the paths it names are made by a ```sh block \
                before it whose first line is "\(Self.setupMarker)..."):
                \(example.setup ?? "(no setup block)")\(example.text)\(result)
                """)
        }
    }

    @Test func theDefaultConfigsCommentedBudgetsPassUncommented() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let config = try String(contentsOf: Self.repository.appendingPathComponent("Config/netlifed.conf"), encoding: .utf8)
        var uncommented = 0
        let text = config.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard line.hasPrefix("#"), let key = line.dropFirst().split(separator: " ").first,
                  key.hasSuffix("-budget") || ["task-time", "expiration-lead", "expiration-grace"].contains(String(key)) else {
                return String(line)
            }
            uncommented += 1
            return String(line.dropFirst())
        }.joined(separator: "\n")
        #expect(uncommented >= 9, "the budget keys, each with a trailing comment")
        let result = Self.check(text, setup: nil, in: directory, name: "budgets.conf")
        #expect(result.status == 0, "\(result)")
    }
}
