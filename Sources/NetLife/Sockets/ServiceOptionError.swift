// Why a service or a data socket's protocol cannot be made from its options.

/// Why a service cannot be made from its options.
public struct ServiceOptionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The option at fault, if one is.
    public var key: String?
    public var message: String
    /// Whether the fault is in this host rather than in the text: a file or directory missing (a `root` not
    /// made yet), or one netlifed must write that it cannot (a read-only file system, as systemd's
    /// ProtectSystem=strict makes it). netlifed does not start until it is mended, and `--check-config`, which
    /// runs every check the start runs, reports it as an error.
    public var isAboutThisHost: Bool
    /// Further errors of other options, independent of this one: every one is reported, each once.
    public var others: [ServiceOptionError] = []
    public init(key: String? = nil, _ message: String, isAboutThisHost: Bool = false) {
        self.key = key
        self.message = message
        self.isAboutThisHost = isAboutThisHost
    }
    public var description: String { message }

    /// This error and the others.
    public var all: [ServiceOptionError] {
        var first = self
        first.others = []
        return [first] + others.flatMap(\.all)
    }

    /// Throws every error of `errors` (independent checks of different options), the first with the rest as
    /// its `others`; nothing when there is none.
    public static func throwAll(_ errors: [ServiceOptionError]) throws(ServiceOptionError) {
        let flat = errors.flatMap(\.all)
        guard var first = flat.first else { return }
        first.others = Array(flat.dropFirst())
        throw first
    }
}
