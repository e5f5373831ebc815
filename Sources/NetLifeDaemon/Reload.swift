// Reloading the config (SIGHUP or `netlifectl reload`), as nginx and systemd do: the file is read and
// checked again; with any error nothing changes and every error is reported. Otherwise apps that left the
// config are terminated, new ones launched as their `launch` says, apps whose listeners changed are
// restarted (terminated, then launched again if they were running), and the others take their new
// settings in place. The control socket path and group are fixed for the daemon's lifetime.

import NetLife
import NetLifeEvent

/// What a reload does to the apps, decided from the old and new configs alone.
struct ReloadPlan: Equatable {
    var added: [String] = []
    var removed: [String] = []
    var restarted: [String] = []
    var updated: [String] = []

    init(from old: DaemonConfiguration, to new: DaemonConfiguration) {
        let oldApps = Dictionary(uniqueKeysWithValues: old.apps.map { ($0.name, $0) })
        let newNames = Set(new.apps.map(\.name))
        removed = old.apps.map(\.name).filter { !newNames.contains($0) }
        for app in new.apps {
            guard let previous = oldApps[app.name] else { added.append(app.name); continue }
            if !app.canReplaceInPlace(previous) { restarted.append(app.name) }
            else if previous != app { updated.append(app.name) }
        }
    }

    /// The daemon settings that only a restart changes.
    static func fixedSettingsChanged(from old: DaemonConfiguration, to new: DaemonConfiguration) -> [String] {
        var changed: [String] = []
        if old.control != new.control { changed.append("control") }
        if old.controlGroup != new.controlGroup { changed.append("control-group") }
        return changed
    }
}

extension DaemonRuntime {
    /// Re-reads the config and applies it; `completion` gets the reply (after removed and restarted apps have
    /// gone through will-terminate).
    func reload(completion: @escaping (JSON) -> Void) {
        guard !isReloading else {
            completion(Reply.error(.busy, "a reload is already in progress"))
            return
        }
        let newConfiguration: DaemonConfiguration
        do {
            newConfiguration = options.applyOverrides(to: try ConfigLoader.load(path: configuration.file, services: services))
        } catch {
            for line in error.errors { logger.error("reload: \(line)") }
            completion(Reply.error(.configError, "the config has errors; nothing was changed:\n" + error.description))
            return
        }
        isReloading = true
        notifier.notify("RELOADING=1\nMONOTONIC_USEC=\(MonotonicTime.now().nanoseconds / 1000)")
        let plan = ReloadPlan(from: configuration, to: newConfiguration)
        for setting in ReloadPlan.fixedSettingsChanged(from: configuration, to: newConfiguration) {
            logger.warning("reload: '\(setting)' changes only when netlifed restarts")
        }
        var applied = newConfiguration
        applied.control = configuration.control
        applied.controlGroup = configuration.controlGroup
        logger.minimumLevel = applied.logLevel
        if applied.loopStall != configuration.loopStall { restartStallWatchdog(threshold: applied.loopStall) }
        configuration = applied

        var pending = 1
        let finish = { [unowned self] in
            pending -= 1
            guard pending == 0 else { return }
            isReloading = false
            logger.notice("reloaded \(configuration.file): added \(plan.added), removed \(plan.removed), restarted \(plan.restarted), updated \(plan.updated)")
            notifier.notify("READY=1\nSTATUS=\(supervisor.statusLine)")
            completion(Reply.ok(["added": .array(plan.added.map(JSON.string)),
                                 "removed": .array(plan.removed.map(JSON.string)),
                                 "restarted": .array(plan.restarted.map(JSON.string)),
                                 "updated": .array(plan.updated.map(JSON.string))]))
        }
        let byName = Dictionary(uniqueKeysWithValues: applied.apps.map { ($0.name, $0) })
        for name in plan.updated {
            supervisor.app(named: name)?.update(configuration: byName[name]!)
        }
        for name in plan.removed {
            guard let app = supervisor.app(named: name) else { continue }
            pending += 1
            app.perform(.terminate) { [unowned self] _ in
                supervisor.remove(app)
                finish()
            }
        }
        for name in plan.restarted + plan.added {
            let old = supervisor.app(named: name)
            pending += 1
            let replace = { [unowned self] (relaunch: LaunchMode?) in
                do throws(ServiceOptionError) {
                    let app = try supervisor.makeApp(byName[name]!, services: services, delegates: delegates,
                                                     hookEnvironment: hookEnvironment)
                    supervisor.replace(old, with: app)
                    if let relaunch, relaunch != .no {
                        app.perform(.launch(background: relaunch == .background)) { _ in finish() }
                        return
                    }
                } catch {
                    logger.error("reload: app \(name): \(error.message)")
                }
                finish()
            }
            if let old {
                // Launched again the way it was running: foreground if it was in the foreground.
                let relaunch: LaunchMode? = switch old.state {
                case .notRunning: nil
                case .active, .inactive: .foreground
                case .background, .suspended: .background
                }
                old.perform(.terminate) { _ in replace(relaunch) }
            } else {
                replace(byName[name]!.launch)
            }
        }
        finish()
    }
}
