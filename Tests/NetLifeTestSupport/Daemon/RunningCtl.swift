#if canImport(Testing)   // built only for the tests: see Package.swift
// netlifectl started in the background against a TestDaemon, so that a test can signal it mid-command.

import Foundation

/// netlifectl started in the background, so that a test can signal it mid-command.
public final class RunningCtl {
    private let process: BackgroundProcess

    /// Starts `netlifectl --control` with the daemon's socket and `arguments`.
    public init(_ daemon: TestDaemon, _ arguments: [String]) throws {
        process = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath] + arguments)
    }

    /// Sends a signal to netlifectl.
    public func signal(_ signal: Int32) { process.signal(signal) }

    /// Waits for it to end (killing it after `timeout`) and returns what it printed.
    public func wait(timeout: TimeInterval = 20) -> ProcessResult { process.wait(timeout: timeout).result }
}
#endif
