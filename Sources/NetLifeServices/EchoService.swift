// The built-in `echo` service: every byte a peer sends comes back. A small read (a chatty peer) is sent back
// straight from the loop's scratch area; a bulk stream is read into the input buffer's blocks and `send`
// writes them from there. Only what the socket refuses is kept (copied, or its blocks moved, to the output
// buffer), so the hot path allocates nothing and copies nothing in user space.

import NetLife
import NetLifeEvent

/// Echoes every byte back to its sender. One instance serves all connections of a listener.
public final class EchoService: Service, ConnectionDelegate {
    /// The descriptor that registers the service as `service = echo`.
    public static let descriptor = ServiceDescriptor(name: "echo") { _ in EchoService() }

    public init() {}

    public func serve(_ connection: Connection) {
        connection.delegate = self
    }

    public func connectionDidRead(_ connection: Connection) {
        connection.send(connection.input)
    }

    /// A small read goes straight back from the loop's scratch area, as the C reference's does.
    public func connection(_ connection: Connection, consumeSmallRead bytes: UnsafeRawBufferPointer) -> Bool {
        connection.send(bytes)
        return true
    }
}
