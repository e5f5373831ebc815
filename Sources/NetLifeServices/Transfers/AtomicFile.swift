// Small state files that must survive a crash whole or not at all: a transfer's record, the daemon's list of
// transfers. Written to a temporary file, fsynced, renamed over the old one, and the directory fsynced, so
// that a reader after `kill -9` or a power cut finds either the old contents or the new, never a mix.

@preconcurrency import Glibc
import NetLifeEvent

/// Replaces the file at `path` with `bytes` atomically; the error names the call that failed.
public func writeFileAtomically(_ path: String, _ bytes: [UInt8]) -> SystemError? {
    let temporary = path + ".tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return SystemError("open \(temporary)", Errno.current) }
    var written = 0
    while written < bytes.count {
        let result = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if result < 0 {
            if errno == EINTR { continue }
            let error = SystemError("write \(temporary)", Errno.current)
            close(fd)
            unlink(temporary)
            return error
        }
        written += result
    }
    let synced = fsync(fd) == 0 ? nil : SystemError("fsync \(temporary)", Errno.current)
    close(fd)
    if let synced {
        unlink(temporary)
        return synced
    }
    guard rename(temporary, path) == 0 else {
        let error = SystemError("rename \(temporary)", Errno.current)
        unlink(temporary)
        return error
    }
    syncDirectory(of: path)
    return nil
}

/// fsyncs the directory that holds `path`, so that a rename or unlink in it is on disk.
public func syncDirectory(of path: String) {
    let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
    let fd = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if fd >= 0 {
        fsync(fd)
        close(fd)
    }
}

/// The contents of a small file (at most 64 KiB), or nil when it cannot be read.
public func readSmallFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
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
