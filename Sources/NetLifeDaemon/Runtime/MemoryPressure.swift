// Memory pressure (`netlifectl memory-pressure [--free BYTES]`, docs/data-sockets.md): the shell around
// MemoryPressureRules. It measures each suspended app (`App.heldBytes`: its sockets' buffers and kernel queues,
// plus a process app's program's memory as its cgroup charges it, the program's `memory` in `status`), ends the
// apps the rules choose without callbacks, in their order, then relaunches the VoIP apps among them into the
// background, as iOS relaunches a VoIP app that jetsam ended. The reply waits for the relaunches. The kernel's
// pressure trigger (KernelMemoryPressure.swift) ends its apps the same way, one per event.

import NetLife
import NetLifeControl

extension DaemonRuntime {
    /// Ends suspended apps until `free` bytes are freed (every one when nil), VoIP apps last, and relaunches
    /// the VoIP apps it ended into the background; `completion` gets the apps ended, in the order they were,
    /// once every relaunch has finished.
    func relieveMemoryPressure(free: Int?, completion: @escaping ([JettisonInfo]) -> Void) {
        let candidates = jetsamCandidates()
        let chosen = MemoryPressureRules.appsToEnd(candidates, free: free)
        logger.notice("memory pressure: terminating \(chosen.count) of \(candidates.count) suspended app(s)"
                      + (free.map { " to free \($0) bytes" } ?? ""))
        endForMemoryPressure(chosen, pressure: nil, completion: completion)
    }

    /// The suspended apps, as memory pressure weighs them.
    func jetsamCandidates() -> [JetsamCandidate] {
        supervisor.apps.filter(\.canTerminateForMemoryPressure).map { JetsamCandidate(name: $0.name, bytes: $0.heldBytes, voip: $0.hasVoIPSocket) }
    }

    /// Ends the `chosen` apps that are still suspended, in order, without callbacks (`pressure`: what the
    /// kernel's pressure file said, when its trigger asked), then relaunches the VoIP apps among them.
    func endForMemoryPressure(_ chosen: [JetsamCandidate], pressure: PressureStall?, completion: @escaping ([JettisonInfo]) -> Void) {
        var ended: [(app: App, info: JettisonInfo)] = []
        for candidate in chosen {
            guard let app = supervisor.app(named: candidate.name), app.terminateForMemoryPressure(pressure: pressure) else { continue }
            ended.append((app: app, info: JettisonInfo(app: app.name, bytes: candidate.bytes, voip: candidate.voip)))
        }
        relaunchVoIPApps(ended, completion: completion)
    }

    /// Launches the VoIP apps of `ended` into the background, all at once (one app's slow hook delays no
    /// other), and calls `completion` when the last launch has finished.
    private func relaunchVoIPApps(_ ended: [(app: App, info: JettisonInfo)], completion: @escaping ([JettisonInfo]) -> Void) {
        let logger = self.logger
        var results = ended.map { $0.info }
        let voip = ended.indices.filter { ended[$0].info.voip }
        guard !voip.isEmpty else { return completion(results) }
        guard !isShuttingDown else {
            logger.notice("memory pressure: netlifed is shutting down; the VoIP apps ended are not relaunched")
            return completion(results)
        }
        var pending = voip.count
        for index in voip {
            let name = ended[index].app.name
            // A launch may answer at once (refused, cancelled): `pending` counts every launch before any answer.
            ended[index].app.perform(.launch(background: true)) { outcome in
                if let failure = Self.relaunchFailure(outcome) {
                    logger.warning("memory pressure: VoIP app \(name) was not relaunched: \(failure)")
                } else {
                    results[index].relaunched = true
                    logger.notice("memory pressure: relaunched VoIP app \(name) into the background")
                }
                pending -= 1
                if pending == 0 { completion(results) }
            }
        }
    }

    /// Why a relaunch did not leave the app running, or nil when it did.
    private static func relaunchFailure(_ outcome: TransitionOutcome) -> String? {
        switch outcome {
        case .completed(.notRunning, _): return "it stopped during its launch"
        case .completed: return nil
        case .already(let state): return "it was already \(state) (launched by another command)"
        case .refused(let reason), .cancelled(let reason): return reason
        case .killed(let timeout): return "the watchdog killed it during its launch (\(timeout.stage))"
        case .suspendPending(let reason): return reason
        }
    }
}
