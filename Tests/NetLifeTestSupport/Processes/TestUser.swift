#if canImport(Testing)   // built only for the tests: see Package.swift
// An unprivileged user made for one test (useradd, with a group of its own), who runs netlifectl as a
// member of the daemon's `control-group` would: its own uid, its groups, nothing else. A copy of netlifectl
// sits in a directory that user can reach (the build tree may be under a 0700 directory). Removed with
// `remove()` (userdel, groupdel): tests that make users are serialized, since useradd locks /etc/passwd.

import Foundation

/// A user and its primary group, made for a test.
public final class TestUser: @unchecked Sendable {
    public let name: String
    public let group: String
    public let uid: UInt32
    public let gid: UInt32
    /// A directory the user owns (0755), for its own files.
    public let home: TemporaryDirectory
    /// Where the user's copy of netlifectl is (0755).
    private let tools = TemporaryDirectory()

    /// Makes the group and the user (no home directory, no login shell).
    public init() throws {
        let suffix = String(UInt32.random(in: 0..<0xFFFFFF), radix: 36)
        name = "nlm" + suffix
        group = "nlg" + suffix
        let madeGroup = NetLifeTestSupport.run(["/usr/sbin/groupadd", group])
        guard madeGroup.status == 0 else { throw TestFailure("groupadd \(group): \(madeGroup)") }
        let madeUser = NetLifeTestSupport.run(["/usr/sbin/useradd", "-M", "-N", "-g", group, "-s", "/usr/sbin/nologin", name])
        guard madeUser.status == 0 else {
            _ = NetLifeTestSupport.run(["/usr/sbin/groupdel", group])
            throw TestFailure("useradd \(name): \(madeUser)")
        }
        guard let uid = userID(named: name), let gid = groupID(named: group) else { throw TestFailure("\(name) was not made") }
        self.uid = uid
        self.gid = gid
        home = TemporaryDirectory()
        chmod(home.path, 0o755)
        chown(home.path, uid, gid)
        chmod(tools.path, 0o755)
        try FileManager.default.copyItem(atPath: product("netlifectl"), toPath: tools.file("netlifectl"))
        chmod(tools.file("netlifectl"), 0o755)
    }

    /// Runs `arguments` as this user, with its groups (setpriv --init-groups).
    public func run(_ arguments: [String], timeout: TimeInterval = 30) -> ProcessResult {
        NetLifeTestSupport.run(["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(gid)", "--init-groups"] + arguments, timeout: timeout)
    }

    /// Runs netlifectl as this user against `control`.
    public func ctl(_ control: String, _ arguments: String...) -> ProcessResult {
        run([tools.file("netlifectl"), "--control", control] + arguments)
    }

    /// Removes the user, its group and its directories.
    public func remove() {
        home.remove()
        tools.remove()
        _ = NetLifeTestSupport.run(["/usr/sbin/userdel", name])
        _ = NetLifeTestSupport.run(["/usr/sbin/groupdel", group])
    }
}
#endif
