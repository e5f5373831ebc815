// Fuzz target: the FTP downloader's parser of untrusted bytes and the session it drives. The input is what a
// server sends on the control connection. FTPReplyParser reads it whole, in pieces (sizes from a hash of the
// input) and one byte at a time, and must find the same replies and fail the same way; it never holds more
// than its limits, every reply's code is 100 to 599, and an error sticks. The replies then drive an
// FTPDownloadSession, started from a record and a part chosen from the hash, with shell events (the data
// connection made, data appended, its end, broken connections, pauses, restarts, a file error) chosen from
// the hash between them. A fake shell performs the actions and checks what the session promises: commands
// without CR or LF on an open control connection, one data connection at a time and only with the control
// connection, a data port 1 to 65535, no cut past the part's end, no record that vouches for more than the
// part holds or that does not read back, bytesDone equal to the part's size, a rename only of a part as long
// as SIZE said, and no connection left open once the download stops.

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFTP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    // The choices (piece sizes, the record, shell events) come from a hash, so that the whole input stays a
    // server's stream and the seeds are plain transcripts.
    var random = SplitMix(hashing: input)

    let (replies, error) = parse(input) { input.count }
    let longest = random.next() % 2 == 0 ? 8 : 1024
    let (pieceReplies, pieceError) = parse(input) { 1 + Int(random.next() % UInt64(longest)) }
    let (byteReplies, byteError) = parse(input) { 1 }
    guard pieceReplies == replies, pieceError == error, byteReplies == replies, byteError == error else {
        fatalError("the reply parser fed whole: \(replies) \(String(describing: error)); in pieces: \(pieceReplies) "
            + "\(String(describing: pieceError)); one byte at a time: \(byteReplies) \(String(describing: byteError))")
    }
    for reply in replies {
        guard (100...599).contains(reply.code) else { fatalError("a reply with code \(reply.code)") }
        // Invalid UTF-8 becomes U+FFFD, three bytes for one: the bound is on what was stored.
        guard reply.text.unicodeScalars.count <= FTPReplyParser.maxReplyBytes + FTPReplyParser.maxReplyLines else {
            fatalError("a reply text of \(reply.text.unicodeScalars.count) characters, over the limit")
        }
        guard reply.shown.utf8.count <= 300 else { fatalError("a shown reply of \(reply.shown.utf8.count) bytes") }
    }

    drive(replies, random: &random)
    return 0
}

// MARK: The parser

/// The replies of `input` fed in pieces of `pieceSize()` bytes, and the error that stopped the parser.
private func parse(_ input: [UInt8], pieceSize: () -> Int) -> ([FTPReply], FTPReplyError?) {
    var parser = FTPReplyParser()
    var replies: [FTPReply] = []
    var start = 0
    while start < input.count {
        let end = min(input.count, start + max(1, pieceSize()))
        do {
            try parser.feed(input[start..<end], into: &replies)
        } catch {
            // An error sticks: the stream cannot be read any further.
            do {
                _ = try parser.feed([UInt8(ascii: "\n")])
                fatalError("the parser read on after \(error)")
            } catch let again {
                guard again == error else { fatalError("the parser failed with \(error), then with \(again)") }
            }
            return (replies, error)
        }
        guard parser.bufferedLineBytes <= FTPReplyParser.maxLineBytes + 1,
              parser.bufferedReplyBytes <= FTPReplyParser.maxReplyBytes else {
            fatalError("the parser holds \(parser.bufferedLineBytes) bytes of a line, \(parser.bufferedReplyBytes) of a reply")
        }
        start = end
    }
    return (replies, nil)
}

// MARK: The session

private let url = URLParts(scheme: .ftp, host: .ipv4([127, 0, 0, 1]), port: 2121, path: "/pub/file.bin")

private func drive(_ replies: [FTPReply], random: inout SplitMix) {
    // A record as an earlier run left it: of this file (the MDTM time of the seeds) or none, and a part that
    // may be longer or shorter than the record says.
    let totals: [Int?] = [nil, 10, 1000, 1 << 20]
    let total = totals[Int(random.next() % 4)]
    let offset = total.map { Int(random.next() % UInt64($0 + 1)) } ?? Int(random.next() % 2000)
    let record = random.next() % 4 == 0 ? nil
        : DownloadRecord(url: url, validator: .lastModified("Sun, 01 Mar 2026 12:00:00 GMT"), total: total, offset: offset)
    let partSize = max(0, offset + Int(random.next() % 5) - 2)
    var session = FTPDownloadSession(url: url, existing: record, partSize: partSize, recordInterval: 100)
    var shell = FakeShell(partSize: partSize)
    shell.step(&session, "start()") { $0.start() }
    for reply in replies {
        shell.step(&session, "reply \(reply.shown)") { $0.reply(reply) }
        // The data connection is usually made at once; other events now and then.
        if shell.dataConnecting && random.next() % 4 != 0 {
            shell.step(&session, "dataConnected()") { $0.dataConnected() }
        }
        switch random.next() % 32 {
        case 0..<6 where shell.receiving:
            let count = Int(random.next() % 3000)
            shell.partSize += count
            shell.step(&session, "dataBytes(\(count))") { $0.dataBytes(count) }
        case 6..<8 where shell.receiving: shell.step(&session, "dataEnded()") { $0.dataEnded() }
        case 8: shell.step(&session, "dataFailed") { $0.dataFailed("reset") }
        case 9: shell.step(&session, "controlFailed") { $0.controlFailed("closed") }
        case 10: shell.step(&session, "pause") { $0.pause("suspended") }
        case 11: shell.step(&session, "start()") { $0.start() }
        case 12: shell.step(&session, "fileFailed") { $0.fileFailed("write: No space left on device") }
        default: break
        }
    }
}

/// The files and connections of a shell, kept as counts and flags, and the checks of every step.
private struct FakeShell {
    var partSize: Int
    var controlOpen = false
    var dataConnecting = false
    var dataOpen = false
    var receiving = false

    init(partSize: Int) { self.partSize = partSize }

    mutating func step(_ session: inout FTPDownloadSession, _ event: String, _ perform: (inout FTPDownloadSession) -> [FTPDownloadSession.Action]) {
        var actions = perform(&session)
        // The rename is done at once, as the real shell does it.
        if actions.last == .renameIntoPlace { actions += session.renamed() }
        func fail(_ what: String) -> Never {
            fatalError("\(event) gave \(actions): \(what)")
        }
        if event == "dataConnected()" {
            dataConnecting = false
            dataOpen = true
        }
        for action in actions {
            switch action {
            case .connectControl:
                if controlOpen || dataOpen || dataConnecting { fail("a control connection while one is open") }
                controlOpen = true
            case .sendCommand(let command):
                if !controlOpen { fail("\(command) without a control connection") }
                if command.utf8.contains(where: { $0 == 0 || $0 == 10 || $0 == 13 }) { fail("a command with CR, LF or NUL") }
            case .connectData(let port):
                if !controlOpen || dataOpen || dataConnecting { fail("a data connection without control, or a second one") }
                if !(1...65535).contains(port) { fail("data port \(port)") }
                dataConnecting = true
            case .receiveData:
                if !dataOpen { fail("receiving without a data connection") }
                receiving = true
            case .closeData:
                dataConnecting = false
                dataOpen = false
                receiving = false
            case .closeControl:
                controlOpen = false
            case .truncatePart(let length):
                if length < 0 || length > partSize { fail("a cut to \(length) of a part of \(partSize) bytes") }
                partSize = length
            case .writeRecord(let record):
                if record.offset > partSize { fail("a record of \(record.offset) bytes for a part of \(partSize)") }
                if record.url != url { fail("a record of another URL") }
                if DownloadRecord.decode(record.encoded()) != record { fail("a record that does not read back") }
            case .renameIntoPlace:
                if session.state != .done { fail("a rename that did not end the download: \(session.state)") }
                if let total = session.total, total != partSize { fail("a rename of \(partSize) bytes of \(total)") }
                if controlOpen || dataOpen || dataConnecting { fail("a rename with a connection open") }
                partSize = 0
            case .removeRecord:
                break
            case .report(let state):
                if state != session.state { fail("reported \(state) while \(session.state)") }
            }
        }
        switch session.state {
        case .running:
            if session.bytesDone != partSize { fail("bytesDone \(session.bytesDone) for a part of \(partSize)") }
        case .paused, .failed:
            if session.bytesDone != partSize { fail("bytesDone \(session.bytesDone) for a part of \(partSize)") }
            if controlOpen || dataOpen || dataConnecting { fail("stopped with a connection open") }
        case .done:
            if controlOpen || dataOpen || dataConnecting { fail("done with a connection open") }
        case .idle:
            fail("idle after an event")
        }
    }
}
