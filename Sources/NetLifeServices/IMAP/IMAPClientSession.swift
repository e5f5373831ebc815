// The client side of an IMAP IDLE connection as a pure state machine: LOGIN, SELECT, IDLE while the app is
// active, DONE in quiet mode (the app in the background), IDLE again in the foreground, LOGOUT at the end.
// It is told what the server said (`receive`) and what the app wants (`setQuiet`, `keepAlive`, `logout`), and
// answers with the actions its shell performs: lines to send, and when to close, fail or end the background
// task held for quiet mode. No sockets, no timers: the shell owns both.
//
// One command is in flight at a time (tags a1, a2, ...): what is asked meanwhile waits for its tagged reply.
// The password is sent and never shown: not in `lastServerText` (server text quoting it is withheld), not in
// failure messages, not in the descriptions of the session or of its actions.

/// What the session asks its shell to do.
public enum IMAPAction: Equatable, Sendable, CustomStringConvertible {
    /// Write these bytes: a whole command line with its CRLF (`a1 LOGIN alice "secret"\r\n`), `DONE\r\n`, or
    /// the part of a LOGIN that follows a synchronizing literal. Never log the line itself: `description`
    /// hides what may hold the password.
    case send(String)
    /// Nothing remains to wait for in quiet mode: the DONE sent for it was answered (the IDLE command's tagged
    /// OK), or the app came back before the DONE was needed. The shell ends the background task it holds for it.
    case quietReached
    /// SELECT succeeded: the mailbox is ready.
    case loggedIn
    /// The connection cannot go on (LOGIN or SELECT refused, BYE, an unexpected tagged NO or BAD...): the shell
    /// closes it and shows the message, which never holds the password.
    case fail(String)
    /// LOGOUT was answered (or the server said BYE while the client was leaving): the shell closes.
    case close

    /// The action for a log, a sent line without its CRLF; LOGIN lines and the parts of a LOGIN that follow its
    /// literals are shown as `<LOGIN, redacted>`.
    public var description: String {
        switch self {
        case .send(let line):
            return "send \"\(Self.loggable(line))\""
        case .quietReached: return "quiet-reached"
        case .loggedIn: return "logged-in"
        case .fail(let message): return "fail: \(message)"
        case .close: return "close"
        }
    }

    /// The line without its CRLF if it is one the session sends that cannot hold the password: `DONE`, or
    /// `aN IDLE`, `aN NOOP`, `aN LOGOUT`, `aN SELECT "..."` in printable ASCII. A part of a LOGIN never looks
    /// like these: a part after a literal holds the CR, LF or non-ASCII character that made the literal
    /// necessary, before its final CRLF.
    private static func loggable(_ line: String) -> String {
        let redacted = "<LOGIN, redacted>"
        guard line.utf8.count >= 2, line.hasSuffix("\r\n") else { return redacted }
        let text = Substring(line).utf8.dropLast(2)
        guard text.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return redacted }
        let shown = String(decoding: text, as: UTF8.self)
        if shown == "DONE" { return shown }
        let words = shown.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        guard words.count == 2, words[0].count > 1, words[0].first == "a",
              words[0].dropFirst().allSatisfy({ $0 >= "0" && $0 <= "9" }) else { return redacted }
        let command = words[1]
        guard ["IDLE", "NOOP", "LOGOUT"].contains(command) || (command.hasPrefix("SELECT \"") && command.hasSuffix("\"")) else {
            return redacted
        }
        return shown
    }
}

/// One IMAP client connection's protocol state, from the greeting to LOGOUT.
///
/// Decisions, beyond RFC 3501 and RFC 2177:
/// - A user name or password holding CR, LF or non-ASCII characters is sent as a synchronizing literal
///   (`{N}\r\n`, then the rest after the server's `+`); one holding NUL, which IMAP cannot carry at all, fails
///   the session before anything is sent. Otherwise both are quoted strings.
/// - The mailbox name is encoded in modified UTF-7 (RFC 3501 section 5.1.3) and quoted.
/// - A tagged response whose tag is not that of the command in flight fails the session: with one command in
///   flight, it means client and server disagree about the stream. A `+` that nothing waits for is ignored.
/// - A greeting other than OK, PREAUTH or BYE (a NO or BAD) fails the session.
/// - `exists` follows `* N EXISTS` and is one less after each `* N EXPUNGE` (RFC 3501 section 7.4.1).
/// - After `.fail` or `.close` the phase is `closed` and every method does nothing.
///
/// The shell's contract for quiet mode: when `awaitingQuietReply` becomes true (after `setQuiet(true)`), hold a
/// background task; one of `.quietReached`, `.fail` or `.close` follows, and then it can end.
public struct IMAPClientSession: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Where the session is.
    public enum Phase: String, Sendable {
        /// Connected; waiting for the server's greeting.
        case greeting
        /// LOGIN sent (or being sent, literal by literal); waiting for its reply.
        case loggingIn
        /// SELECT sent; waiting for its reply.
        case selecting
        /// The mailbox is selected and no IDLE runs (quiet mode, or a NOOP in flight).
        case ready
        /// IDLE sent; waiting for the server's `+`.
        case enteringIdle
        /// Idling: the server reports changes as they happen.
        case idling
        /// DONE sent; waiting for the IDLE command's tagged reply.
        case leavingIdle
        /// LOGOUT sent; waiting for its reply.
        case loggingOut
        /// Finished: failed or logged out. Nothing more happens.
        case closed
    }

    /// The user name LOGIN sends.
    public let user: String
    /// The mailbox SELECT opens.
    public let mailbox: String
    private let password: String

    /// Where the session is.
    public private(set) var phase: Phase = .greeting
    /// The mailbox size: the last `* N EXISTS`, less one for each `* N EXPUNGE` since.
    public private(set) var exists: Int?
    /// How many EXISTS responses arrived.
    public private(set) var existsUpdates = 0
    /// How many EXPUNGE responses arrived.
    public private(set) var expunges = 0
    /// The last `* N RECENT`.
    public private(set) var recent: Int?
    /// The text of the last status response (tagged, or untagged OK, NO, BAD, BYE, PREAUTH), for status and
    /// diagnostics; withheld when it quotes the password.
    public private(set) var lastServerText: String?
    /// Whether quiet mode is wanted (the app is in the background): no IDLE.
    public private(set) var quiet = false
    /// Whether a DONE was sent for quiet mode (or is owed once the IDLE's `+` arrives) and its reply has not
    /// arrived yet.
    public var awaitingQuietReply: Bool { quietReplyOwed }

    /// A command sent whose tagged reply has not arrived.
    private enum Command: Sendable { case login, select, idle, noop, logout }
    private var inFlight: (tag: String, command: Command)?
    /// The parts of a LOGIN still to send, one per `+` (after synchronizing literals).
    private var loginRemainder: [String] = []
    private var nextTag = 1
    private var logoutRequested = false
    /// The IDLE whose tagged reply is still to come after a logout sent DONE and LOGOUT together.
    private var idleAnsweredAfterLogout: String?
    private var quietReplyOwed = false

    /// A session for `user` that will select `mailbox`; nothing is sent before the server's greeting.
    public init(user: String, password: String, mailbox: String = "INBOX") {
        self.user = user
        self.password = password
        self.mailbox = mailbox
    }

    // MARK: Events

    /// The server said this.
    public mutating func receive(_ response: IMAPResponse) -> [IMAPAction] {
        guard phase != .closed else { return [] }
        switch response {
        case .untagged(let untagged): return receive(untagged)
        case .continuation: return receiveContinuation()
        case .tagged(let tag, let status, let text): return receiveTagged(tag: tag, status: status, text: text)
        }
    }

    /// The app went to the background (`true`: DONE if idling; `.quietReached` once it is answered) or came
    /// back (`false`: IDLE again when nothing is in flight).
    public mutating func setQuiet(_ quiet: Bool) -> [IMAPAction] {
        guard phase != .closed, quiet != self.quiet else { return [] }
        self.quiet = quiet
        if quiet {
            switch phase {
            case .idling:
                phase = .leavingIdle
                quietReplyOwed = true
                return [.send("DONE\r\n")]
            case .enteringIdle, .leavingIdle:
                // DONE goes out when the `+` arrives, or already went (for a keep-alive or a logout).
                quietReplyOwed = true
                return []
            case .greeting, .loggingIn, .selecting, .ready, .loggingOut, .closed:
                return []
            }
        }
        switch phase {
        case .enteringIdle where quietReplyOwed:
            // The DONE owed after the `+` is no longer wanted: nothing remains to wait for.
            quietReplyOwed = false
            return [.quietReached]
        case .ready where inFlight == nil && !logoutRequested:
            return startIdle()
        case .greeting, .loggingIn, .selecting, .ready, .enteringIdle, .idling, .leavingIdle, .loggingOut, .closed:
            // IDLE follows SELECT's reply, the NOOP's, or (after `.quietReached`) the IDLE's.
            return []
        }
    }

    /// Keeps the connection alive: idling, DONE and IDLE again after the reply (RFC 2177 asks clients to
    /// re-issue IDLE at least every 29 minutes); selected without IDLE, NOOP; otherwise nothing.
    public mutating func keepAlive() -> [IMAPAction] {
        switch phase {
        case .idling:
            phase = .leavingIdle
            return [.send("DONE\r\n")]
        case .ready where inFlight == nil:
            return sendTagged(.noop, "NOOP")
        case .greeting, .loggingIn, .selecting, .ready, .enteringIdle, .leavingIdle, .loggingOut, .closed:
            return []
        }
    }

    /// Leaves: LOGOUT once nothing else is in flight, `.close` after its reply (or a BYE). While idling, DONE
    /// and LOGOUT go out together (pipelined, RFC 3501 section 5.5): a terminating app closes its socket right
    /// after the goodbye is written, so it cannot wait for the IDLE's reply first. Before the greeting there
    /// is nothing to say goodbye to: `.close` at once.
    public mutating func logout() -> [IMAPAction] {
        switch phase {
        case .closed, .loggingOut:
            return []
        case .greeting:
            return finish(.close)
        case .idling:
            logoutRequested = true
            idleAnsweredAfterLogout = inFlight?.tag
            inFlight = nil
            return [.send("DONE\r\n")] + sendLogout()
        case .ready where inFlight == nil:
            logoutRequested = true
            return sendLogout()
        case .loggingIn, .selecting, .ready, .enteringIdle, .leavingIdle:
            logoutRequested = true
            return []
        }
    }

    // MARK: Responses

    private mutating func receive(_ untagged: IMAPUntagged) -> [IMAPAction] {
        switch untagged {
        case .exists(let count):
            exists = count
            existsUpdates += 1
            return []
        case .expunge:
            expunges += 1
            if let count = exists, count > 0 { exists = count - 1 }
            return []
        case .recent(let count):
            recent = count
            return []
        case .other:
            return []
        case .status(let condition, let text):
            let text = shown(text)
            lastServerText = text
            switch (condition, phase) {
            case (.bye, .greeting):
                return finish(.fail("the server refused the connection: \(text)"))
            case (.bye, _):
                return finish(phase == .loggingOut || logoutRequested ? .close : .fail("the server closed the connection: \(text)"))
            case (.ok, .greeting):
                return startLogin()
            case (.preauth, .greeting):
                return startSelect()
            case (.no, .greeting), (.bad, .greeting):
                return finish(.fail("unexpected greeting: \(condition.rawValue) \(text)"))
            case (.ok, _), (.no, _), (.bad, _), (.preauth, _):
                return []
            }
        }
    }

    private mutating func receiveContinuation() -> [IMAPAction] {
        switch phase {
        case .loggingIn where !loginRemainder.isEmpty:
            return [.send(loginRemainder.removeFirst())]
        case .enteringIdle:
            guard quiet || logoutRequested else {
                phase = .idling
                return []
            }
            phase = .leavingIdle
            return [.send("DONE\r\n")]
        case .greeting, .loggingIn, .selecting, .ready, .idling, .leavingIdle, .loggingOut, .closed:
            return []
        }
    }

    private mutating func receiveTagged(tag: String, status: IMAPStatus, text: String) -> [IMAPAction] {
        let text = shown(text)
        lastServerText = text
        if let idle = idleAnsweredAfterLogout, idle == tag {
            // The IDLE ended by the DONE sent with LOGOUT: LOGOUT's own reply (or BYE) closes.
            idleAnsweredAfterLogout = nil
            if quietReplyOwed {
                quietReplyOwed = false
                return [.quietReached]
            }
            return []
        }
        guard let command = inFlight, command.tag == tag else {
            return finish(.fail("the server answered a command that was not sent (tag \(shown(tag))): \(status.rawValue) \(text)"))
        }
        inFlight = nil
        loginRemainder = []
        var actions: [IMAPAction] = []
        if command.command == .idle {
            phase = .ready
            if quietReplyOwed, status == .ok || logoutRequested {
                quietReplyOwed = false
                actions.append(.quietReached)
            }
        }
        if command.command == .logout { return finish(.close) }
        if logoutRequested { return actions + sendLogout() }
        let refusal = "\(status.rawValue) \(text)"
        switch (command.command, status) {
        case (.login, .ok):
            return startSelect()
        case (.login, _):
            return finish(.fail("login refused: \(refusal)"))
        case (.select, .ok):
            phase = .ready
            return [.loggedIn] + (quiet ? [] : startIdle())
        case (.select, _):
            return finish(.fail("cannot select \(mailbox): \(refusal)"))
        case (.idle, .ok), (.noop, .ok):
            phase = .ready
            return actions + (quiet ? [] : startIdle())
        case (.idle, _):
            return finish(.fail("IDLE refused: \(refusal)"))
        case (.noop, _):
            return finish(.fail("NOOP refused: \(refusal)"))
        case (.logout, _):
            return finish(.close)
        }
    }

    // MARK: Commands

    private mutating func startLogin() -> [IMAPAction] {
        guard !user.utf8.contains(0), !password.utf8.contains(0) else {
            return finish(.fail("the user name or password holds a NUL character, which IMAP cannot send"))
        }
        let tag = takeTag()
        inFlight = (tag, .login)
        phase = .loggingIn
        // Each synchronizing literal ends a part; the next part goes out after the server's `+`.
        var parts: [String] = []
        var current = "\(tag) LOGIN"
        for argument in [user, password] {
            current += " "
            if argument.utf8.allSatisfy({ $0 < 0x80 && $0 != IMAPSyntax.cr && $0 != IMAPSyntax.lf }) {
                current += Self.quoted(argument)
            } else {
                parts.append(current + "{\(argument.utf8.count)}\r\n")
                current = argument
            }
        }
        parts.append(current + "\r\n")
        loginRemainder = Array(parts.dropFirst())
        return [.send(parts[0])]
    }

    private mutating func startSelect() -> [IMAPAction] {
        phase = .selecting
        return sendTagged(.select, "SELECT " + Self.quoted(Self.modifiedUTF7(mailbox)))
    }

    private mutating func startIdle() -> [IMAPAction] {
        phase = .enteringIdle
        return sendTagged(.idle, "IDLE")
    }

    private mutating func sendLogout() -> [IMAPAction] {
        phase = .loggingOut
        return sendTagged(.logout, "LOGOUT")
    }

    private mutating func sendTagged(_ command: Command, _ text: String) -> [IMAPAction] {
        let tag = takeTag()
        inFlight = (tag, command)
        return [.send("\(tag) \(text)\r\n")]
    }

    private mutating func takeTag() -> String {
        defer { nextTag += 1 }
        return "a\(nextTag)"
    }

    private mutating func finish(_ action: IMAPAction) -> [IMAPAction] {
        phase = .closed
        inFlight = nil
        loginRemainder = []
        quietReplyOwed = false
        return [action]
    }

    /// Server text as it may be shown: withheld if it holds the password (a server echoing a refused LOGIN).
    private func shown(_ text: String) -> String {
        let secret = Array(password.utf8)
        guard !secret.isEmpty else { return text }
        let bytes = Array(text.utf8)
        guard bytes.count >= secret.count else { return text }
        for start in 0...(bytes.count - secret.count) where bytes[start] == secret[0] {
            if bytes[start..<(start + secret.count)].elementsEqual(secret) {
                return "(withheld: the server's text quotes the password)"
            }
        }
        return text
    }

    // MARK: Encodings

    /// An IMAP quoted string: `"` and `\` escaped. The caller makes sure there is no CR, LF or NUL.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for character in text {
            if character == "\"" || character == "\\" { result.append("\\") }
            result.append(character)
        }
        return result + "\""
    }

    /// A mailbox name in modified UTF-7 (RFC 3501 section 5.1.3): printable ASCII as it is, `&` as `&-`, any
    /// other run of characters as `&` + the modified base64 of its UTF-16 + `-`.
    static func modifiedUTF7(_ name: String) -> String {
        var result = ""
        var run: [UInt8] = []
        func flush() {
            guard !run.isEmpty else { return }
            result += "&" + modifiedBase64(run) + "-"
            run = []
        }
        for unit in name.utf16 {
            if unit >= 0x20 && unit <= 0x7E {
                flush()
                result += unit == 0x26 ? "&-" : String(UnicodeScalar(UInt8(unit)))
            } else {
                run += [UInt8(unit >> 8), UInt8(unit & 0xFF)]
            }
        }
        flush()
        return result
    }

    /// Base64 with `,` for `/` and no padding.
    private static func modifiedBase64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,".utf8)
        var output: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var group = 0
            for (offset, byte) in chunk.enumerated() { group |= Int(byte) << (16 - 8 * offset) }
            for sextet in 0...chunk.count { output.append(alphabet[(group >> (18 - 6 * sextet)) & 0x3F]) }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    // MARK: Descriptions

    /// The session for a log: user, mailbox, phase and counts; never the password.
    public var description: String {
        "IMAPClientSession(user: \(user), mailbox: \(mailbox), phase: \(phase.rawValue), quiet: \(quiet), "
            + "exists: \(exists.map(String.init) ?? "-"), existsUpdates: \(existsUpdates), expunges: \(expunges))"
    }

    /// The same as `description`: no password.
    public var debugDescription: String { description }

    /// What `dump` and debuggers show: no password, no part of a LOGIN.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "user": user, "mailbox": mailbox, "phase": phase, "quiet": quiet, "exists": exists as Any,
            "existsUpdates": existsUpdates, "expunges": expunges, "recent": recent as Any,
            "lastServerText": lastServerText as Any, "awaitingQuietReply": awaitingQuietReply,
        ], displayStyle: .struct)
    }
}
