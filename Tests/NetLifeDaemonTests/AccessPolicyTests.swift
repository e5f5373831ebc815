// Who may run which command: the access policy as a table of requesters by kinds of command, on an app that
// names who may use it and on one that names nobody.

import NetLifeControl
@testable import NetLifeDaemon
import Testing

@Suite struct AccessPolicyTests {
    static let daemonUID: UInt32 = 500
    static let policy = AccessPolicy(
        daemonUID: daemonUID, adminGroup: NamedID(name: "ops", id: 70),
        apps: ["mail": AppAccess(users: [NamedID(name: "alice", id: 1001)], groups: [NamedID(name: "mailers", id: 80)])])

    static let root = Requester(uid: 0, gid: 0, pid: 1)
    static let daemon = Requester(uid: daemonUID, gid: 500, pid: 2)
    static let alice = Requester(uid: 1001, gid: 1001, pid: 3)
    static let mailer = Requester(uid: 1002, gid: 1002, groups: [80], pid: 4)
    static let admin = Requester(uid: 1003, gid: 70, pid: 5)
    static let member = Requester(uid: 1004, gid: 1004, groups: [60], pid: 6)

    /// Whether each requester may run `command` on `app`, in the order root, daemon, alice, mailer, admin, member.
    func allowed(_ command: ControlCommand, app: String?) -> [Bool] {
        [Self.root, Self.daemon, Self.alice, Self.mailer, Self.admin, Self.member].map {
            Self.policy.refusal(command, app: app, requester: $0) == nil
        }
    }

    @Test func readOnlyCommandsAreOpenToEveryPeer() {
        for command in [ControlCommand.status, .watch, .transfers, .version, .taskList] {
            #expect(allowed(command, app: "mail") == [true, true, true, true, true, true], "\(command)")
            #expect(command.access == .readOnly)
        }
    }

    @Test func appCommandsFollowTheAppsUsersAndGroups() {
        for command in [ControlCommand.launch, .foreground, .background, .suspend, .reclaim, .terminate, .interruptBegin,
                        .interruptEnd, .taskBegin, .taskEnd, .mode, .download, .upload] {
            #expect(command.access == .app, "\(command)")
            // mail names alice and the group mailers.
            #expect(allowed(command, app: "mail") == [true, true, true, true, false, false], "\(command)")
            // An app that names nobody is open to every peer the socket lets in.
            #expect(allowed(command, app: "echo") == [true, true, true, true, true, true], "\(command)")
        }
    }

    @Test func daemonWideCommandsNeedRootTheDaemonOrTheAdminGroup() {
        for command in [ControlCommand.reload, .lock, .memoryPressure, .debugStall] {
            #expect(command.access == .daemon, "\(command)")
            #expect(allowed(command, app: nil) == [true, true, false, false, true, false], "\(command)")
        }
        let noAdmins = AccessPolicy(daemonUID: Self.daemonUID, adminGroup: nil)
        #expect(noAdmins.refusal(.reload, app: nil, requester: Self.admin)?.message.contains("admin-group (not set)") == true)
    }

    @Test func aRefusalNamesTheCommandTheAppAndWhatWouldGrantIt() throws {
        let refusal = try #require(Self.policy.refusal(.interruptBegin, app: "mail", requester: Self.member))
        #expect(refusal.code == .permissionDenied)
        #expect(refusal.message == "uid 1004 may not run 'interrupt begin' on app mail: allowed are root, uid 500, allow-users: alice, members of allow-groups: mailers (allow-users and allow-groups in [app mail])")
        let daemonWide = try #require(Self.policy.refusal(.memoryPressure, app: nil, requester: Self.member))
        #expect(daemonWide.message == "uid 1004 may not run 'memory-pressure': it needs root, uid 500 or a member of admin-group ops")
        // A transfer's cancel is judged by the transfer's app.
        #expect(Self.policy.refusal("transfers cancel", app: "mail", requester: Self.mailer) == nil)
        #expect(Self.policy.refusal("transfers cancel", app: "mail", requester: Self.member)?.code == .permissionDenied)
    }

    @Test func privilegedRequestersKeepTheDaemonsRightsForFiles() {
        #expect(Self.root.fileOwner(daemonUID: Self.daemonUID) == nil)
        #expect(Self.daemon.fileOwner(daemonUID: Self.daemonUID) == nil)
        let owner = Self.mailer.fileOwner(daemonUID: Self.daemonUID)
        #expect(owner?.uid == 1002 && owner?.gid == 1002 && owner?.groups == [80])
    }
}
