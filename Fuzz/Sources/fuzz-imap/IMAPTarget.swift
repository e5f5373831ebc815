// Fuzz target: the IMAP response parser, which reads every byte an IMAP server sends, and the client session
// it drives. The input is what a server sends. Any input may be rejected; none may crash, hang or take more
// than linear time. What the parser returns must not depend on how the bytes are split into feeds, it never
// stores more than its limit, and an error sticks. The session, driven by the responses and by app events
// chosen from a hash of the input, keeps one command in flight, never shows the password, and ends every
// wait for quiet mode it starts with `.quietReached`, `.fail` or `.close`.

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIMAP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    // The choices (feed sizes, app events, credentials) come from a hash, so that the whole input stays a
    // server's stream and the seeds are plain transcripts.
    var random = SplitMix(hashing: input)

    let (responses, error) = parseWhole(input)
    let (pieceResponses, pieceError) = parseInPieces(input, random: &random)
    guard pieceResponses == responses, pieceError == error else {
        fatalError("fed in pieces, the parser read \(pieceResponses) \(String(describing: pieceError)); fed whole, \(responses) \(String(describing: error))")
    }
    for response in responses { checkSizes(response) }

    drive(responses, random: &random)
    return 0
}

private func parseWhole(_ input: [UInt8]) -> ([IMAPResponse], IMAPParseError?) {
    var parser = IMAPResponseParser()
    var responses: [IMAPResponse] = []
    do {
        try parser.feed(input, into: &responses)
    } catch {
        checkBuffered(parser)
        // An error sticks: the stream cannot be read any further.
        do {
            _ = try parser.feed([UInt8(ascii: "\n")])
            fatalError("the parser read on after \(error)")
        } catch let again {
            guard again == error else { fatalError("the parser failed with \(error), then with \(again)") }
        }
        return (responses, error)
    }
    checkBuffered(parser)
    return (responses, nil)
}

private func parseInPieces(_ input: [UInt8], random: inout SplitMix) -> ([IMAPResponse], IMAPParseError?) {
    var parser = IMAPResponseParser()
    var responses: [IMAPResponse] = []
    var start = 0
    // Mostly short pieces (single bytes split every token), sometimes long ones.
    let longest = random.next() % 2 == 0 ? 8 : 512
    while start < input.count {
        let end = min(input.count, start + 1 + Int(random.next() % UInt64(longest)))
        do {
            try parser.feed(input[start..<end], into: &responses)
        } catch {
            return (responses, error)
        }
        checkBuffered(parser)
        start = end
    }
    return (responses, nil)
}

private func checkBuffered(_ parser: IMAPResponseParser) {
    guard parser.bufferedByteCount <= IMAPResponseParser.maxLineLength, parser.literalBytesRemaining >= 0 else {
        fatalError("the parser holds \(parser.bufferedByteCount) bytes, \(parser.literalBytesRemaining) literal bytes to come")
    }
}

private func checkSizes(_ response: IMAPResponse) {
    let texts: [String]
    switch response {
    case .tagged(let tag, _, let text): texts = [tag, text]
    case .continuation(let text): texts = [text]
    case .untagged(.status(_, let text)), .untagged(.other(let text)): texts = [text]
    case .untagged(.exists(let count)), .untagged(.expunge(let count)), .untagged(.recent(let count)):
        guard count >= 0 else { fatalError("a negative count in \(response)") }
        texts = []
    }
    // Invalid UTF-8 becomes U+FFFD, three bytes for one: the bound is on what was stored, at most the limit.
    for text in texts where text.unicodeScalars.count > IMAPResponseParser.maxLineLength {
        fatalError("a response text of \(text.unicodeScalars.count) characters, over the line limit")
    }
}

// MARK: The session

private func drive(_ responses: [IMAPResponse], random: inout SplitMix) {
    // Quoted (with characters to escape) or sent as literals; the user name too, now and then.
    let password = random.next() % 2 == 0 ? "s3cr\"et\\pw" : "p\u{e4}ssw\u{f6}rd-9"
    let user = random.next() % 2 == 0 ? "alice" : "j\u{f6}rg"
    var session = IMAPClientSession(user: user, password: password)
    var checker = SessionChecker(password: password)
    for response in responses {
        // The reply to the command in flight: the session may send the next one at once.
        if case .tagged(let tag, _, _) = response, tag == checker.inFlight { checker.inFlight = nil }
        checker.step(&session, "receive \(response)") { $0.receive(response) }
        switch random.next() % 32 {
        case 0..<4: checker.step(&session, "setQuiet(true)") { $0.setQuiet(true) }
        case 4..<8: checker.step(&session, "setQuiet(false)") { $0.setQuiet(false) }
        case 8..<11: checker.step(&session, "keepAlive()") { $0.keepAlive() }
        case 11: checker.step(&session, "logout()") { $0.logout() }
        default: break
        }
    }
}

/// What must hold across a session's steps.
private struct SessionChecker {
    let password: String
    /// The tag of the command sent and not answered yet.
    var inFlight: String?

    mutating func step(_ session: inout IMAPClientSession, _ event: String, _ perform: (inout IMAPClientSession) -> [IMAPAction]) {
        let wasClosed = session.phase == .closed
        let wasAwaiting = session.awaitingQuietReply
        let actions = perform(&session)
        func fail(_ what: String) -> Never {
            fatalError("\(event) in \(session) gave \(actions): \(what)")
        }
        if wasClosed && !actions.isEmpty { fail("a closed session acted") }
        let ends = actions.contains { action in
            switch action {
            case .quietReached, .close, .fail: return true
            case .send, .loggedIn: return false
            }
        }
        if wasAwaiting && !session.awaitingQuietReply && !ends { fail("the wait for quiet mode ended silently") }
        if actions.contains(.quietReached) && !wasAwaiting { fail("quiet reached that nobody waited for") }
        if session.phase == .closed && session.awaitingQuietReply { fail("closed and still awaiting") }
        if session.phase == .idling && session.quiet { fail("idling in quiet mode") }
        if let text = session.lastServerText, contains(text, password) { fail("lastServerText shows the password") }
        if contains(session.description, password) { fail("the description shows the password") }
        var previousLine: String?
        for action in actions {
            if contains(action.description, password) { fail("an action's description shows the password") }
            switch action {
            case .fail(let message):
                if contains(message, password) { fail("a failure shows the password") }
                inFlight = nil
            case .close:
                inFlight = nil
            case .send(let line):
                guard line.hasSuffix("\r\n") else { fail("a line without CRLF") }
                let tag = line.prefix { $0 != " " }
                if tag.count > 1, tag.first == "a", tag.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) {
                    // The one pipelined pair: a logout while idling sends DONE and LOGOUT together (the socket
                    // closes right after), so the IDLE is still unanswered when LOGOUT goes out.
                    let pipelinedLogout = line.hasSuffix(" LOGOUT\r\n") && previousLine == "DONE\r\n"
                    if let inFlight, !pipelinedLogout { fail("a second command while \(inFlight) is in flight") }
                    inFlight = String(tag)
                }
                previousLine = line
            case .quietReached, .loggedIn:
                break
            }
        }
        if session.phase == .closed && !actions.isEmpty && !ends { fail("closed without saying so") }
    }

    private func contains(_ text: String, _ part: String) -> Bool {
        let bytes = Array(text.utf8), sought = Array(part.utf8)
        guard bytes.count >= sought.count else { return false }
        return (0...(bytes.count - sought.count)).contains { bytes[$0..<($0 + sought.count)].elementsEqual(sought) }
    }
}
