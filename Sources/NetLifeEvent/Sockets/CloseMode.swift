// How a connection is ended: a plain value the pure cores decide on (the app's lifecycle ends its
// connections one way or another), kept apart from the Connection shell that performs it.

extension Connection {
    /// How `close(_:)` ends the connection.
    public enum CloseMode: Equatable, Sendable {
        /// Write what is in `output`, then send FIN and close. Gives up (and resets) when no byte could be
        /// written for `flushTimeout`.
        case afterFlush
        /// Close now; unsent output is dropped. The peer sees FIN, or RST if it had unread data queued.
        case now
        /// Reset the connection (SO_LINGER 0): the peer sees RST.
        case reset
    }
}
