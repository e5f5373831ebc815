// The calls on files and directories by name (rename, unlink, mkdir, a directory's fsync) and the atomic
// replacement of a small file, each checked: a failure throws a SystemError naming the call and the path, so
// that a record never claims what the disk did not take.
//
// Small state files that must survive a crash whole or not at all (a transfer's record, the daemon's list of
// transfers, an upload resource's record) are written to a temporary file, fsynced, renamed over the old one,
// and the directory fsynced, so that a reader after `kill -9` or a power cut finds either the old contents
// or the new, never a mix.

@preconcurrency import Glibc

/// File and directory calls by name.
public enum FileCalls {
    /// Replaces the file at `path` with `bytes` atomically, every call with `owner`'s identity when there is
    /// one. The temporary file `PATH.tmp` is made anew (whatever was at its name is removed first, a symbolic
    /// link as a link) and never opened through a link.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], as owner: FileCredentials? = nil) throws(SystemError) {
        try FileCredentials.acting(as: owner) { () throws(SystemError) in try writeAtomically(path, bytes) }
    }

    private static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws(SystemError) {
        let temporary = path + ".tmp"
        try remove(temporary)
        let file = try FileDescriptor.open(temporary, .writeOnly, options: [.create, .exclusiveCreate, .noFollow])
        do throws(SystemError) {
            try file.write(all: bytes)
            try file.sync()
            try file.close()
            try rename(temporary, to: path)
        } catch {
            _ = try? remove(temporary)
            throw error
        }
        try syncDirectory(of: path)
    }

    /// Renames `path` to `target`. The corresponding C function is `rename`.
    public static func rename(_ path: String, to target: String) throws(SystemError) {
        try sys("rename \(path)") { Glibc.rename(path, target) }
    }

    /// Renames `path` to `name` in `directory`, an open directory: a directory swapped in at its path since
    /// it was opened is not followed. The corresponding C function is `renameat`.
    public static func rename(_ path: String, to name: String, in directory: borrowing FileDescriptor) throws(SystemError) {
        let fd = directory.rawValue
        try sys("rename \(path)") { renameat(AT_FDCWD, path, fd, name) }
    }

    /// Removes the file at `path`; false when nothing was there, which is no error. The corresponding C
    /// function is `unlink`.
    @discardableResult
    public static func remove(_ path: String) throws(SystemError) -> Bool {
        do throws(SystemError) {
            try sys("unlink \(path)") { unlink(path) }
            return true
        } catch where error.errno.rawValue == ENOENT {
            return false
        }
    }

    /// Makes the directory `path` (EEXIST when something is there). The corresponding C function is `mkdir`.
    public static func makeDirectory(_ path: String, permissions: mode_t) throws(SystemError) {
        try sys("mkdir \(path)") { mkdir(path, permissions) }
    }

    /// fsyncs the directory that holds `path`, so that a rename or unlink in it is on the disk.
    public static func syncDirectory(of path: String) throws(SystemError) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let name = directory.isEmpty ? "/" : directory
        try FileDescriptor.open(name, .readOnly, options: .directory).sync()
    }
}
