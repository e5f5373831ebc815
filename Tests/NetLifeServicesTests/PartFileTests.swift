// A download's part and record: a record that cannot be written comes back as an error naming the call and
// the path, never ignored, and nothing is renamed into place.

@preconcurrency import Glibc
@testable import NetLifeServices
import NetLifeEvent
import NetLifeTestSupport
import Testing

@Suite struct PartFileTests {
    /// A directory where the record's temporary file goes cannot be removed to make room for a fresh one.
    @Test func aPartWhoseRecordCannotBeWrittenReportsItAndRenamesNothing() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let part = PartFile(output: scratch.file("out"))
        #expect(Array("bytes".utf8).withUnsafeBytes { part.append($0) } == nil)
        #expect(mkdir(part.recordPath + ".tmp", 0o755) == 0)
        let error = part.writeRecord(DownloadRecord(url: try URLParts(parsing: "http://h/"), offset: 5))
        #expect(error?.description.hasPrefix("unlink \(part.recordPath).tmp") == true, "\(String(describing: error))")
        part.close()
        #expect(scratch.read("out.part") == "bytes")
        #expect(try FileCalls.remove(part.path))
    }

    @Test func aPartIsNeverOpenedThroughALinkNorAsAnythingButARegularFile() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("target", "theirs\n")
        symlink(scratch.file("target"), scratch.file("linked.part"))
        let linked = PartFile(output: scratch.file("linked"))
        let error = Array("x".utf8).withUnsafeBytes { linked.append($0) }
        #expect(error?.errno == Errno(rawValue: ELOOP), "\(String(describing: error))")
        #expect(scratch.read("target") == "theirs\n")
        mkfifo(scratch.file("fifo.part"), 0o600)
        let fifo = PartFile(output: scratch.file("fifo"))
        // Opened without blocking: a FIFO with no reader fails at once (ENXIO) instead of waiting for one.
        #expect(Array("x".utf8).withUnsafeBytes { fifo.append($0) } != nil)
        #expect(throws: SystemError.self) { _ = try linked.openForReading() }
        #expect(throws: SystemError.self) { _ = try fifo.openForReading() }
    }
}
