// mDNS (DNS-SD, as Bonjour does) through avahi-daemon: a listener configured with `mdns = _type._tcp` is
// announced while it is open and withdrawn when it closes (docs/configuration.md). A pure core (`MDNSRegistry`)
// decides what to publish or withdraw as listeners open and close and avahi-daemon comes and goes; the
// publisher performs that with libavahi-client on the event loop (AvahiLoopPool), one entry group per
// listener. The client is made with AVAHI_CLIENT_NO_FAIL: without avahi-daemon it waits for one to appear,
// and when avahi-daemon restarts everything is published again.

@preconcurrency import Glibc
import CAvahi
import NetLife
import NetLifeEvent

/// Identifies a listener's announcement.
struct MDNSServiceKey: Hashable, Comparable, CustomStringConvertible {
    var app: String
    var listener: String
    static func < (a: Self, b: Self) -> Bool { (a.app, a.listener) < (b.app, b.listener) }
    var description: String { "\(app).\(listener)" }
}

/// One service as announced: instance name, type, port and TXT strings, and where (MDNSScope).
struct MDNSService: Equatable {
    var name: String
    var type: String
    var port: UInt16
    var txt: [String]
    var scope: MDNSScope = .everywhere
}

/// What should be announced, given the open listeners and whether avahi-daemon is ready; each event returns
/// the actions that bring the announcements in line.
struct MDNSRegistry {
    enum Action: Equatable {
        case publish(MDNSServiceKey, MDNSService)
        case withdraw(MDNSServiceKey)
    }

    /// The services of the open listeners.
    private(set) var wanted: [MDNSServiceKey: MDNSService] = [:]
    /// The services handed to avahi-daemon (registering or established).
    private(set) var published: Set<MDNSServiceKey> = []
    /// Whether avahi-daemon is running and accepts registrations (AVAHI_CLIENT_S_RUNNING).
    private(set) var serverIsReady = false

    mutating func listenerOpened(_ key: MDNSServiceKey, _ service: MDNSService) -> [Action] {
        wanted[key] = service
        guard serverIsReady else { return [] }
        let stale: [Action] = published.contains(key) ? [.withdraw(key)] : []
        published.insert(key)
        return stale + [.publish(key, service)]
    }

    /// Whether nothing is wanted or published: then a listener closing concerns no announcement.
    var isEmpty: Bool { wanted.isEmpty && published.isEmpty }

    mutating func listenerClosed(_ key: MDNSServiceKey) -> [Action] {
        wanted[key] = nil
        return published.remove(key) != nil ? [.withdraw(key)] : []
    }

    /// avahi-daemon became ready (everything wanted is published) or went away (everything published is
    /// dropped: its registrations are gone with it).
    mutating func serverChanged(ready: Bool) -> [Action] {
        guard ready != serverIsReady else { return [] }
        serverIsReady = ready
        if ready {
            let keys = wanted.keys.sorted()
            published = Set(keys)
            return keys.compactMap { key in wanted[key].map { .publish(key, $0) } }
        }
        let keys = published.sorted()
        published = []
        return keys.map { .withdraw($0) }
    }

    /// Another host announces the same name: publish again under `alternative`.
    mutating func nameCollided(_ key: MDNSServiceKey, alternative: String) -> [Action] {
        guard var service = wanted[key], published.contains(key) else { return [] }
        service.name = alternative
        wanted[key] = service
        return [.withdraw(key), .publish(key, service)]
    }

    /// avahi-daemon refused or dropped a registration: it is given up until the listener reopens.
    mutating func publishFailed(_ key: MDNSServiceKey) -> [Action] {
        published.remove(key) != nil ? [.withdraw(key)] : []
    }
}

/// Announces listeners through avahi-daemon. Loop thread only; `close()` before the loop closes.
final class MDNSPublisher {
    private let loop: EventLoop
    private let logger: Logger
    private let poll: AvahiLoopPoll
    private var registry = MDNSRegistry()
    private var client: OpaquePointer?
    private var groups: [MDNSServiceKey: OpaquePointer] = [:]
    private var publishedAt: [MDNSServiceKey: MonotonicTime] = [:]
    /// Avahi's callbacks only note what happened; this timer acts on it on the next loop turn, outside
    /// Avahi's own call stack (a client must not be freed from its callback).
    private var work: EventTimer!
    private var clientStateChanged = false
    private var collisions: Set<MDNSServiceKey> = []
    private var failures: Set<MDNSServiceKey> = []
    private var retryDelay: Duration = .seconds(1)
    private var reconnectAt: MonotonicTime?
    private var lastConnect: MonotonicTime?
    private var everRunning = false
    private var warnedUnavailable = false
    /// The listeners already warned of being announced on the loopback interface only.
    private var warnedLoopback: Set<MDNSServiceKey> = []
    private var isClosed = false

    init(loop: EventLoop, logger: Logger) {
        self.loop = loop
        self.logger = logger
        poll = AvahiLoopPoll(loop: loop, logger: logger)
        work = EventTimer(loop: loop) { [weak self] in self?.performPendingWork() }
    }

    /// Follows the listeners of every app (a sink of DaemonRuntime's app events).
    func appEvent(_ app: App, _ event: AppEvent) {
        guard !isClosed else { return }
        switch event {
        case .listenerOpened(let name, let address, let mdns):
            // The event carries the announcement: no search of the app's listeners (1,000 listeners opening
            // made that quadratic).
            guard let announcement = mdns, let port = address.port else { return }
            let key = MDNSServiceKey(app: app.name, listener: name)
            let scope = MDNSScope.of(address, interfaces: MDNSScope.machineInterfaces())
            if scope.loopback, warnedLoopback.insert(key).inserted {
                logger.warning("mDNS: listener \(key) listens on \(address), a loopback address: announced on \(scope.interface ?? "lo") only, where only this host can connect")
            }
            let service = MDNSService(name: announcement.name ?? app.name, type: announcement.type, port: port, txt: announcement.txt,
                                      scope: scope)
            if client == nil && reconnectAt == nil { connect() }
            perform(registry.listenerOpened(key, service))
        case .listenerClosed(let name):
            // Most listeners have no mDNS: with nothing registered there is no key to make or hash (1,000
            // listeners close on one `background`).
            guard !registry.isEmpty else { return }
            perform(registry.listenerClosed(MDNSServiceKey(app: app.name, listener: name)))
        default:
            break
        }
    }

    /// Withdraws every announcement and disconnects from avahi-daemon. Idempotent.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        work.close()
        perform(registry.serverChanged(ready: false))
        if let client { avahi_client_free(client) }
        client = nil
        poll.close()
    }

    // MARK: The client

    private func connect() {
        lastConnect = .now()
        var failure: CInt = 0
        let context = Unmanaged.passUnretained(self).toOpaque()
        // The callback may run before avahi_client_new returns; it records the client it is given.
        let made = avahi_client_new(poll.api, AVAHI_CLIENT_NO_FAIL, avahiClientChanged, context, &failure)
        guard let made else {
            if !warnedUnavailable {
                warnedUnavailable = true
                logger.warning("mDNS: cannot connect to the system D-Bus (avahi_client_new: \(avahiError(failure))): listeners are not announced; retrying")
            } else {
                logger.debug("mDNS: avahi_client_new: \(avahiError(failure)); retrying in \(retryDelay)")
            }
            scheduleReconnect()
            return
        }
        client = made
        retryDelay = .seconds(1)
        clientChanged(made)
    }

    private func scheduleReconnect() {
        reconnectAt = .now() + retryDelay
        work.arm(after: retryDelay)
        retryDelay = min(retryDelay * 2, .seconds(30))
    }

    fileprivate func clientChanged(_ changed: OpaquePointer) {
        client = changed
        clientStateChanged = true
        work.arm(after: .zero)
    }

    fileprivate func groupChanged(_ group: OpaquePointer, _ state: AvahiEntryGroupState) {
        guard let key = groups.first(where: { $0.value == group })?.key else { return }
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            let service = registry.wanted[key]
            let elapsed = publishedAt.removeValue(forKey: key).map { " in \(Int((MonotonicTime.now() - $0).milliseconds)) ms" } ?? ""
            logger.info("mDNS: announced \(key) as '\(service?.name ?? "?")' \(service?.type ?? "") port \(service?.port ?? 0)\(elapsed)")
        case AVAHI_ENTRY_GROUP_COLLISION:
            collisions.insert(key)
            work.arm(after: .zero)
        case AVAHI_ENTRY_GROUP_FAILURE:
            logger.error("mDNS: avahi-daemon failed to announce \(key): \(avahiError(avahi_client_errno(avahi_entry_group_get_client(group))))")
            failures.insert(key)
            work.arm(after: .zero)
        default:
            break
        }
    }

    private func performPendingWork() {
        guard !isClosed else { return }
        if let reconnectAt, client == nil {
            let now = MonotonicTime.now()
            if now < reconnectAt {
                work.arm(after: reconnectAt - now)
                return
            }
            self.reconnectAt = nil
            connect()
        }
        if clientStateChanged {
            clientStateChanged = false
            followClientState()
        }
        for key in collisions.sorted() {
            guard let current = registry.wanted[key]?.name else { continue }
            guard let renamed = avahi_alternative_service_name(current) else {
                logger.error("mDNS: avahi_alternative_service_name failed for '\(current)'")
                continue
            }
            let alternative = String(cString: renamed)
            avahi_free(renamed)
            logger.notice("mDNS: the name '\(current)' of \(key) is taken on the network; announcing it as '\(alternative)'")
            perform(registry.nameCollided(key, alternative: alternative))
        }
        collisions = []
        for key in failures.sorted() { perform(registry.publishFailed(key)) }
        failures = []
    }

    private func followClientState() {
        guard let client else { return }
        let state = avahi_client_get_state(client)
        logger.debug("mDNS: Avahi client state \(state.rawValue)")
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            if warnedUnavailable || everRunning {
                logger.notice("mDNS: avahi-daemon is running: announcing \(registry.wanted.count) listener(s)")
            }
            everRunning = true
            warnedUnavailable = false
            perform(registry.serverChanged(ready: true))
        case AVAHI_CLIENT_CONNECTING:
            warnUnavailable("avahi-daemon is not running")
            perform(registry.serverChanged(ready: false))
        case AVAHI_CLIENT_FAILURE:
            warnUnavailable("the connection to avahi-daemon failed (\(avahiError(avahi_client_errno(client))))")
            perform(registry.serverChanged(ready: false))
            // A failed client is done for (AVAHI_ERR_DISCONNECTED when avahi-daemon exits): make a new one,
            // which waits for avahi-daemon to come back.
            avahi_client_free(client)
            self.client = nil
            if let lastConnect, MonotonicTime.now() - lastConnect < .seconds(1) { scheduleReconnect() } else { connect() }
        default:
            // S_REGISTERING, S_COLLISION: the host name is being (re)established; services wait for S_RUNNING.
            perform(registry.serverChanged(ready: false))
        }
    }

    /// One warning per outage: it names what is lost and that it comes back by itself.
    private func warnUnavailable(_ reason: String) {
        guard !warnedUnavailable else { return }
        warnedUnavailable = true
        logger.warning("mDNS: \(reason): listeners are not announced until avahi-daemon runs (netlifed works on without mDNS)")
    }

    // MARK: Entry groups

    private func perform(_ actions: [MDNSRegistry.Action]) {
        for action in actions {
            switch action {
            case .publish(let key, let service): publish(key, service)
            case .withdraw(let key): withdraw(key)
            }
        }
    }

    private func withdraw(_ key: MDNSServiceKey) {
        publishedAt[key] = nil
        guard let group = groups.removeValue(forKey: key) else { return }
        let result = avahi_entry_group_free(group)
        if result < 0 {
            logger.debug("mDNS: avahi_entry_group_free for \(key): \(avahiError(result))")
        } else {
            logger.info("mDNS: withdrew \(key)")
        }
    }

    private func publish(_ key: MDNSServiceKey, _ service: MDNSService) {
        guard let client else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let group = avahi_entry_group_new(client, avahiGroupChanged, context) else {
            logger.error("mDNS: avahi_entry_group_new for \(key): \(avahiError(avahi_client_errno(client)))")
            _ = registry.publishFailed(key)
            return
        }
        groups[key] = group
        publishedAt[key] = .now()
        var interface: CInt = -1
        if let name = service.scope.interface {
            let index = if_nametoindex(name)
            if index == 0 {
                logger.warning("mDNS: interface \(name) of \(key) has no index (\(Errno.current)); announcing on every interface")
            } else {
                interface = CInt(index)
            }
        }
        let added = withTXTList(service.txt) { txt in
            netlife_avahi_add_service(group, interface, service.scope.ipProtocol.rawValue, service.name, service.type, service.port, txt)
        }
        var failed = ""
        if added == CInt(AVAHI_ERR_COLLISION) {
            // The name is taken by another service of this very avahi-daemon: rename, on the next loop turn.
            collisions.insert(key)
            work.arm(after: .zero)
            return
        } else if added < 0 {
            failed = "avahi_entry_group_add_service: \(avahiError(added))"
        } else {
            let committed = avahi_entry_group_commit(group)
            if committed < 0 { failed = "avahi_entry_group_commit: \(avahiError(committed))" }
        }
        guard !failed.isEmpty else { return }
        logger.error("mDNS: cannot announce \(key) as '\(service.name)' \(service.type): \(failed)")
        perform(registry.publishFailed(key))
    }

    /// Calls `body` with an AvahiStringList of `strings` (nil when there are none), freed afterwards.
    private func withTXTList(_ strings: [String], _ body: (UnsafeMutablePointer<AvahiStringList>?) -> CInt) -> CInt {
        guard !strings.isEmpty else { return body(nil) }
        var copies = strings.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        let list = copies.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) {
                avahi_string_list_new_from_array($0, CInt(buffer.count))
            }
        }
        guard let list else { return CInt(AVAHI_ERR_NO_MEMORY) }
        defer { avahi_string_list_free(list) }
        return body(list)
    }
}

/// Avahi's message for an error number (`avahi_strerror`).
func avahiError(_ code: CInt) -> String {
    "\(String(cString: avahi_strerror(code))) (\(code))"
}

private func avahiClientChanged(_ client: OpaquePointer?, _ state: AvahiClientState, _ context: UnsafeMutableRawPointer?) {
    guard let client, let context else { return }
    Unmanaged<MDNSPublisher>.fromOpaque(context).takeUnretainedValue().clientChanged(client)
}

private func avahiGroupChanged(_ group: OpaquePointer?, _ state: AvahiEntryGroupState, _ context: UnsafeMutableRawPointer?) {
    guard let group, let context else { return }
    Unmanaged<MDNSPublisher>.fromOpaque(context).takeUnretainedValue().groupChanged(group, state)
}
