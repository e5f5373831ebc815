// Running the real binaries from a test: where they are, and a bounded run that captures output.

import Foundation
import Testing

/// The directory that holds the built products (netlifed, netlifectl) next to the test bundle.
let productsDirectory: String = {
    let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var url = URL(fileURLWithPath: executable).deletingLastPathComponent()
    // On Linux the test bundle is an executable in the products directory itself.
    if url.lastPathComponent.hasSuffix(".xctest") { url = url.deletingLastPathComponent() }
    return url.path
}()

/// The path of a built product, such as `netlifed`.
func product(_ name: String) -> String {
    let path = productsDirectory + "/" + name
    precondition(FileManager.default.isExecutableFile(atPath: path), "\(path) is missing: run `swift build` first")
    return path
}

/// What a finished process printed and how it ended.
struct ProcessResult: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
}

/// A scratch directory removed by `remove()`.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String

    init() {
        var template = Array("/tmp/netlife-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func write(_ name: String, _ text: String) {
        _ = FileManager.default.createFile(atPath: file(name), contents: Data(text.utf8))
    }

    func read(_ name: String) -> String {
        (try? String(contentsOfFile: file(name), encoding: .utf8)) ?? ""
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Runs a program to completion (killing it after `timeout`) and captures its output.
func run(_ arguments: [String], environment: [String: String]? = nil, timeout: TimeInterval = 20) -> ProcessResult {
    let scratch = TemporaryDirectory()
    defer { scratch.remove() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: arguments[0])
    process.arguments = Array(arguments.dropFirst())
    if let environment { process.environment = environment }
    _ = FileManager.default.createFile(atPath: scratch.file("out"), contents: nil)
    _ = FileManager.default.createFile(atPath: scratch.file("err"), contents: nil)
    process.standardOutput = FileHandle(forWritingAtPath: scratch.file("out"))
    process.standardError = FileHandle(forWritingAtPath: scratch.file("err"))
    process.standardInput = FileHandle.nullDevice
    do {
        try process.run()
    } catch {
        return ProcessResult(status: -1, stdout: "", stderr: "cannot run \(arguments[0]): \(error)")
    }
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(2000) }
    if process.isRunning {
        process.terminate()
        usleep(100_000)
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return ProcessResult(status: -2, stdout: scratch.read("out"), stderr: "timed out after \(timeout)s\n" + scratch.read("err"))
    }
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, stdout: scratch.read("out"), stderr: scratch.read("err"))
}

/// Polls `condition` every 5 ms until it holds or `timeout` passes.
@discardableResult
func waitUntil(timeout: TimeInterval = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(5000)
    }
    return condition()
}

/// A program started in the background, waited for later.
final class BackgroundProcess {
    private let process = Process()
    private let scratch = TemporaryDirectory()
    let started = Date()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        _ = FileManager.default.createFile(atPath: scratch.file("out"), contents: nil)
        _ = FileManager.default.createFile(atPath: scratch.file("err"), contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: scratch.file("out"))
        process.standardError = FileHandle(forWritingAtPath: scratch.file("err"))
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }

    /// What it has written to stdout so far.
    var output: String { scratch.read("out") }

    /// Waits for the program (killing it after `timeout`); returns its result and how long it ran.
    func wait(timeout: TimeInterval = 20) -> (result: ProcessResult, elapsed: TimeInterval) {
        defer { scratch.remove() }
        if !waitUntil(timeout: timeout, { !process.isRunning }) {
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        let elapsed = Date().timeIntervalSince(started)
        return (ProcessResult(status: process.terminationStatus, stdout: scratch.read("out"), stderr: scratch.read("err")), elapsed)
    }
}

/// Whether process `pid` is gone (or a zombie).
func processIsGone(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return true }
    return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
}
