// Every request that changes something is attributed to who asked: a log record (in the journal with the
// fields NETLIFE_UID, NETLIFE_PID, NETLIFE_COMMAND and NETLIFE_APP) and a `request` event to the watchers,
// before the events the request causes.

@preconcurrency import Glibc
import NetLife
import NetLifeControl

extension DaemonRuntime {
    /// The access rules of the config in force.
    var accessPolicy: AccessPolicy {
        AccessPolicy(daemonUID: UInt32(geteuid()), adminGroup: configuration.adminGroup, apps: configuration.appAccess)
    }

    /// Records that `requester` asked for `command` (on `app`).
    func attribute(_ command: ControlCommand, app: String?, to requester: Requester) {
        var logger = self.logger.labeled("control")
            .adding(field: "NETLIFE_UID", String(requester.uid))
            .adding(field: "NETLIFE_PID", String(requester.pid))
            .adding(field: "NETLIFE_COMMAND", command.name)
        if let app { logger = logger.adding(field: "NETLIFE_APP", app) }
        let words = command.words.joined(separator: " ")
        logger.info("uid \(requester.uid) (pid \(requester.pid)) asked: \(words)\(app.map { " \($0.prefix(256))" } ?? "")")
        watchers.request(command, app: app, by: requester)
    }
}

extension Watchers {
    /// A request that changes something was accepted: who asked, for what.
    func request(_ command: ControlCommand, app: String?, by requester: Requester) {
        send(WatchEvent(.request(command: command.name, uid: requester.uid, pid: requester.pid), at: WallClock.now(), app: app), app: app)
    }
}
