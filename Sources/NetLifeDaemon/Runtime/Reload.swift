// Reloading the config (SIGHUP or `netlifectl reload`), as nginx and systemd do: the file is read and
// checked again; with any error nothing changes and every error is reported. Otherwise apps that left the
// config are terminated, new ones launched as their `launch` says, apps whose listeners changed are
// restarted (terminated, then launched again if they were running), and the others take their new
// settings in place. The plan is made from the apps the supervisor holds, and every new App is built before
// any running one is touched, so that a reload either applies or changes nothing. An app that leaves is
// retired (drained) by the supervisor; commands queued for it are answered with an error. The control
// socket path and group are fixed for the daemon's lifetime.

import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeServices

/// What a reload does to the apps, decided from the running and the new app configurations alone.
struct ReloadPlan: Equatable {
    var added: [String] = []
    var removed: [String] = []
    var restarted: [String] = []
    var updated: [String] = []

    init(from running: [AppConfiguration], to new: [AppConfiguration]) {
        let runningByName = Dictionary(running.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let newNames = Set(new.map(\.name))
        removed = running.map(\.name).filter { !newNames.contains($0) }
        for app in new {
            guard let previous = runningByName[app.name] else { added.append(app.name); continue }
            if !app.canReplaceInPlace(previous) { restarted.append(app.name) }
            else if previous != app { updated.append(app.name) }
        }
    }

    /// The daemon settings that only a restart changes.
    static func fixedSettingsChanged(from old: DaemonConfiguration, to new: DaemonConfiguration) -> [String] {
        var changed: [String] = []
        if old.control != new.control { changed.append("control") }
        if old.controlGroup != new.controlGroup { changed.append("control-group") }
        if old.metrics != new.metrics { changed.append("metrics") }
        return changed
    }
}

extension DaemonRuntime {
    /// Re-reads the config and applies it; `completion` gets the reply (after removed and restarted apps have
    /// gone through will-terminate).
    func reload(completion: @escaping (JSON) -> Void) {
        guard !isShuttingDown else {
            completion(Reply.error(.shuttingDown, "netlifed is shutting down"))
            return
        }
        guard !isReloading else {
            completion(Reply.error(.busy, "a reload is already in progress"))
            return
        }
        // Access logs are reopened whatever the config holds now: logrotate renamed them and waits for this.
        AccessLogFile.reopenAll()
        let newConfiguration: DaemonConfiguration
        do {
            newConfiguration = options.applyOverrides(to: try ConfigLoader.load(path: configuration.file, services: services))
        } catch {
            for line in error.errors { logger.error("reload: \(line)") }
            completion(Reply.error(.configError, "the config has errors; nothing was changed:\n" + error.description))
            return
        }
        // The listeners' certificates are read again (a renewed one is served to new connections); the config
        // check just read them, so a failure here is a file changed since, and the listener keeps its own.
        let certificates = TLSCertificate.reloadAll()
        for failure in certificates.failures { logger.error("reload: TLS certificate \(failure)") }
        for path in certificates.renewed { logger.notice("reload: TLS certificate \(path) changed: new connections get the new one") }
        let plan = ReloadPlan(from: supervisor.apps.map(\.configuration), to: newConfiguration.apps)
        let byName = Dictionary(newConfiguration.apps.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var built: [String: App] = [:]
        for name in plan.restarted + plan.added {
            guard let appConfiguration = byName[name] else { continue }
            do throws(ServiceOptionError) {
                built[name] = try supervisor.makeApp(appConfiguration, services: services, delegates: delegates,
                                                     hookEnvironment: hookEnvironment)
            } catch {
                for app in built.values { app.retire(reason: "the reload that made it failed") }
                logger.error("reload: app \(name): \(error.message)")
                completion(Reply.error(.configError, "app \(name): \(error.message); nothing was changed"))
                return
            }
        }
        // A changed memory-pressure-trigger is armed now, the old one kept until it is: a refusal changes nothing.
        let pressure: (plan: PressureTriggerPlan, armed: ArmedPressureTrigger?)
        do {
            pressure = try preparePressureTrigger(newConfiguration.memoryPressureTrigger)
        } catch {
            for app in built.values { app.retire(reason: "the reload that made it failed") }
            logger.error("reload: \(error.message)")
            completion(Reply.error(.configError, "\(configuration.file): \(error.message); nothing was changed"))
            return
        }

        isReloading = true
        announcer.state("RELOADING=1\nMONOTONIC_USEC=\(MonotonicTime.now().nanoseconds / 1000)")
        for setting in ReloadPlan.fixedSettingsChanged(from: configuration, to: newConfiguration) {
            logger.warning("reload: '\(setting)' changes only when netlifed restarts")
        }
        var applied = newConfiguration
        applied.control = configuration.control
        applied.controlGroup = configuration.controlGroup
        applied.metrics = configuration.metrics
        logger.minimumLevel = applied.logLevel
        if applied.loopStall != configuration.loopStall { restartStallWatchdog(threshold: applied.loopStall) }
        // Transfers made from now on (new, or restarted by a new `download`) are held to the new limits.
        transfers.limits = applied.transferLimits
        applyPressureTrigger(pressure.plan, armed: pressure.armed)
        configuration = applied

        var pending = 1
        let finish = { [weak self] in
            guard let self else { return }
            pending -= 1
            guard pending == 0 else { return }
            isReloading = false
            logger.notice("reloaded \(configuration.file): added \(plan.added), removed \(plan.removed), restarted \(plan.restarted), updated \(plan.updated)")
            announcer.state("READY=1\nSTATUS=\(supervisor.statusLine)")
            watchers.reloaded(added: plan.added, removed: plan.removed, restarted: plan.restarted, updated: plan.updated)
            completion(ReloadReply(added: plan.added, removed: plan.removed, restarted: plan.restarted,
                                   updated: plan.updated).json)
        }
        for name in plan.updated {
            if let app = supervisor.app(named: name), let appConfiguration = byName[name] {
                app.update(configuration: appConfiguration)
            }
        }
        for name in plan.removed {
            guard let app = supervisor.app(named: name) else { continue }
            pending += 1
            app.perform(.terminate, cause: .reload) { [weak self] _ in
                self?.supervisor.remove(app, reason: "app \(name) was removed by a reload")
                finish()
            }
        }
        for name in plan.restarted + plan.added {
            guard let app = built[name] else { continue }
            pending += 1
            let launch = { [weak self] (mode: LaunchMode) in
                // A shutdown that began meanwhile has already terminated every app it knew: launching now
                // would start an app that never gets will-terminate.
                guard mode != .no, let self, !isShuttingDown else { return finish() }
                app.perform(.launch(background: mode == .background)) { _ in finish() }
            }
            guard let old = supervisor.app(named: name) else {
                supervisor.add(app)
                launch(app.configuration.launch)
                continue
            }
            // Launched again the way it was running when its terminate began (foreground if it was in the
            // foreground), not when the reload was asked: the commands queued before the terminate run first.
            let asked = old.state
            old.perform(.terminate, cause: .reload) { [weak self] outcome in
                let running: AppState = if case .already = outcome { .notRunning } else { old.stateWhenTerminateBegan ?? asked }
                let relaunch: LaunchMode = switch running {
                case .notRunning: .no
                case .active, .inactive: .foreground
                case .background, .suspended: .background
                }
                app.inheritLastTermination(from: old)
                self?.supervisor.replace(old, with: app, reason: "app \(name) was restarted by a reload; send the command again")
                launch(relaunch)
            }
        }
        finish()
    }
}
