// Where netlifed arms its memory pressure trigger, what a reload does with it, and what a refusal says, as pure
// decisions (docs/data-sockets.md, memory pressure). The file is the one systemd names in
// $MEMORY_PRESSURE_WATCH for this very process (its unit's cgroup's `memory.pressure`, which systemd 254 and
// later make writable for the service even under ProtectControlGroups=yes); else netlifed's own cgroup2
// directory's `memory.pressure` (the cgroup that holds it and its apps: the parent of its `netlife-daemon` leaf
// when it made one); else /proc/pressure/memory, the whole system's. The trigger written is always the
// config's: systemd's $MEMORY_PRESSURE_WRITE is the default it sets for every service that watches, and
// netlifed's key, which is off unless written, is what turns jetsam on.

@preconcurrency import Glibc
import NetLifeEvent

/// The pressure file a trigger is armed on, and how it was chosen.
public struct PressureSource: Equatable, Sendable {
    /// How the file was chosen.
    public enum Origin: Equatable, Sendable {
        /// systemd named it in $MEMORY_PRESSURE_WATCH.
        case systemd
        /// netlifed's own cgroup2 directory.
        case ownCgroup
        /// No cgroup2 directory of netlifed's has one: the whole system's.
        case system
    }

    public var path: String
    public var origin: Origin
    /// What was passed over and why, for the log.
    public var notes: [String] = []

    /// The whole system's memory pressure file.
    public static let systemFile = "/proc/pressure/memory"

    /// What a path is, as `choose` asks of it.
    public enum FileKind: Equatable, Sendable {
        /// A regular file: a kernel pressure file (cgroupfs and procfs files are regular files).
        case regular
        /// Something else (a FIFO, a socket, a directory).
        case other
        /// Nothing is there, or it cannot be looked at.
        case missing
    }

    /// The file for this process: `environment` is its environment, `pid` its pid, `ownCgroup` its cgroup2
    /// directory (nil without one), `kind` what a path is (the shell's `stat`).
    public static func choose(environment: [String: String], pid: Int32, ownCgroup: String?,
                              kind: (String) -> FileKind) -> PressureSource {
        var notes: [String] = []
        if let watch = environment["MEMORY_PRESSURE_WATCH"] {
            if environment["SYSTEMD_EXEC_PID"] != String(pid) {
                // Inherited: systemd set it for another process (a login session's service, a parent daemon).
                notes.append("MEMORY_PRESSURE_WATCH=\(watch) was set for another process (SYSTEMD_EXEC_PID is not netlifed's pid): not used")
            } else if watch == "/dev/null" {
                notes.append("systemd's MemoryPressureWatch= is off for this unit (MEMORY_PRESSURE_WATCH=/dev/null); memory-pressure-trigger asks for a trigger all the same")
            } else if !watch.hasPrefix("/") {
                notes.append("MEMORY_PRESSURE_WATCH=\(watch) is no absolute path: not used")
            } else if kind(watch) == .other {
                notes.append("MEMORY_PRESSURE_WATCH=\(watch) is a FIFO or a socket, which netlifed does not watch: not used")
            } else {
                if environment["MEMORY_PRESSURE_WRITE"] != nil {
                    notes.append("systemd's MEMORY_PRESSURE_WRITE (MemoryPressureThresholdSec=) is not written: memory-pressure-trigger is")
                }
                return PressureSource(path: watch, origin: .systemd, notes: notes)
            }
        }
        if let ownCgroup {
            let file = ownCgroup + "/memory.pressure"
            if kind(file) == .regular { return PressureSource(path: file, origin: .ownCgroup, notes: notes) }
            notes.append("netlifed's cgroup \(ownCgroup) has no memory.pressure")
        }
        return PressureSource(path: systemFile, origin: .system, notes: notes)
    }

    /// `/sys/fs/cgroup/system.slice/netlifed.service/memory.pressure (netlifed's cgroup)`.
    public var description: String {
        switch origin {
        case .systemd: "\(path) (from MEMORY_PRESSURE_WATCH)"
        case .ownCgroup: "\(path) (netlifed's cgroup)"
        case .system: "\(path) (the whole system)"
        }
    }
}

/// What a reload does with the trigger.
public enum PressureTriggerPlan: Equatable, Sendable {
    /// The armed trigger stays as it is (the key did not change).
    case keep
    /// Arm this trigger, in the place of the armed one if there is one (the key changed, or the armed one's
    /// file went away).
    case arm(PressureTrigger)
    /// Remove the armed trigger (the key is gone, or `no`).
    case disarm

    /// The plan from the trigger watched now (nil: none, or its file went away) to the config's.
    public static func reload(armed: PressureTrigger?, wanted: PressureTrigger?) -> PressureTriggerPlan {
        guard let wanted else { return armed == nil ? .keep : .disarm }
        return armed == wanted ? .keep : .arm(wanted)
    }
}

/// What a trigger the kernel (or the file system) refused is told, plainly: the key, the file, what was written,
/// the errno, and what to do.
public enum PressureTriggerRefusal {
    /// The message for `error`, armed for `trigger` on `source`; `holdsSysResource` says whether netlifed
    /// holds CAP_SYS_RESOURCE (nil: unknown).
    public static func message(_ error: PressureTriggerWatcher.ArmError, trigger: PressureTrigger, source: PressureSource,
                               holdsSysResource: Bool?) -> String {
        let errno = "\(name(of: error.errno)) (\(error.errno))"
        let key = "memory-pressure-trigger = \(trigger.configText)"
        switch error.step {
        case .open:
            let opening = "\(key): cannot open \(source.description) for reading and writing: \(errno)"
            switch error.errno.rawValue {
            case ENOENT, ENOTDIR:
                return opening + ": this kernel keeps no pressure stall information there (PSI needs a kernel built with CONFIG_PSI, "
                    + "and psi=1 on its command line where it is off by default)"
            case EROFS:
                return opening + ": the cgroup tree is read-only here (systemd's ProtectControlGroups=yes); netlifed's unit makes "
                    + "its own cgroup's file writable again (ReadWritePaths=), and a unit under another name or in another slice "
                    + "needs that line in a drop-in (docs/operations.md)"
            case EACCES, EPERM:
                return opening + ": netlifed may not write it (run it as root, or as the owner of its cgroup); "
                    + "kernels before Linux 6.5 let only a process with CAP_SYS_RESOURCE open /proc/pressure/memory for writing"
            default:
                return opening
            }
        case .write:
            let writing = "\(key): the kernel refused the trigger: writing '\(error.trigger)' to \(source.description) failed with \(errno)"
            switch error.errno.rawValue {
            case EINVAL where !trigger.windowIsUnprivileged && holdsSysResource != true:
                return writing + ". " + (holdsSysResource == false ? "netlifed runs without CAP_SYS_RESOURCE" : "netlifed may lack CAP_SYS_RESOURCE")
                    + " (netlifed's unit grants none), and the kernel then takes only a window that is a multiple of 2s "
                    + "(2s, 4s, 6s, 8s or 10s): write memory-pressure-trigger = \(suggestion(for: trigger).configText)"
            case EINVAL:
                return writing + ": the kernel takes a window from 500ms to 10s and a stall above 0 and at most the window, "
                    + "and from a process without CAP_SYS_RESOURCE only a window that is a multiple of 2s"
            case EPERM, EACCES:
                return writing + ": kernels before Linux 6.5 take a trigger only from a process with CAP_SYS_RESOURCE, "
                    + "which netlifed's unit does not grant"
            default:
                return writing
            }
        case .watch:
            return "\(key): cannot watch \(source.description): \(errno)"
        }
    }

    /// The trigger with its window raised to the next multiple of 2 s (and its stall kept within it).
    static func suggestion(for trigger: PressureTrigger) -> PressureTrigger {
        let step = PressureTrigger.unprivilegedWindowStep.nanoseconds
        let steps = max(1, (trigger.window.nanoseconds + step - 1) / step)
        let window = Duration.nanoseconds(min(steps * step, PressureTrigger.windows.upperBound.nanoseconds))
        return PressureTrigger(kind: trigger.kind, stall: min(trigger.stall, window), window: window)
    }

    /// `EINVAL`: the symbolic name of the errnos a trigger meets, or the number.
    static func name(of errno: Errno) -> String {
        let names: [CInt: String] = [EINVAL: "EINVAL", EPERM: "EPERM", EACCES: "EACCES", ENOENT: "ENOENT", ENOTDIR: "ENOTDIR",
                                     EROFS: "EROFS", EBUSY: "EBUSY", ENOMEM: "ENOMEM", EOPNOTSUPP: "EOPNOTSUPP", ENODEV: "ENODEV"]
        return names[errno.rawValue] ?? "errno \(errno.rawValue)"
    }
}
