// Host names on the loop: libevent's evdns (`evdns_getaddrinfo`), which reads /etc/hosts and
// /etc/resolv.conf and asks the name servers without blocking, instead of getaddrinfo(3), which would
// stall every app while a name server is slow. HostConnector resolves and then connects, trying each
// address in turn.

@preconcurrency import Glibc
internal import CLibevent

/// Why a name could not be resolved or connected to.
public struct HostConnectError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The loop's resolver, made on first use (`EventLoop.nameResolver`) and freed with the loop.
public final class NameResolver: LoopOwned {
    private unowned let loop: EventLoop
    /// Where the loop keeps this object (`LoopOwned`).
    var loopSlot: Int32 = -1
    private var dns: OpaquePointer?

    /// The corresponding C function is `evdns_base_new` (name servers from /etc/resolv.conf, names from
    /// /etc/hosts; the resolver does not keep the loop busy while idle).
    init(loop: EventLoop) throws(SystemError) {
        loop.assertInLoop()
        self.loop = loop
        dns = try libevent("evdns_base_new") {
            evdns_base_new(loop.base, EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE)
        }
        loop.retain(self)
    }

    /// Looks up `host` (a name, or a numeric address, answered at once) for TCP on `port`. `handler` is
    /// called once, on the loop thread, unless the lookup is cancelled first; it may be called before
    /// `resolve` returns (numeric addresses, /etc/hosts).
    public func resolve(_ host: String, port: UInt16,
                        _ handler: @escaping (Result<[SocketAddress], HostConnectError>) -> Void) -> NameLookup {
        loop.assertInLoop()
        let lookup = NameLookup(host: host, handler: handler)
        guard let dns else {
            lookup.finish(.failure(HostConnectError("\(host): the resolver is closed")))
            return lookup
        }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = CInt(SOCK_STREAM.rawValue)
        hints.ai_protocol = CInt(IPPROTO_TCP)
        // Retained until the callback, which libevent calls exactly once (with EVUTIL_EAI_CANCEL when cancelled).
        let context = Unmanaged.passRetained(lookup).toOpaque()
        let request = evdns_getaddrinfo(dns, host, String(port), &hints, nameResolved, context)
        if !lookup.isFinished { lookup.request = request }
        return lookup
    }

    private func close() {
        guard let dns else { return }
        self.dns = nil
        // Pending lookups are answered (as failed) from inside this call.
        evdns_base_free(dns, 1)
        loop.release(self)
    }
}

/// One lookup under way.
public final class NameLookup {
    let host: String
    fileprivate var request: OpaquePointer?
    private var handler: ((Result<[SocketAddress], HostConnectError>) -> Void)?
    fileprivate private(set) var isFinished = false

    fileprivate init(host: String, handler: @escaping (Result<[SocketAddress], HostConnectError>) -> Void) {
        self.host = host
        self.handler = handler
    }

    fileprivate func finish(_ result: Result<[SocketAddress], HostConnectError>) {
        isFinished = true
        request = nil
        let handler = self.handler
        self.handler = nil
        handler?(result)
    }

    /// Gives up: the handler is not called.
    public func cancel() {
        handler = nil
        // The request is freed by libevent once its callback has run; only a pending one is cancelled.
        if let request, !isFinished {
            self.request = nil
            evdns_getaddrinfo_cancel(request)
        }
    }
}

private func nameResolved(_ result: CInt, _ list: UnsafeMutablePointer<addrinfo>?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let lookup = Unmanaged<NameLookup>.fromOpaque(context).takeRetainedValue()
    defer { if let list { evutil_freeaddrinfo(list) } }
    guard result == 0 else {
        let reason = String(cString: evutil_gai_strerror(result))
        lookup.finish(.failure(HostConnectError("\(lookup.host.prefix(255)): \(reason)")))
        return
    }
    var addresses: [SocketAddress] = []
    var entry = list
    while let current = entry, addresses.count < 32 {
        if let address = current.pointee.ai_addr, let parsed = SocketAddress(address) { addresses.append(parsed) }
        entry = current.pointee.ai_next
    }
    if addresses.isEmpty {
        lookup.finish(.failure(HostConnectError("\(lookup.host.prefix(255)): no address")))
    } else {
        lookup.finish(.success(addresses))
    }
}

extension NameResolver: LoopSource {
    var closeRank: Int { 6 }
    func closeForLoopShutdown() { close() }
}

extension EventLoop {
    /// The loop's resolver, made on first use.
    public func nameResolver() throws(SystemError) -> NameResolver {
        if let existing = resolver { return existing }
        let made = try NameResolver(loop: self)
        resolver = made
        return made
    }
}

/// A TCP connect to a host given by name or number: resolves it on the loop, then tries each address in
/// turn (as curl and nginx do) until one accepts.
public final class HostConnector {
    private unowned let loop: EventLoop
    private let host: String
    private let port: UInt16
    private let timeout: Duration
    private var lookup: NameLookup?
    private var connector: OutboundConnector?
    private var pending: [SocketAddress] = []
    private var errors: [String] = []
    private var handler: ((Result<CInt, HostConnectError>) -> Void)?
    /// The address of the connect under way or done.
    public private(set) var address: SocketAddress?

    /// Starts at once; `handler` is called once on the loop thread (never from inside `init`) with the
    /// connected, non-blocking descriptor (the caller owns it) or every reason it failed.
    public init(loop: EventLoop, host: String, port: UInt16, timeout: Duration = .seconds(10),
                _ handler: @escaping (Result<CInt, HostConnectError>) -> Void) {
        self.loop = loop
        self.host = host
        self.port = port
        self.timeout = timeout
        self.handler = handler
        // Deferred to a loop turn so that a lookup answered at once does not call back from inside init.
        connector = nil
        let start = loop.schedule(after: .zero) { [weak self] in self?.resolve() }
        startTimer = start
    }

    private var startTimer: EventTimer?

    private func resolve() {
        startTimer = nil
        do {
            let resolver = try loop.nameResolver()
            lookup = resolver.resolve(host, port: port) { [weak self] result in
                guard let self else { return }
                lookup = nil
                switch result {
                case .success(let addresses):
                    pending = addresses
                    next()
                case .failure(let error):
                    finish(.failure(error))
                }
            }
        } catch {
            finish(.failure(HostConnectError("\(host.prefix(255)): \(error)")))
        }
    }

    private func next() {
        guard !pending.isEmpty else {
            return finish(.failure(HostConnectError(errors.joined(separator: "; "))))
        }
        let address = pending.removeFirst()
        self.address = address
        connector = OutboundConnector(loop: loop, address: address, timeout: timeout) { [weak self] result in
            guard let self else {
                if case .success(let fd) = result { SocketCalls.close(fd) }
                return
            }
            connector = nil
            switch result {
            case .success(let fd): finish(.success(fd))
            case .failure(let error):
                errors.append("\(address): \(error)")
                next()
            }
        }
    }

    private func finish(_ result: Result<CInt, HostConnectError>) {
        guard let handler else {
            if case .success(let fd) = result { SocketCalls.close(fd) }
            return
        }
        self.handler = nil
        handler(result)
    }

    /// Gives up: nothing is called back and a socket under way is closed.
    public func cancel() {
        handler = nil
        startTimer?.cancel()
        startTimer = nil
        lookup?.cancel()
        lookup = nil
        connector?.cancel()
        connector = nil
        pending = []
    }
}
