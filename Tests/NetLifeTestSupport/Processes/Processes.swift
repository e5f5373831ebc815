#if canImport(Testing)   // built only for the tests: see Package.swift
// Running the real binaries and helper programs from a test: where the built products and the repository
// are, a bounded run that captures output, a program left running in the background, polling, and a flag
// one thread sets for another.

import Foundation

/// The directory that holds the built products (netlifed, netlifectl) next to the test bundle.
public let productsDirectory: String = {
    let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var url = URL(fileURLWithPath: executable).deletingLastPathComponent()
    // On Linux the test bundle is an executable in the products directory itself.
    if url.lastPathComponent.hasSuffix(".xctest") { url = url.deletingLastPathComponent() }
    return url.path
}()

/// The path of a built product, such as `netlifed`.
public func product(_ name: String) -> String {
    let path = productsDirectory + "/" + name
    precondition(FileManager.default.isExecutableFile(atPath: path), "\(path) is missing: run `swift build` first")
    return path
}

/// The repository's top directory (this file is Tests/NetLifeTestSupport/Processes/Processes.swift).
public let repositoryDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

/// What a finished process printed and how it ended.
public struct ProcessResult: CustomStringConvertible {
    /// The exit status (-1: it could not run, -2: it timed out and was killed).
    public var status: Int32
    /// What it printed on stdout.
    public var stdout: String
    /// What it printed on stderr.
    public var stderr: String
    /// The text a test failure shows.
    public var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// A result with these parts.
    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }
}

/// Why a helper (a server, a proxy, a build) could not be set up: the test fails with this message.
public struct TestFailure: Error, CustomStringConvertible {
    /// The text a test failure shows.
    public let description: String
    /// An error that says `description`.
    public init(_ description: String) { self.description = description }
}

/// Runs a program to completion and captures its output. After `timeout` its whole process group is killed
/// (a script's children too) and the result says so.
public func run(_ arguments: [String], environment: [String: String]? = nil, timeout: TimeInterval = 20) -> ProcessResult {
    let scratch = TemporaryDirectory()
    defer { scratch.remove() }
    let child: SpawnedProgram
    do {
        child = try SpawnedProgram(arguments, output: scratch.file("out"), errors: scratch.file("err"), environment: environment)
    } catch {
        return ProcessResult(status: -1, stdout: "", stderr: "\(error)")
    }
    let (status, timedOut) = child.wait(timeout: timeout)
    if timedOut {
        return ProcessResult(status: -2, stdout: scratch.read("out"), stderr: "timed out after \(timeout)s\n" + scratch.read("err"))
    }
    return ProcessResult(status: status, stdout: scratch.read("out"), stderr: scratch.read("err"))
}

/// Polls `condition` every `interval` (5 ms) until it holds or `timeout` passes.
@discardableResult
public func waitUntil(timeout: TimeInterval = 5, every interval: TimeInterval = 0.005, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(useconds_t(interval * 1_000_000))
    }
    return condition()
}

/// A program started in the background (in a process group of its own), waited for later.
public final class BackgroundProcess {
    private let child: SpawnedProgram
    private let scratch = TemporaryDirectory()
    /// When it was started.
    public let started = Date()

    /// Starts `arguments[0]` (a path) with the rest as arguments, output captured.
    public init(_ arguments: [String]) throws {
        do {
            child = try SpawnedProgram(arguments, output: scratch.file("out"), errors: scratch.file("err"))
        } catch {
            scratch.remove()
            throw error
        }
    }

    /// Whether it still runs.
    public var isRunning: Bool { child.isRunning }

    /// What it has written to stdout so far.
    public var output: String { scratch.read("out") }

    /// Sends a signal to the program.
    public func signal(_ signal: Int32) { child.signal(signal) }

    /// Waits for the program (killing its process group after `timeout`); returns its result and how long
    /// it ran.
    public func wait(timeout: TimeInterval = 20) -> (result: ProcessResult, elapsed: TimeInterval) {
        defer { scratch.remove() }
        let status = child.wait(timeout: timeout).status
        let elapsed = Date().timeIntervalSince(started)
        return (ProcessResult(status: status, stdout: scratch.read("out"), stderr: scratch.read("err")), elapsed)
    }

    /// Waits until the program has printed a port number on a line of its own (as the helper servers do
    /// once they listen), or it exits, or `timeout` passes; returns the port, 0 when none came.
    public func waitForPort(timeout: TimeInterval = 10) -> UInt16 {
        var port: UInt16 = 0
        _ = waitUntil(timeout: timeout) {
            port = UInt16(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            return port != 0 || !isRunning
        }
        return port
    }
}

/// Whether process `pid` is gone (or a zombie).
public func processIsGone(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return true }
    return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
}

/// Whether process `pid` exists and is not a zombie.
public func processIsLive(_ pid: Int32) -> Bool { !processIsGone(pid) }

/// Whether every process of group `pgid` is gone (or a zombie) within two seconds.
public func waitUntilGroupIsGone(_ pgid: pid_t) -> Bool {
    waitUntil(timeout: 2) {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return !entries.contains { entry in
            guard Int32(entry) != nil, let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // Fields after the command: state is 0, pgrp is 2.
            return fields.count > 2 && Int32(fields[2]) == pgid && fields[0] != "Z"
        }
    }
}

/// A flag one thread sets and another polls.
public final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    /// An unset flag.
    public init() {}

    /// Whether the flag was set.
    public var isSet: Bool { lock.withLock { value } }
    /// Sets the flag.
    public func set() { lock.withLock { value = true } }
}
#endif
