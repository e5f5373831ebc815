// Every configuration example shipped passes the real `netlifed --check-config`: each ```ini block of
// README.md and docs/*.md, and each Config/*.conf, as written. The paths an example names that the check
// needs to exist (an http root, an upload root, an IMAP password file, a working directory) are made in a
// private mount namespace, on overlays of their top directories, so that the host's /etc and /srv stay as
// they are and the example is checked with its own paths.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1)))
struct ConfigExamplesTests {
    static let repository = URL(fileURLWithPath: repositoryDirectory)

    /// Each ```ini block of a Markdown file, with the line it starts on.
    static func iniBlocks(of markdown: String) -> [(line: Int, text: String)] {
        var blocks: [(line: Int, text: String)] = []
        var current: (line: Int, lines: [String])?
        for (index, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if var block = current {
                if line.trimmingCharacters(in: .whitespaces) == "```" {
                    blocks.append((block.line, block.lines.joined(separator: "\n") + "\n"))
                    current = nil
                } else {
                    block.lines.append(String(line))
                    current = block
                }
            } else if line.trimmingCharacters(in: .whitespaces) == "```ini" {
                current = (index + 1, [])
            }
        }
        return blocks
    }

    /// The examples: (a name for messages, the text).
    static func examples() -> [(name: String, text: String)] {
        var examples: [(name: String, text: String)] = []
        var markdown = [repository.appendingPathComponent("README.md")]
        let docs = repository.appendingPathComponent("docs")
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []).sorted() where name.hasSuffix(".md") {
            markdown.append(docs.appendingPathComponent(name))
        }
        for file in markdown {
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            for block in iniBlocks(of: text) {
                examples.append(("\(file.lastPathComponent):\(block.line)", block.text))
            }
        }
        let config = repository.appendingPathComponent("Config")
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: config.path)) ?? []).sorted() where name.hasSuffix(".conf") {
            examples.append(("Config/\(name)", (try? String(contentsOf: config.appendingPathComponent(name), encoding: .utf8)) ?? ""))
        }
        return examples
    }

    /// Runs `netlifed --check-config` on `text` in a mount namespace of its own where the directories and
    /// files the text names exist.
    static func check(_ text: String, in directory: TemporaryDirectory, name: String) -> ProcessResult {
        let file = directory.file(name.replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: ":", with: "_"))
        _ = FileManager.default.createFile(atPath: file, contents: Data(text.utf8))
        var directories: [String] = []
        var files: [String] = []
        var certificates: [String] = []
        var keys: [String] = []
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let path = parts[1].split(separator: " ").first.map(String.init), path.hasPrefix("/") else { continue }
            switch parts[0] {
            case "root", "upload-root", "working-directory": directories.append(path)
            case "access-log": directories.append(String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]))
            case "password-file": files.append(path)
            case "tls-certificate": certificates.append(path)
            case "tls-key": keys.append(path)
            default: break
            }
        }
        // A certificate and its key where an example names them (--check-config reads and matches them).
        if !certificates.isEmpty || !keys.isEmpty {
            _ = run(["/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                     "-subj", "/CN=example", "-keyout", directory.file("example.key"), "-out", directory.file("example.pem")], timeout: 30)
        }
        let tops = Set((directories + files + certificates + keys).compactMap { $0.split(separator: "/").first.map { "/" + $0 } }).sorted()
        let scratch = directory.file("ns")
        try? FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        var script = "set -e\nmount -t tmpfs tmpfs '\(scratch)'\n"
        for (index, top) in tops.enumerated() {
            script += "mkdir -p '\(scratch)/\(index)/up' '\(scratch)/\(index)/work'\n"
            script += "mount -t overlay overlay -o 'lowerdir=\(top),upperdir=\(scratch)/\(index)/up,workdir=\(scratch)/\(index)/work' '\(top)'\n"
        }
        for path in directories { script += "mkdir -p '\(path)'\n" }
        for path in files { script += "mkdir -p \"$(dirname '\(path)')\"\necho example-secret > '\(path)'\n" }
        for path in certificates { script += "mkdir -p \"$(dirname '\(path)')\"\ncp '\(directory.file("example.pem"))' '\(path)'\n" }
        for path in keys { script += "mkdir -p \"$(dirname '\(path)')\"\ncp '\(directory.file("example.key"))' '\(path)'\n" }
        script += "exec '\(product("netlifed"))' --check-config '\(file)'\n"
        return run(["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script])
    }

    @Test func everyShippedExamplePassesCheckConfig() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let examples = Self.examples()
        #expect(examples.count >= 5, "README's ini blocks and Config/netlifed.conf: \(examples.map(\.name))")
        for example in examples {
            let result = Self.check(example.text, in: directory, name: example.name)
            #expect(result.status == 0, "\(example.name):\n\(example.text)\n\(result)")
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
        let result = Self.check(text, in: directory, name: "budgets.conf")
        #expect(result.status == 0, "\(result)")
    }
}
