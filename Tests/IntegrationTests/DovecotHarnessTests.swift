// The Dovecot test helper proven with a plain socket client: greeting, LOGIN with the password file's
// password, SELECT INBOX, IDLE, a delivery seen as `* N EXISTS`, DONE, LOGOUT; the server's rawlog shows what
// the client sent after login (DONE after IDLE), one session per logged-in connection; a wrong password is
// refused without delay; and stop() leaves nothing listening or connected. Without dovecot installed,
// Dovecot() throws and the tests fail saying so.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct DovecotHarnessTests {
    @Test func idleSeesADeliveryAndTheServerSeesDone() throws {
        let started = Date()
        let dovecot = try Dovecot()
        defer { dovecot.stop() }
        let startUp = Date().timeIntervalSince(started)
        let client = IMAPLineClient(try dovecot.connect())
        defer { client.close() }

        let password = try String(contentsOfFile: dovecot.passwordFile, encoding: .utf8)
        #expect(password.hasSuffix("\n") && password.dropLast().allSatisfy { $0 != "\n" }, "not one line: \(password.debugDescription)")
        let login = client.command("a1 LOGIN \(dovecot.user) \(password.trimmingCharacters(in: .newlines))")
        try #require(login.last?.hasPrefix("a1 OK") == true, "LOGIN: \(login)\nlog:\n\(dovecot.log)")
        let select = client.command("a2 SELECT INBOX")
        try #require(select.last?.hasPrefix("a2 OK") == true, "SELECT: \(select)\nlog:\n\(dovecot.log)")
        #expect(select.contains("* 0 EXISTS"), "SELECT: \(select)")

        client.send("a3 IDLE")
        let continuation = client.readLine()
        try #require(continuation?.hasPrefix("+") == true, "IDLE answered \(continuation ?? "nothing")")

        let delivered = Date()
        try dovecot.deliver(subject: "while idling")
        let exists = client.readLines(until: { $0.hasSuffix(" EXISTS") }, timeout: 5)
        let seenAfter = Date().timeIntervalSince(delivered)
        #expect(exists.last == "* 1 EXISTS", "after the delivery: \(exists)\nlog:\n\(dovecot.log)")

        let done = client.command("DONE", tag: "a3")
        #expect(done.last?.hasPrefix("a3 OK") == true, "DONE: \(done)")
        // DONE is in the rawlog by the time its reply arrived (the server logs what it reads before acting).
        let lines = dovecot.clientLines()
        #expect(lines == ["a2 SELECT INBOX", "a3 IDLE", "DONE"], "rawlog: \(lines)")

        let logout = client.command("a4 LOGOUT")
        #expect(logout.first == "* BYE Logging out" && logout.last?.hasPrefix("a4 OK") == true, "LOGOUT: \(logout)")
        #expect(client.readLine(timeout: 2) == nil, "the server did not close after LOGOUT")
        #expect(dovecot.clientLines().last == "a4 LOGOUT", "rawlog: \(dovecot.clientLines())")
        print(String(format: "dovecot: greeting %.0f ms after start, EXISTS %.0f ms after doveadm save began",
                     startUp * 1000, seenAfter * 1000))
    }

    @Test func eachLoggedInConnectionIsASessionAndPipelinedLinesAreRead() throws {
        let dovecot = try Dovecot()
        defer { dovecot.stop() }
        let password = try String(contentsOfFile: dovecot.passwordFile, encoding: .utf8).trimmingCharacters(in: .newlines)
        for round in 1...2 {
            let client = IMAPLineClient(try dovecot.connect())
            defer { client.close() }
            // LOGIN, SELECT and NOOP in one write: imap-login hands what follows LOGIN to the imap process.
            client.send("a1 LOGIN \(dovecot.user) \(password)\r\na2 SELECT INBOX\r\na3 NOOP")
            let replies = client.readLines(until: { $0.hasPrefix("a3 ") }, timeout: 5)
            #expect(replies.last?.hasPrefix("a3 OK") == true, "round \(round): \(replies)\nlog:\n\(dovecot.log)")
            // Sent without waiting for an answer before the close: poll until the server has read it.
            client.send("a4 LOGOUT")
            #expect(waitUntil(timeout: 5) { dovecot.clientSessions().count == round && dovecot.clientLines().last == "a4 LOGOUT" },
                    "round \(round): \(dovecot.clientSessions())")
        }
        #expect(dovecot.clientSessions() == Array(repeating: ["a2 SELECT INBOX", "a3 NOOP", "a4 LOGOUT"], count: 2))
    }

    @Test func aWrongPasswordIsRefusedAtOnce() throws {
        let dovecot = try Dovecot()
        defer { dovecot.stop() }
        let client = IMAPLineClient(try dovecot.connect())
        defer { client.close() }
        let started = Date()
        let login = client.command("a1 LOGIN \(dovecot.user) not-the-password")
        #expect(login.last?.hasPrefix("a1 NO") == true, "LOGIN: \(login)")
        #expect(Date().timeIntervalSince(started) < 1, "auth_failure_delay is not 0")
        #expect(dovecot.clientSessions().isEmpty)
    }

    @Test func stopEndsTheServerAndItsSessions() throws {
        let dovecot = try Dovecot()
        defer { dovecot.stop() }
        let client = IMAPLineClient(try dovecot.connect())
        defer { client.close() }
        let password = try String(contentsOfFile: dovecot.passwordFile, encoding: .utf8).trimmingCharacters(in: .newlines)
        let login = client.command("a1 LOGIN \(dovecot.user) \(password)")
        try #require(login.last?.hasPrefix("a1 OK") == true, "LOGIN: \(login)")
        let pid = dovecot.pid
        let stopping = Date()
        dovecot.stop()
        let stopTime = Date().timeIntervalSince(stopping)
        #expect(processIsGone(pid))
        #expect(!FileManager.default.fileExists(atPath: dovecot.directory.path))
        #expect(throws: DovecotError.self) { try dovecot.connect(timeout: 1).close() }
        // The logged-in session's imap process is gone too: its connection ends.
        let rest = client.readLines(until: { _ in false }, timeout: 2)
        #expect(client.ended, "the session outlived stop(); it sent \(rest)")
        print(String(format: "dovecot: stop() took %.0f ms", stopTime * 1000))
    }
}

/// A line-oriented IMAP client over a Peer: sends CRLF-terminated lines, reads lines with timeouts.
private final class IMAPLineClient {
    private let peer: Peer
    private var buffer: [UInt8] = []
    /// Whether the server closed the connection (or it failed).
    private(set) var ended = false

    init(_ peer: Peer) { self.peer = peer }

    func send(_ line: String) { peer.send(line + "\r\n") }

    /// The next line without its CRLF, or nil after `timeout` or at the end of the stream.
    func readLine(timeout: TimeInterval = 5) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                if line.hasSuffix("\r") { line.removeLast() }
                return line
            }
            guard !ended, Date() < deadline else { return nil }
            switch peer.read(timeout: max(0.01, deadline.timeIntervalSinceNow)) {
            case .bytes(let bytes): buffer += bytes
            case .endOfStream, .error: ended = true
            case .timedOut: break
            }
        }
    }

    /// Lines up to and including the first that satisfies `last` (all lines read if none did in time).
    func readLines(until last: (String) -> Bool, timeout: TimeInterval) -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        var lines: [String] = []
        while let line = readLine(timeout: max(0, deadline.timeIntervalSinceNow)) {
            lines.append(line)
            if last(line) { break }
        }
        return lines
    }

    /// Sends `line` and returns the replies up to its tagged one (the tag is the line's first word).
    func command(_ line: String, tag: String? = nil, timeout: TimeInterval = 5) -> [String] {
        let tag = tag ?? String(line.prefix { $0 != " " })
        send(line)
        return readLines(until: { $0.hasPrefix(tag + " ") }, timeout: timeout)
    }

    func close() { peer.close() }
}
