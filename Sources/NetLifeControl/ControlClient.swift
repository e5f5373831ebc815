// The client side of the control protocol, as netlifectl uses it: a blocking Unix stream socket, one
// request line out, reply lines in. Plain libc, no event loop.

@preconcurrency import Glibc

/// A blocking connection to a daemon's control socket.
public final class ControlClient {
    /// Why talking to the daemon failed.
    public enum Failure: Error {
        /// Nothing answers at the socket.
        case unreachable(String)
        /// The daemon closed the connection or sent something that is not a reply.
        case broken(String)
    }

    private let fd: CInt
    private var buffer: [UInt8] = []
    /// The far host the connection reaches through a spawned program (`init(spawning:to:)`), for messages.
    private var farHost: String?

    /// Takes a connected stream socket whose other end speaks the protocol (ssh running a far bridge).
    public init(descriptor: CInt) {
        fd = descriptor
    }

    /// Connects to the socket at `path`. The corresponding C functions are `socket` and `connect`.
    public init(path: String) throws(Failure) {
        guard path.utf8.count <= ControlProtocol.maxSocketPathBytes else {
            throw .unreachable("the control socket path is \(path.utf8.count) bytes long; at most \(ControlProtocol.maxSocketPathBytes) fit in a Unix socket address")
        }
        fd = socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .unreachable("cannot make a socket: \(Self.errorText())") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.utf8) }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result != 0 {
            let error = errno
            close(fd)
            switch error {
            case ENOENT, ECONNREFUSED: throw .unreachable("netlifed is not running (socket \(path))")
            default: throw .unreachable("cannot reach netlifed at \(path): \(String(cString: strerror(error)))")
            }
        }
    }

    deinit { close(fd) }

    private static func errorText() -> String { String(cString: strerror(errno)) }

    /// Sends one request line.
    public func send(_ request: ControlRequest) throws(Failure) {
        try send(line: request.json.serialized)
    }

    /// Sends one line (a newline is added).
    public func send(line: String) throws(Failure) {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw .broken("sending the request failed: \(Self.errorText())")
            }
            offset += written
        }
    }

    /// Reads one reply line; nil at end of stream.
    public func receive() throws(Failure) -> JSON? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                do {
                    return try JSON.parse(line)
                } catch {
                    guard let farHost else { throw .broken("netlifed sent a reply that is not JSON: \(error)") }
                    // Over ssh, what comes before the bridge's first byte is the login's: a shell that refuses
                    // the user, a profile or a banner that prints, a PATH without netlifectl.
                    let text = String(decoding: line.prefix(200), as: UTF8.self).unicodeScalars
                        .map { $0.properties.isWhitespace || (0x20..<0x7f).contains($0.value) ? String($0) : "?" }.joined()
                    throw .broken("\(farHost) answered with something other than netlifed's reply: \"\(text)\" (the ssh user's "
                                  + "login printed it, or ran no netlifectl --bridge: its shell, profile or PATH on \(farHost))")
                }
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = recv(fd, &chunk, chunk.count, 0)
            if count < 0 {
                if errno == EINTR { continue }
                throw .broken("reading the reply failed: \(Self.errorText())")
            }
            if count == 0 {
                if buffer.isEmpty { return nil }
                throw .broken("netlifed closed the connection in the middle of a reply")
            }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }
}

extension ControlClient {
    /// Starts `arguments` (a program looked up in PATH, and its arguments) with one end of a socket pair as its
    /// standard input and output, and speaks the protocol over the other: the program (ssh running a far
    /// netlifectl --bridge) carries it to a daemon. Its standard error is netlifectl's. `host` names the far
    /// side in messages.
    public convenience init(spawning arguments: [String], to host: String) throws(Failure) {
        guard let program = arguments.first else { throw .unreachable("no command to reach \(host) with") }
        var ends: [CInt] = [-1, -1]
        guard socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw .unreachable("cannot make a socket pair for \(program): \(Self.errorText())")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        var pid: pid_t = 0
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let status = posix_spawnp(&pid, program, &actions, nil, argv, environ)
        close(ends[1])
        guard status == 0 else {
            close(ends[0])
            throw .unreachable("cannot run \(program) to reach \(host): \(String(cString: strerror(status)))")
        }
        self.init(descriptor: ends[0])
        farHost = host
    }

    /// Copies `input` to the socket and the socket to `output` until both are done (what `netlifectl --bridge`
    /// does on the far host): at the end of `input` the socket's sending side is shut down and the daemon's
    /// last replies still come back. False when a descriptor fails.
    public func relay(input: CInt, output: CInt) -> Bool {
        var fds = [pollfd(fd: input, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        var chunk = [UInt8](repeating: 0, count: 65536)
        var inputOpen = true
        while true {
            fds[0].fd = inputOpen ? input : -1
            guard poll(&fds, 2, -1) >= 0 || errno == EINTR else { return false }
            if inputOpen, fds[0].revents != 0 {
                let count = read(input, &chunk, chunk.count)
                if count > 0 {
                    guard Self.writeAll(fd, chunk[0..<count]) else { return false }
                } else if count == 0 || errno != EINTR {
                    inputOpen = false
                    shutdown(fd, CInt(SHUT_WR))
                }
            }
            if fds[1].revents != 0 {
                let count = recv(fd, &chunk, chunk.count, 0)
                if count > 0 {
                    // A reader that has gone (the far netlifectl ended) ends the relay.
                    guard Self.writeAll(output, chunk[0..<count]) else { return true }
                } else if count == 0 || errno != EINTR {
                    return true
                }
            }
        }
    }

    /// Writes all of `bytes` to `target`; false when the reader is gone.
    private static func writeAll(_ target: CInt, _ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let written = bytes[offset...].withUnsafeBytes { write(target, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }
}
