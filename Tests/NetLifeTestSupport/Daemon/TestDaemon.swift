#if canImport(Testing)   // built only for the tests: see Package.swift
// A real netlifed started for one test: its own directory, config, control socket and notify socket; ready
// when it sends READY=1; driven with the real netlifectl; always stopped (and its directory removed).
// Stopping it checks how it ended: exit 0 after SIGTERM unless the test declared otherwise. Under a
// sanitizer (scripts/test-sanitized) the daemon runs with halt_on_error and exit code 66, so that a report
// from the daemon fails the test that started it, with the report (in the daemon's log) in the issue.

import Foundation
import Testing

/// Receives sd_notify datagrams, as systemd would: a thread reads them as they come.
public final class NotifyReceiver: @unchecked Sendable {
    /// The socket's path, for NOTIFY_SOCKET.
    public let path: String
    private let fd: Int32
    private let lock = NSLock()
    private var received: [String] = []
    private var closed = false

    /// Binds the socket at `path` and starts reading.
    public init(path: String) {
        self.path = path
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        precondition(withUnixAddress(path, { bind(fd, $0, $1) }) == 0, "cannot bind the notify socket \(path)")
        Thread { [self] in readLoop() }.start()
    }

    private func readLoop() {
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 50)
            if lock.withLock({ closed }) { return }
            guard ready > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            guard count > 0 else { continue }
            let message = String(decoding: buffer[0..<count], as: UTF8.self)
            lock.withLock { received.append(message) }
        }
    }

    /// Every datagram received so far.
    public var messages: [String] { lock.withLock { received } }

    /// Waits until a datagram containing `text` has arrived, or `timeout` passes.
    @discardableResult
    public func wait(for text: String, timeout: TimeInterval = 10) -> Bool {
        waitUntil(timeout: timeout) { messages.contains { $0.contains(text) } }
    }

    /// Stops reading and closes the socket.
    public func close() {
        lock.withLock { closed = true }
        usleep(60_000)
        Foundation.close(fd)
    }
}

/// How a test expects its daemon to end.
public enum ExpectedEnd: Equatable {
    /// Exit status 0 after SIGTERM (the default).
    case cleanExit
    /// Death by this signal (the loop-stall watchdog aborts: SIGABRT).
    case signal(Int32)
    /// Anything: the test kills the daemon itself or does not care.
    case anything
}

/// A netlifed under test.
public final class TestDaemon {
    /// The daemon's own directory: config, control and notify sockets, log.
    public let directory = TemporaryDirectory()
    /// The control socket's path.
    public let controlPath: String
    /// The config file's path.
    public let configPath: String
    /// The daemon's sd_notify messages.
    public let notify: NotifyReceiver
    private let process = Process()
    private var stopped = false
    /// How the daemon should end; `stop()` records an issue otherwise.
    public var expectedEnd: ExpectedEnd

    /// Starts netlifed with `config` (a full config text) and waits for READY=1.
    public init(config: String, environment extra: [String: String] = [:], waitForReady: Bool = true,
         launcher: [String] = [], executable: String? = nil, expectedEnd: ExpectedEnd = .cleanExit,
         sourceLocation: SourceLocation = #_sourceLocation) throws {
        self.expectedEnd = expectedEnd
        controlPath = directory.file("control/control.sock")
        configPath = directory.file("netlifed.conf")
        directory.write("netlifed.conf", config)
        notify = NotifyReceiver(path: directory.file("notify.sock"))
        var environment = sanitizerEnvironment(base: ProcessInfo.processInfo.environment)
        environment["NOTIFY_SOCKET"] = notify.path
        environment["SWIFT_BACKTRACE"] = "enable=no"
        // libcurl reads proxies from netlifed's environment: a test's transfers go where the test says, not
        // through a proxy the machine running the tests happens to set.
        for name in ["http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy"] {
            environment[name] = nil
            environment[name.uppercased()] = nil
        }
        for (key, value) in extra { environment[key] = value }
        let arguments = [executable ?? product("netlifed"), "--config", configPath, "--control", controlPath, "--log-level", "debug"]
        process.executableURL = URL(fileURLWithPath: launcher.first ?? arguments[0])
        process.arguments = Array((launcher + arguments).dropFirst())
        process.environment = environment
        _ = FileManager.default.createFile(atPath: directory.file("netlifed.log"), contents: nil)
        let log = FileHandle(forWritingAtPath: directory.file("netlifed.log"))
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        if waitForReady {
            let deadline = Date().addingTimeInterval(15)
            while !notify.wait(for: "READY=1", timeout: 0.05) && process.isRunning && Date() < deadline {}
            if !notify.wait(for: "READY=1", timeout: 0) {
                Issue.record("netlifed did not send READY=1; log:\n\(self.log)", sourceLocation: sourceLocation)
            }
        }
    }

    /// The daemon's pid.
    public var pid: Int32 { process.processIdentifier }
    /// Whether the daemon still runs.
    public var isRunning: Bool { process.isRunning }
    /// What the daemon has logged so far (stdout and stderr).
    public var log: String { directory.read("netlifed.log") }
    /// The exit status or the signal that ended it (once it has ended).
    public var exitStatus: Int32 { process.terminationStatus }

    /// Runs netlifectl against this daemon.
    public func ctl(_ arguments: String..., timeout: TimeInterval = 20) -> ProcessResult {
        ctl(arguments, timeout: timeout)
    }

    /// Runs netlifectl against this daemon with `arguments`.
    public func ctl(_ arguments: [String], timeout: TimeInterval = 20) -> ProcessResult {
        run([product("netlifectl"), "--control", controlPath] + arguments, timeout: timeout)
    }

    /// The JSON status of one app, parsed with Foundation (independently of the daemon's own JSON code).
    public func status(_ app: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any] {
        let result = ctl("--json", "status", app)
        // 5: the daemon is degraded (a listener that could not open); the reply is whole.
        guard result.status == 0 || result.status == 5,
              let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let apps = object["apps"] as? [[String: Any]], let first = apps.first else {
            Issue.record("status \(app) failed: \(result)", sourceLocation: sourceLocation)
            return [:]
        }
        return first
    }

    /// The state of an app.
    public func state(_ app: String) -> String? { status(app)["state"] as? String }

    /// Sends a signal to the daemon.
    public func signal(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// Waits for the daemon to exit; returns whether it did within `timeout`.
    @discardableResult
    public func waitForExit(timeout: TimeInterval = 10) -> Bool {
        waitUntil(timeout: timeout) { !process.isRunning }
    }

    /// How the daemon ended, in words: "exit status 0", "signal 6 (SIGABRT)".
    public var endDescription: String {
        switch process.terminationReason {
        case .exit:
            let status = process.terminationStatus
            return "exit status \(status)" + (status == sanitizerExitStatus ? " (a sanitizer report)" : "")
        case .uncaughtSignal:
            let number = process.terminationStatus
            return "signal \(number)" + (strsignal(number).map { " (\(String(cString: $0)))" } ?? "")
        @unknown default:
            return "status \(process.terminationStatus)"
        }
    }

    /// Whether the daemon ended as `expectedEnd` says.
    private var endedAsExpected: Bool {
        switch expectedEnd {
        case .anything: true
        case .cleanExit: process.terminationReason == .exit && process.terminationStatus == 0
        case .signal(let number): process.terminationReason == .uncaughtSignal && process.terminationStatus == number
        }
    }

    /// Stops the daemon (SIGTERM, then SIGKILL after 10 s), checks that it ended as `expectedEnd` says
    /// (else records an issue with its log, which holds any sanitizer report), and removes its directory.
    public func stop(sourceLocation: SourceLocation = #_sourceLocation) {
        guard !stopped else { return }
        stopped = true
        var killed = false
        if process.isRunning {
            signal(SIGTERM)
            if !waitForExit(timeout: 10) {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                killed = true
                Issue.record("netlifed did not exit within 10 s of SIGTERM; log:\n\(log)", sourceLocation: sourceLocation)
            }
        }
        process.waitUntilExit()
        if !killed && !endedAsExpected {
            Issue.record("netlifed ended with \(endDescription), expected \(expectedEnd); log:\n\(log)", sourceLocation: sourceLocation)
        }
        notify.close()
        directory.remove()
    }
}
#endif
