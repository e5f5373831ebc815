// Who sent a control request: the uid, groups and pid the kernel recorded for the connection (SO_PEERCRED,
// SO_PEERGROUPS) when the client connected, never what the client says of itself. The access policy judges
// the request by it, the log and `watch` attribute the request to it, and the files the request names are
// opened with its identity (FileCredentials).

import NetLifeEvent

/// The peer of a control connection.
struct Requester: Equatable, Sendable, CustomStringConvertible {
    var uid: UInt32
    var gid: UInt32
    /// Its supplementary groups when it connected.
    var groups: [UInt32]
    var pid: Int32

    init(uid: UInt32, gid: UInt32, groups: [UInt32] = [], pid: Int32) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.pid = pid
    }

    init(_ credentials: PeerCredentials) {
        self.init(uid: credentials.uid, gid: credentials.gid, groups: credentials.groups, pid: credentials.pid)
    }

    /// Whether it holds every right the daemon has: root, or the daemon's own uid.
    func isPrivileged(daemonUID: UInt32) -> Bool { uid == 0 || uid == daemonUID }

    /// Whether `group` is its primary or one of its supplementary groups.
    func isMember(of group: UInt32) -> Bool { gid == group || groups.contains(group) }

    /// The identity the files it names are opened with: nil for a privileged requester (the daemon's own,
    /// which is root's or the requester's), its own otherwise.
    func fileOwner(daemonUID: UInt32) -> FileCredentials? {
        isPrivileged(daemonUID: daemonUID) ? nil : FileCredentials(uid: uid, gid: gid, groups: groups)
    }

    var description: String { "uid \(uid) (pid \(pid))" }
}
