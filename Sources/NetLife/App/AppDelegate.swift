// The Swift API an app author implements: the UIApplicationDelegate of netlife. Each callback runs on the
// loop thread as a step of its transition's pipeline, under the transition's budget; a callback that needs
// more time begins a background task (`App.beginBackgroundTask(name:expirationHandler:)`) and returns.

/// Receives an app's lifecycle callbacks. Every method has an empty default.
public protocol AppDelegate: AnyObject {
    /// The app was launched (state inactive, or background for a background launch).
    func appDidFinishLaunching(_ app: App)
    /// The app is about to leave the foreground (state inactive).
    func appWillResignActive(_ app: App)
    /// The app is in the background; its listeners are already closed.
    func appDidEnterBackground(_ app: App)
    /// The app is about to come to the foreground; its listeners are already reopened.
    func appWillEnterForeground(_ app: App)
    /// The app is active.
    func appDidBecomeActive(_ app: App)
    /// The app is about to be terminated.
    func appWillTerminate(_ app: App)
}

extension AppDelegate {
    public func appDidFinishLaunching(_ app: App) {}
    public func appWillResignActive(_ app: App) {}
    public func appDidEnterBackground(_ app: App) {}
    public func appWillEnterForeground(_ app: App) {}
    public func appDidBecomeActive(_ app: App) {}
    public func appWillTerminate(_ app: App) {}
}

extension LifecycleEvent {
    /// Calls the delegate method of this event.
    func deliver(to delegate: AppDelegate, app: App) {
        switch self {
        case .didFinishLaunching: delegate.appDidFinishLaunching(app)
        case .willResignActive: delegate.appWillResignActive(app)
        case .didEnterBackground: delegate.appDidEnterBackground(app)
        case .willEnterForeground: delegate.appWillEnterForeground(app)
        case .didBecomeActive: delegate.appDidBecomeActive(app)
        case .willTerminate: delegate.appWillTerminate(app)
        }
    }
}
