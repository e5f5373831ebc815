// An open file descriptor with one owner, as swift-system's FileDescriptor with the ownership the compiler
// checks: it is closed once, when its owner drops it, or by `close()` for an owner that wants the error, or
// handed with `take()` to what closes it afterwards (libevent's file segments, libcurl, a child process).
// Every call on it retries EINTR and throws a SystemError naming the call and the file; a bad descriptor
// traps, as only a bug in netlife can make one. An open by path always adds O_CLOEXEC (no descriptor leaks
// into a child) and O_NOCTTY (no terminal becomes the daemon's).

@preconcurrency import Glibc

/// An open file descriptor, closed once by its one owner.
public struct FileDescriptor: ~Copyable {
    /// The descriptor; -1 once taken.
    private var fd: CInt
    /// What its errors name: the path it was opened by, or what it is.
    public let name: String

    /// Owns `fd` from now on; `name` is what its errors name.
    public init(owning fd: CInt, name: String) {
        self.fd = fd
        self.name = name
    }

    /// The descriptor, for a call that only borrows it (it stays owned here).
    public var rawValue: CInt { fd }

    deinit {
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    /// Closes it and reports the error. EINTR is not retried: Linux releases the descriptor even then, and a
    /// second close could close another's.
    public consuming func close() throws(SystemError) {
        let name = self.name
        let fd = take()
        guard Glibc.close(fd) != 0 else { return }
        let error = Errno.current
        if error == .interrupted { return }
        trapIfBug("close \(name)", error)
        throw SystemError("close \(name)", error)
    }

    /// The descriptor, handed to what closes it from now on; nothing here closes it.
    public consuming func take() -> CInt {
        let fd = self.fd
        self.fd = -1
        return fd
    }

    // MARK: Opening

    /// How a file is opened: O_RDONLY, O_WRONLY or O_RDWR.
    public enum AccessMode: Sendable {
        case readOnly, writeOnly, readWrite

        var flags: CInt {
            switch self {
            case .readOnly: O_RDONLY
            case .writeOnly: O_WRONLY
            case .readWrite: O_RDWR
            }
        }
    }

    /// The flags of an open beyond its access mode.
    public struct OpenOptions: OptionSet, Sendable {
        public let rawValue: CInt
        public init(rawValue: CInt) { self.rawValue = rawValue }

        /// O_CREAT, with the permissions given to the open.
        public static let create = OpenOptions(rawValue: O_CREAT)
        /// O_EXCL: with `create`, fails with EEXIST when something is there (a symbolic link included).
        public static let exclusiveCreate = OpenOptions(rawValue: O_EXCL)
        /// O_APPEND: every write goes to the end.
        public static let append = OpenOptions(rawValue: O_APPEND)
        /// O_TRUNC.
        public static let truncate = OpenOptions(rawValue: O_TRUNC)
        /// O_NOFOLLOW: a symbolic link at the last component is refused (ELOOP), never followed.
        public static let noFollow = OpenOptions(rawValue: O_NOFOLLOW)
        /// O_NONBLOCK: a FIFO or a device does not hold the open (nor the reads).
        public static let nonBlocking = OpenOptions(rawValue: O_NONBLOCK)
        /// O_DIRECTORY: anything but a directory is refused (ENOTDIR).
        public static let directory = OpenOptions(rawValue: O_DIRECTORY)
    }

    /// Opens `path`; `permissions` are a created file's (less the umask). The corresponding C function is
    /// `open`.
    public static func open(_ path: String, _ mode: AccessMode, options: OpenOptions = [],
                            permissions: mode_t = 0o600) throws(SystemError) -> FileDescriptor {
        try open(at: AT_FDCWD, path, mode, options, permissions)
    }

    /// Opens `path` relative to `directory` (an absolute path ignores it). The corresponding C function is
    /// `openat`.
    public static func open(_ path: String, in directory: borrowing FileDescriptor, _ mode: AccessMode,
                            options: OpenOptions = [], permissions: mode_t = 0o600) throws(SystemError) -> FileDescriptor {
        try open(at: directory.fd, path, mode, options, permissions)
    }

    private static func open(at directory: CInt, _ path: String, _ mode: AccessMode, _ options: OpenOptions,
                             _ permissions: mode_t) throws(SystemError) -> FileDescriptor {
        let flags = mode.flags | options.rawValue | O_CLOEXEC | O_NOCTTY
        let fd = try sys("open \(path)") { openat(directory, path, flags, permissions) }
        return FileDescriptor(owning: fd, name: path)
    }

    // MARK: Reading and writing

    /// Reads what is there, up to the buffer's size; 0 at the end of the file. The corresponding C function
    /// is `read`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try sys("read \(name)") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// What the file holds from its offset to its end, at most `limit` bytes (what lies past them stays
    /// unread). The first read takes `expectedSize` bytes and one more, so that a file of that size takes
    /// two reads, the second finding its end; a larger one is read on in larger pieces.
    public func readToEnd(atMost limit: Int, expectedSize: Int = 4095) throws(SystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: min(limit, max(0, expectedSize) + 1))
        var count = 0
        while count < limit {
            if count == bytes.count {
                bytes += [UInt8](repeating: 0, count: min(limit, max(2 * count, 4096)) - count)
            }
            let result = bytes[count...].withUnsafeMutableBytes { buffer -> Result<Int, SystemError> in
                do throws(SystemError) { return .success(try read(into: buffer)) } catch { return .failure(error) }
            }
            let got = try result.get()
            if got == 0 { break }
            count += got
        }
        bytes.removeSubrange(count...)
        return bytes
    }

    /// Reads from `offset` without moving the file's offset. The corresponding C function is `pread`.
    public func read(fromAbsoluteOffset offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try sys("pread \(name)") { pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// One write: the bytes it took, perhaps fewer than given. The corresponding C function is `write`.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        try sys("write \(name)") { Glibc.write(fd, bytes.baseAddress, bytes.count) }
    }

    /// One write of `bytes`: the bytes it took.
    public func write(_ bytes: [UInt8]) throws(SystemError) -> Int {
        let result = bytes.withUnsafeBytes { buffer -> Result<Int, SystemError> in
            do throws(SystemError) { return .success(try write(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Writes all of `bytes`, continuing after short writes.
    public func write(all bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try Self.write(all: bytes, to: fd, name: name, owned: true)
    }

    /// Writes all of `bytes`, continuing after short writes.
    public func write(all bytes: [UInt8]) throws(SystemError) {
        let result = bytes.withUnsafeBytes { buffer -> Result<Void, SystemError> in
            do throws(SystemError) { return .success(try write(all: buffer)) } catch { return .failure(error) }
        }
        try result.get()
    }

    /// Writes all of `bytes` to `fd`, a descriptor owned elsewhere (stderr, a caller's pipe): a bad
    /// descriptor is thrown there, not trapped, as it is not netlife's to keep open.
    public static func write(all bytes: UnsafeRawBufferPointer, toUnowned fd: CInt, name: String) throws(SystemError) {
        try write(all: bytes, to: fd, name: name, owned: false)
    }

    private static func write(all bytes: UnsafeRawBufferPointer, to fd: CInt, name: String, owned: Bool) throws(SystemError) {
        var written = 0
        while written < bytes.count {
            let result = Glibc.write(fd, bytes.baseAddress.map { $0 + written }, bytes.count - written)
            if result > 0 {
                written += result
                continue
            }
            // A write of at least one byte that takes none would loop for ever.
            let error = result == 0 ? Errno(rawValue: EIO) : Errno.current
            if error == .interrupted { continue }
            if owned { trapIfBug("write \(name)", error) }
            throw SystemError("write \(name)", error)
        }
    }

    // MARK: The file

    /// Its status. The corresponding C function is `fstat`.
    public func status() throws(SystemError) -> stat {
        var info = stat()
        try sys("fstat \(name)") { fstat(fd, &info) }
        return info
    }

    /// Whether it is a regular file (not a directory, FIFO, socket or device).
    public func isRegularFile() throws(SystemError) -> Bool {
        try status().st_mode & S_IFMT == S_IFREG
    }

    /// Puts its data and metadata on the disk. The corresponding C function is `fsync`.
    public func sync() throws(SystemError) {
        try sys("fsync \(name)") { fsync(fd) }
    }

    /// Cuts or extends it to `length` bytes. The corresponding C function is `ftruncate`.
    public func truncate(to length: Int) throws(SystemError) {
        try sys("ftruncate \(name)") { ftruncate(fd, off_t(length)) }
    }

    /// Sets its permission bits. The corresponding C function is `fchmod`.
    public func setPermissions(_ mode: mode_t) throws(SystemError) {
        try sys("fchmod \(name)") { fchmod(fd, mode) }
    }

    /// A second descriptor of the same open file, owned by the caller (for work on another thread while
    /// this one may be closed). The corresponding C function is `fcntl(F_DUPFD_CLOEXEC)`.
    public func duplicate() throws(SystemError) -> FileDescriptor {
        let copy = try sys("fcntl F_DUPFD_CLOEXEC \(name)") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
        return FileDescriptor(owning: copy, name: name)
    }
}
