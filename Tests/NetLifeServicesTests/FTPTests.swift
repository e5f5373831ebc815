// The FTP downloader's pure core: the reply parser (single and multi-line replies, CRLF and bare LF, every
// split, limits, errors) and the session driven through every rule by a fake shell against a fake server,
// both in memory: a fresh download, a resume with REST, REST refused, a changed file, SIZE mismatches, EPSV
// refused, a 227 naming another host, RETR refused, the two orders of the data connection's end and 226,
// a pause, and the helpers that read 213, 227, 229 and the URL's path.

@testable import NetLifeServices
import Testing

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The suites below, under one name (`swift test --filter FTPTests`).
@Suite(.timeLimit(.minutes(5)))
struct FTPTests {}

// MARK: - Replies

private func parse(_ text: String) throws(FTPReplyError) -> [FTPReply] {
    var parser = FTPReplyParser()
    return try parser.feed(bytes(text))
}

private func parseError(_ text: String) -> String? {
    do {
        _ = try parse(text)
        return nil
    } catch {
        return error.message
    }
}

/// What vsftpd, pyftpdlib and ProFTPD send, in one stream.
private let transcript = "220-Welcome to the test server\r\n220-  second line\r\n220 ready.\r\n"
    + "331 Username ok, send password.\r\n230 Login successful.\r\n200 Type set to: Binary.\r\n"
    + "213 1048576\n213 20260301120000\r\n"
    + "211-Features:\r\n MDTM\r\n REST STREAM\r\n211-not the end\r\n211 End\r\n"
    + "229 Entering extended passive mode (|||40123|).\r\n150 File status okay. About to open data connection.\r\n"
    + "226 Transfer complete.\r\n221 Goodbye.\r\n"

extension FTPTests {
    @Suite(.timeLimit(.minutes(5)))
    struct Replies {
        @Test func readsSingleAndMultiLineReplies() throws {
            let replies = try parse(transcript)
            #expect(replies.map(\.code) == [220, 331, 230, 200, 213, 213, 211, 229, 150, 226, 221])
            #expect(replies[0].text == "Welcome to the test server\n220-  second line\nready.")
            #expect(replies[4].text == "1048576" && replies[5].text == "20260301120000")
            #expect(replies[6].text == "Features:\n MDTM\n REST STREAM\n211-not the end\nEnd")
            #expect(replies[7].text == "Entering extended passive mode (|||40123|).")
            // A code alone, text with a CR inside, empty lines between replies, another code inside.
            #expect(try parse("200\r\n") == [FTPReply(code: 200, text: "")])
            #expect(try parse("\r\n\n200 a\rb\r\n") == [FTPReply(code: 200, text: "a\rb")])
            #expect(try parse("150-x\r\n226 not mine\r\n150\r\n") == [FTPReply(code: 150, text: "x\n226 not mine\n")])
            #expect(try parse("500 caf\u{e9}\r\n")[0].shown == "500 caf\\xc3\\xa9")
        }

        @Test func everySplitGivesTheSameReplies() throws {
            let input = bytes(transcript)
            let whole = try parse(transcript)
            for split in 0...input.count {
                var parser = FTPReplyParser()
                let replies = try parser.feed(input[..<split]) + parser.feed(input[split...])
                #expect(replies == whole, "split at \(split)")
            }
            var parser = FTPReplyParser()
            var replies: [FTPReply] = []
            for byte in input { try parser.feed([byte], into: &replies) }
            #expect(replies == whole)
            #expect(parser.bufferedLineBytes == 0 && parser.bufferedReplyBytes == 0)
        }

        @Test func rejectsWhatIsNoReply() {
            #expect(parseError("HTTP/1.1 200 OK\r\n") == "not an FTP reply: \"HTTP/1.1 200 OK\"")
            #expect(parseError("600 x\r\n") != nil)
            #expect(parseError("099 x\r\n") != nil)
            #expect(parseError("20 x\r\n") != nil)
            #expect(parseError("200x\r\n") != nil)
            #expect(parseError(" 200 x\r\n") != nil)
            #expect(parseError("-200 x\r\n") != nil)
            // Replies before the error are kept by feed(_:into:).
            var parser = FTPReplyParser()
            var replies: [FTPReply] = []
            #expect(throws: FTPReplyError.self) { try parser.feed(bytes("200 a\r\nnonsense\r\n200 b\r\n"), into: &replies) }
            #expect(replies == [FTPReply(code: 200, text: "a")])
            // The error sticks.
            #expect(throws: FTPReplyError("not an FTP reply: \"nonsense\"")) { try parser.feed(bytes("200 c\r\n")) }
        }

        @Test func limitsLinesAndReplies() throws {
            let longest = "200 " + String(repeating: "x", count: FTPReplyParser.maxLineBytes - 4)
            #expect(try parse(longest + "\r\n")[0].text.utf8.count == FTPReplyParser.maxLineBytes - 4)
            #expect(try parse(longest + "\n").count == 1)
            #expect(parseError(longest + "x\r\n") == "reply line over 8192 bytes")
            #expect(parseError(longest + "\r\r\n") == "reply line over 8192 bytes")
            // A line that never ends is refused once it passes the limit, not stored.
            var parser = FTPReplyParser()
            #expect(throws: FTPReplyError.self) { try parser.feed([UInt8](repeating: 0x41, count: 100_000)) }
            #expect(parser.bufferedLineBytes == 0)

            let manyLines = "211-start\r\n" + String(repeating: " line\r\n", count: FTPReplyParser.maxReplyLines - 2) + "211 end\r\n"
            #expect(try parse(manyLines)[0].text.utf8.count > 5000)
            let tooMany = "211-start\r\n" + String(repeating: " line\r\n", count: FTPReplyParser.maxReplyLines - 1) + "211 end\r\n"
            #expect(parseError(tooMany) == "reply of over 1000 lines")
            let tooBig = "211-start\r\n" + String(repeating: String(repeating: "y", count: 8000) + "\r\n", count: 9) + "211 end\r\n"
            #expect(parseError(tooBig) == "reply of over 65536 bytes")
        }

        @Test func worksLinearlyHoweverTheBytesAreSplit() throws {
            // 600 replies of 999 lines each fed one kilobyte at a time: a quadratic parser would take minutes.
            let reply = bytes("211-s\r\n" + String(repeating: "x\r\n", count: 997) + "211 e\r\n")
            let input = Array((0..<600).map { _ in reply }.joined())
            let clock = ContinuousClock()
            var count = 0
            let elapsed = try clock.measure {
                var parser = FTPReplyParser()
                for start in stride(from: 0, to: input.count, by: 1024) {
                    count += try parser.feed(input[start..<min(input.count, start + 1024)]).count
                }
            }
            #expect(count == 600)
            #expect(elapsed < .seconds(5), "\(elapsed)")
        }
    }
}

// MARK: - Reading replies and URLs

extension FTPTests {
    @Suite(.timeLimit(.minutes(5)))
    struct Helpers {
        @Test func readsPassivePorts() {
            typealias Session = FTPDownloadSession
            #expect(Session.extendedPassivePort("Entering Extended Passive Mode (|||6446|)") == 6446)
            #expect(Session.extendedPassivePort("ok (!!!65535!)") == 65535)
            for bad in ["(|||0|)", "(|||65536|)", "(|||123456|)", "(||6446|)", "(|||6446)", "(|1|2|6446|)", "(1116446 1)",
                        "(|||-5|)", "(||||)", "no parentheses", "(", "(|||6446|"] {
                #expect(Session.extendedPassivePort(bad) == nil, "\(bad)")
            }
            #expect(Session.passivePort("Entering Passive Mode (127,0,0,1,156,64).") == 156 * 256 + 64)
            #expect(Session.passivePort("Entering Passive Mode 10,1,2,3,0,21") == 21)
            #expect(Session.passivePort("=1999,10,1,2,3,4,5,6") == 4 * 256 + 5, "a first run that is no address is skipped")
            for bad in ["(127,0,0,1,0,0)", "(127,0,0,1,256,1)", "(127,0,0,1,1)", "(127,0,0,1,1,)", "(1,2,3,4,5,6789)", "nothing"] {
                #expect(Session.passivePort(bad) == nil, "\(bad)")
            }
        }

        @Test func readsSizesAndModificationTimes() {
            typealias Session = FTPDownloadSession
            #expect(Session.decimal("1048576") == 1_048_576 && Session.decimal(" 7 ") == 7)
            #expect(Session.decimal("12 bytes") == nil && Session.decimal("") == nil && Session.decimal("99999999999999999999") == nil)
            #expect(Session.modificationTime("20260301120000") == .lastModified("Sun, 01 Mar 2026 12:00:00 GMT"))
            #expect(Session.modificationTime("19940601010203.123") == .lastModified("Wed, 01 Jun 1994 01:02:03 GMT"))
            #expect(Session.modificationTime("20240229235960") == .lastModified("Fri, 01 Mar 2024 00:00:00 GMT"))
            for bad in ["2026030112000", "202603011200001", "20261301120000", "20260230120000", "20230229120000",
                        "20260301240000", "20260301126000", "00000101000000", "20260301120000.", "20260301120000.x",
                        "191260301120000", "2026-03-01 12:00", ""] {
                #expect(Session.modificationTime(bad) == nil, "\(bad)")
            }
            // What the record keeps reads back.
            let record = DownloadRecord(url: ftpURL, validator: Session.modificationTime("20260301120000"), total: 5, offset: 2)
            #expect(DownloadRecord.decode(record.encoded()) == record)
        }

        @Test func sendsTheURLsPathRelativeAndDecoded() throws {
            func path(_ text: String) throws -> Result<String, FTPPathError> {
                FTPDownloadSession.commandPath(try URLParts(parsing: text))
            }
            #expect(try path("ftp://127.0.0.1/file.bin") == .success("file.bin"))
            #expect(try path("ftp://127.0.0.1/pub/a%20b.iso") == .success("pub/a b.iso"))
            #expect(try path("ftp://127.0.0.1/%2Fetc/motd") == .success("/etc/motd"))
            #expect(try path("ftp://127.0.0.1/caf%C3%A9") == .success("caf\u{e9}"))
            for bad in ["ftp://127.0.0.1/", "ftp://127.0.0.1", "ftp://127.0.0.1/pub/", "ftp://127.0.0.1/a%0d%0aDELE%20b",
                        "ftp://127.0.0.1/a%00", "ftp://127.0.0.1/a%ff", "ftp://127.0.0.1/a?b"] {
                guard case .failure = try path(bad) else {
                    Issue.record("\(bad) was accepted")
                    continue
                }
            }
            var session = FTPDownloadSession(url: try URLParts(parsing: "ftp://127.0.0.1/a%0d%0aDELE%20b"), existing: nil, partSize: 0)
            #expect(session.start() == [.report(.running), .report(.failed("the path holds a CR, LF, NUL or bytes that are not UTF-8"))])
        }
    }
}

// MARK: - The session, against a fake server through a fake shell

private typealias Action = FTPDownloadSession.Action

/// Deterministic bytes: different seeds give different contents.
private func content(_ count: Int, seed: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 / 253 &+ seed) }
}

private let ftpURL = URLParts(scheme: .ftp, host: .ipv4([127, 0, 0, 1]), port: 2121, path: "/pub/file.bin")
private let mdtm = "20260301120000"
private let validator = DownloadValidator.lastModified("Sun, 01 Mar 2026 12:00:00 GMT")

/// A server with one file, answering as pyftpdlib does, with switches for the servers the rules defend
/// against. Each command is answered with reply text that goes through the parser.
private struct FakeFTPServer {
    var content: [UInt8]
    var modified: String? = mdtm
    var sizeSupported = true
    var userReply = "331 Username ok, send password."
    /// The answer to REST when it is not 350.
    var restRefusal: String?
    var extendedPassiveReply = "229 Entering extended passive mode (|||40123|)."
    var passiveReply = "227 Entering passive mode (10,9,8,7,156,64)."
    /// The answer to RETR instead of the file.
    var retrRefusal: String?
    /// The 226 comes before the data connection's end.
    var finalReplyFirst = false
    /// Bytes sent past the file, or short of it.
    var extraBytes: [UInt8] = []
    var missingBytes = 0
    private(set) var commands: [String] = []
    private var restartAt = 0

    init(content: [UInt8]) { self.content = content }

    private func replies(_ text: String) -> [FTPReply] {
        var parser = FTPReplyParser()
        return (try? parser.feed(bytes(text + "\r\n"))) ?? []
    }

    var greeting: [FTPReply] { replies("220-pyftpdlib ready.\r\n220 welcome") }

    /// The replies to a command, and for RETR the data (nil when RETR is refused).
    mutating func answer(_ command: String) -> (replies: [FTPReply], data: [UInt8]?, final: [FTPReply]) {
        commands.append(command)
        let word = command.prefix { $0 != " " }
        let argument = command.drop { $0 != " " }.dropFirst()
        switch word {
        case "USER": return (replies(userReply), nil, [])
        case "PASS": return (replies("230 Login successful."), nil, [])
        case "TYPE": return (replies("200 Type set to: Binary."), nil, [])
        case "SIZE":
            return (replies(sizeSupported ? "213 \(content.count)" : "502 Command not implemented."), nil, [])
        case "MDTM": return (replies(modified.map { "213 \($0)" } ?? "550 Not a file."), nil, [])
        case "REST":
            if let restRefusal { return (replies(restRefusal), nil, []) }
            restartAt = Int(argument) ?? 0
            return (replies("350 Restarting at position \(restartAt)."), nil, [])
        case "EPSV": return (replies(extendedPassiveReply), nil, [])
        case "PASV": return (replies(passiveReply), nil, [])
        case "RETR":
            if let retrRefusal { return (replies(retrRefusal), nil, []) }
            let data = Array(content[min(restartAt, content.count)...].dropLast(missingBytes)) + extraBytes
            restartAt = 0
            return (replies("150 File status okay. About to open data connection."), data, replies("226 Transfer complete."))
        case "QUIT": return (replies("221 Goodbye."), nil, [])
        default: return (replies("500 Command not understood."), nil, [])
        }
    }
}

/// Performs actions as the real shell does, on files and connections kept in memory, and checks the
/// session's promises on the way: one control and one data connection at a time, commands only on an open
/// control connection, no cut past the part's end, no record that vouches for more bytes than the part
/// holds, every record readable back.
private struct FakeFTPShell {
    var part: [UInt8] = []
    var recordFile: String?
    var output: [UInt8]?
    var performed: [Action] = []
    var dataPorts: [Int] = []
    /// Data is written in pieces of this size.
    var pieceSize = 7
    /// Once the part holds this many bytes, the app pauses the download (once).
    var pauseAt: Int?
    /// The next rename fails.
    var failsRename = false
    private var controlOpen = false
    private var dataOpen = false
    private var receiving = false

    /// The session a restarted daemon makes from the files.
    func reopened(recordInterval: Int = ResumableDownload.defaultRecordInterval) -> FTPDownloadSession {
        FTPDownloadSession(url: ftpURL, existing: recordFile.flatMap(DownloadRecord.decode), partSize: part.count,
                           recordInterval: recordInterval)
    }

    /// The record on disk.
    var record: DownloadRecord? { recordFile.flatMap(DownloadRecord.decode) }

    /// The commands sent, in order.
    var commands: [String] {
        performed.compactMap { if case .sendCommand(let command) = $0 { return command } else { return nil } }
    }

    /// Performs `actions` and everything they lead to.
    mutating func run(_ actions: [Action], _ session: inout FTPDownloadSession, _ server: inout FakeFTPServer) {
        var queue = actions
        while !queue.isEmpty {
            queue += perform(queue.removeFirst(), &session, &server)
        }
    }

    private mutating func deliver(_ replies: [FTPReply], _ session: inout FTPDownloadSession, _ server: inout FakeFTPServer) {
        for reply in replies where controlOpen {
            run(session.reply(reply), &session, &server)
        }
    }

    private mutating func perform(_ action: Action, _ session: inout FTPDownloadSession, _ server: inout FakeFTPServer) -> [Action] {
        performed.append(action)
        switch action {
        case .connectControl:
            #expect(!controlOpen && !dataOpen, "a control connection while one is open")
            controlOpen = true
            deliver(server.greeting, &session, &server)
        case .sendCommand(let command):
            #expect(controlOpen, "\(command) without a control connection")
            #expect(!command.contains("\r") && !command.contains("\n"))
            let (replies, data, final) = server.answer(command)
            deliver(replies, &session, &server)
            guard let data else { return [] }
            #expect(receiving, "RETR before the data connection is read")
            if server.finalReplyFirst { deliver(final, &session, &server) }
            var offset = 0
            while offset < data.count, receiving {
                var count = min(pieceSize, data.count - offset)
                if let pauseAt { count = min(count, max(0, pauseAt - part.count)) }
                if count > 0 {
                    part += data[offset..<(offset + count)]
                    offset += count
                    run(session.dataBytes(count), &session, &server)
                }
                if let pauseAt, part.count >= pauseAt {
                    self.pauseAt = nil
                    run(session.pause("background task expired"), &session, &server)
                }
            }
            if receiving { run(session.dataEnded(), &session, &server) }
            if !server.finalReplyFirst { deliver(final, &session, &server) }
        case .connectData(let port):
            #expect(controlOpen && !dataOpen, "a data connection without control, or a second one")
            dataPorts.append(port)
            dataOpen = true
            return session.dataConnected()
        case .receiveData:
            #expect(dataOpen)
            receiving = true
        case .closeData:
            dataOpen = false
            receiving = false
        case .closeControl:
            controlOpen = false
        case .truncatePart(let size):
            #expect(size <= part.count, "a cut to \(size) of a part of \(part.count) bytes")
            part = Array(part.prefix(size))
        case .writeRecord(let record):
            #expect(record.offset <= part.count, "a record of \(record.offset) bytes for a part of \(part.count)")
            #expect(DownloadRecord.decode(record.encoded()) == record)
            recordFile = record.encoded()
        case .renameIntoPlace:
            if failsRename {
                failsRename = false
                return session.fileFailed("rename: Permission denied")
            }
            output = part
            part = []
            return session.renamed()
        case .removeRecord:
            recordFile = nil
        case .report:
            break
        }
        return []
    }
}

/// The commands of a fresh download up to the data connection.
private let loginCommands = ["USER anonymous", "PASS netlife@", "TYPE I", "SIZE pub/file.bin", "MDTM pub/file.bin"]

/// A fresh download from `server` through `shell`, run to wherever it stops.
private func freshDownload(_ server: inout FakeFTPServer, shell: FakeFTPShell = FakeFTPShell()) -> (FTPDownloadSession, FakeFTPShell) {
    var session = FTPDownloadSession(url: ftpURL, existing: nil, partSize: 0)
    var shell = shell
    shell.run(session.start(), &session, &server)
    return (session, shell)
}

/// A download paused after `offset` bytes of the file `data` (served by `server` when given): the shell
/// holding its part and record.
private func pausedShell(_ data: [UInt8], at offset: Int, on server: FakeFTPServer? = nil) -> FakeFTPShell {
    var server = server ?? FakeFTPServer(content: data)
    var shell = FakeFTPShell()
    shell.pauseAt = offset
    let session: FTPDownloadSession
    (session, shell) = freshDownload(&server, shell: shell)
    #expect(session.state == .paused("background task expired") && shell.part == Array(data.prefix(offset)))
    return shell
}

extension FTPTests {
    @Suite(.timeLimit(.minutes(5)))
    struct Session {
        @Test func aFreshDownloadIsDoneAndRenamedIntoPlace() {
            let data = content(1000)
            for finalReplyFirst in [false, true] {
                var server = FakeFTPServer(content: data)
                server.finalReplyFirst = finalReplyFirst
                let (session, shell) = freshDownload(&server)
                #expect(shell.output == data && shell.recordFile == nil && session.state == .done, "226 first: \(finalReplyFirst)")
                #expect(session.bytesDone == 1000 && session.total == 1000)
                #expect(server.commands == loginCommands + ["EPSV", "RETR pub/file.bin", "QUIT"])
                #expect(shell.dataPorts == [40123])
                let record = DownloadRecord(url: ftpURL, validator: validator, total: 1000)
                #expect(shell.performed.prefix(8) == [
                    .report(.running), .connectControl, .sendCommand("USER anonymous"), .sendCommand("PASS netlife@"),
                    .sendCommand("TYPE I"), .sendCommand("SIZE pub/file.bin"), .sendCommand("MDTM pub/file.bin"),
                    .truncatePart(to: 0),
                ])
                #expect(shell.performed.dropFirst(8).prefix(5) == [
                    .writeRecord(record), .sendCommand("EPSV"), .connectData(port: 40123), .receiveData, .sendCommand("RETR pub/file.bin"),
                ])
                #expect(shell.performed.suffix(6) == [.closeData, .sendCommand("QUIT"), .closeControl, .renameIntoPlace, .removeRecord, .report(.done)])
            }
        }

        @Test func aLoginWithoutPasswordAndOneRefused() {
            var server = FakeFTPServer(content: content(10))
            server.userReply = "230 Anonymous access granted."
            var (session, shell) = freshDownload(&server)
            #expect(session.state == .done && !server.commands.contains { $0.hasPrefix("PASS") })

            server = FakeFTPServer(content: content(10))
            server.userReply = "530 Anonymous access not allowed."
            (session, shell) = freshDownload(&server)
            #expect(session.state == .failed("anonymous login: the server answered 530 Anonymous access not allowed."))
            #expect(shell.performed.suffix(2) == [.closeControl, .report(session.state)])
        }

        @Test func aPausedDownloadResumesWithREST() {
            let data = content(1000)
            var shell = pausedShell(data, at: 350)
            #expect(shell.record == DownloadRecord(url: ftpURL, validator: validator, total: 1000, offset: 350))
            #expect(shell.performed.suffix(4) == [.closeData, .closeControl, .writeRecord(shell.record!), .report(.paused("background task expired"))])

            var server = FakeFTPServer(content: data)
            var session = shell.reopened()
            #expect(session.state == .idle && session.bytesDone == 350 && session.total == 1000)
            shell.performed = []
            shell.run(session.start(), &session, &server)
            #expect(server.commands == loginCommands + ["REST 350", "EPSV", "RETR pub/file.bin", "QUIT"])
            #expect(!shell.performed.contains(.truncatePart(to: 0)))
            #expect(shell.output == data && session.state == .done && shell.recordFile == nil)
        }

        @Test func recordsAreWrittenEveryIntervalAndAtThePause() {
            let data = content(1000)
            var server = FakeFTPServer(content: data)
            var session = FTPDownloadSession(url: ftpURL, existing: nil, partSize: 0, recordInterval: 100)
            var shell = FakeFTPShell()
            shell.pauseAt = 350
            shell.run(session.start(), &session, &server)
            let offsets = shell.performed.compactMap { action -> Int? in
                if case .writeRecord(let record) = action { return record.offset }
                return nil
            }
            #expect(offsets == [0, 105, 210, 315, 350])
            #expect(session.bytesDone == 350)
            // Paused again, before anything happens: nothing more.
            #expect(session.pause("again") == [])
        }

        @Test func restRefusedStartsOverFromZero() {
            let data = content(1000)
            for refusal in ["500 Command not understood.", "502 Command not implemented.", "421 Service not available, closing."] {
                var shell = pausedShell(data, at: 400)
                var server = FakeFTPServer(content: data)
                server.restRefusal = refusal
                var session = shell.reopened()
                shell.performed = []
                shell.run(session.start(), &session, &server)
                let fresh = DownloadRecord(url: ftpURL, validator: validator, total: 1000)
                #expect(shell.performed.contains(.truncatePart(to: 0)), "\(refusal)")
                #expect(shell.performed.contains(.writeRecord(fresh)), "\(refusal)")
                #expect(server.commands == loginCommands + ["REST 400", "EPSV", "RETR pub/file.bin", "QUIT"], "\(refusal)")
                #expect(shell.output == data && session.state == .done, "\(refusal)")
            }
        }

        @Test func aChangedFileStartsOverFromZero() {
            let first = content(1000, seed: 1)
            let second = content(1000, seed: 2)   // the same length: only MDTM tells
            var shell = pausedShell(first, at: 600)
            var server = FakeFTPServer(content: second)
            server.modified = "20260302080000"
            var session = shell.reopened()
            shell.performed = []
            shell.run(session.start(), &session, &server)
            #expect(!server.commands.contains { $0.hasPrefix("REST") })
            #expect(shell.performed.contains(.truncatePart(to: 0)))
            #expect(shell.output == second && session.state == .done)

            // A changed SIZE with the same MDTM starts over as well.
            shell = pausedShell(first, at: 600)
            server = FakeFTPServer(content: content(1200, seed: 3))
            session = shell.reopened()
            shell.run(session.start(), &session, &server)
            #expect(!server.commands.contains { $0.hasPrefix("REST") } && shell.output == content(1200, seed: 3))
        }

        @Test func withoutMDTMTheDownloadStartsOverEvenWithTheSameSize() {
            let data = content(1000)
            var server = FakeFTPServer(content: data)
            server.modified = nil
            var shell = pausedShell(data, at: 500, on: server)
            #expect(shell.record == DownloadRecord(url: ftpURL, validator: nil, total: 1000, offset: 500))
            var session = shell.reopened()
            shell.run(session.start(), &session, &server)
            #expect(!server.commands.contains { $0.hasPrefix("REST") })
            #expect(shell.output == data && session.state == .done)
        }

        @Test func withoutSIZETheLengthIsWhatCameAndResumesNeedTheSameAnswer() {
            let data = content(1000)
            var server = FakeFTPServer(content: data)
            server.sizeSupported = false
            var shell = pausedShell(data, at: 300, on: server)
            #expect(shell.record == DownloadRecord(url: ftpURL, validator: validator, total: nil, offset: 300))
            var session = shell.reopened()
            shell.run(session.start(), &session, &server)
            #expect(server.commands.contains("REST 300"))
            #expect(shell.output == data && session.state == .done && session.total == 1000)
        }

        @Test func aCompletePartIsRenamedWithoutRETR() {
            let data = content(500)
            var server = FakeFTPServer(content: data)
            let record = DownloadRecord(url: ftpURL, validator: validator, total: 500, offset: 500)
            var session = FTPDownloadSession(url: ftpURL, existing: record, partSize: 500)
            var shell = FakeFTPShell()
            shell.part = data
            shell.run(session.start(), &session, &server)
            #expect(server.commands == loginCommands + ["QUIT"])
            #expect(shell.output == data && session.state == .done)
        }

        @Test func aPartLongerThanItsRecordIsCutBack() {
            let data = content(500)
            var server = FakeFTPServer(content: data)
            let record = DownloadRecord(url: ftpURL, validator: validator, total: 500, offset: 200)
            var session = FTPDownloadSession(url: ftpURL, existing: record, partSize: 260)
            var shell = FakeFTPShell()
            shell.part = Array(data.prefix(200)) + [UInt8](repeating: 0xEE, count: 60)
            shell.run(session.start(), &session, &server)
            #expect(shell.performed.prefix(3) == [.report(.running), .truncatePart(to: 200), .connectControl])
            #expect(server.commands.contains("REST 200") && shell.output == data)
            // A record of another URL counts for nothing: the part is cut to 0.
            let other = DownloadRecord(url: URLParts(scheme: .ftp, host: .ipv4([127, 0, 0, 1]), path: "/other"), validator: validator, offset: 9)
            session = FTPDownloadSession(url: ftpURL, existing: other, partSize: 9)
            #expect(session.start().prefix(2) == [.report(.running), .truncatePart(to: 0)])
        }

        @Test func aPartThatCouldNotBeRenamedIsRenamedByTheNextStart() {
            let data = content(300)
            var server = FakeFTPServer(content: data)
            var shell = FakeFTPShell()
            shell.failsRename = true
            var session: FTPDownloadSession
            (session, shell) = freshDownload(&server, shell: shell)
            #expect(session.state == .paused("rename: Permission denied") && shell.output == nil)
            #expect(shell.record == DownloadRecord(url: ftpURL, validator: validator, total: 300, offset: 300))
            session = shell.reopened()
            shell.run(session.start(), &session, &server)
            #expect(session.state == .done && shell.output == data && shell.recordFile == nil)
            #expect(server.commands.suffix(6) == loginCommands + ["QUIT"], "renamed without a second RETR")
        }

        @Test func aLengthOtherThanSIZEIsNeverRenamed() {
            let data = content(1000)
            var server = FakeFTPServer(content: data)
            server.missingBytes = 100
            var (session, shell) = freshDownload(&server)
            #expect(session.state == .paused("the transfer ended after 900 of 1000 bytes"))
            #expect(shell.output == nil && shell.record?.offset == 900)

            server = FakeFTPServer(content: data)
            server.extraBytes = [1, 2, 3]
            (session, shell) = freshDownload(&server)
            #expect(session.state == .failed("the server sent more than the 1000 bytes SIZE announced"))
            #expect(shell.output == nil && shell.part.isEmpty && shell.record == DownloadRecord(url: ftpURL))
        }

        @Test func passiveModeFallsBackAndIgnoresTheAddressOf227() {
            for refusal in ["500 Command EPSV not understood.", "229 Extended passive mode (no port)", "502 Not implemented."] {
                var server = FakeFTPServer(content: content(100))
                server.extendedPassiveReply = refusal
                let (session, shell) = freshDownload(&server)
                #expect(server.commands.suffix(4) == ["EPSV", "PASV", "RETR pub/file.bin", "QUIT"], "\(refusal)")
                // 10.9.8.7 in the 227 is not where the data connection goes: only the port is taken.
                #expect(shell.dataPorts == [156 * 256 + 64] && session.state == .done, "\(refusal)")
            }
            var server = FakeFTPServer(content: content(100))
            server.extendedPassiveReply = "500 no"
            server.passiveReply = "500 PASV not understood."
            let (session, _) = freshDownload(&server)
            #expect(session.state == .failed("passive mode (EPSV and PASV): the server answered 500 PASV not understood."))
        }

        @Test func retrRefusedFailsWithTheServersText() {
            var server = FakeFTPServer(content: content(100))
            server.retrRefusal = "550 No such file or directory.\u{1}"
            var (session, shell) = freshDownload(&server)
            #expect(session.state == .failed("RETR: the server answered 550 No such file or directory.\\x01"))
            #expect(shell.performed.suffix(3) == [.closeData, .closeControl, .report(session.state)])
            #expect(shell.output == nil)

            server.retrRefusal = "425 Can't open data connection."
            (session, shell) = freshDownload(&server)
            #expect(session.state == .paused("RETR: the server answered 425 Can't open data connection."))
        }

        @Test func theTransferNeedsBothTheDataEndAndTheFinalReply() {
            var session = FTPDownloadSession(url: ftpURL, existing: nil, partSize: 0)
            func reply(_ code: Int, _ text: String = "x") -> [Action] { session.reply(FTPReply(code: code, text: text)) }
            _ = session.start()
            for code in [220, 331, 230, 200] { _ = reply(code) }
            _ = reply(213, "10")
            _ = reply(213, mdtm)
            #expect(reply(229, "(|||5000|)") == [.connectData(port: 5000)])
            #expect(session.dataConnected() == [.receiveData, .sendCommand("RETR pub/file.bin")])
            #expect(reply(150).isEmpty)
            #expect(session.dataBytes(10).isEmpty)
            #expect(reply(226).isEmpty, "226 before the data connection's end waits for it")
            #expect(session.state == .running)
            #expect(session.dataEnded() == [.closeData, .sendCommand("QUIT"), .closeControl, .renameIntoPlace])
            #expect(session.state == .running && session.pause("too late") == [] && session.controlFailed("closed") == [])
            #expect(session.renamed() == [.removeRecord, .report(.done)])
            #expect(session.state == .done && session.fileFailed("stale") == [] && session.renamed() == [])
        }

        @Test func brokenConnectionsAndTheServerClosingPause() {
            var session = FTPDownloadSession(url: ftpURL, existing: nil, partSize: 0)
            _ = session.start()
            #expect(session.controlFailed("connect: Connection refused") == [
                .closeControl, .writeRecord(DownloadRecord(url: ftpURL)), .report(.paused("connect: Connection refused")),
            ])
            _ = session.start()
            #expect(session.reply(FTPReply(code: 421, text: "Too many connections")).last == .report(.paused("the server is closing: 421 Too many connections")))
            _ = session.start()
            for code in [220, 331, 230, 200] { _ = session.reply(FTPReply(code: code, text: "")) }
            _ = session.reply(FTPReply(code: 213, text: "10"))
            _ = session.reply(FTPReply(code: 213, text: mdtm))
            _ = session.reply(FTPReply(code: 229, text: "(|||5000|)"))
            _ = session.dataConnected()
            _ = session.dataBytes(4)
            #expect(session.dataFailed("read: Connection reset by peer").suffix(2) == [
                .writeRecord(DownloadRecord(url: ftpURL, validator: validator, total: 10, offset: 4)),
                .report(.paused("read: Connection reset by peer")),
            ])
        }

        @Test func eventsOutOfPlaceChangeNothing() {
            var session = FTPDownloadSession(url: ftpURL, existing: nil, partSize: 0)
            #expect(session.reply(FTPReply(code: 220, text: "")) == [])
            #expect(session.dataConnected() == [] && session.dataBytes(5) == [] && session.dataEnded() == [])
            #expect(session.controlFailed("x") == [] && session.dataFailed("x") == [] && session.pause("x") == [])
            _ = session.start()
            #expect(session.start() == [])
            #expect(session.dataBytes(5) == [] && session.dataEnded() == [] && session.dataConnected() == [])
            #expect(session.dataFailed("x") == [] && session.bytesDone == 0)
            // A reply nobody asked for ends the conversation.
            _ = session.reply(FTPReply(code: 220, text: ""))
            #expect(session.reply(FTPReply(code: 226, text: "stray")).last == .report(.failed("anonymous login: the server answered 226 stray")))
        }
    }
}
