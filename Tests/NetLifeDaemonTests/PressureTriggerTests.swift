// The kernel memory pressure trigger's pure parts: the trigger as the config writes it and as the kernel
// takes it, the pressure file netlifed arms it on (systemd's, its own cgroup's, the system's), what a reload
// does with it, and the plain words of a refusal.

@preconcurrency import Glibc
@testable import NetLifeDaemon
import NetLifeEvent
import Testing

private let cgroup = "/sys/fs/cgroup/system.slice/netlifed.service"

/// A file system where `regular` are regular files and `other` are FIFOs or sockets.
private func files(regular: [String] = [], other: [String] = []) -> (String) -> PressureSource.FileKind {
    { path in regular.contains(path) ? .regular : other.contains(path) ? .other : .missing }
}

@Suite struct PressureTriggerTests {
    @Test func aTriggerIsReadFromTheConfigAndWrittenInMicrosecondsForTheKernel() throws {
        let trigger = try PressureTrigger(configText: "some 150ms 2s")
        #expect(trigger == PressureTrigger(kind: .some, stall: .milliseconds(150), window: .seconds(2)))
        #expect(trigger.kernelText == "some 150000 2000000")
        #expect(trigger.configText == "some 150ms 2s")
        #expect(try PressureTrigger(configText: "\tfull   1s 10s ").kernelText == "full 1000000 10000000")
        #expect(throws: PressureTrigger.ParseError.syntax) { try PressureTrigger(configText: "some 150000 2000000") }
        #expect(throws: PressureTrigger.ParseError.syntax) { try PressureTrigger(configText: "") }
        #expect(throws: PressureTrigger.ParseError.window(.seconds(20))) { try PressureTrigger(configText: "some 1s 20s") }
        #expect(throws: PressureTrigger.ParseError.stall(.seconds(3), window: .seconds(2))) { try PressureTrigger(configText: "some 3s 2s") }
    }

    @Test func onlyWindowsThatAreMultiplesOfTwoSecondsAreTakenWithoutCapSysResource() throws {
        for (text, unprivileged) in [("some 1ms 2s", true), ("some 1ms 10s", true), ("some 1ms 4s", true), ("some 1ms 1s", false),
                                     ("some 1ms 500ms", false), ("some 1ms 2001ms", false), ("some 1ms 3s", false)] {
            #expect(try PressureTrigger(configText: text).windowIsUnprivileged == unprivileged, "\(text)")
        }
    }

    @Test func systemdsFileIsTakenWhenSystemdSetItForThisVeryProcess() {
        let watch = cgroup + "/memory.pressure"
        let environment = ["MEMORY_PRESSURE_WATCH": watch, "SYSTEMD_EXEC_PID": "42", "MEMORY_PRESSURE_WRITE": "c29tZSAyMDAwMDAgMjAwMDAwMAA="]
        let chosen = PressureSource.choose(environment: environment, pid: 42, ownCgroup: "/sys/fs/cgroup/other", kind: files(regular: [watch]))
        #expect(chosen.path == watch && chosen.origin == .systemd)
        #expect(chosen.notes == ["systemd's MEMORY_PRESSURE_WRITE (MemoryPressureThresholdSec=) is not written: memory-pressure-trigger is"])
        #expect(chosen.description == watch + " (from MEMORY_PRESSURE_WATCH)")
        // A file not there yet is still systemd's: opening it says what is wrong.
        #expect(PressureSource.choose(environment: environment, pid: 42, ownCgroup: nil, kind: files()).path == watch)
    }

    @Test func systemdsVariablesSetForAnotherProcessOrSayingOffOrNotAPressureFileAreNotUsed() {
        let own = cgroup + "/memory.pressure"
        let cases: [([String: String], String)] = [
            (["MEMORY_PRESSURE_WATCH": "/sys/fs/cgroup/user.slice/x/memory.pressure", "SYSTEMD_EXEC_PID": "7"],
             "MEMORY_PRESSURE_WATCH=/sys/fs/cgroup/user.slice/x/memory.pressure was set for another process (SYSTEMD_EXEC_PID is not netlifed's pid): not used"),
            (["MEMORY_PRESSURE_WATCH": "/sys/fs/cgroup/user.slice/x/memory.pressure"],
             "MEMORY_PRESSURE_WATCH=/sys/fs/cgroup/user.slice/x/memory.pressure was set for another process (SYSTEMD_EXEC_PID is not netlifed's pid): not used"),
            (["MEMORY_PRESSURE_WATCH": "/dev/null", "SYSTEMD_EXEC_PID": "42"],
             "systemd's MemoryPressureWatch= is off for this unit (MEMORY_PRESSURE_WATCH=/dev/null); memory-pressure-trigger asks for a trigger all the same"),
            (["MEMORY_PRESSURE_WATCH": "pressure", "SYSTEMD_EXEC_PID": "42"], "MEMORY_PRESSURE_WATCH=pressure is no absolute path: not used"),
            (["MEMORY_PRESSURE_WATCH": "/run/pressure.fifo", "SYSTEMD_EXEC_PID": "42"],
             "MEMORY_PRESSURE_WATCH=/run/pressure.fifo is a FIFO or a socket, which netlifed does not watch: not used"),
        ]
        for (environment, note) in cases {
            let chosen = PressureSource.choose(environment: environment, pid: 42, ownCgroup: cgroup,
                                               kind: files(regular: [own], other: ["/run/pressure.fifo"]))
            #expect(chosen == PressureSource(path: own, origin: .ownCgroup, notes: [note]), "\(environment)")
        }
    }

    @Test func withoutSystemdItsOwnCgroupsFileElseTheSystemsIsWatched() {
        let own = cgroup + "/memory.pressure"
        #expect(PressureSource.choose(environment: [:], pid: 1, ownCgroup: cgroup, kind: files(regular: [own]))
                == PressureSource(path: own, origin: .ownCgroup))
        // A root cgroup without pressure files (older kernels), and no cgroup2 at all: the whole system's.
        #expect(PressureSource.choose(environment: [:], pid: 1, ownCgroup: "/sys/fs/cgroup", kind: files())
                == PressureSource(path: "/proc/pressure/memory", origin: .system, notes: ["netlifed's cgroup /sys/fs/cgroup has no memory.pressure"]))
        #expect(PressureSource.choose(environment: [:], pid: 1, ownCgroup: nil, kind: files()) == PressureSource(path: "/proc/pressure/memory", origin: .system))
    }

    @Test func aReloadKeepsAnUnchangedTriggerArmsAChangedOneAndRemovesOneNoLongerWanted() throws {
        let old = try PressureTrigger(configText: "some 150ms 2s")
        let new = try PressureTrigger(configText: "full 300ms 4s")
        #expect(PressureTriggerPlan.reload(armed: old, wanted: old) == .keep)
        #expect(PressureTriggerPlan.reload(armed: old, wanted: new) == .arm(new))
        #expect(PressureTriggerPlan.reload(armed: nil, wanted: old) == .arm(old), "a trigger whose file went away is armed again")
        #expect(PressureTriggerPlan.reload(armed: old, wanted: nil) == .disarm)
        #expect(PressureTriggerPlan.reload(armed: nil, wanted: nil) == .keep)
    }

    @Test func aRefusalSaysTheFileWhatWasWrittenTheErrnoAndTheTwoSecondRule() throws {
        let trigger = try PressureTrigger(configText: "some 150ms 1s")
        let source = PressureSource(path: cgroup + "/memory.pressure", origin: .ownCgroup)
        let refused = PressureTriggerWatcher.ArmError(step: .write, path: source.path, trigger: trigger.kernelText, errno: Errno(rawValue: EINVAL))
        #expect(PressureTriggerRefusal.message(refused, trigger: trigger, source: source, holdsSysResource: false) ==
                "memory-pressure-trigger = some 150ms 1s: the kernel refused the trigger: writing 'some 150000 1000000' to "
                + cgroup + "/memory.pressure (netlifed's cgroup) failed with EINVAL (Invalid argument). netlifed runs without "
                + "CAP_SYS_RESOURCE (netlifed's unit grants none), and the kernel then takes only a window that is a multiple of 2s "
                + "(2s, 4s, 6s, 8s or 10s): write memory-pressure-trigger = some 150ms 2s")
        #expect(PressureTriggerRefusal.message(refused, trigger: trigger, source: source, holdsSysResource: nil).contains("netlifed may lack CAP_SYS_RESOURCE"))
        // With the capability, or with a window of whole 2 s steps, the rule is only recalled.
        let held = PressureTriggerRefusal.message(refused, trigger: trigger, source: source, holdsSysResource: true)
        #expect(held.hasSuffix("failed with EINVAL (Invalid argument): the kernel takes a window from 500ms to 10s and a stall above 0 and at most the window, "
                               + "and from a process without CAP_SYS_RESOURCE only a window that is a multiple of 2s"), "\(held)")
        #expect(PressureTriggerRefusal.suggestion(for: try PressureTrigger(configText: "full 3s 3s")) == (try PressureTrigger(configText: "full 3s 4s")))
        #expect(PressureTriggerRefusal.suggestion(for: try PressureTrigger(configText: "some 500ms 500ms")) == (try PressureTrigger(configText: "some 500ms 2s")))
    }

    @Test func aFileThatCannotBeOpenedSaysWhy() throws {
        let trigger = try PressureTrigger(configText: "some 150ms 2s")
        let system = PressureSource(path: "/proc/pressure/memory", origin: .system)
        func message(_ errno: CInt, _ source: PressureSource = system) -> String {
            PressureTriggerRefusal.message(PressureTriggerWatcher.ArmError(step: .open, path: source.path, trigger: trigger.kernelText, errno: Errno(rawValue: errno)),
                                           trigger: trigger, source: source, holdsSysResource: false)
        }
        #expect(message(ENOENT) == "memory-pressure-trigger = some 150ms 2s: cannot open /proc/pressure/memory (the whole system) for reading and writing: "
                + "ENOENT (No such file or directory): this kernel keeps no pressure stall information there (PSI needs a kernel built with "
                + "CONFIG_PSI, and psi=1 on its command line where it is off by default)")
        let unit = PressureSource(path: cgroup + "/memory.pressure", origin: .systemd)
        #expect(message(EROFS, unit).contains("(from MEMORY_PRESSURE_WATCH) for reading and writing: EROFS (Read-only file system): the cgroup tree is read-only here"))
        #expect(message(EACCES).contains("EACCES (Permission denied): netlifed may not write it"))
        #expect(message(EPERM).contains("kernels before Linux 6.5 let only a process with CAP_SYS_RESOURCE open /proc/pressure/memory for writing"))
        #expect(message(EIO).hasSuffix("for reading and writing: errno \(EIO) (Input/output error)"))
    }
}
