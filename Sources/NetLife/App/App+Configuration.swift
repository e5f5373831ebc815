// An app's configuration at run time: what its lifecycle reads of it, and a reload that changes it in place.

import NetLifeEvent

extension App {
    /// What the lifecycle reads of the configuration and the app's attachments.
    static func settings(_ configuration: AppConfiguration, backgroundMode: BackgroundMode, hasDelegate: Bool,
                                 program: (any AppProgram)?) -> AppLifecycle.Settings {
        AppLifecycle.Settings(traits: configuration.traits(hasDelegate: hasDelegate), budgets: configuration.budgets,
                              autoSuspend: configuration.autoSuspend, reclaimOnSuspend: configuration.reclaimOnSuspend,
                              relaunchInBackground: configuration.launch == .background,
                              // Frozen at once in the background only when a listener was shut down there, which a
                              // silent program would go on polling.
                              silentProgram: (program.map { !$0.speaksProtocol } ?? false)
                                  && !(configuration.program != nil && !configuration.listeners.isEmpty
                                       && configuration.listeners.allSatisfy { $0.onBackground == .wake }),
                              continuousMode: backgroundMode == .continuous,
                              awaitsReady: configuration.program?.ready == .notify,
                              adoptsListeners: configuration.program != nil && configuration.listeners.contains { $0.adopt })
    }

    func settingsChanged() {
        send(.settingsChanged(Self.settings(configuration, backgroundMode: backgroundMode, hasDelegate: delegate != nil,
                                            program: program)))
    }

    /// Whether `newConfiguration` can replace the running one without restarting the app: the same name and
    /// the same listeners.
    public func canUpdateInPlace(to newConfiguration: AppConfiguration) -> Bool {
        newConfiguration.canReplaceInPlace(configuration)
    }

    /// Applies a reloaded configuration with the same listeners: budgets, hooks, launch mode and suspension
    /// settings take effect from now on (a transition already running keeps the budget it started with).
    /// The background mode follows the config only if the config changed it. Returns false, changing
    /// nothing, when the configuration cannot replace this one in place.
    @discardableResult
    public func update(configuration newConfiguration: AppConfiguration) -> Bool {
        guard retirement == nil, canUpdateInPlace(to: newConfiguration) else { return false }
        let modeChanged = newConfiguration.backgroundMode != configuration.backgroundMode
        configuration = newConfiguration
        backgroundTasks.update(budgets: newConfiguration.budgets, expirationHook: newConfiguration.expirationHook)
        if modeChanged { backgroundMode = newConfiguration.backgroundMode }
        settingsChanged()
        return true
    }

    /// Takes the last termination of the app this one replaces (a reload restarted it).
    public func inheritLastTermination(from old: App) {
        inheritedTermination = old.lastTermination
    }
}
