// The listening sockets a program bound itself, found and taken (`adopt = yes`, docs/process-apps.md).
//
// A program such as nginx binds its own listeners; netlifed holds them as it holds the ones it hands over
// once it has a copy of each. They are found through /proc as reclaim finds a program's connections
// (ProcessSockets): the socket descriptors of every process of the program (a master and its workers), joined
// with the lines of /proc/PID/net/tcp and tcp6 in LISTEN state whose local address is a configured one. A
// socket held by several processes (inherited by the workers) is one listener, taken once; a port with
// SO_REUSEPORT has several sockets, each of which is taken, since a connect goes to any of them. The matching
// is the pure `match`; `find` reads /proc and `take` makes the copies (`pidfd_getfd`).

@preconcurrency import Glibc

/// A listening socket a program holds at one of the addresses looked for.
public struct HeldListener: Equatable, Sendable {
    /// The socket's inode.
    public var inode: UInt64
    /// Its local address (the one looked for).
    public var local: SocketAddress
    /// The process a copy is taken from, and its descriptor of the socket there.
    public var pid: Int32
    public var fd: CInt
    /// Every process that holds it, in the order the processes were given.
    public var pids: [Int32]

    public init(inode: UInt64, local: SocketAddress, pid: Int32, fd: CInt, pids: [Int32]) {
        self.inode = inode
        self.local = local
        self.pid = pid
        self.fd = fd
        self.pids = pids
    }
}

/// Finding and taking the listening sockets a program bound itself.
public enum AdoptedListeners {
    /// The listening sockets at each of `addresses`, from the socket descriptors of each process (`held`, in
    /// order: the first process holding a socket is the one its copy comes from, at its lowest descriptor)
    /// and the TCP table lines of their sockets. An address is matched exactly (a socket bound to 0.0.0.0 is
    /// not one bound to 127.0.0.1); only sockets in LISTEN state count. Each socket appears once, in the order
    /// it was first seen; an address with no socket is absent. Linear in the input.
    public static func match(addresses: [SocketAddress], held: [(pid: Int32, descriptors: [SocketDescriptor])],
                             table: [TCPTableEntry]) -> [SocketAddress: [HeldListener]] {
        let wanted = Set(addresses)
        var listening: [UInt64: SocketAddress] = [:]
        for entry in table where entry.state == .listen && wanted.contains(entry.local) { listening[entry.inode] = entry.local }
        var byInode: [UInt64: HeldListener] = [:]
        var order: [UInt64] = []
        for (pid, descriptors) in held {
            for descriptor in descriptors.sorted(by: { $0.fd < $1.fd }) {
                guard let local = listening[descriptor.inode] else { continue }
                if var known = byInode[descriptor.inode] {
                    if known.pids.last != pid, !known.pids.contains(pid) { known.pids.append(pid) }
                    byInode[descriptor.inode] = known
                } else {
                    byInode[descriptor.inode] = HeldListener(inode: descriptor.inode, local: local, pid: pid, fd: descriptor.fd, pids: [pid])
                    order.append(descriptor.inode)
                }
            }
        }
        var result: [SocketAddress: [HeldListener]] = [:]
        for inode in order {
            guard let listener = byInode[inode] else { continue }
            result[listener.local, default: []].append(listener)
        }
        return result
    }

    /// The listening sockets at `addresses` that the processes `pids` hold (a process that exited meanwhile
    /// is skipped). The table lines are read in the first process's network namespace.
    public static func find(addresses: [SocketAddress], pids: [Int32]) throws(SystemError) -> [SocketAddress: [HeldListener]] {
        var held: [(pid: Int32, descriptors: [SocketDescriptor])] = []
        var inodes = Set<UInt64>()
        for pid in pids {
            do {
                let descriptors = try ProcessSockets.socketDescriptors(pid: pid)
                held.append((pid, descriptors))
                for descriptor in descriptors { inodes.insert(descriptor.inode) }
            } catch where error.errno.rawValue == ENOENT || error.errno.rawValue == ESRCH {
                // It exited while we looked.
            }
        }
        guard let first = held.first?.pid else { return [:] }
        return match(addresses: addresses, held: held, table: try ProcessSockets.tableEntries(pid: first, inodes: inodes))
    }

    /// A copy, in netlifed, of `listener` (close-on-exec). `pidfd` refers to `listener.pid` when that is the
    /// main process; for another process one is opened for the call. The corresponding C functions are
    /// `pidfd_open` and `pidfd_getfd`.
    public static func take(_ listener: HeldListener, mainPid: Int32, mainPidfd: CInt) throws(SystemError) -> CInt {
        if listener.pid == mainPid { return try SocketCalls.takeDescriptor(pidfd: mainPidfd, fd: listener.fd) }
        let pidfd = try SocketCalls.openProcess(listener.pid)
        defer { Glibc.close(pidfd) }
        return try SocketCalls.takeDescriptor(pidfd: pidfd, fd: listener.fd)
    }
}
