// How the sources are laid out, checked from the files themselves: inside each module the folders depend on
// one another without a cycle (a folder depends on another when one of its files names a type declared at the
// top level of the other's files), and docs/design.md's module and folder map names only folders and files
// that exist, and every folder of every module.

import Foundation
import Testing
import NetLifeTestSupport

private let sources = URL(fileURLWithPath: repositoryDirectory).appendingPathComponent("Sources")

/// The Swift files of `module`, by folder relative to the module ("" for its top), with their text.
private func swiftFiles(of module: String) -> [(folder: String, path: String, text: String)] {
    let root = sources.appendingPathComponent(module)
    guard let walker = FileManager.default.enumerator(atPath: root.path) else { return [] }
    var files: [(String, String, String)] = []
    for case let relative as String in walker where relative.hasSuffix(".swift") {
        let parts = relative.split(separator: "/")
        let folder = parts.count > 1 ? String(parts[0]) : ""
        let text = (try? String(contentsOf: root.appendingPathComponent(relative), encoding: .utf8)) ?? ""
        files.append((folder, relative, text))
    }
    return files
}

/// The code of a Swift text without its comments and string literals (a type named in a comment or a message
/// is no dependency).
private func code(_ text: String) -> String {
    text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
        var kept = ""
        var inString = false
        var previous: Character = " "
        for character in line {
            if !inString, character == "/", previous == "/" { kept.removeLast(); break }
            if character == "\"" { inString.toggle() } else if !inString { kept.append(character) }
            previous = character
        }
        return kept
    }.joined(separator: "\n")
}

/// Which folders of `module` each folder depends on.
func folderDependencies(of module: String) -> [String: Set<String>] {
    let files = swiftFiles(of: module)
    var declaredIn: [String: String] = [:]
    let declaration = try! Regex(#"^(?:public |final |internal |open )*(?:class|struct|enum|protocol|actor|typealias) ([A-Z][A-Za-z0-9_]*)"#)
    for file in files {
        for line in file.text.split(separator: "\n") {
            if let match = line.firstMatch(of: declaration), let name = match.output[1].substring {
                declaredIn[String(name), default: file.folder] = declaredIn[String(name)] ?? file.folder
            }
        }
    }
    var dependencies: [String: Set<String>] = [:]
    let identifier = try! Regex(#"\b[A-Z][A-Za-z0-9_]*\b"#)
    for file in files {
        dependencies[file.folder, default: []].formUnion([])
        for match in code(file.text).matches(of: identifier) {
            if let folder = declaredIn[String(match.output[0].substring ?? "")], folder != file.folder {
                dependencies[file.folder, default: []].insert(folder)
            }
        }
    }
    return dependencies
}

/// The cycles among `graph`'s nodes (its strongly connected components of more than one node).
func cycles(_ graph: [String: Set<String>]) -> [[String]] {
    var index: [String: Int] = [:], low: [String: Int] = [:], onStack: Set<String> = [], stack: [String] = []
    var found: [[String]] = []
    var next = 0
    func visit(_ node: String) {
        index[node] = next; low[node] = next; next += 1
        stack.append(node); onStack.insert(node)
        for target in graph[node] ?? [] {
            if index[target] == nil {
                visit(target)
                low[node] = min(low[node] ?? 0, low[target] ?? 0)
            } else if onStack.contains(target) {
                low[node] = min(low[node] ?? 0, index[target] ?? 0)
            }
        }
        guard low[node] == index[node] else { return }
        var component: [String] = []
        while let top = stack.popLast() {
            onStack.remove(top)
            component.append(top)
            if top == node { break }
        }
        if component.count > 1 { found.append(component.sorted()) }
    }
    for node in graph.keys.sorted() where index[node] == nil { visit(node) }
    return found
}

/// The Swift modules of Sources/ (the C system libraries have no Swift files).
private func modules() -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: sources.path)) ?? []).sorted().filter { !swiftFiles(of: $0).isEmpty }
}

/// The modules whose folders are layers: every one.
private let layeredModules = modules()

@Suite struct SourceLayoutTests {
    @Test(arguments: layeredModules)
    func theFoldersOfAModuleDependOnOneAnotherWithoutACycle(_ module: String) {
        let found = cycles(folderDependencies(of: module))
        #expect(found.isEmpty, "\(module): folders in a cycle: \(found.map { $0.map { $0.isEmpty ? "(top)" : $0 } })")
    }

    @Test func theCycleCheckFindsACycle() {
        #expect(cycles(["a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]]) == [["a", "b", "c"]])
        #expect(cycles(["a": ["b"], "b": [], "c": ["a", "b"]]).isEmpty)
    }

    /// docs/design.md's map: `Sources/MODULE` lines, then folders (`  Name/`) and files (`  Name.swift`) of
    /// that module at the start of their lines.
    @Test func theModuleMapOfTheDesignNotesNamesWhatExistsAndEveryFolder() throws {
        let design = try String(contentsOf: URL(fileURLWithPath: repositoryDirectory).appendingPathComponent("docs/design.md"), encoding: .utf8)
        guard let start = design.range(of: "## Module and folder map"),
              let block = design[start.upperBound...].split(separator: "```", omittingEmptySubsequences: false).dropFirst().first else {
            Issue.record("docs/design.md has no module map")
            return
        }
        var module: String?
        var named: [String: Set<String>] = [:]
        for line in block.split(separator: "\n") {
            if line.hasPrefix("Sources/") {
                let path = String(line.split(separator: " ")[0])
                // `Sources/CSystemd, CAvahi` names two.
                module = path.hasSuffix(",") ? nil : String(path.dropFirst("Sources/".count))
                if let module {
                    #expect(FileManager.default.fileExists(atPath: sources.appendingPathComponent(module).path), "the map names \(path)")
                }
            } else if line.hasPrefix("  "), !line.hasPrefix("   "), let module {
                let entry = String(line.dropFirst(2).split(separator: " ")[0])
                if entry.hasSuffix("/") {
                    let folder = String(entry.dropLast())
                    named[module, default: []].insert(folder)
                    var isDirectory: ObjCBool = false
                    let path = sources.appendingPathComponent(module).appendingPathComponent(folder).path
                    #expect(FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue,
                            "the map names \(module)/\(folder)/, which does not exist")
                }
            } else if !line.hasPrefix(" ") {
                module = nil
            }
        }
        for module in modules() {
            let folders = Set(swiftFiles(of: module).map(\.folder).filter { !$0.isEmpty })
            let missing = folders.subtracting(named[module] ?? [])
            #expect(missing.isEmpty, "docs/design.md's map does not name \(module)'s folders \(missing.sorted())")
        }
    }
}
