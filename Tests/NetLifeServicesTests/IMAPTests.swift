// The IMAP client core: the response parser (splits at every byte, literals, limits, linear work) and the
// session's state machine (login, select, idle, quiet mode, keep-alive, logout, failures), as pure values.

import NetLife
@testable import NetLifeServices
import Testing

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// What dovecot 2.3 says to a client that logs in, selects INBOX, idles, sees a new message and sends DONE.
private let dovecotTranscript = [
    "* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE LITERAL+ STARTTLS AUTH=PLAIN] Dovecot (Debian) ready.\r\n",
    "a1 OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE SORT SORT=DISPLAY THREAD=REFERENCES MULTIAPPEND "
        + "UNSELECT CHILDREN NAMESPACE UIDPLUS LIST-EXTENDED I18NLEVEL=1 CONDSTORE QRESYNC ESEARCH LIST-STATUS BINARY MOVE "
        + "SNIPPET=FUZZY PREVIEW=FUZZY LITERAL+ NOTIFY SPECIAL-USE] Logged in\r\n",
    "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n",
    "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags permitted.\r\n",
    "* 2 EXISTS\r\n",
    "* 0 RECENT\r\n",
    "* OK [UIDVALIDITY 1700000000] UIDs valid\r\n",
    "* OK [UIDNEXT 3] Predicted next UID\r\n",
    "a2 OK [READ-WRITE] Select completed (0.001 + 0.000 secs).\r\n",
    "+ idling\r\n",
    "* 3 EXISTS\r\n",
    "* 1 RECENT\r\n",
    "a3 OK Idle completed (0.001 + 12.345 + 12.344 secs).\r\n",
]

private let dovecotResponses: [IMAPResponse] = [
    .untagged(.status(.ok, text: "[CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE LITERAL+ STARTTLS AUTH=PLAIN] Dovecot (Debian) ready.")),
    .tagged(tag: "a1", status: .ok, text: String(dovecotTranscript[1].dropFirst(6).dropLast(1))),
    .untagged(.other("FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)")),
    .untagged(.status(.ok, text: "[PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags permitted.")),
    .untagged(.exists(2)),
    .untagged(.recent(0)),
    .untagged(.status(.ok, text: "[UIDVALIDITY 1700000000] UIDs valid")),
    .untagged(.status(.ok, text: "[UIDNEXT 3] Predicted next UID")),
    .tagged(tag: "a2", status: .ok, text: "[READ-WRITE] Select completed (0.001 + 0.000 secs)."),
    .continuation(text: "idling"),
    .untagged(.exists(3)),
    .untagged(.recent(1)),
    .tagged(tag: "a3", status: .ok, text: "Idle completed (0.001 + 12.345 + 12.344 secs)."),
]

/// Feeds the chunks one after another into one parser; returns every response.
private func parse(_ chunks: [[UInt8]]) throws(IMAPParseError) -> [IMAPResponse] {
    var parser = IMAPResponseParser()
    var responses: [IMAPResponse] = []
    for chunk in chunks { responses += try parser.feed(chunk) }
    return responses
}

private func parse(_ text: String) throws(IMAPParseError) -> [IMAPResponse] { try parse([bytes(text)]) }

/// The error feeding `text` throws, nil if it throws none.
private func parseError(_ text: String) -> IMAPParseError? {
    do {
        _ = try parse(text)
        return nil
    } catch {
        return error
    }
}

@Suite(.timeLimit(.minutes(5)))
struct IMAPResponseParserTests {
    @Test func parsesADovecotTranscript() throws {
        #expect(dovecotResponses[1] != .tagged(tag: "a1", status: .ok, text: ""))   // the expected text is not empty
        #expect(try parse(dovecotTranscript.joined()) == dovecotResponses)
    }

    @Test func everySplitOfTheTranscriptGivesTheSameResponses() throws {
        let input = bytes(dovecotTranscript.joined())
        for split in 0...input.count {
            let responses = try parse([Array(input[..<split]), Array(input[split...])])
            #expect(responses == dovecotResponses, "split at byte \(split)")
            if responses != dovecotResponses { return }
        }
        #expect(try parse(input.map { [$0] }) == dovecotResponses)
    }

    @Test func responsesArriveAsSoonAsTheirLineEnds() throws {
        var parser = IMAPResponseParser()
        #expect(try parser.feed(bytes("* 4 EXI")) == [])
        #expect(parser.bufferedByteCount == 7)
        #expect(try parser.feed(bytes("STS\r")) == [])
        #expect(try parser.feed(bytes("\n+ idl")) == [.untagged(.exists(4))])
        #expect(try parser.feed(bytes("ing\n")) == [.continuation(text: "idling")])
        #expect(parser.bufferedByteCount == 0)
    }

    @Test func bareLFEndsALineAndALoneCRIsText() throws {
        #expect(try parse("* 3 EXISTS\n* 1 EXPUNGE\r\na9 NO nope\n") ==
                [.untagged(.exists(3)), .untagged(.expunge(1)), .tagged(tag: "a9", status: .no, text: "nope")])
        #expect(try parse("* OK a\rb\r\r\n") == [.untagged(.status(.ok, text: "a\rb\r"))])
    }

    @Test func readsEveryKindOfResponse() throws {
        #expect(try parse("+\r\n+ \r\n+ Ready for literal\r\n+idling\r\n") ==
                [.continuation(text: ""), .continuation(text: ""), .continuation(text: "Ready for literal"), .continuation(text: "idling")])
        #expect(try parse("* BYE Server shutting down\r\n* PREAUTH IMAP4rev1 server logged in as alice\r\n* no\r\n* BAD [PARSE] x\r\n") == [
            .untagged(.status(.bye, text: "Server shutting down")),
            .untagged(.status(.preauth, text: "IMAP4rev1 server logged in as alice")),
            .untagged(.status(.no, text: "")),
            .untagged(.status(.bad, text: "[PARSE] x")),
        ])
        #expect(try parse("A001 ok done\r\nx.y] BAD\r\n") ==
                [.tagged(tag: "A001", status: .ok, text: "done"), .tagged(tag: "x.y]", status: .bad, text: "")])
        #expect(try parse("* 0 exists\r\n* 22 Expunge\r\n* 5 RECENT\r\n") ==
                [.untagged(.exists(0)), .untagged(.expunge(22)), .untagged(.recent(5))])
        #expect(try parse("\r\n\n* 1 EXISTS\r\n") == [.untagged(.exists(1))])   // empty lines are skipped
    }

    @Test func untaggedDataItDoesNotKnowIsOther() throws {
        #expect(try parse("* CAPABILITY IMAP4rev1 IDLE\r\n* 3 FETCH (FLAGS (\\Seen))\r\n* \r\n* OKAY\r\n") == [
            .untagged(.other("CAPABILITY IMAP4rev1 IDLE")),
            .untagged(.other("3 FETCH (FLAGS (\\Seen))")),
            .untagged(.other("")),
            .untagged(.other("OKAY")),
        ])
        // Numbers too large for Int, signs, trailing words: never a trap, never EXISTS.
        #expect(try parse("* 99999999999999999999 EXISTS\r\n* 9223372036854775807 EXISTS\r\n* 9223372036854775808 EXISTS\r\n") == [
            .untagged(.other("99999999999999999999 EXISTS")),
            .untagged(.exists(Int.max)),
            .untagged(.other("9223372036854775808 EXISTS")),
        ])
        #expect(try parse("* -1 EXISTS\r\n* 3 EXISTS now\r\n* 3  EXISTS\r\n* 3\r\n") == [
            .untagged(.other("-1 EXISTS")), .untagged(.other("3 EXISTS now")), .untagged(.other("3  EXISTS")), .untagged(.other("3")),
        ])
    }

    @Test func linesThatAreNoResponseAreErrors() {
        for line in ["a1 FOO bar\r\n", "a1\r\n", " OK x\r\n", "a1 OKAY\r\n", "*\r\n", "*OK\r\n", "a+1 OK x\r\n", "a{1 OK\r\n", "\u{1}a OK\r\n"] {
            #expect(parseError(line)?.code == .malformed, "\(line.debugDescription)")
        }
        #expect(parseError("a1 FOO bar\r\n")?.description == "not an IMAP response: \"a1 FOO bar\"")
        #expect(parseError("\u{7}\u{5c}" + String(repeating: "x", count: 60) + "\n")?.description ==
                "not an IMAP response: \"\\x07\\x5c" + String(repeating: "x", count: 38) + "...\"")
    }

    @Test func textThatIsNotUTF8IsReplaced() throws {
        #expect(try parse([[0x2A, 0x20, 0x4F, 0x4B, 0x20, 0xFF, 0x41, 0x0A]]) == [.untagged(.status(.ok, text: "\u{FFFD}A"))])
    }

    @Test func literalBytesAreSkippedAndTheResponseGoesOnAfterThem() throws {
        let input = "* 1 FETCH (BODY[] {5}\r\nhello)\r\n* 2 FETCH (BODY[HEADER] {11+}\r\na1 OK x\r\n\r\n BODY[TEXT] {0}\r\n)\r\na4 OK done\r\n"
        let expected: [IMAPResponse] = [
            .untagged(.other("1 FETCH (BODY[] {5})")),
            .untagged(.other("2 FETCH (BODY[HEADER] {11+} BODY[TEXT] {0})")),
            .tagged(tag: "a4", status: .ok, text: "done"),
        ]
        #expect(try parse(input) == expected)
        let all = bytes(input)
        for split in 0...all.count {
            #expect(try parse([Array(all[..<split]), Array(all[split...])]) == expected, "split at byte \(split)")
        }
        #expect(try parse(all.map { [$0] }) == expected)
    }

    @Test func aLiteralSplitAcrossFeedsIsCountedDown() throws {
        var parser = IMAPResponseParser()
        #expect(try parser.feed(bytes("* 1 FETCH (BODY[] {10}\r\n0123")) == [])
        #expect(parser.literalBytesRemaining == 6)
        #expect(try parser.feed(bytes("4\r\n")) == [])
        #expect(parser.literalBytesRemaining == 3)
        #expect(try parser.feed(bytes("\r\n9)\r\n+ go\r\n")) == [.untagged(.other("1 FETCH (BODY[] {10})")), .continuation(text: "go")])
        #expect(parser.literalBytesRemaining == 0)
    }

    @Test func aHugeAnnouncedLiteralStoresNothing() throws {
        var parser = IMAPResponseParser()
        #expect(try parser.feed(bytes("* 1 FETCH (BODY[] {999999999999}\r\n")) == [])
        let stored = parser.bufferedByteCount
        #expect(stored == "* 1 FETCH (BODY[] {999999999999}".utf8.count)
        let chunk = [UInt8](repeating: UInt8(ascii: "\n"), count: 1 << 16)   // newlines: a line parser would end lines
        let workBefore = parser.workDone
        for _ in 0..<256 { #expect(try parser.feed(chunk) == []) }
        #expect(parser.bufferedByteCount == stored)
        #expect(parser.literalBytesRemaining == 999_999_999_999 - 256 << 16)
        #expect(parser.workDone - workBefore == 256)   // one step per chunk, however large
    }

    @Test func literalSizesTooLargeAreErrorsAndBadBracesAreText() throws {
        #expect(parseError("* 1 FETCH (BODY[] {9223372036854775808}\r\n")?.code == .literalTooLarge)
        #expect(try parse("* 1 FETCH {9223372036854775807}\r\n") == [])   // the largest accepted: waits for its bytes
        #expect(try parse("* 1 FETCH {0000000000000000000000003}\r\nabc)\r\n") == [.untagged(.other("1 FETCH {0000000000000000000000003})"))])
        #expect(try parse("* X {}\r\n* X {a}\r\n* X {-1}\r\n* X { 5}\r\n* X {5 }\r\n* X {+}\r\n* X 5}\r\n* X {5}}\r\n") ==
                ["{}", "{a}", "{-1}", "{ 5}", "{5 }", "{+}", "5}", "{5}}"].map { .untagged(.other("X \($0)")) })
        // Any line may announce one, as RFC 3501's readers do; a `{N}` before the end of a line is text.
        #expect(try parse("a1 NO see {3}\r\nxyz\r\n+ {1}\r\nq\r\n* X {3} y\r\n") ==
                [.tagged(tag: "a1", status: .no, text: "see {3}"), .continuation(text: "{1}"), .untagged(.other("X {3} y"))])
    }

    @Test func tooManyLiteralsInOneResponseIsAnError() throws {
        let allowed = "* 1 FETCH (" + String(repeating: "{0}\r\n", count: IMAPResponseParser.maxLiteralsPerResponse) + ")\r\n"
        #expect(try parse(allowed).count == 1)
        let tooMany = "* 1 FETCH (" + String(repeating: "{0}\r\n", count: IMAPResponseParser.maxLiteralsPerResponse + 1) + ")\r\n"
        #expect(parseError(tooMany)?.code == .tooManyLiterals)
    }

    @Test func aLineOverTheLimitIsAnErrorAndTheParserStaysFailed() throws {
        let limit = IMAPResponseParser.maxLineLength
        let longest = "* " + String(repeating: "x", count: limit - 2)
        #expect(try parse(longest + "\r\n") == [.untagged(.other(String(repeating: "x", count: limit - 2)))])
        var parser = IMAPResponseParser()
        #expect(try parser.feed(bytes("* 1 EXISTS\r\n")) == [.untagged(.exists(1))])
        #expect(throws: IMAPParseError(.lineTooLong, "response line over 65536 bytes")) { try parser.feed(bytes(longest + "x")) }
        #expect(parser.bufferedByteCount == limit)
        #expect(throws: IMAPParseError(.lineTooLong, "response line over 65536 bytes")) { try parser.feed(bytes("\r\n* 2 EXISTS\r\n")) }
        // The limit counts a response's lines together (its literals excluded), not each line.
        let half = String(repeating: "y", count: limit / 2)
        #expect(parseError("* " + half + "{3}\r\nabc" + half + "\r\n")?.code == .lineTooLong)
        #expect(try parse("* " + half + "{3}\r\nabc" + half.dropFirst(7) + "\r\n").count == 1)
    }

    @Test func feedIntoKeepsTheResponsesBeforeAnError() {
        var parser = IMAPResponseParser()
        var responses: [IMAPResponse] = []
        #expect(throws: IMAPParseError.self) { try parser.feed(bytes("* BYE going away\r\nrubbish\r\n* 1 EXISTS\r\n"), into: &responses) }
        #expect(responses == [.untagged(.status(.bye, text: "going away"))])
    }

    @Test func readsSequencesThatAreNotContiguous() throws {
        var parser = IMAPResponseParser()
        let lazy = bytes("* 7 EXISTS\r\n").lazy.map { $0 }
        #expect(try parser.feed(lazy) == [.untagged(.exists(7))])
        #expect(try parser.feed(bytes("* 8 EXISTS\r\n").reversed().reversed()) == [.untagged(.exists(8))])
    }

    @Test func workIsLinearWhenAMegabyteArrivesOneByteAtATime() throws {
        // Short responses, a line near the limit, a literal, and a line of literal-size digits (looked at twice).
        let short = String(repeating: "* 17 EXISTS\r\n", count: 40_000)
        let long = "* " + String(repeating: "z", count: IMAPResponseParser.maxLineLength - 2) + "\r\n"
        let literal = "* 1 FETCH (BODY[] {400000}\r\n" + String(repeating: "q", count: 400_000) + ")\r\n"
        let digits = "* X {" + String(repeating: "0", count: 60_000) + "1}\r\n!\r\n"
        let input = bytes(short + long + literal + digits)
        #expect(input.count > 1_000_000)
        var parser = IMAPResponseParser()
        var count = 0
        for byte in input { count += try parser.feed(CollectionOfOne(byte)).count }
        #expect(count == 40_003)
        // Each byte once, the digits of the two literal sizes once more.
        #expect(parser.workDone == input.count + "400000".utf8.count + 60_001)
        #expect(parser.bufferedByteCount == 0)
    }
}

// MARK: - Session

/// A session driven through the greeting, LOGIN and SELECT to idling; returns it and its last actions.
private func idlingSession(user: String = "alice", password: String = "s3cret") -> IMAPClientSession {
    var session = IMAPClientSession(user: user, password: password)
    _ = session.receive(.untagged(.status(.ok, text: "ready")))
    _ = session.receive(.tagged(tag: "a1", status: .ok, text: "Logged in"))
    _ = session.receive(.tagged(tag: "a2", status: .ok, text: "[READ-WRITE] Select completed"))
    _ = session.receive(.continuation(text: "idling"))
    return session
}

private let ok = IMAPStatus.ok

@Suite(.timeLimit(.minutes(5)))
struct IMAPClientSessionTests {
    @Test func aWholeLife() {
        var session = IMAPClientSession(user: "alice", password: "s3cret")
        #expect(session.phase == .greeting)
        #expect(session.receive(.untagged(.status(.ok, text: "[CAPABILITY IMAP4rev1 IDLE] Dovecot ready."))) ==
                [.send("a1 LOGIN \"alice\" \"s3cret\"\r\n")])
        #expect(session.phase == .loggingIn)
        #expect(session.receive(.tagged(tag: "a1", status: ok, text: "Logged in")) == [.send("a2 SELECT \"INBOX\"\r\n")])
        #expect(session.phase == .selecting)
        #expect(session.receive(.untagged(.other("FLAGS (\\Seen)"))) == [])
        #expect(session.receive(.untagged(.exists(2))) == [])
        #expect(session.receive(.untagged(.recent(0))) == [])
        #expect(session.receive(.untagged(.status(.ok, text: "[UIDVALIDITY 1] UIDs valid"))) == [])
        #expect(session.receive(.tagged(tag: "a2", status: ok, text: "Select completed")) == [.loggedIn, .send("a3 IDLE\r\n")])
        #expect(session.phase == .enteringIdle)
        #expect(session.receive(.continuation(text: "idling")) == [])
        #expect(session.phase == .idling)
        #expect(session.receive(.untagged(.exists(3))) == [])
        #expect(session.receive(.untagged(.expunge(1))) == [])
        #expect(session.receive(.untagged(.exists(3))) == [])
        #expect(session.exists == 3 && session.existsUpdates == 3 && session.expunges == 1 && session.recent == 0)

        // Background: DONE, and quiet is reached with the IDLE's OK.
        #expect(session.setQuiet(true) == [.send("DONE\r\n")])
        #expect(session.phase == .leavingIdle && session.awaitingQuietReply)
        #expect(session.receive(.tagged(tag: "a3", status: ok, text: "Idle completed")) == [.quietReached])
        #expect(session.phase == .ready && !session.awaitingQuietReply)
        #expect(session.keepAlive() == [.send("a4 NOOP\r\n")])
        #expect(session.keepAlive() == [])   // one command in flight
        #expect(session.receive(.tagged(tag: "a4", status: ok, text: "NOOP completed")) == [])
        #expect(session.phase == .ready)

        // Foreground: IDLE again; a keep-alive re-issues it.
        #expect(session.setQuiet(false) == [.send("a5 IDLE\r\n")])
        #expect(session.receive(.continuation(text: "idling")) == [])
        #expect(session.keepAlive() == [.send("DONE\r\n")])
        #expect(session.phase == .leavingIdle && !session.awaitingQuietReply)
        #expect(session.receive(.tagged(tag: "a5", status: ok, text: "Idle completed")) == [.send("a6 IDLE\r\n")])
        #expect(session.receive(.continuation(text: "idling")) == [])

        // Terminate: DONE and LOGOUT together (the socket closes right after), then close.
        #expect(session.logout() == [.send("DONE\r\n"), .send("a7 LOGOUT\r\n")])
        #expect(session.logout() == [])
        #expect(session.phase == .loggingOut)
        #expect(session.receive(.tagged(tag: "a6", status: ok, text: "Idle completed")) == [], "the IDLE's reply is expected")
        #expect(session.phase == .loggingOut)
        #expect(session.receive(.untagged(.status(.bye, text: "Logging out"))) == [.close])
        #expect(session.phase == .closed)
        #expect(session.receive(.tagged(tag: "a7", status: ok, text: "Logout completed")) == [])
        #expect(session.lastServerText == "Logging out")
    }

    @Test func drivenByTheParserOverADovecotTranscript() throws {
        var parser = IMAPResponseParser()
        var session = IMAPClientSession(user: "alice", password: "s3cret")
        var sent: [String] = []
        for line in dovecotTranscript {
            if line.hasPrefix("a3 ") { sent += session.setQuiet(true).map(\.description) }
            for response in try parser.feed(bytes(line)) { sent += session.receive(response).map(\.description) }
        }
        #expect(sent == [
            "send \"<LOGIN, redacted>\"", "send \"a2 SELECT \"INBOX\"\"", "logged-in", "send \"a3 IDLE\"", "send \"DONE\"", "quiet-reached",
        ])
        #expect(session.exists == 3 && session.recent == 1 && session.phase == .ready)
    }

    @Test func quietDuringLoginMeansNoIdleAfterSelect() {
        var session = IMAPClientSession(user: "alice", password: "s3cret", mailbox: "Work")
        _ = session.receive(.untagged(.status(.ok, text: "ready")))
        #expect(session.setQuiet(true) == [])
        #expect(!session.awaitingQuietReply)
        #expect(session.receive(.tagged(tag: "a1", status: ok, text: "")) == [.send("a2 SELECT \"Work\"\r\n")])
        #expect(session.receive(.tagged(tag: "a2", status: ok, text: "")) == [.loggedIn])
        #expect(session.phase == .ready)
        #expect(session.setQuiet(false) == [.send("a3 IDLE\r\n")])
    }

    @Test func quietBeforeTheContinuationSendsDoneRightAfterIt() {
        var session = IMAPClientSession(user: "alice", password: "s3cret")
        _ = session.receive(.untagged(.status(.ok, text: "")))
        _ = session.receive(.tagged(tag: "a1", status: ok, text: ""))
        #expect(session.receive(.tagged(tag: "a2", status: ok, text: "")) == [.loggedIn, .send("a3 IDLE\r\n")])
        #expect(session.setQuiet(true) == [])
        #expect(session.awaitingQuietReply)   // the shell holds its task from now on
        #expect(session.receive(.continuation(text: "idling")) == [.send("DONE\r\n")])
        #expect(session.phase == .leavingIdle)
        #expect(session.receive(.tagged(tag: "a3", status: ok, text: "")) == [.quietReached])
        #expect(session.phase == .ready)
    }

    @Test func backBeforeTheContinuationNeedsNoDone() {
        var session = idlingSession()
        _ = session.setQuiet(true)
        _ = session.receive(.tagged(tag: "a3", status: ok, text: ""))
        #expect(session.setQuiet(false) == [.send("a4 IDLE\r\n")])
        #expect(session.setQuiet(true) == [])
        #expect(session.setQuiet(false) == [.quietReached])
        #expect(!session.awaitingQuietReply)
        #expect(session.receive(.continuation(text: "idling")) == [])
        #expect(session.phase == .idling)
    }

    @Test func backWhileDoneIsUnansweredIdlesAgainAfterTheReply() {
        var session = idlingSession()
        #expect(session.setQuiet(true) == [.send("DONE\r\n")])
        #expect(session.setQuiet(false) == [])
        #expect(session.awaitingQuietReply)   // the task ends with the reply, as promised
        #expect(session.receive(.tagged(tag: "a3", status: ok, text: "")) == [.quietReached, .send("a4 IDLE\r\n")])
    }

    @Test func quietWhileLeavingIdleForAKeepAliveStaysQuiet() {
        var session = idlingSession()
        #expect(session.keepAlive() == [.send("DONE\r\n")])
        #expect(session.setQuiet(true) == [])
        #expect(session.awaitingQuietReply)
        #expect(session.receive(.tagged(tag: "a3", status: ok, text: "")) == [.quietReached])
        #expect(session.phase == .ready)
    }

    @Test func keepAliveInEachPhase() {
        var session = IMAPClientSession(user: "u", password: "p")
        #expect(session.keepAlive() == [])   // greeting
        _ = session.receive(.untagged(.status(.ok, text: "")))
        #expect(session.keepAlive() == [])   // loggingIn
        _ = session.receive(.tagged(tag: "a1", status: ok, text: ""))
        #expect(session.keepAlive() == [])   // selecting
        _ = session.receive(.tagged(tag: "a2", status: ok, text: ""))
        #expect(session.phase == .enteringIdle)
        #expect(session.keepAlive() == [])
        _ = session.receive(.continuation(text: ""))
        #expect(session.keepAlive() == [.send("DONE\r\n")])   // idling
        #expect(session.keepAlive() == [])                   // leavingIdle
        _ = session.setQuiet(true)
        _ = session.receive(.tagged(tag: "a3", status: ok, text: ""))
        #expect(session.keepAlive() == [.send("a4 NOOP\r\n")])   // ready
        #expect(session.keepAlive() == [])                       // ready, NOOP in flight
        _ = session.receive(.tagged(tag: "a4", status: ok, text: ""))
        #expect(session.logout() == [.send("a5 LOGOUT\r\n")])
        #expect(session.keepAlive() == [])   // loggingOut
        _ = session.receive(.tagged(tag: "a5", status: ok, text: ""))
        #expect(session.phase == .closed)
        #expect(session.keepAlive() == [])
    }

    @Test func aKeepAliveNoopAnsweredAfterComingBackIdles() {
        var session = idlingSession()
        _ = session.setQuiet(true)
        _ = session.receive(.tagged(tag: "a3", status: ok, text: ""))
        #expect(session.keepAlive() == [.send("a4 NOOP\r\n")])
        #expect(session.setQuiet(false) == [])   // the NOOP is in flight
        #expect(session.receive(.tagged(tag: "a4", status: ok, text: "")) == [.send("a5 IDLE\r\n")])
    }

    @Test func loginRefusedFailsWithoutThePassword() {
        var session = IMAPClientSession(user: "alice", password: "hunter2")
        _ = session.receive(.untagged(.status(.ok, text: "")))
        let actions = session.receive(.tagged(tag: "a1", status: .no, text: "[AUTHENTICATIONFAILED] Authentication failed."))
        #expect(actions == [.fail("login refused: NO [AUTHENTICATIONFAILED] Authentication failed.")])
        #expect(session.phase == .closed)
        #expect(session.receive(.untagged(.status(.ok, text: ""))) == [])
    }

    @Test func serverTextQuotingThePasswordIsWithheld() {
        var session = IMAPClientSession(user: "alice", password: "hunter2")
        _ = session.receive(.untagged(.status(.ok, text: "")))
        let actions = session.receive(.tagged(tag: "a1", status: .bad, text: "Error in IMAP command LOGIN \"alice\" \"hunter2\""))
        #expect(actions == [.fail("login refused: BAD (withheld: the server's text quotes the password)")])
        #expect(session.lastServerText == "(withheld: the server's text quotes the password)")
        let described = [session.description, session.debugDescription, String(reflecting: session), actions.description,
                         IMAPAction.send("a1 LOGIN \"alice\" \"hunter2\"\r\n").description]
        for text in described { #expect(!text.contains("hunter2"), "\(text)") }
        var dumped = ""
        dump(idlingSession(password: "hunter2"), to: &dumped)
        #expect(dumped.contains("alice") && !dumped.contains("hunter2"))
    }

    @Test func argumentsAreQuotedWithEscapes() {
        var session = IMAPClientSession(user: "al\"ice", password: "back\\slash\ttab", mailbox: "Sent \"Items\"")
        #expect(session.receive(.untagged(.status(.ok, text: ""))) == [.send("a1 LOGIN \"al\\\"ice\" \"back\\\\slash\ttab\"\r\n")])
        #expect(session.receive(.tagged(tag: "a1", status: ok, text: "")) == [.send("a2 SELECT \"Sent \\\"Items\\\"\"\r\n")])
    }

    @Test func nonASCIIOrLineBreaksGoAsSynchronizingLiterals() {
        var session = IMAPClientSession(user: "jörg", password: "pa\r\nss")
        #expect(session.receive(.untagged(.status(.ok, text: ""))) == [.send("a1 LOGIN {5}\r\n")])
        #expect(session.receive(.untagged(.exists(1))) == [])   // anything but `+` waits
        #expect(session.receive(.continuation(text: "Ready for literal data")) == [.send("jörg {6}\r\n")])
        #expect(session.receive(.continuation(text: "")) == [.send("pa\r\nss\r\n")])
        #expect(session.receive(.continuation(text: "")) == [])
        #expect(session.receive(.tagged(tag: "a1", status: ok, text: "")) == [.send("a2 SELECT \"INBOX\"\r\n")])

        var second = IMAPClientSession(user: "bob", password: "pässword")
        #expect(second.receive(.untagged(.status(.ok, text: ""))) == [.send("a1 LOGIN \"bob\" {9}\r\n")])
        #expect(second.receive(.continuation(text: "")) == [.send("pässword\r\n")])
        #expect(IMAPAction.send("pässword\r\n").description == "send \"<LOGIN, redacted>\"")

        // A refused literal ends the LOGIN: the rest is never sent.
        var third = IMAPClientSession(user: "bob", password: "pässword")
        _ = third.receive(.untagged(.status(.ok, text: "")))
        #expect(third.receive(.tagged(tag: "a1", status: .no, text: "too long")) == [.fail("login refused: NO too long")])
        #expect(third.receive(.continuation(text: "")) == [])
    }

    @Test func aNulInTheCredentialsIsRefusedBeforeSending() {
        var session = IMAPClientSession(user: "alice", password: "a\0b")
        #expect(session.receive(.untagged(.status(.ok, text: ""))) ==
                [.fail("the user name or password holds a NUL character, which IMAP cannot send")])
        #expect(session.phase == .closed)
    }

    @Test func mailboxNamesAreInModifiedUTF7() {
        #expect(IMAPClientSession.modifiedUTF7("INBOX") == "INBOX")
        #expect(IMAPClientSession.modifiedUTF7("Entwürfe") == "Entw&APw-rfe")
        #expect(IMAPClientSession.modifiedUTF7("~peter/mail/台北/日本語") == "~peter/mail/&U,BTFw-/&ZeVnLIqe-")
        #expect(IMAPClientSession.modifiedUTF7("Tom & Jerry") == "Tom &- Jerry")
        #expect(IMAPClientSession.modifiedUTF7("a\r\nb😀") == "a&AA0ACg-b&2D3eAA-")
        var session = IMAPClientSession(user: "u", password: "p", mailbox: "Entwürfe")
        _ = session.receive(.untagged(.status(.preauth, text: "")))
        #expect(session.phase == .selecting)
        #expect(session.receive(.untagged(.status(.ok, text: ""))) == [])
        var preauth = IMAPClientSession(user: "u", password: "p", mailbox: "Entwürfe")
        #expect(preauth.receive(.untagged(.status(.preauth, text: "logged in"))) == [.send("a1 SELECT \"Entw&APw-rfe\"\r\n")])
    }

    @Test func greetingsOtherThanOkOrPreauthFail() {
        var bye = IMAPClientSession(user: "u", password: "p")
        #expect(bye.receive(.untagged(.status(.bye, text: "Too many connections"))) ==
                [.fail("the server refused the connection: Too many connections")])
        var no = IMAPClientSession(user: "u", password: "p")
        #expect(no.receive(.untagged(.status(.no, text: "go away"))) == [.fail("unexpected greeting: NO go away")])
        var other = IMAPClientSession(user: "u", password: "p")
        #expect(other.receive(.untagged(.other("CAPABILITY IMAP4rev1"))) == [])
        #expect(other.receive(.continuation(text: "")) == [])
        #expect(other.phase == .greeting)
    }

    /// Sessions in every phase after the greeting, and what a BYE there does.
    static let byePhases: [(events: Int, phase: IMAPClientSession.Phase)] = [
        (1, .loggingIn), (2, .selecting), (3, .enteringIdle), (4, .idling), (5, .leavingIdle), (6, .ready), (7, .ready),
    ]

    @Test(arguments: byePhases.map(\.events)) func byeFailsInEveryPhase(events: Int) {
        let steps: [(inout IMAPClientSession) -> Void] = [
            { _ = $0.receive(.untagged(.status(.ok, text: ""))) },
            { _ = $0.receive(.tagged(tag: "a1", status: .ok, text: "")) },
            { _ = $0.receive(.tagged(tag: "a2", status: .ok, text: "")) },
            { _ = $0.receive(.continuation(text: "idling")) },
            { _ = $0.setQuiet(true) },
            { _ = $0.receive(.tagged(tag: "a3", status: .ok, text: "")) },
            { _ = $0.keepAlive() },
        ]
        var session = IMAPClientSession(user: "u", password: "p")
        for step in steps.prefix(events) { step(&session) }
        #expect(session.phase == Self.byePhases.first { $0.events == events }?.phase)
        #expect(session.receive(.untagged(.status(.bye, text: "Server shutting down"))) ==
                [.fail("the server closed the connection: Server shutting down")])
        #expect(session.phase == .closed && !session.awaitingQuietReply)
        #expect(session.setQuiet(false) == [] && session.keepAlive() == [] && session.logout() == [])
    }

    @Test func byeWhileLeavingClosesInsteadOfFailing() {
        var session = idlingSession()
        _ = session.logout()
        #expect(session.receive(.untagged(.status(.bye, text: "bye"))) == [.close])
        var loggingOut = idlingSession()
        _ = loggingOut.logout()
        _ = loggingOut.receive(.tagged(tag: "a3", status: .ok, text: ""))
        #expect(loggingOut.receive(.tagged(tag: "a4", status: .ok, text: "Logout completed")) == [.close])
    }

    @Test func logoutWaitsForTheCommandInFlight() {
        var early = IMAPClientSession(user: "u", password: "p")
        #expect(early.logout() == [.close])   // nothing to say goodbye to before the greeting
        #expect(early.phase == .closed)

        var login = IMAPClientSession(user: "u", password: "p")
        _ = login.receive(.untagged(.status(.ok, text: "")))
        #expect(login.logout() == [])
        #expect(login.receive(.tagged(tag: "a1", status: .ok, text: "")) == [.send("a2 LOGOUT\r\n")])

        var entering = IMAPClientSession(user: "u", password: "p")
        _ = entering.receive(.untagged(.status(.ok, text: "")))
        _ = entering.receive(.tagged(tag: "a1", status: .ok, text: ""))
        _ = entering.receive(.tagged(tag: "a2", status: .ok, text: ""))
        #expect(entering.logout() == [])
        #expect(entering.receive(.continuation(text: "idling")) == [.send("DONE\r\n")])
        #expect(entering.receive(.tagged(tag: "a3", status: .ok, text: "")) == [.send("a4 LOGOUT\r\n")])
        #expect(entering.receive(.tagged(tag: "a4", status: .bad, text: "whatever")) == [.close])

        var quietLeaving = idlingSession()
        _ = quietLeaving.setQuiet(true)
        #expect(quietLeaving.logout() == [])
        #expect(quietLeaving.receive(.tagged(tag: "a3", status: .ok, text: "")) == [.quietReached, .send("a4 LOGOUT\r\n")])
    }

    @Test func unexpectedTaggedRepliesFail() {
        var unknown = idlingSession()
        #expect(unknown.receive(.tagged(tag: "a9", status: .ok, text: "what")) ==
                [.fail("the server answered a command that was not sent (tag a9): OK what")])
        var refusedIdle = IMAPClientSession(user: "u", password: "p")
        _ = refusedIdle.receive(.untagged(.status(.ok, text: "")))
        _ = refusedIdle.receive(.tagged(tag: "a1", status: .ok, text: ""))
        _ = refusedIdle.receive(.tagged(tag: "a2", status: .ok, text: ""))
        #expect(refusedIdle.receive(.tagged(tag: "a3", status: .bad, text: "Unknown command")) == [.fail("IDLE refused: BAD Unknown command")])
        var select = IMAPClientSession(user: "u", password: "s3cret", mailbox: "Nope")
        _ = select.receive(.untagged(.status(.ok, text: "")))
        _ = select.receive(.tagged(tag: "a1", status: .ok, text: ""))
        #expect(select.receive(.tagged(tag: "a2", status: .no, text: "Mailbox doesn't exist: Nope")) ==
                [.fail("cannot select Nope: NO Mailbox doesn't exist: Nope")])
        var noop = idlingSession()
        _ = noop.setQuiet(true)
        _ = noop.receive(.tagged(tag: "a3", status: .ok, text: ""))
        _ = noop.keepAlive()
        #expect(noop.receive(.tagged(tag: "a4", status: .no, text: "x")) == [.fail("NOOP refused: NO x")])
    }

    @Test func anIdleTheServerEndsByItselfIsIssuedAgain() {
        var session = idlingSession()
        #expect(session.receive(.tagged(tag: "a3", status: .ok, text: "IDLE timed out")) == [.send("a4 IDLE\r\n")])
        #expect(session.phase == .enteringIdle)
    }

    @Test func mailboxCountsArriveInAnyPhase() {
        var session = IMAPClientSession(user: "u", password: "p")
        _ = session.receive(.untagged(.exists(5)))
        _ = session.receive(.untagged(.status(.ok, text: "")))
        _ = session.receive(.untagged(.expunge(2)))
        _ = session.receive(.untagged(.expunge(1)))
        #expect(session.exists == 3 && session.existsUpdates == 1 && session.expunges == 2)
        _ = session.receive(.untagged(.exists(0)))
        _ = session.receive(.untagged(.expunge(1)))   // a server out of step: never below zero
        #expect(session.exists == 0 && session.expunges == 3)
    }

    @Test func actionDescriptionsShowOnlyWhatCannotHoldThePassword() {
        let shown = ["a12 IDLE\r\n": "a12 IDLE", "DONE\r\n": "DONE", "a3 SELECT \"INBOX\"\r\n": "a3 SELECT \"INBOX\"",
                     "a4 LOGOUT\r\n": "a4 LOGOUT", "a5 NOOP\r\n": "a5 NOOP"]
        for (line, text) in shown { #expect(IMAPAction.send(line).description == "send \"\(text)\"") }
        for line in ["a1 LOGIN \"u\" \"p\"\r\n", "a1 LOGIN {3}\r\n", "b1 IDLE\r\n", "a IDLE\r\n", "jörg {6}\r\n", "a2 IDLE\r\r\n",
                     "pa\r\nss\r\n", "a3 SELECT \"x\r\n", "a4 IDLE"] {
            #expect(IMAPAction.send(line).description == "send \"<LOGIN, redacted>\"", "\(line.debugDescription)")
        }
        #expect(IMAPAction.fail("x").description == "fail: x")
    }
}
