// The transfers' file calls: each failure comes back as an error naming the call and the path, never ignored.

@preconcurrency import Glibc
@testable import NetLifeServices
import NetLifeEvent
import NetLifeTestSupport
import Testing

@Suite struct FileCallsTests {
    /// A directory where the temporary file goes cannot be removed to make room for a fresh one.
    @Test func anAtomicWriteThatCannotCreateItsTemporaryFileSaysSoAndLeavesTheOldFile() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let path = scratch.file("record")
        #expect(writeFileAtomically(path, Array("old\n".utf8)) == nil)
        #expect(mkdir(path + ".tmp", 0o755) == 0)
        let error = writeFileAtomically(path, Array("new\n".utf8))
        #expect(error?.description.hasPrefix("unlink \(path).tmp") == true, "\(String(describing: error))")
        #expect(readSmallFile(path) == "old\n")
        rmdir(path + ".tmp")
    }

    @Test func aWriteToAFullDiskIsAnErrorNotAShortRecord() {
        let fd = open("/dev/full", O_WRONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        let error = writeAll(fd, [UInt8](repeating: 1, count: 10), to: "/dev/full")
        #expect(error?.description.hasPrefix("write /dev/full") == true, "\(String(describing: error))")
        #expect(error?.description.contains("ENOSPC") == true || error?.description.contains("No space") == true, "\(String(describing: error))")
    }

    @Test func fsyncRenameUnlinkAndTheDirectorysSyncEachNameWhatFailed() {
        #expect(syncFile(-1, "the part")?.description.hasPrefix("fsync the part") == true)
        #expect(renameFile("/nonexistent-netlife/a", to: "/nonexistent-netlife/b")?.description.hasPrefix("rename /nonexistent-netlife/a") == true)
        #expect(syncDirectory(of: "/nonexistent-netlife/file")?.description.hasPrefix("open /nonexistent-netlife") == true)
        // A file that is not there is removed already; a directory cannot be unlinked.
        #expect(removeFile("/nonexistent-netlife/file") == nil)
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        #expect(removeFile(scratch.path)?.description.hasPrefix("unlink \(scratch.path)") == true)
        #expect(syncDirectory(of: scratch.file("file")) == nil)
    }

    @Test func aPartWhoseRecordCannotBeWrittenReportsItAndRenamesNothing() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let part = PartFile(output: scratch.file("out"))
        #expect(Array("bytes".utf8).withUnsafeBytes { part.append($0) } == nil)
        #expect(mkdir(part.recordPath + ".tmp", 0o755) == 0)
        let error = part.writeRecord(DownloadRecord(url: try URLParts(parsing: "http://h/"), offset: 5))
        #expect(error?.description.hasPrefix("unlink \(part.recordPath).tmp") == true, "\(String(describing: error))")
        part.close()
        #expect(removeFile(part.path) == nil)
    }
}
