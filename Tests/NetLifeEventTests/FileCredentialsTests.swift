// Acting for a requester: file calls made with another user's file-system identity are checked by the
// kernel as that user's (a file it creates is its own; a directory it cannot write refuses it), and the
// thread has the daemon's identity back afterwards, on whichever thread it ran.

import Foundation
@testable import NetLifeEvent
import NetLifeTestSupport
import Testing

/// The owner of `path`, nil when there is nothing there.
private func owner(_ path: String) -> uid_t? {
    var info = stat()
    return lstat(path, &info) == 0 ? info.st_uid : nil
}

/// Creates `path` (mode 0644), returning the errno of a failure (0 on success).
private func create(_ path: String) -> Int32 {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    if fd < 0 { return errno }
    close(fd)
    return 0
}

@Suite(.enabled(if: getuid() == 0, "taking another user's identity needs root")) struct FileCredentialsTests {
    static let nobody = FileCredentials(uid: 65534, gid: 65534, groups: [])

    @Test func filesAreCreatedAndRefusedAsTheRequesterWouldBe() throws {
        #expect(FileCredentials.isAvailable)
        let open = TemporaryDirectory()
        let closed = TemporaryDirectory()
        defer { open.remove(); closed.remove() }
        chmod(open.path, 0o777)
        chmod(closed.path, 0o755)
        closed.write("root.txt", "root's\n")
        chmod(closed.file("root.txt"), 0o600)

        #expect(try Self.nobody.run { create(open.file("mine")) } == 0)
        #expect(owner(open.file("mine")) == 65534, "a file the requester creates is its own")
        #expect(try Self.nobody.run { create(closed.file("new")) } == EACCES)
        #expect(owner(closed.file("new")) == nil)
        let read = try Self.nobody.run { RegularFile.read(closed.file("root.txt"), limit: 100) }
        #expect(read == .failure(.system(SystemError("open \(closed.file("root.txt"))", Errno(rawValue: EACCES)))))
        // Groups count: a directory writable by a group the requester is in.
        let shared = TemporaryDirectory()
        defer { shared.remove() }
        chown(shared.path, 0, 4242)
        chmod(shared.path, 0o770)
        #expect(try FileCredentials(uid: 65534, gid: 65534, groups: [4242]).run { create(shared.file("g")) } == 0)
        #expect(try Self.nobody.run { create(shared.file("h")) } == EACCES)

        // Afterwards the thread is the daemon's again.
        #expect(create(closed.file("after")) == 0)
        #expect(owner(closed.file("after")) == 0)
        #expect(RegularFile.read(closed.file("root.txt"), limit: 100) == .success(Array("root's\n".utf8)))
    }

    @Test func onlyTheCallingThreadTakesTheIdentity() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        chmod(directory.path, 0o777)
        let inside = StopFlag()
        let done = StopFlag()
        let thread = Thread {
            _ = try? Self.nobody.run { () -> Void in
                inside.set()
                _ = waitUntil(timeout: 5) { done.isSet }
            }
        }
        thread.start()
        #expect(waitUntil(timeout: 5) { inside.isSet })
        // While the other thread acts as nobody, this one is still root.
        #expect(create(directory.file("meanwhile")) == 0)
        #expect(owner(directory.file("meanwhile")) == 0)
        done.set()
    }

    @Test func aRegularFileIsReadWithinItsBoundAndAnythingElseIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("small", "12345")
        #expect(RegularFile.read(directory.file("small"), limit: 5) == .success(Array("12345".utf8)))
        #expect(RegularFile.read(directory.file("small"), limit: 4) == .failure(.tooLarge(4)))
        mkfifo(directory.file("fifo"), 0o600)
        #expect(RegularFile.read(directory.file("fifo"), limit: 100) == .failure(.notRegular("a FIFO")), "opened without blocking and refused")
        #expect(RegularFile.read(directory.path, limit: 100) == .failure(.notRegular("a directory")))
        symlink(directory.file("small"), directory.file("link"))
        #expect(RegularFile.read(directory.file("link"), limit: 100) == .success(Array("12345".utf8)))
        #expect(RegularFile.read(directory.file("link"), limit: 100, followLinks: false) == .failure(.system(SystemError("open \(directory.file("link"))", Errno(rawValue: ELOOP)))))
    }
}
