// Services: what serves the connections of a listener. Built-in ones (echo, http) and an app author's own
// are registered under a name that `service = NAME` in a `[listener]` section refers to.

import NetLifeEvent

/// A network service behind a listener. One instance serves every connection of its listener, on the loop
/// thread.
public protocol Service: ConnectionServer {
    /// The service now belongs to `app` (called once, when the app is made). A service that needs app
    /// facilities (background tasks, app timers, its state) keeps it weakly: an app can leave the daemon
    /// (a reload) while its connections still exist.
    func didAttach(to app: App)
}

extension Service {
    public func didAttach(to app: App) {}
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
