// The states of a TCP socket, as the kernel numbers them (include/net/tcp_states.h; /proc/net/tcp and
// TCP_INFO use the same numbers), and the one rule reclaim needs of them.

/// A TCP state as /proc/net/tcp numbers it.
public enum TCPState: UInt8, Equatable, Sendable {
    case established = 1, synSent, synReceived, finWait1, finWait2, timeWait, closed, closeWait, lastAck,
         listen, closing, newSynReceived

    /// Whether the socket holds a connection that reclaim resets: not a listener, and connected or
    /// connecting.
    public var holdsAConnection: Bool { self != .listen && self != .closed }
}
