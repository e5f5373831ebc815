// Who may do what over the control socket, as systemd's polkit actions carry the unit they act on. The
// socket itself lets in root, the daemon's uid and members of `control-group` (ControlServer); past that,
// each command's table entry says what kind it is (ControlAccess) and this pure value decides:
//
// - read-only commands (`status`, `watch`, `transfers`, `task list`, `version`): every peer let in;
// - commands on an app (transitions, tasks, mode, reclaim, transfers and their cancel): root, the daemon's
//   uid, and the users and groups the app's `allow-users` and `allow-groups` name; an app that names neither
//   is open to every peer let in (as before these keys existed, so that no setup breaks silently);
// - daemon-wide commands (`reload`, `lock`, `memory-pressure`, `debug stall`): root, the daemon's uid and
//   members of `[daemon] admin-group`.
//
// A refusal is `permission-denied`, names the command, the app and what would grant it, and changes nothing.

import NetLifeControl

/// Who may use one app: `allow-users` and `allow-groups`, names resolved to ids when the config was read.
public struct AppAccess: Equatable, Sendable {
    public var users: [NamedID] = []
    public var groups: [NamedID] = []

    public init(users: [NamedID] = [], groups: [NamedID] = []) {
        self.users = users
        self.groups = groups
    }

    /// Whether the app restricts who may use it.
    public var isRestricted: Bool { !users.isEmpty || !groups.isEmpty }
}

/// A user or group as the config named it, with its id.
public struct NamedID: Equatable, Sendable {
    public var name: String
    public var id: UInt32
    public init(name: String, id: UInt32) {
        self.name = name
        self.id = id
    }
}

/// The daemon's access rules: pure, judged per request.
struct AccessPolicy: Equatable, Sendable {
    /// The daemon's own uid: it may do anything, as root may.
    var daemonUID: UInt32
    /// `[daemon] admin-group`: members may run the daemon-wide commands.
    var adminGroup: NamedID?
    /// Each app's `allow-users` and `allow-groups`; an app not listed is open to every peer let in.
    var apps: [String: AppAccess] = [:]

    /// Why `requester` may not run `command` (on `app`, when it names one), or nil when it may.
    func refusal(_ command: ControlCommand, app: String?, requester: Requester) -> ControlError? {
        if requester.isPrivileged(daemonUID: daemonUID) { return nil }
        switch command.access {
        case .readOnly:
            return nil
        case .daemon:
            if let adminGroup, requester.isMember(of: adminGroup.id) { return nil }
            let grant = adminGroup.map { "a member of admin-group \($0.name)" } ?? "a member of [daemon] admin-group (not set)"
            return ControlError(.permissionDenied, "\(requester.identity) may not run '\(command.words.joined(separator: " "))': it needs root, uid \(daemonUID) or \(grant)")
        case .app:
            guard let app else { return nil }
            return refusal(command.words.joined(separator: " "), app: app, requester: requester)
        }
    }

    /// Why `requester` may not run `what` on `app` (a transfer's cancel is judged by each transfer's app).
    func refusal(_ what: String, app: String, requester: Requester) -> ControlError? {
        if requester.isPrivileged(daemonUID: daemonUID) { return nil }
        guard let access = apps[app], access.isRestricted else { return nil }
        if access.users.contains(where: { $0.id == requester.uid }) { return nil }
        if access.groups.contains(where: { requester.isMember(of: $0.id) }) { return nil }
        var grants = ["root", "uid \(daemonUID)"]
        if !access.users.isEmpty { grants.append("allow-users: \(access.users.map(\.name).joined(separator: ", "))") }
        if !access.groups.isEmpty { grants.append("members of allow-groups: \(access.groups.map(\.name).joined(separator: ", "))") }
        return ControlError(.permissionDenied, "\(requester.identity) may not run '\(what)' on app \(app): allowed are \(grants.joined(separator: ", ")) (allow-users and allow-groups in [app \(app)])")
    }
}

private extension Requester {
    var identity: String { "uid \(uid)" }
}
