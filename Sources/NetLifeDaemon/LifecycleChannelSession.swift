// netlifed's end of a process app's lifecycle channel (the NETLIFE_EVENTS socketpair): the shell that
// carries bytes between the program and LifecycleChannelState, which decides.

import NetLifeEvent

/// netlifed's end of a program's NETLIFE_EVENTS socketpair: what comes in goes to `onBytes` (at most 64 KiB a
/// loop turn, through Connection); lines go out through the connection's buffer.
final class ChannelSession: ConnectionDelegate {
    private let connection: Connection
    private let onBytes: ([UInt8]) -> Void
    private let onClose: () -> Void

    init(loop: EventLoop, fd: CInt, onBytes: @escaping ([UInt8]) -> Void, closed onClose: @escaping () -> Void) throws(SystemError) {
        connection = try Connection(loop: loop, fd: fd)
        self.onBytes = onBytes
        self.onClose = onClose
        connection.delegate = self
    }

    var pendingBytes: Int { connection.output.count }

    func send(_ line: String) {
        connection.output.append(line)
        connection.flush()
    }

    func close() {
        connection.delegate = nil
        connection.close(.now)
    }

    func connectionDidRead(_ connection: Connection) {
        let bytes = connection.input.peekBytes(limit: 64 * 1024)
        connection.input.drain(bytes.count)
        onBytes(bytes)
    }

    func connectionDidReachEnd(_ connection: Connection) {
        close()
        onClose()
    }

    func connectionDidClose(_ connection: Connection, error: SystemError?) {
        connection.delegate = nil
        onClose()
    }
}
