// Acting for a requester. A control request that names files (a download's output, its part and record, an
// upload's source, a `--cacert`) is served with the file-system identity of the user who asked, never with
// the daemon's: the calling thread's fsuid, fsgid and supplementary groups become the requester's for the
// length of the file calls, and the kernel then checks every one as it would for that user (permissions, ACLs,
// the sticky bit, protected symlinks and hard links), so netlifed grants nothing the requester could not do
// itself. A file it creates is owned by the requester.
//
// Why not descriptors passed over the control socket (SCM_RIGHTS): a download outlives its request (it runs
// on after netlifectl exits and resumes after a restart), and its part, record and final rename are made
// later, by name, in a directory; a directory descriptor does not carry its opener's rights, so the daemon
// would still create and rename as itself there. Only the kernel's own check, with the requester's identity,
// says exactly what that user may do.
//
// It needs CAP_SETUID and CAP_SETGID and the setfsuid, setfsgid and setgroups system calls (`isAvailable`);
// the thread's effective ids, and so everything else it does (signals, sockets), stay the daemon's.

@preconcurrency import Glibc
internal import CLibevent

/// The identity a requester's files are opened with: a uid, its primary group and its supplementary groups,
/// as the kernel reported them for the control connection (SO_PEERCRED, SO_PEERGROUPS).
public struct FileCredentials: Hashable, Sendable, CustomStringConvertible {
    public var uid: UInt32
    public var gid: UInt32
    public var groups: [UInt32]

    public init(uid: UInt32, gid: UInt32, groups: [UInt32]) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    public var description: String {
        "uid \(uid) (gid \(gid)\(groups.isEmpty ? "" : ", groups " + groups.map(String.init).joined(separator: " ")))"
    }

    /// Whether this process can take another user's identity for files: it holds CAP_SETUID and
    /// CAP_SETGID and its system call filter lets setfsuid, setfsgid and setgroups through. Probed once.
    public static let isAvailable: Bool = {
        // Probed with an identity that is not this process's own, which any process may take.
        let probe: UInt32 = geteuid() == 65534 || getegid() == 65534 ? 65533 : 65534
        return (try? FileCredentials(uid: probe, gid: probe, groups: []).run { () }) != nil
    }()

    /// Runs `body` on this thread with this identity for files, then gives the thread the daemon's back.
    /// Throws (and does not run `body`) when the identity cannot be taken, or what `body` throws.
    public func run<T: ~Copyable>(_ body: () throws(SystemError) -> T) throws(SystemError) -> T {
        let saved = Self.threadGroups()
        let count = min(groups.count, Int(NGROUPS_MAX))
        if groups.withUnsafeBufferPointer({ netlife_thread_setgroups(count, $0.baseAddress) }) != 0 {
            throw SystemError("setgroups", Errno.current)
        }
        _ = netlife_thread_setfsgid(gid)
        guard netlife_thread_setfsgid(gid_t.max) == Int32(bitPattern: gid) else {
            Self.restore(groups: saved)
            throw SystemError("setfsgid", Errno(rawValue: EPERM))
        }
        _ = netlife_thread_setfsuid(uid)
        guard netlife_thread_setfsuid(uid_t.max) == Int32(bitPattern: uid) else {
            Self.restore(groups: saved)
            throw SystemError("setfsuid", Errno(rawValue: EPERM))
        }
        defer { Self.restore(groups: saved) }
        return try body()
    }

    /// Runs `body` as `owner` when there is one, else with the daemon's own identity.
    public static func acting<T: ~Copyable>(as owner: FileCredentials?, _ body: () throws(SystemError) -> T) throws(SystemError) -> T {
        guard let owner else { return try body() }
        return try owner.run(body)
    }

    /// The calling thread's supplementary groups.
    private static func threadGroups() -> [gid_t] {
        let count = getgroups(0, nil)
        guard count > 0 else { return [] }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let read = getgroups(count, &groups)
        return read >= 0 ? Array(groups.prefix(Int(read))) : []
    }

    /// Gives the thread the daemon's file identity back (its effective ids and `groups`). It had them a
    /// moment ago and keeps CAP_SETUID and CAP_SETGID meanwhile (a change of fsuid clears only the file
    /// capabilities, which return with fsuid 0), so this cannot fail; if it did, the thread would go on with
    /// less than the daemon's rights, never more.
    private static func restore(groups: [gid_t]) {
        _ = netlife_thread_setfsuid(geteuid())
        _ = netlife_thread_setfsgid(getegid())
        _ = groups.withUnsafeBufferPointer { netlife_thread_setgroups($0.count, $0.baseAddress) }
    }
}
