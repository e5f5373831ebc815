// The C library's file calls are made in one place: NetLifeEvent, whose FileDescriptor owns and closes each
// descriptor once, and whose opens add O_CLOEXEC, refuse links where asked and do not wait on a FIFO. A
// module above it that called open, openat, read, write, close, pread or pwrite itself would bypass all of
// that; each such call fails here as FILE:LINE. A method of the same name (`connection.write(`,
// `file.read(into:)`, a class's own `close()`) is not the C call: it is reached through a dot, takes labels,
// or takes another number of arguments. Comments and string literals are not code. NetLifeControl is left
// out: netlifectl links it alone, without NetLifeEvent, and its one socket is its own.

import Foundation
import NetLifeTestSupport
import Testing

enum RawFileCalls {
    /// The C functions, and how many arguments each takes.
    static let arity: [String: ClosedRange<Int>] = [
        "open": 2...3, "openat": 3...4, "read": 3...3, "write": 3...3, "close": 1...1, "pread": 4...4, "pwrite": 4...4,
    ]

    /// The source directories (under Sources/) that may call them.
    static let exempt: Set<String> = ["NetLifeEvent", "NetLifeControl"]

    /// The lines (from 1) of Swift source `text` that call one of the C functions, with the call.
    static func calls(in text: String) -> [(line: Int, call: String)] {
        let code = Array(codeOnly(text))
        var found: [(line: Int, call: String)] = []
        var line = 1
        var index = 0
        while index < code.count {
            if code[index] == "\n" { line += 1 }
            if let (name, qualified, end) = callName(code, at: index),
               let arguments = arguments(code, from: end),
               qualified || (arity[name]?.contains(arguments.count) == true && !arguments.contains(where: isLabeled)) {
                found.append((line, (qualified ? "Glibc." : "") + name + "("))
            }
            index += 1
        }
        return found
    }

    /// The name of a C function whose call starts at `index` (at a word's first letter, after the start of a
    /// line, a space or an operator, not after a dot unless `Glibc.`, and not a declaration), whether it is
    /// written `Glibc.NAME`, and the index of its `(`.
    private static func callName(_ code: [Character], at index: Int) -> (String, Bool, Int)? {
        guard "Goprwc".contains(code[index]) else { return nil }
        var start = index
        var qualified = false
        let glibc = Array("Glibc.")
        if index + glibc.count <= code.count, Array(code[index..<index + glibc.count]) == glibc {
            start = index + glibc.count
            qualified = true
        }
        if index > 0 {
            let before = code[index - 1]
            guard before.isWhitespace || "(=!,[{:;?&|<>+-*/%^~".contains(before) else { return nil }
        }
        var end = start
        while end < code.count, code[end].isLetter { end += 1 }
        guard end < code.count, code[end] == "(" else { return nil }
        let name = String(code[start..<end])
        guard arity[name] != nil else { return nil }
        // `func close(`, `case write(`: declarations, not calls.
        let preceding = String(code[max(0, index - 12)..<index])
        if preceding.range(of: #"\b(func|case)\s+$"#, options: .regularExpression) != nil { return nil }
        return (name, qualified, end)
    }

    /// The top-level arguments of the call whose `(` is at `open`; nil when it never closes.
    private static func arguments(_ code: [Character], from open: Int) -> [String]? {
        var depth = 0
        var current = ""
        var result: [String] = []
        for index in open..<code.count {
            let character = code[index]
            switch character {
            case "(", "[", "{":
                depth += 1
                if depth == 1 { continue }
            case ")", "]", "}":
                depth -= 1
                if depth == 0 {
                    let last = current.trimmingCharacters(in: .whitespacesAndNewlines)
                    if !last.isEmpty || !result.isEmpty { result.append(last) }
                    return result
                }
            case "," where depth == 1:
                result.append(current.trimmingCharacters(in: .whitespacesAndNewlines))
                current = ""
                continue
            default:
                break
            }
            current.append(character)
        }
        return nil
    }

    /// Whether an argument carries a label (`to: x`): C functions take none.
    private static func isLabeled(_ argument: String) -> Bool {
        argument.range(of: #"^[A-Za-z_][A-Za-z0-9_]*\s*:(?!:)"#, options: .regularExpression) != nil
    }

    /// `text` with comments and the insides of string literals blanked (newlines kept, so lines keep their
    /// numbers).
    static func codeOnly(_ text: String) -> String {
        let characters = Array(text)
        var out: [Character] = []
        out.reserveCapacity(characters.count)
        var index = 0
        var blockDepth = 0
        func blank(_ character: Character) -> Character { character == "\n" ? "\n" : " " }
        func at(_ string: String) -> Bool {
            let pattern = Array(string)
            return index + pattern.count <= characters.count && Array(characters[index..<index + pattern.count]) == pattern
        }
        while index < characters.count {
            if blockDepth > 0 {
                if at("/*") { blockDepth += 1; out += [" ", " "]; index += 2; continue }
                if at("*/") { blockDepth -= 1; out += [" ", " "]; index += 2; continue }
                out.append(blank(characters[index]))
                index += 1
            } else if at("/*") {
                blockDepth = 1
                out += [" ", " "]
                index += 2
            } else if at("//") {
                while index < characters.count, characters[index] != "\n" {
                    out.append(" ")
                    index += 1
                }
            } else if at("\"\"\"") {
                out += Array("\"\"\"")
                index += 3
                while index < characters.count, !at("\"\"\"") {
                    if characters[index] == "\\", index + 1 < characters.count {
                        out += [" ", blank(characters[index + 1])]
                        index += 2
                        continue
                    }
                    out.append(blank(characters[index]))
                    index += 1
                }
                if index < characters.count { out += Array("\"\"\""); index += 3 }
            } else if characters[index] == "\"" {
                out.append("\"")
                index += 1
                while index < characters.count, characters[index] != "\"", characters[index] != "\n" {
                    if characters[index] == "\\", index + 1 < characters.count {
                        out += [" ", blank(characters[index + 1])]
                        index += 2
                        continue
                    }
                    out.append(" ")
                    index += 1
                }
                if index < characters.count, characters[index] == "\"" { out.append("\""); index += 1 }
            } else {
                out.append(characters[index])
                index += 1
            }
        }
        return String(out)
    }

    /// Every raw call under `sources` outside the exempt directories, as `PATH:LINE: CALL`, PATH relative to
    /// the repository.
    static func violations(under sources: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: sources) else { return [] }
        var found: [String] = []
        while let path = walker.nextObject() as? String {
            guard path.hasSuffix(".swift"), let module = path.split(separator: "/").first,
                  !exempt.contains(String(module)),
                  let text = try? String(contentsOfFile: sources + "/" + path, encoding: .utf8) else { continue }
            for (line, call) in calls(in: text) { found.append("Sources/\(path):\(line): \(call)") }
        }
        return found.sorted()
    }
}

@Suite(.timeLimit(.minutes(1)))
struct FileCallBoundaryTests {
    @Test func theCheckFindsTheCCallsAndNotTheMethodsCommentsOrStrings() {
        let raw = """
            let fd = open(path, O_RDONLY)
            if read(fd, &buffer, 10) < 0 { return }
            defer { Glibc.close(fd) }
            _ = Glibc.write(fd, pointer, count)
            guard !write(fd, p, n).isMultiple(of: 2) else { return }
            let n = pread(fd, buffer, count,
                          offset)
            closeAll(); x = openat(AT_FDCWD, name, flags, 0o600)
            """
        #expect(RawFileCalls.calls(in: raw).map(\.line) == [1, 2, 3, 4, 5, 6, 8], "\(RawFileCalls.calls(in: raw))")
        let spared = """
            connection.write(bytes)
            try file.read(into: buffer)
            func close(cleanly: Bool) {
            func open() -> SystemError? {
            case write(DownloadRecord)
            close()
            open()
            write(response, keepAlive: true, head: head, connection)
            read(sections)
            // close(fd) when done; read(fd, buffer, 10) in the old way
            /* write(fd, p, n) */
            let text = "cannot open(path, flags) or close(fd)"
            let more = \"""
                read(fd, buffer, 10)
                \"""
            reopen(); disclose(x); overwrite(a, b, c)
            """
        #expect(RawFileCalls.calls(in: spared).isEmpty, "\(RawFileCalls.calls(in: spared))")
    }

    @Test func noModuleButNetLifeEventCallsTheCLibrarysFileCalls() {
        let sources = repositoryDirectory + "/Sources"
        #expect(FileManager.default.fileExists(atPath: sources + "/NetLifeServices/HTTP/HTTPService.swift"), "\(sources)")
        let found = RawFileCalls.violations(under: sources)
        if !found.isEmpty {
            let listed = found.joined(separator: "\n")
            Issue.record("open, read, write and close files through NetLifeEvent's FileDescriptor, RegularFile and FileCalls (a socket with SocketCalls.close):\n\(listed)")
        }
    }
}
