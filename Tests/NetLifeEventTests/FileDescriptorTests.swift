// The owned descriptor and the opens built on it: a descriptor is closed once (dropped or closed) and never
// by a `take()`; O_NOFOLLOW refuses a link; a FIFO or a directory is refused without the open waiting on it;
// a bounded read refuses what is over its bound; a write of many bytes through a small pipe arrives whole.

import Foundation
@testable import NetLifeEvent
import NetLifeTestSupport
import Testing

/// A descriptor of the writing end of a new pipe, moved to a number far above the ones the tests running
/// beside this one open, so that no other test's open takes that number while this one looks at it; and
/// the reading end.
private func highPipe() throws -> (reading: CInt, writing: CInt) {
    var ends: [CInt] = [-1, -1]
    try #require(pipe(&ends) == 0)
    var limit = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    let high = CInt(min(limit.rlim_cur, 65536)) - 16
    let moved = fcntl(ends[1], F_DUPFD_CLOEXEC, high)
    close(ends[1])
    try #require(moved >= high)
    return (ends[0], moved)
}

/// Whether `fd` is an open descriptor of this process.
private func isOpen(_ fd: CInt) -> Bool {
    fcntl(fd, F_GETFD) != -1 || errno != EBADF
}

/// Whether the pipe whose reading end is `fd` has no writer left (a read sees its end).
private func writerIsGone(_ fd: CInt) -> Bool {
    var byte: UInt8 = 0
    return read(fd, &byte, 1) == 0
}

@Suite struct FileDescriptorTests {
    @Test func droppingItClosesTheDescriptor() throws {
        let (reading, writing) = try highPipe()
        defer { close(reading) }
        do {
            let file = FileDescriptor(owning: writing, name: "the pipe")
            #expect(file.rawValue == writing)
            #expect(isOpen(writing))
        }
        #expect(!isOpen(writing), "the number is free once the owner is gone")
        #expect(writerIsGone(reading))
    }

    @Test func closeClosesOnceAndTheDropAfterItDoesNothing() throws {
        let (reading, writing) = try highPipe()
        defer { close(reading) }
        let file = FileDescriptor(owning: writing, name: "the pipe")
        try file.close()
        #expect(!isOpen(writing))
        #expect(writerIsGone(reading))
    }

    @Test func takeHandsTheDescriptorOnWithoutClosingIt() throws {
        let (reading, writing) = try highPipe()
        defer { close(reading) }
        let file = FileDescriptor(owning: writing, name: "the pipe")
        let taken = file.take()
        #expect(taken == writing)
        #expect(isOpen(writing), "the new owner has it open")
        #expect(close(taken) == 0)
    }

    @Test func noFollowRefusesASymbolicLinkWithELOOP() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("file", "text")
        symlink(scratch.file("file"), scratch.file("link"))
        #expect(throws: SystemError("open \(scratch.file("link"))", Errno(rawValue: ELOOP))) {
            _ = try FileDescriptor.open(scratch.file("link"), .readOnly, options: .noFollow)
        }
        #expect(throws: RegularFile.Failure.system(SystemError("open \(scratch.file("link"))", Errno(rawValue: ELOOP)))) {
            _ = try RegularFile.open(scratch.file("link"), .writeOnly, options: [.create, .noFollow])
        }
        #expect(scratch.read("file") == "text")
        let followed = try FileDescriptor.open(scratch.file("link"), .readOnly)
        #expect(try followed.isRegularFile())
    }

    @Test func aFIFOOrADirectoryIsRefusedWithoutWaitingOnIt() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let fifo = scratch.file("fifo")
        try #require(mkfifo(fifo, 0o600) == 0)
        // A blocking open of a FIFO with no writer would wait for ever: it runs on a thread of its own, and
        // if it has not come back in time, a writer opened here lets it go and the test fails.
        let outcome = Outcome<RegularFile.Failure?>()
        let thread = Thread { outcome.set(RegularFile.checkReadable(fifo)) }
        thread.start()
        let returned = waitUntil(timeout: 10) { outcome.isSet }
        if !returned {
            let writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            _ = waitUntil(timeout: 10) { outcome.isSet }
            close(writer)
        }
        #expect(returned, "the open of a FIFO with no writer waited")
        #expect(outcome.value == .some(.notRegular("a FIFO")))
        // Opened for writing with no reader, it fails at once (ENXIO).
        #expect(throws: RegularFile.Failure.system(SystemError("open \(fifo)", Errno(rawValue: ENXIO)))) {
            _ = try RegularFile.open(fifo, .writeOnly)
        }
        #expect(throws: RegularFile.Failure.notRegular("a directory")) { _ = try RegularFile.open(scratch.path, .readOnly) }
        #expect(RegularFile.checkReadable(scratch.path) == .notRegular("a directory"))
        #expect(RegularFile.Failure.notRegular("a FIFO").systemError(fifo) == SystemError("open \(fifo) (not a regular file)", Errno(rawValue: EINVAL)))
    }

    @Test func aBoundedReadRefusesAFileOverItsBound() {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("five", "12345")
        #expect(RegularFile.read(scratch.file("five"), limit: 5) == .success(Array("12345".utf8)))
        #expect(RegularFile.read(scratch.file("five"), limit: 4) == .failure(.tooLarge(4)))
        #expect(RegularFile.Failure.tooLarge(4).description == "larger than 4 bytes")
        // A file whose size says 0 while it holds more is read only up to the bound all the same.
        #expect(RegularFile.read("/proc/self/status", limit: 16) == .failure(.tooLarge(16)))
        #expect(RegularFile.read(scratch.file("missing"), limit: 5) == .failure(.system(SystemError("open \(scratch.file("missing"))", Errno(rawValue: ENOENT)))))
    }

    @Test func writeAllWritesEverythingThroughAPipeWithASmallBuffer() throws {
        var ends: [CInt] = [-1, -1]
        try #require(pipe(&ends) == 0)
        // F_SETPIPE_SZ: the pipe holds one page, so the write goes out in many pieces as the reader drains it.
        _ = fcntl(ends[1], 1031, 4096)
        let bytes = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        let received = Outcome<[UInt8]>()
        let reading = ends[0]
        let reader = Thread {
            var all: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 1000)
            while true {
                let count = read(reading, &chunk, chunk.count)
                if count <= 0 { break }
                all += chunk[0..<count]
            }
            received.set(all)
        }
        reader.start()
        let writer = FileDescriptor(owning: ends[1], name: "the pipe")
        try writer.write(all: bytes)
        try writer.close()
        #expect(waitUntil(timeout: 10) { received.isSet })
        close(reading)
        #expect(received.value == bytes)
    }

    @Test func aFailedWriteNamesTheFileAndAnUnownedBadDescriptorIsThrownNotTrapped() throws {
        let full = try FileDescriptor.open("/dev/full", .writeOnly)
        #expect(throws: SystemError("write /dev/full", Errno(rawValue: ENOSPC))) { try full.write(all: [1, 2, 3]) }
        #expect(throws: SystemError("write stderr", Errno(rawValue: EBADF))) {
            try [UInt8](repeating: 0, count: 3).withUnsafeBytes { try FileDescriptor.write(all: $0, toUnowned: -1, name: "stderr") }
        }
    }

    @Test func anOpenRelativeToADirectoryAndARenameInItUseTheDirectoryNotItsPath() throws {
        let scratch = TemporaryDirectory()
        let moved = TemporaryDirectory()
        defer { scratch.remove(); moved.remove() }
        let directory = try FileDescriptor.open(scratch.path, .readOnly, options: .directory)
        let made = try FileDescriptor.open("made", in: directory, .readWrite, options: [.create, .exclusiveCreate])
        try made.write(all: Array("made here".utf8))
        var buffer = [UInt8](repeating: 0, count: 4)
        let count = try buffer.withUnsafeMutableBytes { try made.read(fromAbsoluteOffset: 5, into: $0) }
        #expect(count == 4 && buffer == Array("here".utf8))
        #expect((try made.status()).st_size == 9)
        #expect(scratch.read("made") == "made here")
        // The directory's path now names another directory: the rename still goes into the one opened.
        try FileManager.default.removeItem(atPath: moved.path)
        try FileManager.default.moveItem(atPath: scratch.path, toPath: moved.path)
        try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: false)
        try FileCalls.rename(moved.file("made"), to: "renamed", in: directory)
        #expect(moved.read("renamed") == "made here")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("renamed")))
        #expect(throws: SystemError("open renamed", Errno(rawValue: EEXIST))) {
            _ = try FileDescriptor.open("renamed", in: directory, .writeOnly, options: [.create, .exclusiveCreate])
        }
    }

    @Test func theOpensAddCloseOnExec() throws {
        let file = try FileDescriptor.open("/dev/null", .readOnly)
        #expect(fcntl(file.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        let copy = try file.duplicate()
        #expect(fcntl(copy.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(copy.rawValue != file.rawValue)
    }
}

/// A value set once by another thread.
private final class Outcome<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value?

    var isSet: Bool { lock.withLock { stored != nil } }
    var value: Value? { lock.withLock { stored } }
    func set(_ value: Value) { lock.withLock { stored = value } }
}
