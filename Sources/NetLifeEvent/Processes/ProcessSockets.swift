// The TCP sockets of another process, found and reset for reclaim (docs/process-apps.md).
//
// A process app's sockets are its own descriptors, not netlifed's. They are found through /proc: each entry
// of /proc/PID/fd whose link reads `socket:[INODE]`. For a listing with addresses and states, the inodes are
// joined with the lines of /proc/PID/net/tcp and tcp6 (the process's network namespace); the parsers are
// pure and linear, and the tables are read a chunk at a time keeping only the process's own lines.
//
// Reclaim does not read those tables: the kernel walks its whole TCP hash table for every read of them
// (about 2.3 ms a read on the development machine, five reads for tcp and tcp6: past the 10 ms in which the
// peer must see the reset). It takes each socket descriptor with `pidfd_getfd` (a duplicate of the same open
// socket), asks the socket itself for its TCP state (`getsockopt(TCP_INFO)`, which fails for a socket that
// is not TCP), dissolves the connection with `connect(AF_UNSPEC)` (`SocketCalls.disconnect`: the kernel
// sends RST, and the program's next operation on its descriptor fails) and closes the duplicate: four system
// calls a TCP socket, three for another socket. Listening and unconnected sockets are left alone (resetting a
// listener would stop it listening), and so is every socket the program declared VoIP (by inode: all the
// descriptors of a VoIP socket are spared). Nothing of the program needs to run: it works on a frozen one.

@preconcurrency import Glibc
internal import CLibevent

/// One line of /proc/PID/net/tcp or tcp6.
public struct TCPTableEntry: Equatable, Sendable {
    public var inode: UInt64
    public var local: SocketAddress
    public var remote: SocketAddress
    public var state: TCPState
}

/// A socket descriptor of a process: its number there and the socket's inode.
public struct SocketDescriptor: Equatable, Hashable, Sendable {
    public var fd: CInt
    public var inode: UInt64
}

/// A TCP socket a process holds: the descriptor in that process, and the kernel's view of the socket.
public struct ProcessTCPSocket: Equatable, Sendable {
    public var fd: CInt
    public var inode: UInt64
    public var local: SocketAddress
    public var remote: SocketAddress
    public var state: TCPState
}

/// What resetting a process's sockets did.
public struct SocketResetReport: Equatable, Sendable {
    /// A socket that could not be reset, and why (the program closed it meanwhile: EBADF from
    /// `pidfd_getfd`; it exited: ESRCH).
    public struct Failure: Equatable, Sendable {
        public var socket: SocketDescriptor
        public var error: SystemError
    }

    /// The sockets reset.
    public var reset: [SocketDescriptor] = []
    /// The sockets left alone: not TCP, listening, or not connected.
    public var skipped: [SocketDescriptor] = []
    public var failures: [Failure] = []
}

/// Finding, taking and resetting the TCP sockets of another process.
public enum ProcessSockets {
    /// The most entries of /proc/PID/fd looked at.
    public static let maxDescriptors = 65_536
    /// The most bytes of one TCP table read (about 400,000 sockets in the namespace); the rest is not read,
    /// and sockets listed only there are not found.
    public static let maxTableBytes = 64 << 20
    /// The longest line of a TCP table kept (real lines are about 150 bytes).
    static let maxLineBytes = 512

    // MARK: Pure parsers

    /// The inode of a /proc/PID/fd link target `socket:[INODE]`, or nil for anything else.
    public static func socketInode(linkTarget: some StringProtocol) -> UInt64? {
        guard linkTarget.hasPrefix("socket:["), linkTarget.hasSuffix("]") else { return nil }
        let digits = linkTarget.dropFirst("socket:[".count).dropLast()
        guard !digits.isEmpty, digits.utf8.count <= 20, digits.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
        return UInt64(digits)
    }

    /// Parses one line of /proc/net/tcp (`ipv6: false`) or tcp6: `SL: LOCAL REMOTE ST ... UID TIMEOUT INODE ...`,
    /// addresses as `HEX:PORT`. Nil for the header and for anything malformed.
    public static func tableEntry(line: some Collection<UInt8>, ipv6: Bool) -> TCPTableEntry? {
        var fields: [ArraySlice<UInt8>] = []
        var current: [UInt8] = []
        // Only the first ten fields matter; the split stops there.
        for byte in line {
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                if !current.isEmpty { fields.append(current[...]); current = [] }
                if fields.count == 10 { break }
            } else {
                guard current.count < 64 else { return nil }
                current.append(byte)
            }
        }
        if !current.isEmpty && fields.count < 10 { fields.append(current[...]) }
        guard fields.count == 10, fields[0].last == UInt8(ascii: ":"),
              let local = address(fields[1], ipv6: ipv6), let remote = address(fields[2], ipv6: ipv6),
              fields[3].count == 2, let stateNumber = hex(fields[3]), let state = TCPState(rawValue: UInt8(stateNumber)),
              fields[9].count <= 20, fields[9].allSatisfy({ (48...57).contains($0) }),
              let inode = UInt64(String(decoding: fields[9], as: UTF8.self)) else { return nil }
        return TCPTableEntry(inode: inode, local: local, remote: remote, state: state)
    }

    /// `HEX:PORT`: the address as the kernel holds it in memory, printed as 32-bit words in the host's byte
    /// order (one word for IPv4, four for IPv6), and the port as a number.
    static func address(_ field: ArraySlice<UInt8>, ipv6: Bool) -> SocketAddress? {
        let words = ipv6 ? 4 : 1
        guard field.count == words * 8 + 5, field[field.startIndex + words * 8] == UInt8(ascii: ":"),
              let port = hex(field.suffix(4)) else { return nil }
        var bytes: [UInt8] = []
        for word in 0..<words {
            let start = field.startIndex + word * 8
            guard let value = hex(field[start..<start + 8]) else { return nil }
            withUnsafeBytes(of: UInt32(value)) { bytes.append(contentsOf: $0) }
        }
        return socketAddress(bytes: bytes, port: UInt16(port))
    }

    /// A whole hexadecimal number of at most 16 digits.
    private static func hex(_ digits: some Collection<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var value: UInt64 = 0
        for digit in digits {
            switch digit {
            case 48...57: value = value << 4 | UInt64(digit - 48)
            case 65...70: value = value << 4 | UInt64(digit - 55)
            case 97...102: value = value << 4 | UInt64(digit - 87)
            default: return nil
            }
        }
        return value
    }

    /// The address of network-order `bytes` (4 or 16) and `port`, printed as the rest of netlife prints them.
    private static func socketAddress(bytes: [UInt8], port: UInt16) -> SocketAddress? {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            if bytes.count == 4 {
                var sin = sockaddr_in()
                sin.sin_family = sa_family_t(AF_INET)
                sin.sin_port = port.bigEndian
                withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: bytes) }
                raw.storeBytes(of: sin, as: sockaddr_in.self)
            } else {
                var sin6 = sockaddr_in6()
                sin6.sin6_family = sa_family_t(AF_INET6)
                sin6.sin6_port = port.bigEndian
                withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: bytes) }
                raw.storeBytes(of: sin6, as: sockaddr_in6.self)
            }
        }
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) }
        }
    }

    /// The TCP sockets among `descriptors`, in descriptor order: each descriptor whose inode has a line in
    /// `table`. Linear in both.
    public static func join(descriptors: [SocketDescriptor], table: [TCPTableEntry]) -> [ProcessTCPSocket] {
        var byInode: [UInt64: TCPTableEntry] = [:]
        for entry in table { byInode[entry.inode] = entry }
        return descriptors.sorted { $0.fd < $1.fd }.compactMap { descriptor in
            byInode[descriptor.inode].map {
                ProcessTCPSocket(fd: descriptor.fd, inode: descriptor.inode, local: $0.local, remote: $0.remote, state: $0.state)
            }
        }
    }

    /// The sockets reclaim takes: one descriptor per socket (a socket held twice is reset once), and none
    /// that any of `voipDescriptors` refers to. Which of them are connected TCP sockets is asked of each when
    /// it is taken (`reset(_:pidfd:)`).
    public static func reclaimTargets(_ sockets: [SocketDescriptor], sparing voipDescriptors: Set<CInt>) -> [SocketDescriptor] {
        let spared = Set(sockets.filter { voipDescriptors.contains($0.fd) }.map(\.inode))
        var seen = Set<UInt64>()
        return sockets.sorted { $0.fd < $1.fd }.filter { !spared.contains($0.inode) && seen.insert($0.inode).inserted }
    }

    // MARK: The shell

    /// The socket descriptors of process `pid`, from /proc/PID/fd (at most `maxDescriptors` entries). A
    /// descriptor closed while the directory is read is skipped. The corresponding C functions are
    /// `opendir`, `readdir` and `readlinkat`.
    public static func socketDescriptors(pid: Int32) throws(SystemError) -> [SocketDescriptor] {
        let path = "/proc/\(pid)/fd"
        errno = 0
        guard let directory = opendir(path) else { throw SystemError("opendir(\(path))", Errno.current) }
        defer { closedir(directory) }
        let directoryFD = dirfd(directory)
        var found: [SocketDescriptor] = []
        var target = [CChar](repeating: 0, count: 64)
        var entries = 0
        while entries < maxDescriptors {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw SystemError("readdir(\(path))", Errno.current) }
                break
            }
            entries += 1
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard let fd = CInt(name) else { continue }
            let length = readlinkat(directoryFD, name, &target, target.count)
            guard length > 0, length < target.count else { continue }
            let text = String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let inode = socketInode(linkTarget: text) { found.append(SocketDescriptor(fd: fd, inode: inode)) }
        }
        return found
    }

    /// The lines of /proc/PID/net/tcp and tcp6 for the sockets `inodes`.
    public static func tableEntries(pid: Int32, inodes: Set<UInt64>) throws(SystemError) -> [TCPTableEntry] {
        guard !inodes.isEmpty else { return [] }
        var entries: [TCPTableEntry] = []
        for (file, ipv6) in [("tcp", false), ("tcp6", true)] {
            do {
                try KernelFile.forEachLine("/proc/\(pid)/net/\(file)", limit: maxTableBytes, maxLineBytes: maxLineBytes) { line in
                    if let entry = tableEntry(line: line, ipv6: ipv6), inodes.contains(entry.inode) { entries.append(entry) }
                }
            } catch where error.errno.rawValue == ENOENT && ipv6 {
                // A kernel without IPv6 has no tcp6.
            }
        }
        return entries
    }

    /// The TCP sockets process `pid` holds, in descriptor order.
    public static func tcpSockets(pid: Int32) throws(SystemError) -> [ProcessTCPSocket] {
        let descriptors = try socketDescriptors(pid: pid)
        return join(descriptors: descriptors, table: try tableEntries(pid: pid, inodes: Set(descriptors.map(\.inode))))
    }

    /// Resets each of `sockets` of the process `pidfd` refers to that is a connected TCP socket: takes it
    /// (`pidfd_getfd`), asks its state (`getsockopt(TCP_INFO)`), dissolves its connection
    /// (`connect(AF_UNSPEC)`: the peer gets RST) and closes the duplicate. A failure is reported and the
    /// others are still reset.
    public static func reset(_ sockets: [SocketDescriptor], pidfd: CInt) -> SocketResetReport {
        var report = SocketResetReport()
        for socket in sockets {
            do {
                let fd = try SocketCalls.takeDescriptor(pidfd: pidfd, fd: socket.fd)
                defer { SocketCalls.close(fd) }
                guard let state = SocketCalls.tcpState(fd), state.holdsAConnection else {
                    report.skipped.append(socket)
                    continue
                }
                try SocketCalls.disconnect(fd)
                report.reset.append(socket)
            } catch {
                report.failures.append(.init(socket: socket, error: error))
            }
        }
        return report
    }

    /// Resets the connected TCP sockets of process `pid` (`pidfd` refers to it), sparing `voipDescriptors`.
    public static func reclaim(pid: Int32, pidfd: CInt, sparing voipDescriptors: Set<CInt>) throws(SystemError) -> SocketResetReport {
        reset(reclaimTargets(try socketDescriptors(pid: pid), sparing: voipDescriptors), pidfd: pidfd)
    }
}

extension SocketCalls {
    /// A process descriptor of process `pid` (close-on-exec), for `takeDescriptor`. Not a bug when it fails:
    /// the process may have exited (ESRCH). The corresponding C function is `pidfd_open`.
    public static func openProcess(_ pid: Int32) throws(SystemError) -> CInt {
        try sys("pidfd_open(\(pid))") { pidfd_open(pid, 0) }
    }

    /// A duplicate, in this process, of descriptor `fd` of the process `pidfd` refers to (close-on-exec).
    /// Not a bug when it fails: the other process may have closed `fd` (EBADF) or exited (ESRCH) meanwhile,
    /// so no errno traps here. The corresponding C function is `pidfd_getfd` (Linux 5.6; glibc 2.36).
    public static func takeDescriptor(pidfd: CInt, fd: CInt) throws(SystemError) -> CInt {
        while true {
            errno = 0
            let taken = pidfd_getfd(pidfd, fd, 0)
            if taken >= 0 { return taken }
            if errno == EINTR { continue }
            throw SystemError("pidfd_getfd(\(fd))", Errno.current)
        }
    }

    /// The TCP state of a socket, or nil when it is not a TCP socket. The corresponding C call is
    /// `getsockopt(TCP_INFO)`, of which only the first byte (`tcpi_state`) is asked for.
    public static func tcpState(_ fd: CInt) -> TCPState? {
        var state: UInt8 = 0
        var length = socklen_t(1)
        guard getsockopt(fd, CInt(IPPROTO_TCP), TCP_INFO, &state, &length) == 0, length == 1 else { return nil }
        return TCPState(rawValue: state)
    }
}

extension KernelFile {
    /// Calls `body` with each line of a file (without its newline), reading 64 KiB at a time, at most `limit`
    /// bytes in all; a line longer than `maxLineBytes` is skipped. The corresponding C functions are `open`
    /// and `read`.
    static func forEachLine(_ path: String, limit: Int, maxLineBytes: Int, _ body: (ArraySlice<UInt8>) -> Void) throws(SystemError) {
        let file = try FileDescriptor.open(path, .readOnly)
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var pending: [UInt8] = []
        var skipping = false
        var total = 0
        while total < limit {
            let wanted = min(chunk.count, limit - total)
            let result = chunk.withUnsafeMutableBytes { buffer -> Result<Int, SystemError> in
                do throws(SystemError) {
                    return .success(try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted])))
                } catch {
                    return .failure(error)
                }
            }
            let count = try result.get()
            if count == 0 { break }
            total += count
            var start = 0
            while start < count {
                guard let newline = chunk[start..<count].firstIndex(of: UInt8(ascii: "\n")) else {
                    if !skipping { pending.append(contentsOf: chunk[start..<count]) }
                    if pending.count > maxLineBytes { pending.removeAll(); skipping = true }
                    break
                }
                if !skipping {
                    if pending.isEmpty {
                        if newline - start <= maxLineBytes { body(chunk[start..<newline]) }
                    } else {
                        pending.append(contentsOf: chunk[start..<newline])
                        if pending.count <= maxLineBytes { body(pending[...]) }
                    }
                }
                pending.removeAll(keepingCapacity: true)
                skipping = false
                start = newline + 1
            }
        }
        if !skipping && !pending.isEmpty && pending.count <= maxLineBytes { body(pending[...]) }
    }
}
