// The daemon's side of the transition replies: TransitionOutcome as the reply NetLifeControl types. (An app's
// status needs no such step: the framework makes NetLifeStatus's AppStatus itself.)

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
            return TransitionReply(app: app.name, state: state, already: true).json
        case .refused(let message):
            return error(.invalidTransition, message)
        case .completed(let state, let stages):
            return TransitionReply(app: app.name, state: state, stages: stages.map(\.timing)).json
        case .suspendPending(let reason):
            return TransitionReply(app: app.name, state: app.state, suspendPending: true, reason: reason).json
        case .cancelled(let reason):
            return error(.reloaded, reason)
        case .killed(let timeout):
            return error(.watchdog, "app \(app.name) was killed by the watchdog (0x8badf00d): \(timeout.stage) took \(StatusTime.milliseconds(timeout.elapsed)) ms, over its budget of \(StatusTime.milliseconds(timeout.budget)) ms")
        }
    }
}
