// The files behind the http service's upload resources: the shell's side of ResumableUploadServer. Each
// resource is two files in the staging directory `UPLOAD-ROOT/.netlife-upload/` (mode 0700, never served by
// GET, never an upload target): `ID.part`, the bytes received so far (its size is the offset), and
// `ID.meta`, a small record (target path, length once known, final length once complete) written
// atomically. State lives on disk only, so that resources survive a restart of the daemon; a resource whose
// record is gone or unreadable, or whose bytes are gone before it completed, is removed and answered 404
// (the draft: a server that loses state deactivates the resource).
//
// A finished upload is renamed from `ID.part` to its target through a descriptor of the target's directory
// whose real path was checked to lie under the upload root (not under the staging directory): symlinks
// cannot make it escape, and a directory swapped in between the check and the rename is not followed. An
// existing file at the target is replaced atomically; a directory there is refused; the finished file has
// mode 0644 (0600 while partial). The staging directory
// must be on the same file system as every target directory (rename(2) does not cross file systems).

@preconcurrency import Glibc
import NetLifeEvent

/// The record of one upload resource (`ID.meta`):
/// ```
/// netlife-upload-resource 1
/// target=/dir/name.bin        (\\, \n and \r escaped as in a download record)
/// length=1048576              (absent until the client announced it)
/// complete=1048576            (present once the file is in place: its length)
/// ```
public struct UploadResourceRecord: Equatable, Sendable {
    /// The first line of every record.
    public static let versionLine = "netlife-upload-resource 1"

    public var target: String
    public var length: Int?
    /// The final length once the upload is complete and in place.
    public var completeLength: Int?

    /// A record with these values.
    public init(target: String, length: Int? = nil, completeLength: Int? = nil) {
        self.target = target
        self.length = length
        self.completeLength = completeLength
    }

    /// The file's text, ending in a newline.
    public func encoded() -> String {
        var lines = [Self.versionLine, "target=" + RecordText.escaped(target)]
        if let length { lines.append("length=\(length)") }
        if let completeLength { lines.append("complete=\(completeLength)") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The record in `text`; nil for anything `encoded()` could not have written (another version, unknown or
    /// repeated keys, numbers that do not read, a target that is no upload path, over 16 KiB).
    public static func decode(_ text: String) -> UploadResourceRecord? {
        guard let fields = RecordText.fields(text, version: versionLine, keys: ["target", "length", "complete"]),
              let target = fields["target"], ResumableUploadServer.isTargetPath(target) else { return nil }
        var record = UploadResourceRecord(target: target)
        if let text = fields["length"] {
            guard let length = HTTPSyntax.decimal(text.utf8) else { return nil }
            record.length = length
        }
        if let text = fields["complete"] {
            guard let length = HTTPSyntax.decimal(text.utf8) else { return nil }
            record.completeLength = length
        }
        return record
    }
}


/// The upload resources under one upload root, on disk. Loop-confined, like the service that owns it.
final class UploadStore {
    /// The resolved upload root, without a trailing slash (`/` stays `/`).
    let root: String
    /// `root/.netlife-upload`.
    let staging: String

    init(root: String) {
        self.root = root
        staging = (root == "/" ? "" : root) + "/" + ResumableUploadServer.stagingDirectoryName
    }

    func partPath(_ id: String) -> String { staging + "/" + id + ".part" }
    func metaPath(_ id: String) -> String { staging + "/" + id + ".meta" }

    /// Makes the staging directory (0700) unless it is there; an error if it cannot be made, or if what is
    /// there is not a directory (a symlink included).
    func ensureStaging() -> SystemError? {
        var info = stat()
        if lstat(staging, &info) == 0 {
            return (info.st_mode & S_IFMT) == S_IFDIR ? nil : SystemError("lstat \(staging): not a directory", Errno(rawValue: ENOTDIR))
        }
        do throws(SystemError) {
            try FileCalls.makeDirectory(staging, permissions: 0o700)
        } catch {
            // Made meanwhile: by another listener with the same upload root.
            if error.errno.rawValue != EEXIST { return error }
        }
        return nil
    }

    /// A new resource id: 128 bits from the system's cryptographic generator (getrandom), as 32 hex digits.
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        for _ in 0..<2 {
            let word = generator.next()
            for shift in stride(from: 60, through: 0, by: -4) { bytes.append(digits[Int((word >> UInt64(shift)) & 0xF)]) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Resources

    /// The resource `id` as it is on disk, or nil. A resource whose record does not read, or whose bytes are
    /// gone while it is not complete, has lost its state: its files are removed.
    func load(_ id: String) -> UploadResource? {
        let text = try? RegularFile.read(metaPath(id), limit: RecordText.maxFileBytes).get()
        guard let record = text.flatMap({ UploadResourceRecord.decode(String(decoding: $0, as: UTF8.self)) }) else {
            remove(id)
            return nil
        }
        var meta = stat()
        let metaTime = stat(metaPath(id), &meta) == 0 ? Int64(meta.st_mtim.tv_sec) : 0
        if let complete = record.completeLength {
            return UploadResource(id: id, target: record.target, offset: complete, length: complete, isComplete: true, lastActivity: metaTime)
        }
        var part = stat()
        guard stat(partPath(id), &part) == 0, (part.st_mode & S_IFMT) == S_IFREG else {
            remove(id)
            return nil
        }
        return UploadResource(id: id, target: record.target, offset: Int(part.st_size), length: record.length,
                              lastActivity: max(metaTime, Int64(part.st_mtim.tv_sec)))
    }

    /// A resource just made, and its part open for appending.
    struct Created: ~Copyable {
        let resource: UploadResource
        let part: FileDescriptor
    }

    /// Makes the files of a new resource: an empty part, then its record.
    func create(target: String, length: Int?, now: Int64) throws(SystemError) -> Created {
        if let error = ensureStaging() { throw error }
        let id = Self.newID()
        let part = try FileDescriptor.open(partPath(id), .writeOnly, options: [.create, .exclusiveCreate, .append])
        if let error = writeRecord(id, UploadResourceRecord(target: target, length: length)) {
            _ = consume part
            _ = try? FileCalls.remove(partPath(id))
            throw error
        }
        return Created(resource: UploadResource(id: id, target: target, length: length, lastActivity: now), part: part)
    }

    /// The part of `id` open for appending.
    func openPart(_ id: String) throws(SystemError) -> FileDescriptor {
        try FileDescriptor.open(partPath(id), .writeOnly, options: .append)
    }

    func writeRecord(_ id: String, _ record: UploadResourceRecord) -> SystemError? {
        SystemError.catching { () throws(SystemError) in try FileCalls.writeAtomically(metaPath(id), Array(record.encoded().utf8)) }
    }

    /// Deletes the files of `id` (those that exist).
    func remove(_ id: String) {
        for path in [partPath(id), metaPath(id), metaPath(id) + ".tmp"] { _ = try? FileCalls.remove(path) }
    }

    /// Every resource in the staging directory, and the names of files there that belong to none (a crash
    /// between two steps leaves them).
    func list() -> (resources: [UploadResource], strays: [String]) {
        guard let directory = opendir(staging) else { return ([], []) }
        defer { closedir(directory) }
        var ids: Set<String> = []
        var strays: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            let id = String(name.prefix { $0 != "." })
            if ResumableUploadServer.isResourceID(id), name == id + ".meta" || name == id + ".part" {
                ids.insert(id)
            } else {
                strays.append(name)
            }
        }
        var resources: [UploadResource] = []
        for id in ids.sorted() {
            if let resource = load(id) { resources.append(resource) }
        }
        return (resources, strays)
    }

    func removeStray(_ name: String) {
        _ = try? FileCalls.remove(staging + "/" + name)
    }

    // MARK: Targets

    /// Why a target cannot take a finished upload.
    enum TargetProblem: Error, Equatable {
        /// The parent directory is not there (or is no directory): 404.
        case noDirectory
        /// The real path leaves the upload root, or enters the staging directory: 403.
        case outsideRoot
        /// A directory is in the way: 409.
        case isDirectory
    }

    /// A target's directory, open, the last segment of the target's path, and whether a file is there.
    struct Target: ~Copyable {
        let directory: FileDescriptor
        let name: String
        let exists: Bool
    }

    /// The target's directory, opened and checked (its real path, read back from the descriptor, lies
    /// under the root and outside the staging directory), the last path segment, and whether a file is
    /// already there.
    func openTarget(_ target: String) throws(TargetProblem) -> Target {
        guard let slash = target.lastIndex(of: "/") else { throw .outsideRoot }
        let parent = String(target[..<slash])
        let name = String(target[target.index(after: slash)...])
        guard !name.isEmpty else { throw .isDirectory }
        let path = (root == "/" ? "" : root) + (parent.isEmpty ? "/" : parent)
        guard let directory = try? FileDescriptor.open(path, .readOnly, options: .directory) else { throw .noDirectory }
        let rootPrefix = root == "/" ? "/" : root + "/"
        guard let real = realPath("/proc/self/fd/\(directory.rawValue)"), real == root || real.hasPrefix(rootPrefix),
              real != staging, !real.hasPrefix(staging + "/"),
              !(real == root && name == ResumableUploadServer.stagingDirectoryName) else {
            throw .outsideRoot
        }
        var info = stat()
        let exists = fstatat(directory.rawValue, name, &info, AT_SYMLINK_NOFOLLOW) == 0
        if exists && (info.st_mode & S_IFMT) == S_IFDIR { throw .isDirectory }
        return Target(directory: directory, name: name, exists: exists)
    }

    /// Why a complete upload could not be put in place.
    struct CompletionFailure: Error, Equatable {
        var reason: String
    }

    /// Puts a complete upload in place: the part (open, closed here) reaches the disk, is renamed to the
    /// target, the directory is synced, and the record says complete. Returns whether a file was replaced, or
    /// why it could not be done (the part then stays, the upload incomplete).
    func complete(_ resource: UploadResource, part: consuming FileDescriptor?) -> Result<Bool, CompletionFailure> {
        guard let part = part.take() else { return .failure(CompletionFailure(reason: "the part is not open")) }
        // Private (0600) while partial; the finished file is readable as a served file would be.
        _ = try? part.setPermissions(0o644)
        let synced = SystemError.catching { () throws(SystemError) in try part.sync() }
        _ = try? part.close()
        if let synced { return .failure(CompletionFailure(reason: "\(synced)")) }
        let target: Target
        do throws(TargetProblem) {
            target = try openTarget(resource.target)
        } catch {
            switch error {
            case .noDirectory: return .failure(CompletionFailure(reason: "the target's directory is gone"))
            case .outsideRoot: return .failure(CompletionFailure(reason: "the target's directory leads out of the upload root"))
            case .isDirectory: return .failure(CompletionFailure(reason: "a directory is in the way of the target"))
            }
        }
        do throws(SystemError) {
            try FileCalls.rename(partPath(resource.id), to: target.name, in: target.directory)
        } catch {
            return .failure(CompletionFailure(reason: "rename: \(error.errno)"))
        }
        var directorySynced: SystemError?
        do throws(SystemError) {
            try target.directory.sync()
        } catch {
            directorySynced = SystemError("fsync the directory of \(resource.target)", error.errno)
        }
        // The file is in place: a record that cannot be written only costs a late HEAD its answer (404).
        _ = writeRecord(resource.id, UploadResourceRecord(target: resource.target, length: resource.offset, completeLength: resource.offset))
        // The rename may not survive a power cut: the client is told, and may send the last bytes again.
        if let directorySynced { return .failure(CompletionFailure(reason: "\(directorySynced)")) }
        return .success(target.exists)
    }
}
