// The sd_notify protocol: datagrams such as `READY=1` or `STATUS=...` sent to $NOTIFY_SOCKET, when systemd
// (or a test) provides one. Without NOTIFY_SOCKET every call does nothing.

import NetLife
import NetLifeEvent

/// Sends notifications to the service manager.
struct SystemdNotifier {
    /// The socket path from $NOTIFY_SOCKET, if set.
    let socketPath: String?
    let logger: Logger

    init(environment: [String: String], logger: Logger) {
        let path = environment["NOTIFY_SOCKET"]
        socketPath = (path?.isEmpty ?? true) ? nil : path
        self.logger = logger
    }

    /// Sends one notification, for example `READY=1\nSTATUS=echo active`.
    func notify(_ message: String) {
        guard let socketPath else { return }
        do {
            try SocketCalls.sendUnixDatagram(to: socketPath, message)
        } catch {
            logger.warning("sd_notify to \(socketPath): \(error)")
        }
    }
}
