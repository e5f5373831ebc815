// What an app is, as configured: its listeners, its policies, its budgets and its hooks. Plain values,
// built by the daemon's config parser (or by an app author's code) and read by `App`.

import NetLifeEvent

/// How a listener's accepted connections fare when the app goes to the background.
public enum ConnectionPolicy: String, Sendable, CaseIterable {
    /// Left open (not serviced while the app is suspended). The default.
    case keep
    /// Flushed and closed: the peer sees FIN.
    case close
}

/// A service's own settings from a `[listener]` section (`root = ...` for http, for example).
public struct ServiceOptions: Sendable, Equatable {
    /// Key to value, as written in the config.
    public var values: [String: String]
    public init(_ values: [String: String] = [:]) { self.values = values }
    public subscript(key: String) -> String? { values[key] }
}

/// How a listener is announced over mDNS (DNS-SD, as Bonjour does) while it is open.
public struct MDNSAnnouncement: Sendable, Equatable {
    /// The service type, such as `_http._tcp`.
    public var type: String
    /// The instance name; nil: the app's name.
    public var name: String?
    /// The TXT record's strings, each `key=value`.
    public var txt: [String]

    public init(type: String, name: String? = nil, txt: [String] = []) {
        self.type = type
        self.name = name
        self.txt = txt
    }
}

/// A listening socket of an app.
public struct ListenerConfiguration: Sendable, Equatable {
    /// The `service` of a process app's listeners: the program serves them.
    public static let programService = "program"

    /// The name after the dot in `[listener APP.NAME]`.
    public var name: String
    /// Where it listens. Port 0 takes a port from the kernel at the first open and keeps it afterwards.
    public var address: SocketAddress
    /// The built-in or registered service behind the listener, for example `echo`; `program` for the
    /// listeners of a process app, which its program serves.
    public var service: String
    /// The service's own settings.
    public var serviceOptions = ServiceOptions()
    /// What happens to accepted connections on did-enter-background.
    public var connections: ConnectionPolicy = .keep
    /// The most connections served at once; beyond it the listener stops accepting (as HAProxy's maxconn),
    /// and new connections wait in the kernel's queue.
    public var maxConnections: Int? = nil
    /// The kernel's accept queue length.
    public var backlog: Int32 = 511
    /// `mdns`, `mdns-name`, `mdns-txt`: announced over mDNS while open; nil: not announced.
    public var mdns: MDNSAnnouncement? = nil
    /// `adopt = yes` (a process app's listener): the program binds `address` itself; netlifed finds that
    /// socket after the start and holds it as it holds the listeners it hands over.
    public var adopt = false
    /// `on-background`: whether it stops listening on did-enter-background (the iOS rule) or keeps listening,
    /// and a connection wakes the suspended app.
    public var onBackground = ListenerBackgroundRule.close

    public init(name: String, address: SocketAddress, service: String) {
        self.name = name
        self.address = address
        self.service = service
    }
}

/// `on-background` of a listener.
public enum ListenerBackgroundRule: String, Sendable, CaseIterable {
    /// Stop listening on did-enter-background, listen again on will-enter-foreground: connects are refused
    /// in between (the iOS rule). The default.
    case close
    /// Keep listening in the background and while suspended: a connection wakes the suspended app into the
    /// background, its service (or its program, thawed) serves it, and the app is suspended again once its
    /// connections from these listeners have been closed for `auto-suspend`.
    case wake
}

/// A hook command, split into words as a shell would (quotes and backslashes respected, no expansion).
public struct HookCommand: Sendable, Equatable, CustomStringConvertible {
    /// The program and its arguments.
    public var arguments: [String]
    public init(arguments: [String]) { self.arguments = arguments }
    public var description: String { arguments.joined(separator: " ") }
}

/// `user = NAME` of a process app: the account its program runs as, resolved from the user database
/// (getpwnam) when the config is read.
public struct ProgramUser: Sendable, Equatable {
    public var name: String
    public var uid: UInt32
    /// The user's primary group.
    public var gid: UInt32

    public init(name: String, uid: UInt32, gid: UInt32) {
        self.name = name
        self.uid = uid
        self.gid = gid
    }
}

/// `ready` of a process app: when its program counts as started.
public enum ReadinessMode: String, Sendable, CaseIterable {
    /// As soon as it has been started (systemd's Type=simple). The default.
    case start
    /// When it sends READY=1 on its NOTIFY_SOCKET (systemd's Type=notify), within the launch budget.
    case notify
}

/// A process app's program (docs/process-apps.md): `exec`, `working-directory`, `environment`, `restart`, `user`,
/// `ready`, `watchdog`.
public struct ProgramConfiguration: Sendable, Equatable {
    /// The program and its arguments, split as hook commands are.
    public var arguments: [String]
    /// The directory it starts in; nil: netlifed's.
    public var workingDirectory: String? = nil
    /// Variables added to (or replacing those of) netlifed's environment.
    public var environment: [String: String] = [:]
    /// Which exits start it again.
    public var restart: RestartMode = .no
    /// The user it runs as; nil: netlifed's.
    public var user: ProgramUser? = nil
    /// When its launch's start-program step is over.
    public var ready: ReadinessMode = .start
    /// `watchdog`: the program must send WATCHDOG=1 at least this often (WATCHDOG_USEC); nil: no watchdog.
    public var watchdog: Duration? = nil

    public init(arguments: [String]) { self.arguments = arguments }
}

/// Everything configured about an app.
public struct AppConfiguration: Sendable, Equatable {
    public var name: String
    /// Whether and how the app is launched when the daemon starts.
    public var launch: LaunchMode = .foreground
    /// The time limits of its code.
    public var budgets = Budgets.Profile.ios13.budgets
    /// Hooks per lifecycle callback.
    public var hooks: [LifecycleEvent: HookCommand] = [:]
    /// The hook run when background tasks begun over the control socket expire (`on-expiration`).
    public var expirationHook: HookCommand? = nil
    /// How long after becoming suspend-eligible the app is suspended; nil never (`auto-suspend = never`).
    public var autoSuspend: Duration? = .seconds(1)
    /// How long an active app may go unused before netlifed moves it to the background itself; nil never
    /// (`idle-background`, off by default). See `IdleRule` for what counts as use.
    public var idleBackground: Duration? = nil
    /// Whether an open connection counts as use even when it moves nothing (`idle-keeps-connections`).
    public var idleKeepsConnections = false
    /// UIApplicationExitsOnSuspend: leaving the foreground terminates the app.
    public var exitsOnSuspend = false
    /// `multitasking = no`: like exits-on-suspend, and background tasks are refused (id 0).
    public var multitasking = true
    /// The background mode the app starts in.
    public var backgroundMode: BackgroundMode = .idle
    /// The app's listeners, in config order.
    public var listeners: [ListenerConfiguration] = []
    /// The app's data sockets (`[socket APP.NAME]`), in config order.
    public var sockets: [DataSocketConfiguration] = []
    /// `reclaim-on-suspend = yes`: reclaim runs on every entry into suspended (modern iOS).
    public var reclaimOnSuspend = false
    /// `on-voip-data`: the hook run when data on a VoIP socket wakes the suspended app.
    public var voipDataHook: HookCommand? = nil
    /// `exec`: the app is this program (a process app); its listeners are handed to it.
    public var program: ProgramConfiguration? = nil

    public init(name: String) { self.name = name }

    /// Whether this configuration can replace `running` without restarting the app: the same name, the
    /// same listeners and the same data sockets (everything else takes effect in place).
    public func canReplaceInPlace(_ running: AppConfiguration) -> Bool {
        name == running.name && listeners == running.listeners && sockets == running.sockets && program == running.program
    }

    /// The rules' view of the app.
    public func traits(hasDelegate: Bool) -> LifecycleTraits {
        var traits = LifecycleTraits(exitsOnSuspend: exitsOnSuspend || !multitasking, hasDelegate: hasDelegate,
                                     hooks: Set(hooks.keys), hasProgram: program != nil,
                                     listensInBackground: program == nil && listeners.contains { $0.onBackground == .wake })
        if !exitsOnSuspend && !multitasking { traits.exitsOnSuspendKey = "multitasking = no" }
        return traits
    }
}

/// A data socket as configured.
public struct DataSocketConfiguration: Sendable, Equatable {
    /// The name after the dot in `[socket APP.NAME]`.
    public var name: String
    /// The peer (`connect = HOST:PORT`, numeric addresses).
    public var address: SocketAddress
    /// The protocol's name (`line`, `imap`, or an app author's own).
    public var protocolName: String
    /// The protocol's own settings (`quiet-enter`, `user`, ...).
    public var protocolOptions = ServiceOptions()
    /// What happens on did-enter-background.
    public var policy: DataSocketPolicy = .keep
    /// A VoIP socket: read while the app is suspended (data wakes it), never reclaimed.
    public var voip = false
    /// How often the protocol's keep-alive is sent (waking a suspended app); nil: never.
    public var keepalive: Duration? = nil

    public init(name: String, address: SocketAddress, protocolName: String) {
        self.name = name
        self.address = address
        self.protocolName = protocolName
    }
}
