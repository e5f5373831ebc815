// How a child process ended: a plain value the pure cores (the restart rules, the app's lifecycle) decide on,
// kept apart from the shell that waits for the child.

/// How a child process ended.
public enum ChildExitStatus: Equatable, Sendable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    public var description: String {
        switch self {
        case .exited(let code): return "exit status \(code)"
        case .signaled(let signal): return "killed by signal \(signal)"
        }
    }

    /// Whether the process exited with status 0.
    public var isSuccess: Bool { self == .exited(0) }
}
