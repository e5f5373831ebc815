// What the hardening and abuse tests need beyond TestDaemon and Peer: a daemon's descriptor count, thread
// count and resident memory read from /proc/PID; a raw control-socket client that can pipeline, trickle,
// half-close and time round trips; the real port of a `127.0.0.1:0` listener read from `status`; and
// netlifectl started in the background so that a test can kill it mid-command.

import Foundation
import Testing

/// A process's resource use, read from /proc/PID.
struct ProcessProbe {
    let pid: Int32

    /// Open descriptors (entries of /proc/PID/fd).
    var descriptorCount: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// Threads (`Threads:` in /proc/PID/status).
    var threadCount: Int { statusField("Threads") ?? -1 }

    /// Resident memory in bytes (`VmRSS:` in /proc/PID/status, which the kernel gives in KiB).
    var residentBytes: Int { (statusField("VmRSS") ?? 0) * 1024 }

    /// The most resident memory the process has had, in bytes (`VmHWM:`, its high-water mark).
    var peakResidentBytes: Int { (statusField("VmHWM") ?? 0) * 1024 }

    private func statusField(_ name: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return Int(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }

    /// The descriptors' targets, for a message when the count does not come back.
    var descriptorTargets: [String] {
        let directory = "/proc/\(pid)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }.map {
            "\($0) -> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0)) ?? "?")
        }
    }
}

/// The descriptor and thread counts of a daemon at one moment, to compare with later.
struct ResourceBaseline {
    let descriptors: Int
    let threads: Int

    init(_ probe: ProcessProbe) {
        descriptors = probe.descriptorCount
        threads = probe.threadCount
    }
}

/// The median of some figures.
func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

/// A raw client of the control socket that does what an abuser would: pipeline without reading, trickle,
/// half-close, vanish. Replies are counted as lines; they are parsed only when asked for.
final class RawControlClient: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 256 * 1024)
    private var bufferStart = 0
    /// Whether the daemon closed the connection (read returned 0 or failed).
    private(set) var sawEnd = false

    init?(path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        if withUnixAddress(path, { connect(fd, $0, $1) }) != 0 { Foundation.close(fd); return nil }
    }

    /// Sends every byte (waiting up to `timeout` for room); returns how many went out.
    @discardableResult
    func send(_ bytes: [UInt8], timeout: TimeInterval = 10) -> Int {
        var offset = 0
        let deadline = Date().addingTimeInterval(timeout)
        while offset < bytes.count && Date() < deadline {
            let sent = bytes[offset...].withUnsafeBytes {
                Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if sent > 0 { offset += sent; continue }
            if sent < 0 && errno != EAGAIN && errno != EINTR { break }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&poller, 1, 50)
        }
        return offset
    }

    @discardableResult
    func send(_ text: String, timeout: TimeInterval = 10) -> Int { send(Array(text.utf8), timeout: timeout) }

    /// Reads what is there (waiting up to `timeout` for something); false at EOF, error or timeout.
    @discardableResult
    private func fill(timeout: TimeInterval) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(max(0, timeout) * 1000)) > 0 else { return false }
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count <= 0 {
            if count == 0 || (errno != EAGAIN && errno != EINTR) { sawEnd = true }
            return false
        }
        if bufferStart > 1 << 20 { buffer.removeSubrange(0..<bufferStart); bufferStart = 0 }
        buffer += chunk[0..<count]
        return true
    }

    /// The next reply line as raw bytes (without the newline), or nil at EOF or after `timeout`.
    func line(timeout: TimeInterval = 5) -> [UInt8]? {
        let deadline = Date().addingTimeInterval(timeout)
        // How far past `bufferStart` has been searched already (`fill` may move the buffer's start).
        var searched = 0
        while true {
            if let newline = buffer[(bufferStart + searched)...].firstIndex(of: 10) {
                let line = Array(buffer[bufferStart..<newline])
                bufferStart = newline + 1
                return line
            }
            searched = buffer.count - bufferStart
            if sawEnd || Date() >= deadline { return nil }
            fill(timeout: deadline.timeIntervalSinceNow)
        }
    }

    /// The next reply parsed with Foundation (independently of the daemon's JSON code).
    func reply(timeout: TimeInterval = 5) -> [String: Any]? {
        guard let line = line(timeout: timeout) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any]
    }

    /// Waits until the daemon closes the connection; true if it did within `timeout`. Lines that arrive
    /// meanwhile are kept for `remainingLines()`.
    /// Gives up (false) once more than `maxBytes` are buffered: a daemon that answers without end.
    func waitForEnd(timeout: TimeInterval, maxBytes: Int = 4 << 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !sawEnd && Date() < deadline && buffer.count - bufferStart <= maxBytes {
            fill(timeout: deadline.timeIntervalSinceNow)
        }
        return sawEnd
    }

    /// The complete lines received and not yet taken (at most `limit`; the rest are dropped).
    func remainingLines(limit: Int = 100) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        while lines.count < limit, let newline = buffer[bufferStart...].firstIndex(of: 10) {
            lines.append(Array(buffer[bufferStart..<newline]))
            bufferStart = newline + 1
        }
        buffer = []
        bufferStart = 0
        return lines
    }

    /// The last complete line received (the others not yet taken are dropped).
    func lastLine() -> [UInt8]? {
        let end = buffer.lastIndex(of: 10)
        defer { buffer = []; bufferStart = 0 }
        guard let end, end >= bufferStart else { return nil }
        let start = buffer[bufferStart..<end].lastIndex(of: 10).map { $0 + 1 } ?? bufferStart
        return Array(buffer[start..<end])
    }

    /// Sends `request` and returns the reply and the round trip in milliseconds.
    func roundTrip(_ request: String = "{\"cmd\":\"status\"}\n", timeout: TimeInterval = 5) -> (reply: [UInt8]?, ms: Double) {
        let start = DispatchTime.now().uptimeNanoseconds
        send(request)
        let reply = line(timeout: timeout)
        return (reply, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Closes with SO_LINGER 0: the daemon sees a reset, not a FIN.
    func reset() {
        var linger = Foundation.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Foundation.linger>.size))
        Foundation.close(fd)
    }

    func close() { Foundation.close(fd) }
}

/// The error code of a reply line, if it is an error.
func errorCode(of line: [UInt8]?) -> String? {
    guard let line, let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any] else { return nil }
    return errorCode(of: object)
}

func errorCode(of reply: [String: Any]?) -> String? {
    (reply?["error"] as? [String: Any])?["code"] as? String
}

/// Whether a reply line is `{"ok":true,...}`.
func isOK(_ line: [UInt8]?) -> Bool {
    guard let line, let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any] else { return false }
    return object["ok"] as? Bool == true
}

extension TestDaemon {
    /// Resource use of the daemon process.
    var probe: ProcessProbe { ProcessProbe(pid: pid) }

    /// The port a listener (bound to `127.0.0.1:0` in the config) really got, read from `netlifectl --json status`.
    func port(of app: String, listener: String = "main", sourceLocation: SourceLocation = #_sourceLocation) -> UInt16 {
        let listeners = status(app, sourceLocation: sourceLocation)["listeners"] as? [[String: Any]] ?? []
        guard let address = listeners.first(where: { $0["name"] as? String == listener })?["address"] as? String,
              let port = address.split(separator: ":").last.flatMap({ UInt16($0) }), port != 0 else {
            Issue.record("no port for listener \(app).\(listener) in status", sourceLocation: sourceLocation)
            return 0
        }
        return port
    }

    /// The state of an app, or nil when `status` fails (without recording an issue: for polling).
    func currentState(_ app: String) -> String? {
        let result = ctl("--json", "status", app)
        guard result.status == 0,
              let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let apps = object["apps"] as? [[String: Any]] else { return nil }
        return apps.first?["state"] as? String
    }

    /// Median and worst `status` round trip over `count` requests from a raw client, in milliseconds.
    func statusLatency(count: Int = 21, request: String = "{\"cmd\":\"status\"}\n") -> (median: Double, worst: Double, failures: Int) {
        guard let client = RawControlClient(path: controlPath) else { return (.infinity, .infinity, count) }
        defer { client.close() }
        var times: [Double] = []
        var failures = 0
        for _ in 0..<count {
            let (reply, ms) = client.roundTrip(request)
            if !isOK(reply) { failures += 1 }
            times.append(ms)
        }
        return (median(times), times.max() ?? .infinity, failures)
    }

    /// Checks that the daemon is alive, answers `status` in a few milliseconds, and that its descriptor and
    /// thread counts are back to `baseline` (after up to `settle` seconds).
    func expectHealthy(comparedTo baseline: ResourceBaseline?, settle: TimeInterval = 3, label: String,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(isRunning, "netlifed died during \(label); log tail:\n\(log.suffix(3000))", sourceLocation: sourceLocation)
        guard isRunning else { return }
        let latency = statusLatency()
        print("\(label): status round trip median \(String(format: "%.2f", latency.median)) ms, worst \(String(format: "%.2f", latency.worst)) ms")
        #expect(latency.failures == 0, "status failed \(latency.failures) times after \(label)", sourceLocation: sourceLocation)
        // The goal is 10 ms; the margin covers a loaded 2-core machine running debug builds.
        #expect(latency.median < 15 * slowdown, "status median \(latency.median) ms after \(label)", sourceLocation: sourceLocation)
        guard let baseline else { return }
        let probe = self.probe
        let settled = waitUntil(timeout: settle) {
            probe.descriptorCount <= baseline.descriptors && probe.threadCount <= baseline.threads
        }
        print("\(label): descriptors \(baseline.descriptors) -> \(probe.descriptorCount), threads \(baseline.threads) -> \(probe.threadCount)")
        #expect(settled, "descriptors \(baseline.descriptors) -> \(probe.descriptorCount), threads \(baseline.threads) -> \(probe.threadCount) after \(label):\n\(probe.descriptorTargets.joined(separator: "\n"))",
                sourceLocation: sourceLocation)
    }
}

/// netlifectl started in the background, so that a test can signal it mid-command.
final class RunningCtl {
    let process = Process()
    private let scratch = TemporaryDirectory()

    init(_ daemon: TestDaemon, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: product("netlifectl"))
        process.arguments = ["--control", daemon.controlPath] + arguments
        _ = FileManager.default.createFile(atPath: scratch.file("out"), contents: nil)
        _ = FileManager.default.createFile(atPath: scratch.file("err"), contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: scratch.file("out"))
        process.standardError = FileHandle(forWritingAtPath: scratch.file("err"))
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    func signal(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// Waits for it to end (killing it after `timeout`) and returns what it printed.
    func wait(timeout: TimeInterval = 20) -> ProcessResult {
        defer { scratch.remove() }
        if !waitUntil(timeout: timeout, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return ProcessResult(status: process.terminationStatus, stdout: scratch.read("out"), stderr: scratch.read("err"))
    }
}

/// An `[app NAME]` section with one echo listener on `127.0.0.1:0`.
func echoApp(_ name: String, appLines: String = "", listenerLines: String = "") -> String {
    """
    [app \(name)]
    \(appLines)

    [listener \(name).main]
    address = 127.0.0.1:0
    service = echo
    \(listenerLines)

    """
}

/// A TCP peer whose receive buffer is small and fixed (set before connect, so the kernel does not grow it):
/// what the daemon writes then piles up in its own buffers instead of the kernel's.
func connectSmallWindowPeer(port: UInt16, receiveBuffer: Int32 = 16384) -> Peer? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    var size = receiveBuffer
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard result == 0 else { close(fd); return nil }
    return Peer(fd: fd)
}

extension Peer {
    /// Sends all of `bytes`, waiting for room up to `timeout`; returns how many went out.
    func sendAll(_ bytes: [UInt8], timeout: TimeInterval = 10) -> Int {
        sendAllBytes(fd: fd, bytes, timeout: timeout)
    }

    /// Closes with SO_LINGER 0, so that the daemon sees a reset.
    func reset() {
        var linger = Foundation.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Foundation.linger>.size))
        Foundation.close(fd)
    }
}

/// Sends all of `bytes` on a socket, waiting for room up to `timeout`; returns how many went out.
func sendAllBytes(fd: Int32, _ bytes: [UInt8], timeout: TimeInterval) -> Int {
    var offset = 0
    let deadline = Date().addingTimeInterval(timeout)
    while offset < bytes.count && Date() < deadline {
        let sent = bytes[offset...].withUnsafeBytes {
            Foundation.send(fd, $0.baseAddress, min($0.count, 1 << 16), Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        if sent > 0 { offset += sent; continue }
        if sent < 0 && errno != EAGAIN && errno != EINTR { break }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        _ = poll(&poller, 1, 50)
    }
    return offset
}

/// The sanitizer the suite runs under (`scripts/test-sanitized` sets NETLIFE_SANITIZER), or nil.
let activeSanitizer = ProcessInfo.processInfo.environment["NETLIFE_SANITIZER"].flatMap { $0.isEmpty ? nil : $0 }

/// How much slower than a plain debug build the daemon runs: sanitized builds take several times the CPU
/// per request, so latency limits scale with this.
let slowdown: Double = activeSanitizer == nil ? 1 : 6

/// Whether RSS growth means anything: AddressSanitizer's quarantine holds freed memory on purpose (it grew a
/// daemon by 200+ MB in these tests), so under it the memory figures are printed but not judged.
let rssIsMeaningful = activeSanitizer != "address"
