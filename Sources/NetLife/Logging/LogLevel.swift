// The levels of a log line (syslog's priorities): a plain value the pure cores name when they ask for a line
// to be logged, kept apart from the Logger shell that writes it.

extension Logger {
    /// Syslog priorities, as sd-daemon(3) prefixes them.
    public enum Level: Int32, Sendable, Comparable, CaseIterable {
        case critical = 2, error = 3, warning = 4, notice = 5, info = 6, debug = 7

        public static func < (a: Level, b: Level) -> Bool { a.rawValue > b.rawValue }

        /// Parses `debug`, `info`, `notice`, `warning`, `error` or `critical`.
        public init?(name: String) {
            switch name {
            case "debug": self = .debug
            case "info": self = .info
            case "notice": self = .notice
            case "warning": self = .warning
            case "error": self = .error
            case "critical": self = .critical
            default: return nil
            }
        }
    }
}
