#if canImport(Testing)   // built only for the tests: see Package.swift
// A raw client of the control socket, for tests that do what an abuser would: pipeline without reading,
// trickle, half-close, vanish, and time round trips; and readers of the error code and `ok` of a reply line.

import Foundation

/// A raw client of the control socket that does what an abuser would: pipeline without reading, trickle,
/// half-close, vanish. Replies are counted as lines; they are parsed only when asked for.
public final class RawControlClient: @unchecked Sendable {
    /// The client's socket.
    public let fd: Int32
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 256 * 1024)
    private var bufferStart = 0
    /// Whether the daemon closed the connection (read returned 0 or failed).
    public private(set) var sawEnd = false

    /// Connects to the control socket at `path`; nil when the connect fails.
    public init?(path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        if withUnixAddress(path, { connect(fd, $0, $1) }) != 0 { Foundation.close(fd); return nil }
    }

    /// Sends every byte (waiting up to `timeout` for room); returns how many went out.
    @discardableResult
    public func send(_ bytes: [UInt8], timeout: TimeInterval = 10) -> Int {
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

    /// Sends all of `text` (waiting up to `timeout` for room); returns how many bytes went out.
    @discardableResult
    public func send(_ text: String, timeout: TimeInterval = 10) -> Int { send(Array(text.utf8), timeout: timeout) }

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
    public func line(timeout: TimeInterval = 5) -> [UInt8]? {
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
    public func reply(timeout: TimeInterval = 5) -> [String: Any]? {
        guard let line = line(timeout: timeout) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any]
    }

    /// Waits until the daemon closes the connection; true if it did within `timeout`. Lines that arrive
    /// meanwhile are kept for `remainingLines()`.
    /// Gives up (false) once more than `maxBytes` are buffered: a daemon that answers without end.
    public func waitForEnd(timeout: TimeInterval, maxBytes: Int = 4 << 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !sawEnd && Date() < deadline && buffer.count - bufferStart <= maxBytes {
            fill(timeout: deadline.timeIntervalSinceNow)
        }
        return sawEnd
    }

    /// The complete lines received and not yet taken (at most `limit`; the rest are dropped).
    public func remainingLines(limit: Int = 100) -> [[UInt8]] {
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
    public func lastLine() -> [UInt8]? {
        let end = buffer.lastIndex(of: 10)
        defer { buffer = []; bufferStart = 0 }
        guard let end, end >= bufferStart else { return nil }
        let start = buffer[bufferStart..<end].lastIndex(of: 10).map { $0 + 1 } ?? bufferStart
        return Array(buffer[start..<end])
    }

    /// Sends `request` and returns the reply and the round trip in milliseconds.
    public func roundTrip(_ request: String = "{\"cmd\":\"status\"}\n", timeout: TimeInterval = 5) -> (reply: [UInt8]?, ms: Double) {
        let start = DispatchTime.now().uptimeNanoseconds
        send(request)
        let reply = line(timeout: timeout)
        return (reply, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }

    /// Half-closes: the daemon sees the end of the requests.
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Closes with SO_LINGER 0: the daemon sees a reset, not a FIN.
    public func reset() {
        var linger = Foundation.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Foundation.linger>.size))
        Foundation.close(fd)
    }

    /// Closes the connection.
    /// Closes the socket once: a second close would close whatever descriptor another test has got since
    /// under the same number.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        Foundation.close(fd)
    }
    private var isClosed = false
}

/// The error code of a reply line, if it is an error.
public func errorCode(of line: [UInt8]?) -> String? {
    guard let line, let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any] else { return nil }
    return errorCode(of: object)
}

/// The error code of a parsed reply, if it is an error.
public func errorCode(of reply: [String: Any]?) -> String? {
    (reply?["error"] as? [String: Any])?["code"] as? String
}

/// Whether a reply line is `{"ok":true,...}`.
public func isOK(_ line: [UInt8]?) -> Bool {
    guard let line, let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any] else { return false }
    return object["ok"] as? Bool == true
}
#endif
