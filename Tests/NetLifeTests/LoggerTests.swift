// The logger's two outputs: `<N>`-prefixed lines on a descriptor, and (under systemd) journald records with
// fields, chosen by comparing JOURNAL_STREAM with the descriptor stderr is. journald itself is exercised
// under a real systemd (SystemdContainerTests: `journalctl NETLIFE_APP=echo`).

import Glibc
import NetLife
import Testing

/// What `body` logs through a logger writing to a pipe.
private func written(_ body: (Logger) -> Void) -> String {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { return "pipe failed" }
    defer { close(ends[0]) }
    var logger = Logger(label: "netlifed", minimumLevel: .debug)
    logger.fd = ends[1]
    body(logger)
    close(ends[1])
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = read(ends[0], &buffer, buffer.count)
        guard count > 0 else { break }
        bytes.append(contentsOf: buffer[..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}

@Suite struct LoggerTests {
    @Test func aRecordIsOneLineWithItsPriorityAndLabel() {
        let text = written { logger in
            logger.labeled("app echo").warning("two\nlines")
            logger.debug("detail")
        }
        #expect(text == "<4>app echo: two lines\n<7>netlifed: detail\n")
    }

    @Test func fieldsPassToTheLoggersMadeFromOneAndStayOutOfTheLines() {
        let app = Logger(label: "app echo").adding(field: "NETLIFE_APP", "echo")
        let listener = app.labeled("app echo listener main").adding(field: "NETLIFE_LISTENER", "main")
        #expect(listener.fields == [JournalField("NETLIFE_APP", "echo"), JournalField("NETLIFE_LISTENER", "main")])
        #expect(listener.adding(field: "NETLIFE_APP", "other").fields.map(\.value) == ["main", "other"])
        let text = written { $0.adding(field: "NETLIFE_APP", "echo").info("ready") }
        #expect(text == "<6>netlifed: ready\n")
    }

    @Test func aFieldNameJournaldWouldRefuseIsIgnored() {
        for name in ["", "_PID", "netlife_app", "NETLIFE-APP", "NETLIFE APP", String(repeating: "A", count: 65)] {
            #expect(JournalField(name, "x") == nil, "\(name)")
            #expect(Logger(label: "x").adding(field: name, "x").fields.isEmpty)
        }
        #expect(JournalField("NETLIFE_APP2", "x") != nil)
    }

    @Test func journalStreamMatchesOnlyTheDescriptorsOwnDeviceAndInode() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        var information = stat()
        try #require(fstat(ends[1], &information) == 0)
        let mine = "\(information.st_dev):\(information.st_ino)"
        #expect(Journal.streamMatches(mine, fd: ends[1]))
        #expect(!Journal.streamMatches("\(information.st_dev):\(information.st_ino + 1)", fd: ends[1]))
        for value in [nil, "", ":", "1", "1:2:3", "a:b", "-1:5", "\(information.st_dev):"] {
            #expect(!Journal.streamMatches(value, fd: ends[1]), "\(String(describing: value))")
        }
        #expect(!Journal.streamMatches(mine, fd: -1))
    }
}
