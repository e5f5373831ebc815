// A snapshot of an app for `status` (NetLifeStatus's AppStatus), made on the loop thread and encoded by the
// daemon.

extension App {
    /// A snapshot for `status`.
    public var status: AppStatus {
        let now = loop.now
        return AppStatus(name: name, state: state, suspendPending: suspendPending,
                         backgroundTimeRemaining: backgroundTimeRemaining.map(StatusTime.seconds),
                         backgroundMode: backgroundMode,
                         listeners: sockets.listenerStatus,
                         sockets: sockets.dataSocketStatus,
                         tasks: backgroundTasks.tasks.map { TaskStatus(id: $0.id, name: $0.name, age: StatusTime.seconds(now - $0.begunAt)) },
                         lastTermination: lastTermination?.status,
                         lastStages: lifecycle.lastStages.map(\.timing),
                         program: program?.status,
                         idleBackground: configuration.idleBackground.map(StatusTime.seconds),
                         unusedFor: unusedFor.map(StatusTime.seconds))
    }
}
