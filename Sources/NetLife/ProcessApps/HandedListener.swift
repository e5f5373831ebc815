// A listener of a process app (docs/process-apps.md): netlifed binds it and hands the program a copy at launch
// (systemd socket activation), keeping its own descriptor of the same socket so that the lifecycle can stop
// and restart listening without the program's help. `shutdown(SHUT_RD)` on a listening socket ends the
// listen: the kernel refuses connects at once, although the program still holds its copy; `listen()` on
// the same socket brings it back, and the program's descriptor accepts again.
//
// The port is bound explicitly, also when the config says 0: a socket the kernel gave a port to (autobind)
// gives that port up at shutdown, and the next listen would get another one. So a port-0 listener first
// learns a free port from a probe socket and then binds that port by number (tried a few times, in case
// something takes the port in the microseconds between).
//
// An adopted listener (`adopt = yes`) is one the program binds itself: netlifed binds nothing and hands
// nothing over; once the program runs it is given copies of the program's sockets at the address (`adopt`:
// one, or several with SO_REUSEPORT, each of which is shut down and listened again) and from then on behaves
// as any handed listener. Its port is explicit (the config refuses 0), so `listen()` brings back the same port.

@preconcurrency import Glibc
import NetLifeEvent

/// A listening socket handed to an app's program.
final class HandedListener {
    let configuration: ListenerConfiguration
    private let logger: Logger
    /// The configured address; once bound, with its port.
    private(set) var address: SocketAddress
    /// netlifed's descriptor of the socket (-1 until bound); the program's copy is made at its launch.
    /// An adopted listener's first copy.
    var fd: CInt { fds.first ?? -1 }
    /// netlifed's descriptors: one socket, or an adopted listener's sockets (several with SO_REUSEPORT).
    private var fds: [CInt] = []
    /// An adopted listener's sockets by descriptor: the inode each is, to tell which the program still holds.
    private var inodes: [CInt: UInt64] = [:]
    /// The processes that hold an adopted listener's sockets (empty for a handed one, and until adopted).
    private(set) var owners: [Int32] = []
    /// Whether the program binds it itself (`adopt = yes`).
    var isAdopted: Bool { configuration.adopt }
    /// Whether the socket listens now (false after `close()` until the next `open()`).
    private(set) var isListening = false
    /// Why the last open failed.
    private(set) var openError: String?
    /// Its app: told (`report`) when the listener starts or stops listening, or fails to.
    weak var owner: AppPartOwner?
    /// Whether it keeps listening in the background and while the app is suspended (`on-background = wake`).
    var wakesApp: Bool { configuration.onBackground == .wake }
    /// Watch its sockets for a waiting connection while the app is suspended (`watchForConnection`).
    private var watchers: [IOWatcher] = []

    init(configuration: ListenerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger.labeled("\(logger.label) listener \(configuration.name)").adding(field: "NETLIFE_LISTENER", configuration.name)
        address = configuration.address
    }

    /// Binds the socket (the first time) and listens; false (error kept for `status`) when that fails.
    @discardableResult
    func open() -> Bool {
        // The program binds an adopted listener: nothing to do until its sockets are adopted.
        if isAdopted && fds.isEmpty { return true }
        do {
            if fds.isEmpty { try bind() }
            if !isListening {
                for fd in fds { try sys("listen") { Glibc.listen(fd, configuration.backlog) } }
                isListening = true
                openError = nil
                logger.debug("listening on \(address)")
                owner?.report(.listenerOpened(name: configuration.name, address: address, mdns: configuration.mdns))
            }
            return true
        } catch {
            openError = "\(error)"
            logger.warning("cannot listen on \(address): \(error)")
            owner?.report(.listenerFailed(name: configuration.name, error: "\(error)"))
            return false
        }
    }

    /// Stops listening: connects are refused from now on, also on the program's copy. The corresponding C
    /// function is `shutdown(SHUT_RD)`.
    func close() {
        guard isListening else { return }
        isListening = false
        // Every socket of the port: with SO_REUSEPORT a connect goes to any that still listens.
        for fd in fds where shutdown(fd, CInt(SHUT_RD)) != 0 {
            logger.warning("shutdown: \(Errno.current)")
        }
        owner?.report(.listenerClosed(name: configuration.name))
    }

    /// Calls `connected` once a connection waits on one of its sockets (a listening socket is readable while
    /// its accept queue holds one), then stops watching. netlifed never accepts it: the program does, once
    /// woken. Used while the app is suspended with its program frozen (`on-background = wake`).
    func watchForConnection(on loop: EventLoop, _ connected: @escaping () -> Void) {
        stopWatching()
        for fd in fds {
            let watcher = IOWatcher(loop: loop, descriptor: fd) { [weak self] _ in
                self?.stopWatching()
                connected()
            }
            do {
                try watcher.watch(.readable)
                watchers.append(watcher)
            } catch {
                watcher.close()
                logger.warning("cannot watch \(address) for connections: \(error)")
            }
        }
    }

    /// Whether a connection waits in one of its sockets' accept queues: one the program has yet to accept.
    var hasWaitingConnection: Bool { isListening && fds.contains(where: SocketCalls.hasPendingConnection) }

    func stopWatching() {
        for watcher in watchers { watcher.close() }
        watchers = []
    }

    /// Closes netlifed's descriptor (the app stopped; the program's copy went with the program).
    func release() {
        stopWatching()
        close()
        for fd in fds { SocketCalls.close(fd) }
        fds = []
        inodes = [:]
        owners = []
    }

    /// Takes the program's own sockets at the address (netlifed's copies, `pidfd_getfd`, each with the inode
    /// it is), held by the processes `owners`: the listener listens, as after `open()`.
    func adopt(_ copies: [(fd: CInt, inode: UInt64)], owners: [Int32]) {
        stopWatching()
        for fd in fds { SocketCalls.close(fd) }
        fds = copies.map(\.fd)
        inodes = Dictionary(copies.map { ($0.fd, $0.inode) }, uniquingKeysWith: { first, _ in first })
        self.owners = owners
        isListening = true
        openError = nil
        logger.info("adopted \(copies.count) socket(s) at \(address) held by pid \(owners.map(String.init).joined(separator: ", "))")
        owner?.report(.listenerOpened(name: configuration.name, address: address, mdns: configuration.mdns))
    }

    /// Follows what the program holds at the address now (`found`, looked at while the sockets listen): a
    /// copy is taken (`take`) of each socket the program bound since, and netlifed's copy of each socket the
    /// program no longer holds is closed at once, since nobody would accept on it (a connect that landed
    /// there would hang, and in the background it would not be refused). Returns the counts taken and dropped.
    func follow(_ found: [HeldListener], take: (HeldListener) throws(SystemError) -> CInt) -> (taken: Int, dropped: Int) {
        guard isAdopted, !fds.isEmpty else { return (0, 0) }
        let held = Set(found.map(\.inode))
        let mine = Set(inodes.values)
        var taken = 0
        for socket in found where !mine.contains(socket.inode) {
            do {
                let fd = try take(socket)
                fds.append(fd)
                inodes[fd] = socket.inode
                if !isListening, shutdown(fd, CInt(SHUT_RD)) != 0 { logger.warning("shutdown: \(Errno.current)") }
                taken += 1
            } catch {
                logger.warning("cannot take the program's new socket at \(address) from pid \(socket.pid): \(error)")
            }
        }
        let orphans = fds.filter { inodes[$0].map { !held.contains($0) } ?? false }
        for fd in orphans {
            SocketCalls.close(fd)
            inodes[fd] = nil
        }
        fds.removeAll { orphans.contains($0) }
        if taken > 0 || !orphans.isEmpty {
            logger.info("the program's sockets at \(address) changed: \(taken) taken, \(orphans.count) it closed let go; \(fds.count) held")
        }
        return (taken, orphans.count)
    }

    /// The processes that hold an adopted listener's sockets now (looked at again on will-enter-foreground).
    func holdersChanged(to holders: [Int32]) {
        guard isAdopted, holders != owners else { return }
        owners = holders
        logger.debug("held by pid \(holders.map(String.init).joined(separator: ", "))")
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
                fds = [socket]
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
                       open: isListening, error: openError, connections: 0, pids: owners.map(Int.init))
    }
}
