// The built-in `echo` service: every byte a peer sends comes back. Bytes move from the connection's input
// buffer to its output buffer by handing over libevent's buffer blocks, so the hot path allocates nothing in
// Swift and copies nothing beyond the kernel's read into the loop's scratch area.

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
        connection.output.moveAll(from: connection.input)
        connection.flush()
    }
}
