// The client side of the control protocol, as netlifectl uses it: a blocking Unix socket, one request line
// out, reply lines in.

@preconcurrency import Glibc
import NetLifeEvent

/// A blocking connection to a daemon's control socket.
final class ControlClient {
    /// Why talking to the daemon failed.
    enum Failure: Error {
        /// Nothing answers at the socket.
        case unreachable(String)
        /// The daemon closed the connection or sent something that is not a reply.
        case broken(String)
    }

    private let fd: CInt
    private var buffer: [UInt8] = []

    init(path: String) throws(Failure) {
        do {
            fd = try SocketCalls.connectUnixBlocking(path: path)
        } catch {
            switch error.errno.rawValue {
            case ENOENT, ECONNREFUSED:
                throw .unreachable("netlifed is not running (socket \(path))")
            default:
                throw .unreachable("cannot reach netlifed at \(path): \(error.errno)")
            }
        }
    }

    deinit { SocketCalls.close(fd) }

    /// Sends one request line.
    func send(_ request: JSON) throws(Failure) {
        let bytes = Array((request.serialized + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw .broken("sending the request failed: \(Errno.current)")
            }
            offset += written
        }
    }

    /// Reads one reply line; nil at end of stream.
    func receive() throws(Failure) -> JSON? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                do {
                    return try JSON.parse(line)
                } catch {
                    throw .broken("netlifed sent a reply that is not JSON: \(error)")
                }
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = recv(fd, &chunk, chunk.count, 0)
            if count < 0 {
                if errno == EINTR { continue }
                throw .broken("reading the reply failed: \(Errno.current)")
            }
            if count == 0 {
                if buffer.isEmpty { return nil }
                throw .broken("netlifed closed the connection in the middle of a reply")
            }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }
}
