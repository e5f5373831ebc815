// Services: what serves the connections of a listener. Built-in ones (echo, http) and an app author's own
// are registered under a name that `service = NAME` in a `[listener]` section refers to.

import NetLifeEvent

/// A network service behind a listener. One instance serves every connection of its listener, on the loop
/// thread.
public protocol Service: AnyObject {
    /// A connection was accepted. The service typically becomes its `delegate`; it must not close the
    /// connection's descriptor behind its back (use `connection.close(_:)`).
    func serve(_ connection: Connection)

    /// The service now belongs to `app` (called once, when the app is made). A service that needs app
    /// facilities (background tasks, app timers, its state) keeps it weakly: an app can leave the daemon
    /// (a reload) while its connections still exist.
    func didAttach(to app: App)
}

extension Service {
    public func didAttach(to app: App) {}
}

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

/// How to make a service: its name, the listener keys it accepts, and a factory.
public struct ServiceDescriptor: Sendable {
    /// The value of `service =` that selects it.
    public var name: String
    /// The `[listener]` keys of its own (for example `root` for http); any other unknown key is an error.
    public var optionKeys: Set<String>
    /// Makes an instance for one listener. Also called when the config is checked, so it must be cheap and
    /// free of side effects; it throws for bad options.
    public var make: @Sendable (ServiceOptions) throws(ServiceOptionError) -> any Service

    public init(name: String, optionKeys: Set<String> = [],
                make: @escaping @Sendable (ServiceOptions) throws(ServiceOptionError) -> any Service) {
        self.name = name
        self.optionKeys = optionKeys
        self.make = make
    }
}

/// The services and data-socket protocols a daemon knows by name.
public struct ServiceRegistry: Sendable {
    private var descriptors: [String: ServiceDescriptor] = [:]
    private var protocols: [String: DataProtocolDescriptor] = [:]

    public init(_ descriptors: [ServiceDescriptor] = [], protocols: [DataProtocolDescriptor] = []) {
        for descriptor in descriptors { register(descriptor) }
        for descriptor in protocols { register(descriptor) }
    }

    /// Adds (or replaces) a data-socket protocol.
    public mutating func register(_ descriptor: DataProtocolDescriptor) {
        protocols[descriptor.name] = descriptor
    }

    /// The data-socket protocol called `name`.
    public func dataProtocol(_ name: String) -> DataProtocolDescriptor? { protocols[name] }

    /// The registered protocol names, sorted.
    public var protocolNames: [String] { protocols.keys.sorted() }

    /// Adds (or replaces) a service.
    public mutating func register(_ descriptor: ServiceDescriptor) {
        descriptors[descriptor.name] = descriptor
    }

    /// The service called `name`.
    public subscript(name: String) -> ServiceDescriptor? { descriptors[name] }

    /// The registered names, sorted.
    public var names: [String] { descriptors.keys.sorted() }
}
