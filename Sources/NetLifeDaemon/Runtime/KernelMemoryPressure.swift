// The kernel's memory pressure trigger (`[daemon] memory-pressure-trigger`, docs/data-sockets.md): the shell
// around PressureSource (which file), PressureTriggerPlan (what a reload does) and MemoryPressureRules.step
// (what an event does). At start the trigger is armed on the file, and a refusal stops the start with the
// plain reason (exit 78, as a config error: starting again fails the same way); `--check-config` arms it once
// from the checking process. Each event reads the file's figures and ends one app of the jetsam ladder (the
// largest suspended app, VoIP apps last and relaunched, never an app that runs), with the figures in the log,
// `status` and `watch`. The kernel raises the next event only while the stall goes on, at most one per window,
// so the ladder stops as soon as the pressure falls. A reload arms a changed trigger before anything else
// changes (a refused one refuses the reload, the old trigger kept), removes one no longer written, and keeps an
// unchanged one.

@preconcurrency import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent

/// A trigger armed on the loop.
final class ArmedPressureTrigger {
    let trigger: PressureTrigger
    let source: PressureSource
    let watcher: PressureTriggerWatcher
    /// How many times it has fired.
    var events = 0

    init(trigger: PressureTrigger, source: PressureSource, watcher: PressureTriggerWatcher) {
        self.trigger = trigger
        self.source = source
        self.watcher = watcher
    }

    /// What `status` shows of it.
    var status: PressureTriggerStatus {
        PressureTriggerStatus(trigger: trigger.configText, file: source.path, watching: watcher.isWatching, events: events)
    }
}

/// Why a trigger could not be armed, in plain words.
struct PressureTriggerFailure: Error {
    var message: String
    /// The file or the trigger is at fault (opening or writing failed): starting again fails the same way.
    /// Watching it failed for want of memory or descriptors otherwise, which a restart may cure.
    var isConfigError: Bool
}

extension DaemonRuntime {
    /// The pressure file for this process now.
    static func pressureSource() -> PressureSource {
        // netlifed's cgroup, or the one it made its own leaf in: the cgroup that holds it and its apps.
        let own = (try? CgroupLayout.current())?.unified.map { CgroupDelegation.appsDirectory(forOwn: $0.directory) }
        return PressureSource.choose(environment: processEnvironment(), pid: getpid(), ownCgroup: own) { path in
            var info = stat()
            guard stat(path, &info) == 0 else { return .missing }
            return info.st_mode & S_IFMT == S_IFREG ? .regular : .other
        }
    }

    /// Whether the kernel takes `trigger` from this process on its pressure file (opened, written, closed):
    /// `--check-config`'s check. Returns the refusal's message, or nil.
    static func checkPressureTrigger(_ trigger: PressureTrigger) -> String? {
        let source = pressureSource()
        do {
            try PressureTriggerWatcher.check(path: source.path, trigger: trigger.kernelText)
            return nil
        } catch {
            return PressureTriggerRefusal.message(error, trigger: trigger, source: source,
                                                  holdsSysResource: PressureTriggerWatcher.holdsSysResource())
        }
    }

    /// Arms `trigger` on this process's pressure file and watches it; each event runs `pressureEvent`.
    func armPressureTrigger(_ trigger: PressureTrigger) throws(PressureTriggerFailure) -> ArmedPressureTrigger {
        let source = Self.pressureSource()
        for note in source.notes { logger.info("memory pressure: \(note)") }
        let watcher: PressureTriggerWatcher
        do {
            watcher = try PressureTriggerWatcher(loop: loop, path: source.path, trigger: trigger.kernelText) { [weak self] event in
                self?.pressureEvent(event, trigger: trigger, path: source.path)
            }
        } catch {
            throw PressureTriggerFailure(message: PressureTriggerRefusal.message(error, trigger: trigger, source: source,
                                                                                 holdsSysResource: PressureTriggerWatcher.holdsSysResource()),
                                         isConfigError: error.step != .watch)
        }
        logger.notice("memory pressure: trigger \(trigger.configText) ('\(trigger.kernelText)') armed on \(source.description)")
        return ArmedPressureTrigger(trigger: trigger, source: source, watcher: watcher)
    }

    /// What the trigger armed now asks of a reload to `wanted`, with the new trigger armed when it takes one.
    /// Throws the refusal of a new trigger: the reload then changes nothing.
    func preparePressureTrigger(_ wanted: PressureTrigger?) throws(PressureTriggerFailure) -> (plan: PressureTriggerPlan, armed: ArmedPressureTrigger?) {
        let watching = pressureTrigger.flatMap { $0.watcher.isWatching ? $0.trigger : nil }
        let plan = PressureTriggerPlan.reload(armed: watching, wanted: wanted)
        guard case .arm(let trigger) = plan else { return (plan, nil) }
        return (plan, try armPressureTrigger(trigger))
    }

    /// Puts a prepared plan in place: the new trigger replaces the old, or the old is removed.
    func applyPressureTrigger(_ plan: PressureTriggerPlan, armed: ArmedPressureTrigger?) {
        switch plan {
        case .keep:
            return
        case .arm:
            pressureTrigger?.watcher.close()
            pressureTrigger = armed
        case .disarm:
            if let old = pressureTrigger { logger.notice("memory pressure: trigger \(old.trigger.configText) removed from \(old.source.path)") }
            pressureTrigger?.watcher.close()
            pressureTrigger = nil
        }
    }

    /// One event of the trigger.
    private func pressureEvent(_ event: PressureTriggerWatcher.Event, trigger: PressureTrigger, path: String) {
        if event == .fired { pressureTrigger?.events += 1 }
        guard event == .fired else {
            logger.error("memory pressure: \(path) went away (its cgroup was removed): the trigger \(trigger.configText) no longer fires; a reload arms it again")
            return
        }
        let pressure = (try? PressureTriggerWatcher.read(path)).flatMap { PressureStall(fileText: $0, file: path) }
        let said = "memory pressure in \(path) (\(pressure?.text ?? "its figures could not be read"))"
        guard !isShuttingDown else {
            logger.info("\(said): netlifed is shutting down, no app is ended")
            return
        }
        switch MemoryPressureRules.step(jetsamCandidates()) {
        case .nothingSuspended:
            logger.notice("\(said): no suspended app to end")
        case .end(let candidate):
            logger.notice("\(said): ending \(candidate.name), the largest suspended app (\(candidate.bytes) bytes)"
                          + (candidate.voip ? "; a VoIP app, relaunched into the background" : ""))
            endForMemoryPressure([candidate], pressure: pressure) { _ in }
        }
    }
}
