// The control protocol (SPEC section 8): one JSON object per line each way. This file holds its version,
// its error codes, and how replies are shaped; ControlServer moves the lines, ControlCommands acts on them.

import NetLife
import NetLifeEvent

/// The protocol's constants.
public enum ControlProtocol {
    /// The protocol version this daemon speaks. A request may carry `"protocol": N`; a larger N is refused.
    public static let version = 1
    /// The daemon's version.
    public static let daemonVersion = "0.1.0"
    /// The longest request line accepted.
    public static let maxRequestBytes = 64 * 1024
    /// The most control connections open at once.
    public static let maxConnections = 32
    /// How long an idle control connection is kept.
    public static let idleTimeout: Duration = .seconds(60)
    /// How long a client may take to complete a request it has begun (or its first one).
    public static let requestTimeout: Duration = .seconds(5)
    /// The most replies a session may leave unread before it is no longer read.
    public static let maxUnreadReplyBytes = 1 << 20
    /// The most open background tasks per app.
    public static let maxTasksPerApp = BackgroundTaskRegistry.maxOpenTasks
    /// The longest background task name, in bytes of UTF-8.
    public static let maxTaskNameBytes = 256
}

/// An error reply's `code`.
public enum ControlErrorCode: String, Sendable {
    case badRequest = "bad-request"
    case requestTooLarge = "request-too-large"
    case unknownCommand = "unknown-command"
    case unsupported
    case unknownApp = "unknown-app"
    case invalidTransition = "invalid-transition"
    case watchdog
    case permissionDenied = "permission-denied"
    case tooManyConnections = "too-many-connections"
    case protocolVersion = "protocol-version"
    case shuttingDown = "shutting-down"
    case configError = "config-error"
    case busy
    case timeout
    case limit
    case reloaded
}

/// Building replies.
enum Reply {
    static func ok(_ members: JSONObject = [:]) -> JSON {
        var object: JSONObject = ["ok": true]
        for member in members.members { object[member.key] = member.value }
        return .object(object)
    }

    static func error(_ code: ControlErrorCode, _ message: String) -> JSON {
        .object(["ok": false, "error": .object(["code": .string(code.rawValue), "message": .string(message)])])
    }

    /// The reply to a transition command (`launch`, `foreground`, `background`, `suspend`, `terminate`).
    static func transition(app: App, _ outcome: TransitionOutcome) -> JSON {
        switch outcome {
        case .already(let state):
            return ok(["app": .string(app.name), "state": .string(state.rawValue), "already": true, "stages": []])
        case .refused(let message):
            return error(.invalidTransition, message)
        case .completed(let state, let stages):
            return ok(["app": .string(app.name), "state": .string(state.rawValue), "already": false,
                       "stages": .array(stages.map(stage))])
        case .suspendPending(let reason):
            return ok(["app": .string(app.name), "state": .string(app.state.rawValue), "already": false,
                       "suspendPending": true, "reason": .string(reason), "stages": []])
        case .cancelled(let reason):
            return error(.reloaded, reason)
        case .killed(let timeout):
            return error(.watchdog, "app \(app.name) was killed by the watchdog (0x8badf00d): \(timeout.stage) took \(milliseconds(timeout.elapsed)) ms, over its budget of \(milliseconds(timeout.budget)) ms")
        }
    }

    static func stage(_ report: StageReport) -> JSON {
        .object(["name": .string(report.event.rawValue), "ms": .number(milliseconds(report.duration))])
    }

    /// An app as `status` shows it.
    static func status(_ status: AppStatus) -> JSON {
        var object: JSONObject = [
            "name": .string(status.name),
            "state": .string(status.state.rawValue),
            "suspendPending": .bool(status.suspendPending),
            "backgroundTimeRemaining": status.backgroundTimeRemaining.map { .number(seconds($0)) } ?? .null,
            "backgroundMode": .string(status.backgroundMode.rawValue),
        ]
        object["listeners"] = .array(status.listeners.map { listener in
            .object(["name": .string(listener.name), "address": .string(listener.address),
                     "service": .string(listener.service), "open": .bool(listener.open),
                     "error": listener.error.map(JSON.string) ?? .null,
                     "connections": .number(Double(listener.connections))])
        })
        object["sockets"] = []
        object["tasks"] = .array(status.tasks.map(task))
        object["lastTermination"] = status.lastTermination.map(termination) ?? .null
        object["lastStages"] = .array(status.lastStages.map(stage))
        return .object(object)
    }

    /// A termination record: `reason`, `at` (seconds since the epoch), and per reason `by` (who asked) or the
    /// watchdog's `stage`, `budget` and `elapsed`.
    static func termination(_ record: TerminationRecord) -> JSON {
        var object: JSONObject = ["reason": .string(record.reason.name), "at": .number((record.at * 1000).rounded() / 1000)]
        switch record.reason {
        case .terminated(let cause), .terminatedWhileSuspended(let cause):
            object["by"] = .string(cause.rawValue)
        case .watchdog(let timeout):
            object["stage"] = .string(timeout.stage.description)
            object["budget"] = .number(seconds(timeout.budget))
            object["elapsed"] = .number(seconds(timeout.elapsed))
        case .exitedOnSuspend, .memoryPressure:
            break
        }
        return .object(object)
    }

    static func task(_ task: TaskStatus) -> JSON {
        .object(["id": .number(Double(task.id)), "name": task.name.map(JSON.string) ?? .null,
                 "age": .number(seconds(task.age))])
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
