// The sd_notify protocol: datagrams such as `READY=1` or `STATUS=...` sent to $NOTIFY_SOCKET, when systemd
// (or a test) provides one. Without NOTIFY_SOCKET every call does nothing.
//
// The socket's queue is short (net.unix.max_dgram_qlen, 10 by default) and a send never blocks the loop, so
// a burst of state changes could fill it and push out the READY=1 that matters. Hence two kinds of message:
// STATUS= lines are coalesced to one datagram per loop turn (the latest wins), and state messages (READY,
// RELOADING, STOPPING) are retried with back-off when the queue is full.

import NetLife
import NetLifeControl
import NetLifeEvent

/// Sends notifications to the service manager. A plain value: safe to use from the loop-stall watchdog's
/// thread.
struct SystemdNotifier: Sendable {
    /// The socket path from $NOTIFY_SOCKET, if set.
    let socketPath: String?
    let logger: Logger

    init(environment: [String: String], logger: Logger) {
        let path = environment["NOTIFY_SOCKET"]
        socketPath = (path?.isEmpty ?? true) ? nil : path
        self.logger = logger
    }

    /// Sends one notification now, for example `WATCHDOG=trigger`; returns false when the receiver's queue is
    /// full (EAGAIN). Other errors are logged.
    @discardableResult
    func notify(_ message: String) -> Bool {
        guard let socketPath else { return true }
        do {
            try SocketCalls.sendUnixDatagram(to: socketPath, message)
            return true
        } catch {
            if error.errno == .wouldBlock { return false }
            logger.warning("sd_notify to \(socketPath): \(error)")
            return true
        }
    }
}

/// The loop's side of sd_notify: coalesced STATUS lines and state messages that are not lost to a full queue.
final class SystemdAnnouncer {
    let notifier: SystemdNotifier
    private let loop: EventLoop
    private var pendingStatus: String?
    private var statusTimer: EventTimer?
    private var retries: [(message: String, attempts: Int)] = []
    private var retryTimer: EventTimer?

    /// Attempts for a state message whose receiver's queue stays full: 10 ms doubling, about 5 s in all.
    static let maxAttempts = 10

    init(notifier: SystemdNotifier, loop: EventLoop) {
        self.notifier = notifier
        self.loop = loop
    }

    /// Reports the daemon's status line; bursts within one loop turn send only the last one.
    func status(_ line: String) {
        guard notifier.socketPath != nil else { return }
        pendingStatus = line
        if statusTimer == nil {
            statusTimer = EventTimer(loop: loop) { [weak self] in self?.sendStatus() }
        }
        if statusTimer?.isArmed == false { statusTimer?.arm(after: .zero) }
    }

    private func sendStatus() {
        guard let line = pendingStatus else { return }
        pendingStatus = nil
        if !notifier.notify("STATUS=\(line)") { notifier.logger.debug("sd_notify: queue full, STATUS dropped") }
    }

    /// Sends a state message (READY=1, RELOADING=1, STOPPING=1), retrying while the receiver's queue is full.
    func state(_ message: String) {
        guard notifier.socketPath != nil else { return }
        if retries.isEmpty, notifier.notify(message) { return }
        retries.append((message, 0))
        armRetry()
    }

    private func armRetry() {
        guard let first = retries.first else { return }
        if retryTimer == nil { retryTimer = EventTimer(loop: loop) { [weak self] in self?.retry() } }
        retryTimer?.arm(after: .milliseconds(10 << min(first.attempts, 9)))
    }

    private func retry() {
        while let first = retries.first {
            if notifier.notify(first.message) {
                retries.removeFirst()
                continue
            }
            retries[0].attempts += 1
            if retries[0].attempts >= Self.maxAttempts {
                notifier.logger.warning("sd_notify: the service manager's queue stayed full; '\(first.message.prefix(40))' was not delivered")
                retries.removeFirst()
                continue
            }
            break
        }
        armRetry()
    }

    /// Frees the timers (at exit).
    func close() {
        statusTimer?.close()
        retryTimer?.close()
        statusTimer = nil
        retryTimer = nil
    }
}

/// systemd's service watchdog (`WatchdogSec=`): `WATCHDOG=1` from the event loop every half `WATCHDOG_USEC`,
/// when systemd set it for this process (`WATCHDOG_PID` absent or ours). The pings come from a timer on the
/// loop, so a loop that stalls stops them, and systemd catches the stall even if the loop-stall watchdog's
/// own report is lost.
final class SystemdWatchdogPinger {
    /// The interval between pings: half of WATCHDOG_USEC.
    let interval: Duration
    private var timer: EventTimer?
    private let notifier: SystemdNotifier

    /// Nil when systemd asked for no pings (no WATCHDOG_USEC, a WATCHDOG_PID of another process, no
    /// NOTIFY_SOCKET).
    init?(environment: [String: String], pid: Int32, notifier: SystemdNotifier, loop: EventLoop) {
        guard notifier.socketPath != nil, let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let owner = environment["WATCHDOG_PID"], !owner.isEmpty, owner != String(pid) { return nil }
        interval = .microseconds(Int64(clamping: usec / 2))
        self.notifier = notifier
        timer = EventTimer(loop: loop) { [weak self] in self?.ping() }
        ping()
    }

    private func ping() {
        notifier.notify("WATCHDOG=1")
        timer?.arm(after: interval)
    }

    /// Stops the pings (at exit).
    func close() {
        timer?.close()
        timer = nil
    }
}
