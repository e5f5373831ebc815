// The calls by name and the atomic write: each failure comes back as an error naming the call and the path,
// never ignored, and an atomic write that fails leaves the old file as it was.

import Foundation
@testable import NetLifeEvent
import NetLifeTestSupport
import Testing

@Suite struct FileCallsTests {
    @Test func anAtomicWriteReplacesTheFileAndLeavesNoTemporaryFile() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let path = scratch.file("record")
        try FileCalls.writeAtomically(path, Array("old\n".utf8))
        try FileCalls.writeAtomically(path, Array("new\n".utf8))
        #expect(scratch.read("record") == "new\n")
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    /// A directory where the temporary file goes cannot be removed to make room for a fresh one.
    @Test func anAtomicWriteThatCannotCreateItsTemporaryFileSaysSoAndLeavesTheOldFile() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let path = scratch.file("record")
        try FileCalls.writeAtomically(path, Array("old\n".utf8))
        #expect(mkdir(path + ".tmp", 0o755) == 0)
        #expect(throws: SystemError("unlink \(path).tmp", Errno(rawValue: EISDIR))) {
            try FileCalls.writeAtomically(path, Array("new\n".utf8))
        }
        #expect(RegularFile.read(path, limit: 100) == .success(Array("old\n".utf8)))
        rmdir(path + ".tmp")
    }

    /// A symbolic link at the temporary file's name is removed as a link, never written through.
    @Test func anAtomicWriteNeverWritesThroughALinkAtItsTemporaryName() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("victim", "theirs\n")
        symlink(scratch.file("victim"), scratch.file("record.tmp"))
        try FileCalls.writeAtomically(scratch.file("record"), Array("mine\n".utf8))
        #expect(scratch.read("victim") == "theirs\n")
        #expect(scratch.read("record") == "mine\n")
    }

    @Test func renameUnlinkMkdirAndTheDirectorysSyncEachNameWhatFailed() throws {
        #expect(throws: SystemError("rename /nonexistent-netlife/a", Errno(rawValue: ENOENT))) {
            try FileCalls.rename("/nonexistent-netlife/a", to: "/nonexistent-netlife/b")
        }
        #expect(throws: SystemError("open /nonexistent-netlife", Errno(rawValue: ENOENT))) {
            try FileCalls.syncDirectory(of: "/nonexistent-netlife/file")
        }
        // A file that is not there is removed already; a directory cannot be unlinked.
        #expect(try FileCalls.remove("/nonexistent-netlife/file") == false)
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        #expect(throws: SystemError("unlink \(scratch.path)", Errno(rawValue: EISDIR))) { try FileCalls.remove(scratch.path) }
        try FileCalls.syncDirectory(of: scratch.file("file"))
        try FileCalls.makeDirectory(scratch.file("made"), permissions: 0o700)
        #expect(throws: SystemError("mkdir \(scratch.file("made"))", Errno(rawValue: EEXIST))) {
            try FileCalls.makeDirectory(scratch.file("made"), permissions: 0o700)
        }
        scratch.write("gone", "x")
        #expect(try FileCalls.remove(scratch.file("gone")))
    }
}
