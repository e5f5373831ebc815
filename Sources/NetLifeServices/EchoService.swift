// The built-in `echo` service: every byte a peer sends comes back. The connection reads into its input
// buffer's blocks and `send` writes them from there (what the socket refuses moves to the output buffer by
// handing over the blocks), so the hot path allocates nothing in Swift and copies nothing in user space.

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
}
