// App on a real loop, without listeners or hooks (their pipelines complete synchronously): the order of
// callbacks a delegate sees, and that a terminated app leaves nothing registered on the loop.

import NetLife
import Testing

private final class RecordingDelegate: AppDelegate {
    var calls: [String] = []
    func appDidFinishLaunching(_ app: App) { calls.append("did-finish-launching \(app.state)") }
    func appWillResignActive(_ app: App) { calls.append("will-resign-active \(app.state)") }
    func appDidEnterBackground(_ app: App) { calls.append("did-enter-background \(app.state)") }
    func appWillEnterForeground(_ app: App) { calls.append("will-enter-foreground \(app.state)") }
    func appDidBecomeActive(_ app: App) { calls.append("did-become-active \(app.state)") }
    func appWillTerminate(_ app: App) { calls.append("will-terminate \(app.state)") }
}

private func makeApp(_ loop: EventLoop, autoSuspend: Duration? = nil) throws -> App {
    var configuration = AppConfiguration(name: "a")
    configuration.autoSuspend = autoSuspend
    return try App(configuration: configuration, services: ServiceRegistry(), loop: loop,
                   logger: Logger(label: "test", minimumLevel: .critical))
}

@Suite(.timeLimit(.minutes(5)))
struct AppTests {
    @Test func theDelegateSeesEachCallbackInTheStateIOSGivesIt() throws {
        let loop = try EventLoop()
        let app = try makeApp(loop)
        defer { app.retire(reason: "test over") }   // frees its timers: a loop is never left holding them
        let delegate = RecordingDelegate()
        app.delegate = delegate
        var outcomes: [TransitionOutcome] = []
        for command in [LifecycleCommand.launch(background: false), .background, .foreground, .terminate] {
            app.perform(command) { outcomes.append($0) }
        }
        #expect(delegate.calls == [
            "did-finish-launching inactive", "did-become-active active",
            "will-resign-active inactive", "did-enter-background background",
            "will-enter-foreground background", "did-become-active active",
            "will-terminate active",
        ])
        #expect(outcomes.count == 4)
        #expect(app.state == .notRunning)
    }

    @Test func aTerminatedAppLeavesNothingRegisteredOnTheLoop() throws {
        let loop = try EventLoop()
        let app = try makeApp(loop, autoSuspend: .seconds(30))
        let baseline = loop.registeredObjectCount   // the app's own deadline timers, kept until it retires
        app.perform(.launch(background: false)) { _ in }
        #expect(app.beginBackgroundTask(name: "upload") {} != 0)
        app.perform(.background) { _ in }
        app.schedule(after: .seconds(10)) {}
        #expect(loop.registeredObjectCount > 0, "task timers and the app timer are armed")
        app.perform(.terminate) { _ in }
        #expect(app.state == .notRunning)
        #expect(loop.registeredObjectCount == baseline, "every timer of the run was closed")
        app.retire(reason: "test")
        #expect(loop.registeredObjectCount == 0, "a retired app leaves nothing on the loop")
    }

    @Test func aRetiredAppAnswersQueuedCommandsKillsItsHooksAndLeavesNothingOnTheLoop() throws {
        let loop = try EventLoop()
        var configuration = AppConfiguration(name: "a")
        configuration.autoSuspend = .seconds(30)
        configuration.hooks[.didEnterBackground] = HookCommand(arguments: ["/bin/sleep", "5"])
        let app = try App(configuration: configuration, services: ServiceRegistry(), loop: loop,
                          logger: Logger(label: "test", minimumLevel: .critical))
        app.perform(.launch(background: false)) { _ in }
        var outcomes: [TransitionOutcome] = []
        app.perform(.background) { outcomes.append($0) }   // waits for the hook
        app.perform(.foreground) { outcomes.append($0) }   // queued behind it
        app.schedule(after: .seconds(10)) {}
        #expect(app.isInTransition)
        app.retire(reason: "removed")
        #expect(outcomes == [.cancelled("removed"), .cancelled("removed")])
        #expect(app.state == .notRunning)
        app.perform(.launch(background: false)) { outcomes.append($0) }
        #expect(outcomes.last == .cancelled("removed"), "a retired app runs nothing more")
        #expect(loop.registeredObjectCount == 0, "the hook was reaped and every timer closed")
    }

    @Test func anAppWhoseCodeCannotRunHasNoBackgroundTimeAndARefusedTaskSaysWhy() throws {
        let loop = try EventLoop()
        let app = try makeApp(loop)
        defer { app.retire(reason: "test over") }
        #expect(app.backgroundTimeRemaining == .zero, "not running: no time is offered")
        #expect(app.beginBackgroundTask(name: "early") == BackgroundTaskRegistry.invalid)
        #expect(app.beginControlTask(name: "early") == .failure(BackgroundTaskRefusal(message: "app a is not running")))

        app.perform(.launch(background: false)) { _ in }
        #expect(app.backgroundTimeRemaining == nil, "unlimited in the foreground")
        #expect(app.backgroundTaskRefusal == nil)

        app.perform(.background) { _ in }
        app.perform(.suspend) { _ in }
        #expect(app.state == .suspended)
        #expect(app.backgroundTimeRemaining == .zero)
        #expect(app.backgroundTaskRefusal?.message.hasPrefix("app a is suspended") == true, "\(String(describing: app.backgroundTaskRefusal))")

        app.perform(.terminate) { _ in }
        #expect(app.state == .notRunning)
        #expect(app.backgroundTimeRemaining == .zero)

        var configuration = AppConfiguration(name: "solo")
        configuration.multitasking = false
        let solo = try App(configuration: configuration, services: ServiceRegistry(), loop: loop,
                           logger: Logger(label: "test", minimumLevel: .critical))
        defer { solo.retire(reason: "test over") }
        solo.perform(.launch(background: false)) { _ in }
        guard case .failure(let refusal) = solo.beginControlTask(name: nil) else {
            Issue.record("multitasking = no must refuse a task")
            return
        }
        #expect(refusal.message.contains("multitasking = no"), "\(refusal.message)")
    }
}
