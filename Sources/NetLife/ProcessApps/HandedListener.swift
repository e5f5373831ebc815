// A listener of a process app (SPEC section 12): netlifed binds it and hands the program a copy at launch
// (systemd socket activation), keeping its own descriptor of the same socket so that the lifecycle can stop
// and restart listening without the program's help. `shutdown(SHUT_RD)` on a listening socket ends the
// listen: the kernel refuses connects at once, although the program still holds its copy; `listen()` on
// the same socket brings it back, and the program's descriptor accepts again.
//
// The port is bound explicitly, also when the config says 0: a socket the kernel gave a port to (autobind)
// gives that port up at shutdown, and the next listen would get another one. So a port-0 listener first
// learns a free port from a probe socket and then binds that port by number (tried a few times, in case
// something takes the port in the microseconds between).

@preconcurrency import Glibc
import NetLifeEvent

/// A listening socket handed to an app's program.
final class HandedListener {
    let configuration: ListenerConfiguration
    private let logger: Logger
    /// The configured address; once bound, with its port.
    private(set) var address: SocketAddress
    /// netlifed's descriptor of the socket (-1 until bound); the program's copy is made at its launch.
    private(set) var fd: CInt = -1
    /// Whether the socket listens now (false after `close()` until the next `open()`).
    private(set) var isListening = false
    /// Why the last open failed.
    private(set) var openError: String?
    /// Told when the listener starts or stops listening, or fails to.
    var onEvent: ((AppEvent) -> Void)?

    init(configuration: ListenerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger.labeled("\(logger.label) listener \(configuration.name)").adding(field: "NETLIFE_LISTENER", configuration.name)
        address = configuration.address
    }

    /// Binds the socket (the first time) and listens; false (error kept for `status`) when that fails.
    @discardableResult
    func open() -> Bool {
        do {
            if fd < 0 { try bind() }
            if !isListening {
                try sys("listen") { Glibc.listen(fd, configuration.backlog) }
                isListening = true
                openError = nil
                logger.debug("listening on \(address)")
                onEvent?(.listenerOpened(name: configuration.name, address: address, mdns: configuration.mdns))
            }
            return true
        } catch {
            openError = "\(error)"
            logger.warning("cannot listen on \(address): \(error)")
            onEvent?(.listenerFailed(name: configuration.name, error: "\(error)"))
            return false
        }
    }

    /// Stops listening: connects are refused from now on, also on the program's copy. The corresponding C
    /// function is `shutdown(SHUT_RD)`.
    func close() {
        guard isListening else { return }
        isListening = false
        if shutdown(fd, CInt(SHUT_RD)) != 0 {
            logger.warning("shutdown: \(Errno.current)")
        }
        onEvent?(.listenerClosed(name: configuration.name))
    }

    /// Closes netlifed's descriptor (the app stopped; the program's copy went with the program).
    func release() {
        close()
        if fd >= 0 { SocketCalls.close(fd) }
        fd = -1
    }

    private func bind() throws(SystemError) {
        var lastError = SystemError("bind", Errno(rawValue: EADDRINUSE))
        for _ in 0..<5 {
            var wanted = address
            if address.port == 0 {
                let probe = try SocketCalls.listen(on: address, backlog: 1)
                SocketCalls.close(probe.fd)
                wanted = address.with(port: probe.bound.port ?? 0)
            }
            do {
                let (socket, bound) = try SocketCalls.listen(on: wanted, backlog: configuration.backlog)
                // The program gets a blocking socket, as systemd hands them (NonBlocking=no); netlifed never
                // accepts on its own copy.
                let flags = fcntl(socket, F_GETFL)
                if flags >= 0 { _ = fcntl(socket, F_SETFL, flags & ~O_NONBLOCK) }
                fd = socket
                address = bound
                return
            } catch {
                lastError = error
                // Only a port taken between the probe and the bind is worth another try.
                guard address.port == 0, error.errno.rawValue == EADDRINUSE else { throw error }
            }
        }
        throw lastError
    }

    var status: ListenerStatus {
        ListenerStatus(name: configuration.name, address: address.description, service: configuration.service,
                       open: isListening, error: openError, connections: 0)
    }
}
