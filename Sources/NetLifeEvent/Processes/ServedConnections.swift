// The connections a program serves on some of its listeners' ports (`on-background = wake`, docs/process-apps.md):
// an app woken by a connection is suspended again only once none is left, for `auto-suspend`.
//
// They are counted as reclaim finds connections (ProcessSockets): the socket descriptors in /proc/PID/fd of
// every process of the program, each socket asked once what it is, through a copy (`pidfd_getfd`): its TCP
// state (`getsockopt(TCP_INFO)`) and local address (`getsockname`). A connection accepted on a listener has
// the listener's local port. Not the TCP tables: each read of them walks the kernel's whole hash table
// (about 4 ms a table on a 24 GiB machine, where a count is wanted 20 times a second); a socket's inode
// names it for as long as a process holds it, so the answer is kept by inode and a later count costs a
// directory listing per process. A socket counts until the program closes it (a connection in CLOSE_WAIT
// is still the program's to finish).

@preconcurrency import Glibc

/// Counts the TCP connections that processes hold on some local ports, remembering each socket's answer.
public final class ServedConnectionCensus {
    /// Whether each socket seen is a connection on one of the ports (by inode), from the last count.
    private var known: [UInt64: Bool] = [:]
    /// The ports of the last count: other ports make every socket's answer stale.
    private var ports: Set<UInt16> = []

    public init() {}

    /// The TCP connections (not listening sockets) at one of `ports` that the processes `pids` hold, each
    /// socket once however many processes share it. A process that exited meanwhile counts none; a socket
    /// closed meanwhile is not counted.
    public func count(pids: [Int32], ports: Set<UInt16>) -> Int {
        if ports != self.ports {
            known = [:]
            self.ports = ports
        }
        var seen: [UInt64: Bool] = [:]
        for pid in pids {
            guard let descriptors = try? ProcessSockets.socketDescriptors(pid: pid) else { continue }
            var pidfd: CInt = -1
            defer { if pidfd >= 0 { Glibc.close(pidfd) } }
            for descriptor in descriptors where seen[descriptor.inode] == nil {
                if let answer = known[descriptor.inode] {
                    seen[descriptor.inode] = answer
                    continue
                }
                if pidfd < 0 { pidfd = (try? SocketCalls.openProcess(pid)) ?? -1 }
                guard pidfd >= 0, let answer = Self.isConnection(pidfd: pidfd, fd: descriptor.fd, ports: ports) else { continue }
                seen[descriptor.inode] = answer
            }
        }
        known = seen
        return seen.values.reduce(0) { $0 + ($1 ? 1 : 0) }
    }

    /// Whether descriptor `fd` of the process `pidfd` refers to is a TCP connection at one of `ports`; nil
    /// when it cannot be asked (closed meanwhile).
    private static func isConnection(pidfd: CInt, fd: CInt, ports: Set<UInt16>) -> Bool? {
        guard let copy = try? SocketCalls.takeDescriptor(pidfd: pidfd, fd: fd) else { return nil }
        defer { SocketCalls.close(copy) }
        guard let state = SocketCalls.tcpState(copy) else { return false }
        guard state != .listen, let port = (try? SocketCalls.localAddress(of: copy))?.port else { return false }
        return ports.contains(port)
    }
}
