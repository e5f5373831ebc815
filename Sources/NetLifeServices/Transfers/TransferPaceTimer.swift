// The shell of TransferPace: a timer on the loop that samples a transfer's byte count every
// `checkInterval` while the transfer waits on the network, and calls back once when a limit is hit. The
// shells (Download, FTPDownload, Upload) start it when an attempt begins to use the network and stop it
// when the attempt ends or leaves the network (verifying a digest, renaming).

import NetLifeEvent

/// Watches one transfer's progress against its limits. Loop-confined; `stop()` before letting it go.
final class TransferPaceTimer {
    private unowned let loop: EventLoop
    private var timer: EventTimer?
    private var pace: TransferPace?
    private var bytes: () -> Int = { 0 }
    private var onStall: (TransferStall) -> Void = { _ in }

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// Whether it is watching.
    var isWatching: Bool { pace != nil }

    /// Starts watching afresh (an attempt's clock starts now): `bytes` gives the cumulative count of bytes
    /// moved, `onStall` is called once, on the loop, when a limit is hit (the watch has stopped by then).
    /// With no limit set, it does nothing.
    func start(limits: TransferLimits, bytes: @escaping () -> Int, onStall: @escaping (TransferStall) -> Void) {
        stop()
        guard limits.idleTimeout > .zero || limits.lowSpeedLimit > 0 else { return }
        self.bytes = bytes
        self.onStall = onStall
        pace = TransferPace(limits: limits, bytes: bytes(), now: loop.now)
        let timer = EventTimer(loop: loop) { [weak self] in self?.tick() }
        self.timer = timer
        timer.arm(after: limits.checkInterval)
    }

    /// Stops watching. Calling it again does nothing.
    func stop() {
        timer?.close()
        timer = nil
        pace = nil
        bytes = { 0 }
        onStall = { _ in }
    }

    private func tick() {
        guard var pace else { return }
        if let stall = pace.check(bytes: bytes(), at: loop.now) {
            let onStall = self.onStall
            stop()
            onStall(stall)
            return
        }
        self.pace = pace
        timer?.arm(after: pace.limits.checkInterval)
    }
}
