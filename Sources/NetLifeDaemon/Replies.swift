// The daemon's side of the replies: the typed values of NetLifeControl filled in from the framework's
// snapshots (AppStatus, TransitionOutcome). The member names live in NetLifeControl alone.

import NetLife
import NetLifeControl
import NetLifeEvent

enum Reply {
    static func error(_ code: ControlErrorCode, _ message: String) -> JSON {
        ControlError(code, message).json
    }

    /// The reply to a transition command (`launch`, `foreground`, `background`, `suspend`, `terminate`).
    static func transition(app: App, _ outcome: TransitionOutcome) -> JSON {
        switch outcome {
        case .already(let state):
            return TransitionReply(app: app.name, state: state.rawValue, already: true).json
        case .refused(let message):
            return error(.invalidTransition, message)
        case .completed(let state, let stages):
            return TransitionReply(app: app.name, state: state.rawValue, stages: stages.map(stage)).json
        case .suspendPending(let reason):
            return TransitionReply(app: app.name, state: app.state.rawValue, suspendPending: true, reason: reason).json
        case .cancelled(let reason):
            return error(.reloaded, reason)
        case .killed(let timeout):
            return error(.watchdog, "app \(app.name) was killed by the watchdog (0x8badf00d): \(timeout.stage) took \(milliseconds(timeout.elapsed)) ms, over its budget of \(milliseconds(timeout.budget)) ms")
        }
    }

    static func stage(_ report: StageReport) -> StageTiming {
        StageTiming(name: report.event.rawValue, milliseconds: milliseconds(report.duration))
    }

    /// An app as `status` shows it.
    static func app(_ status: AppStatus) -> AppInfo {
        var info = AppInfo(name: status.name, state: status.state.rawValue, suspendPending: status.suspendPending,
                backgroundTimeRemaining: status.backgroundTimeRemaining.map(seconds),
                backgroundMode: status.backgroundMode.rawValue,
                listeners: status.listeners.map { listener in
                    ListenerInfo(name: listener.name, address: listener.address, service: listener.service,
                                 open: listener.open, error: listener.error, connections: listener.connections,
                                 pids: listener.pids.map(Int.init))
                },
                sockets: status.sockets.map(socket),
                tasks: status.tasks.map(task),
                lastTermination: status.lastTermination.map(termination),
                lastStages: status.lastStages.map(stage))
        info.program = status.program.map { program in
            ProgramInfo(pid: program.pid.map(Int.init), cgroup: program.cgroup, containment: program.containment,
                        frozen: program.frozen, memory: program.memoryBytes, speaksProtocol: program.speaksProtocol,
                        members: program.members, ready: program.ready, statusText: program.statusText)
        }
        return info
    }

    static func socket(_ socket: DataSocketStatus) -> SocketInfo {
        var info = SocketInfo(name: socket.name, peer: socket.peer, policy: socket.policy.rawValue, voip: socket.voip,
                              state: socket.state.rawValue, error: socket.error)
        info.protocolName = socket.protocolName
        info.connects = socket.connects
        let detail = socket.protocolStatus
        info.lines = detail.lines
        info.lastLine = detail.lastLine
        info.exists = detail.exists
        info.existsUpdates = detail.existsUpdates
        info.expunges = detail.expunges
        info.idle = detail.idle
        return info
    }

    static func termination(_ record: TerminationRecord) -> TerminationInfo {
        var info = TerminationInfo(reason: record.reason.name, at: (record.at * 1000).rounded() / 1000)
        switch record.reason {
        case .terminated(let cause), .terminatedWhileSuspended(let cause):
            if cause != .reload { info.by = cause.rawValue }
        case .watchdog(let timeout):
            info.stage = timeout.stage.description
            info.budget = seconds(timeout.budget)
            info.elapsed = seconds(timeout.elapsed)
        case .programExited(let detail):
            info.detail = detail
        case .exitedOnSuspend, .memoryPressure:
            break
        }
        return info
    }

    static func task(_ task: TaskStatus) -> TaskInfo {
        TaskInfo(id: task.id, name: task.name, age: seconds(task.age))
    }

    /// Seconds with millisecond precision.
    static func seconds(_ duration: Duration) -> Double {
        (duration.seconds * 1000).rounded() / 1000
    }

    /// Milliseconds with microsecond precision.
    static func milliseconds(_ duration: Duration) -> Double {
        (duration.milliseconds * 1000).rounded() / 1000
    }
}
