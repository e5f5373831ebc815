// Files a config or a request names, opened without ever waiting on them: non-blocking (a FIFO with no writer
// or a device does not hold the caller), refused unless a regular file, and read only up to a bound, so that a
// file that grows or lies about its size cannot make the read unbounded. With an owner, the open runs with
// that requester's identity (FileCredentials); the calls on the open descriptor need none.

@preconcurrency import Glibc

/// Regular files, opened without blocking and read within a bound.
public enum RegularFile {
    /// Why a file could not be opened or read.
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// A system call failed (the file is missing, not readable by the caller, a symbolic link where none
        /// is followed).
        case system(SystemError)
        /// It is a directory, a FIFO, a socket or a device.
        case notRegular(String)
        /// It is larger than the bound.
        case tooLarge(Int)

        public var description: String {
            switch self {
            // The caller names the file: the reason alone.
            case .system(let error): "\(error.errno)"
            case .notRegular(let kind): "not a regular file (\(kind))"
            case .tooLarge(let limit): "larger than \(limit) bytes"
            }
        }

        /// The failure as a SystemError about `path`, for callers that report one (a transfer's pause).
        public func systemError(_ path: String) -> SystemError {
            switch self {
            case .system(let error): error
            case .notRegular: SystemError("open \(path) (not a regular file)", Errno(rawValue: EINVAL))
            case .tooLarge(let limit): SystemError("read \(path) (larger than \(limit) bytes)", Errno(rawValue: EFBIG))
            }
        }
    }

    /// A regular file just opened, and its status as the check saw it. Frozen, so that a caller in another
    /// module may take the descriptor out of it.
    @frozen public struct Opened: ~Copyable {
        public let file: FileDescriptor
        public let status: stat
    }

    /// Opens the regular file at `path`, with `owner`'s identity when there is one: non-blocking (the
    /// descriptor stays so, which a regular file ignores), and closed again unless it is a regular file.
    public static func open(_ path: String, _ mode: FileDescriptor.AccessMode, options: FileDescriptor.OpenOptions = [],
                            permissions: mode_t = 0o600, as owner: FileCredentials? = nil) throws(Failure) -> FileDescriptor {
        let opened = try openWithStatus(path, mode, options: options, permissions: permissions, as: owner)
        return opened.file
    }

    /// As `open`, with the status its check read (a caller that needs the size, the time or the inode makes
    /// no second fstat).
    public static func openWithStatus(_ path: String, _ mode: FileDescriptor.AccessMode, options: FileDescriptor.OpenOptions = [],
                                      permissions: mode_t = 0o600, as owner: FileCredentials? = nil) throws(Failure) -> Opened {
        let file: FileDescriptor
        do throws(SystemError) {
            file = try FileCredentials.acting(as: owner) { () throws(SystemError) -> FileDescriptor in
                try FileDescriptor.open(path, mode, options: options.union(.nonBlocking), permissions: permissions)
            }
        } catch {
            throw .system(error)
        }
        let info: stat
        do throws(SystemError) { info = try file.status() } catch { throw .system(error) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .notRegular(kind(info.st_mode)) }
        return Opened(file: file, status: info)
    }

    /// The bytes of the regular file at `path`, at most `limit` of them, opened with `owner`'s identity when
    /// there is one. `followLinks: false` refuses a symbolic link at the last component (O_NOFOLLOW).
    public static func read(_ path: String, limit: Int, followLinks: Bool = true,
                            as owner: FileCredentials? = nil) -> Result<[UInt8], Failure> {
        do throws(Failure) {
            let opened = try openWithStatus(path, .readOnly, options: followLinks ? [] : .noFollow, as: owner)
            return .success(try read(opened.file, size: Int(opened.status.st_size), limit: limit))
        } catch {
            return .failure(error)
        }
    }

    /// What `file`, of `size` bytes by its status, holds from its offset to its end, when that is at most
    /// `limit` bytes. A file that holds
    /// more than its size says (one that grows, one of /proc) is read on, up to one byte past the bound.
    private static func read(_ file: borrowing FileDescriptor, size: Int, limit: Int) throws(Failure) -> [UInt8] {
        guard size <= limit else { throw .tooLarge(limit) }
        let bytes: [UInt8]
        do throws(SystemError) {
            bytes = try file.readToEnd(atMost: limit == .max ? limit : limit + 1, expectedSize: size)
        } catch {
            throw .system(error)
        }
        guard bytes.count <= limit else { throw .tooLarge(limit) }
        return bytes
    }

    /// Whether `path` can be opened for reading by the caller and is a regular file (closed at once).
    public static func checkReadable(_ path: String) -> Failure? {
        do throws(Failure) {
            _ = try open(path, .readOnly)
            return nil
        } catch {
            return error
        }
    }

    /// What a file that is not regular is.
    public static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        case S_IFLNK: "a symbolic link"
        default: "not a regular file"
        }
    }
}
