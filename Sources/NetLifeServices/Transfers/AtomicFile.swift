// The file calls of the transfers, each result checked (as SocketCalls checks the socket calls): a write,
// fsync, rename or unlink that fails returns a SystemError naming the call and the path, which the transfer
// turns into a pause, so that a record never claims bytes the disk did not take.
//
// Small state files that must survive a crash whole or not at all (a transfer's record, the daemon's list of
// transfers) are written to a temporary file, fsynced, renamed over the old one, and the directory fsynced,
// so that a reader after `kill -9` or a power cut finds either the old contents or the new, never a mix.

@preconcurrency import Glibc
import NetLifeEvent

/// Replaces the file at `path` with `bytes` atomically; the error names the call that failed. With `owner`,
/// every call runs with that identity. The temporary file is made anew (whatever was at its name is removed
/// first, a symbolic link as a link) and never opened through a link.
public func writeFileAtomically(_ path: String, _ bytes: [UInt8], as owner: FileCredentials? = nil) -> SystemError? {
    acting(as: owner) { writeFileAtomically(path, bytes) }
}

/// Runs `body` with `owner`'s identity (nil: the daemon's); an error when that identity cannot be taken.
public func acting(as owner: FileCredentials?, _ body: () -> SystemError?) -> SystemError? {
    do {
        return try FileCredentials.acting(as: owner, body)
    } catch {
        return error
    }
}

private func writeFileAtomically(_ path: String, _ bytes: [UInt8]) -> SystemError? {
    let temporary = path + ".tmp"
    if let error = removeFile(temporary) { return error }
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return SystemError("open \(temporary)", Errno.current) }
    let error = writeAll(fd, bytes, to: temporary) ?? syncFile(fd, temporary)
    close(fd)
    if let error {
        unlink(temporary)
        return error
    }
    if let error = renameFile(temporary, to: path) {
        unlink(temporary)
        return error
    }
    return syncDirectory(of: path)
}

/// Writes all of `bytes` to `fd` (retrying short writes and EINTR).
func writeAll(_ fd: CInt, _ bytes: some Collection<UInt8>, to path: String) -> SystemError? {
    Array(bytes).withUnsafeBytes { writeAll(fd, $0, to: path) }
}

/// Writes all of `bytes` to `fd` (retrying after EINTR and short writes); the error names `path`.
func writeAll(_ fd: CInt, _ bytes: UnsafeRawBufferPointer, to path: String) -> SystemError? {
    var written = 0
    while written < bytes.count {
        let result = Glibc.write(fd, bytes.baseAddress.map { $0 + written }, bytes.count - written)
        if result < 0 {
            if errno == EINTR { continue }
            return SystemError("write \(path)", Errno.current)
        }
        written += result
    }
    return nil
}

/// fsyncs `fd`, the open file at `path`.
func syncFile(_ fd: CInt, _ path: String) -> SystemError? {
    fsync(fd) == 0 ? nil : SystemError("fsync \(path)", Errno.current)
}

/// Renames `path` to `target`.
func renameFile(_ path: String, to target: String) -> SystemError? {
    rename(path, target) == 0 ? nil : SystemError("rename \(path)", Errno.current)
}

/// Removes the file at `path`; one that is not there is no error.
func removeFile(_ path: String) -> SystemError? {
    unlink(path) == 0 || errno == ENOENT ? nil : SystemError("unlink \(path)", Errno.current)
}

/// fsyncs the directory that holds `path`, so that a rename or unlink in it is on disk.
public func syncDirectory(of path: String) -> SystemError? {
    let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
    let name = directory.isEmpty ? "/" : directory
    let fd = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return SystemError("open \(name)", Errno.current) }
    defer { close(fd) }
    return syncFile(fd, name)
}

/// The contents of a small file (at most 64 KiB), or nil when it cannot be read. `followLinks: false`
/// refuses a symbolic link.
public func readSmallFile(_ path: String, followLinks: Bool = true) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followLinks ? 0 : O_NOFOLLOW))
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes = [UInt8](repeating: 0, count: 65536)
    var count = 0
    while count < bytes.count {
        let result = bytes[count...].withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if result < 0, errno == EINTR { continue }
        if result < 0 { return nil }
        if result == 0 { break }
        count += result
    }
    return String(decoding: bytes[0..<count], as: UTF8.self)
}
