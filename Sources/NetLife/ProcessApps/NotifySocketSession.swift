// netlifed's end of one program run's NOTIFY_SOCKET (systemd's notify protocol, sd_notify(3)): the shell
// that reads datagrams on the loop, keeps those of the program's own processes, parses them (NotifyMessage)
// and hands them to ProgramNotifyState, which decides; it arms one timer for that state's watchdog deadline.
//
// Every sender is untrusted, so each way one can make this end work is bounded:
// - a datagram is read into a buffer of NotifyMessage.maxDatagramBytes; a longer one is dropped whole;
// - at most `datagramsPerTurn` are read a loop turn; the rest wait in the kernel's queue (the socket is
//   watched level-triggered, so the next turn reads on), and a full queue makes senders' sd_notify fail with
//   EAGAIN, never blocks netlifed;
// - a datagram is kept only when its sender (the pid in the kernel's SCM_CREDENTIALS) is a process of the
//   run: in its cgroup, or in its process group where it has none. Others are dropped, and said so in the
//   log at most once per `dropLogInterval`, with how many were dropped meanwhile.

import NetLifeEvent

/// One program run's notify socket on the loop. Loop thread only.
final class NotifySocketSession {
    /// The most datagrams read in one loop turn.
    static let datagramsPerTurn = 16
    /// How often a dropped datagram is logged at most.
    static let dropLogInterval = Duration.seconds(10)

    /// The socket's name as NOTIFY_SOCKET says it (`@...`).
    let address: String
    /// What the run said and its watchdog.
    private(set) var state: ProgramNotifyState

    private let socket: CredentialDatagramSocket
    private var watcher: IOWatcher?
    private var watchdogTimer: DeadlineTimer?
    private let isSender: (Int32) -> Bool
    private let onAction: (ProgramNotifyState.Action) -> Void
    private let logger: Logger
    /// Whether the run was asked to end: only its STOPPING=1 is told, and its watchdog is off.
    private var isEnding = false
    private var dropped = 0
    private var lastDropLog: MonotonicTime?

    /// Binds a socket named `name` for a run whose watchdog is `watchdog` (nil: none), starting now.
    /// `isSender(pid)` says whether a datagram's sender belongs to the run; `onAction` is told what
    /// ProgramNotifyState decides (never after `close()`).
    init(loop: EventLoop, name: String, watchdog: Duration?, logger: Logger, isSender: @escaping (Int32) -> Bool,
         onAction: @escaping (ProgramNotifyState.Action) -> Void) throws(SystemError) {
        socket = try CredentialDatagramSocket(abstractName: name)
        address = socket.address
        state = ProgramNotifyState(watchdog: watchdog, startedAt: .now())
        self.isSender = isSender
        self.onAction = onAction
        self.logger = logger
        let watcher = IOWatcher(loop: loop, descriptor: socket.descriptor) { [weak self] _ in self?.readable() }
        self.watcher = watcher
        do {
            try watcher.watch(.readable)
        } catch {
            watcher.close()
            socket.close()
            throw error
        }
        watchdogTimer = DeadlineTimer(loop: loop) { [weak self] in self?.clock() }
        watchdogTimer?.arm(at: state.deadline)
    }

    /// The run is frozen: its watchdog waits.
    func froze() {
        state.froze()
        watchdogTimer?.arm(at: state.deadline)
    }

    /// The run is thawed: its watchdog starts a fresh interval.
    func thawed() {
        state.thawed(now: .now())
        watchdogTimer?.arm(at: state.deadline)
    }

    /// The run is asked to end (or has ended): its watchdog stops, and of what it says only STOPPING=1 is told
    /// (a READY=1 of an ending run must not complete the next run's launch).
    func end() {
        isEnding = true
        state.froze()
        watchdogTimer?.close()
        watchdogTimer = nil
    }

    /// Reads what the run sent before its main process exited (one turn's share), then closes: a STOPPING=1
    /// sent just before the exit is not lost to the order in which the loop sees the two.
    func drainAndClose() {
        end()
        readable()
        close()
    }

    /// Stops reading and frees the socket and the timer; nothing is told afterwards. Idempotent.
    func close() {
        watcher?.close()
        watcher = nil
        watchdogTimer?.close()
        watchdogTimer = nil
        socket.close()
    }

    private func readable() {
        for _ in 0..<Self.datagramsPerTurn {
            guard watcher != nil else { return }
            let datagram: CredentialDatagram
            do {
                guard let next = try socket.receive(limit: NotifyMessage.maxDatagramBytes) else { return }
                datagram = next
            } catch {
                logger.warning("notify socket: \(error)")
                return
            }
            handle(datagram)
        }
    }

    private func handle(_ datagram: CredentialDatagram) {
        guard datagram.senderPID > 0, isSender(datagram.senderPID) else {
            return drop("from pid \(datagram.senderPID), which is not a process of the program")
        }
        guard !datagram.truncated else { return drop("longer than \(NotifyMessage.maxDatagramBytes) bytes") }
        switch NotifyMessage.parse(datagram.bytes) {
        case .failure(let refusal):
            drop(refusal.description)
        case .success(let message):
            perform(state.receive(message, now: .now()))
        }
    }

    private func clock() {
        perform(state.clock(now: .now()))
    }

    private func perform(_ actions: [ProgramNotifyState.Action]) {
        watchdogTimer?.arm(at: state.deadline)
        for action in actions {
            guard watcher != nil else { return }
            if isEnding, action != .notify(.stopping) { continue }
            onAction(action)
        }
    }

    /// Counts a dropped datagram; logs at most once per `dropLogInterval`.
    private func drop(_ why: String) {
        dropped += 1
        let now = MonotonicTime.now()
        if let last = lastDropLog, now - last < Self.dropLogInterval { return }
        lastDropLog = now
        logger.warning("notify socket: dropped \(dropped) datagram(s); the last one \(why)")
        dropped = 0
    }
}
