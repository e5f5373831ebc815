#if canImport(Testing)   // built only for the tests: see Package.swift
// A scratch directory for one test, made with mkdtemp under /tmp and removed by the test (usually in a
// `defer`), with helpers to name, write and read the files in it.

import Foundation

/// Set once, by the first scratch directory (every test that talks to a peer makes one): the test process
/// ignores SIGPIPE, as netlifed and netlifectl do, so that a write to a pipe or socket whose reader has
/// gone (a child's stdin after it died, a peer cut off by the daemon) fails with EPIPE in that one test
/// instead of killing the whole run.
private let brokenPipesIgnored: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

/// A scratch directory removed by `remove()`.
public final class TemporaryDirectory: @unchecked Sendable {
    /// The directory's path.
    public let path: String

    /// Makes a fresh directory under /tmp.
    public init() {
        _ = brokenPipesIgnored
        var template = Array("/tmp/netlife-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The path of `name` in the directory.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Writes `text` to `name` (replacing it).
    public func write(_ name: String, _ text: String) {
        _ = FileManager.default.createFile(atPath: file(name), contents: Data(text.utf8))
    }

    /// Writes `bytes` to `name` (replacing it).
    public func write(_ name: String, bytes: [UInt8]) {
        _ = FileManager.default.createFile(atPath: file(name), contents: Data(bytes))
    }

    /// The text of `name`, "" when it cannot be read.
    public func read(_ name: String) -> String {
        (try? String(contentsOfFile: file(name), encoding: .utf8)) ?? ""
    }

    /// The bytes of `name`, nil when it cannot be read.
    public func readBytes(_ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: file(name)).map { [UInt8]($0) }
    }

    /// Removes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
#endif
