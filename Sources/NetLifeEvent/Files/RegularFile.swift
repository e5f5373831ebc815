// Reading a file a config or a request names, without ever waiting on it: opened non-blocking (a FIFO or a
// device does not hold the caller), refused unless it is a regular file, and read only up to a bound, so a
// file that grows or lies about its size cannot make the read unbounded.

@preconcurrency import Glibc

/// Bounded reads of regular files.
public enum RegularFile {
    /// Why a file could not be read.
    public enum Failure: Error, Equatable, CustomStringConvertible {
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
    }

    /// The bytes of the regular file at `path`, at most `limit` of them. `followLinks: false` refuses a
    /// symbolic link at the last component (O_NOFOLLOW).
    public static func read(_ path: String, limit: Int, followLinks: Bool = true) -> Result<[UInt8], Failure> {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (followLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { return .failure(.system(SystemError("open \(path)", Errno.current))) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failure(.system(SystemError("fstat \(path)", Errno.current))) }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(.notRegular(kind(info.st_mode))) }
        guard Int(info.st_size) <= limit else { return .failure(.tooLarge(limit)) }
        var bytes = [UInt8](repeating: 0, count: min(limit, Int(info.st_size)) + 1)
        var count = 0
        while count < bytes.count {
            let result = bytes[count...].withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if result < 0, errno == EINTR { continue }
            if result < 0 { return .failure(.system(SystemError("read \(path)", Errno.current))) }
            if result == 0 { break }
            count += result
        }
        // The file grew past its size since fstat: more than the bound, or more than it said.
        if count > limit { return .failure(.tooLarge(limit)) }
        return .success(Array(bytes[0..<count]))
    }

    /// Whether `path` can be opened for reading by the caller and is a regular file (opened non-blocking,
    /// closed at once).
    public static func checkReadable(_ path: String) -> Failure? {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return .system(SystemError("open \(path)", Errno.current)) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .system(SystemError("fstat \(path)", Errno.current)) }
        return info.st_mode & S_IFMT == S_IFREG ? nil : .notRegular(kind(info.st_mode))
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
