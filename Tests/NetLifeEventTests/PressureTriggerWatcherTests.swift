// The kernel pressure trigger on the loop, in a cgroup2 directory of the test's own: a trigger the kernel
// refuses is an error naming the step, the file, what was written and the errno; an armed trigger on an idle
// cgroup stays silent (its descriptor polls readable at all times, which a plain read event would report
// without end); a trigger whose cgroup is removed says `gone` once and stops watching. That it fires under
// real pressure is shown against the real netlifed (KernelMemoryPressureTests).

import Glibc
import NetLifeEvent
import NetLifeTestSupport
import Testing

/// Whether this kernel keeps pressure stall information (PSI) and a cgroup2 hierarchy is writable here.
private let pressureCgroups = CgroupMachine.v2Parent != nil && (try? PressureTriggerWatcher.read("/proc/pressure/memory"))?.hasPrefix("some ") == true

/// A fresh, empty cgroup2 directory under the writable parent, removed by `remove()`.
private struct ScratchCgroup {
    let directory: String
    init() throws {
        let parent = try #require(CgroupMachine.v2Parent)
        directory = parent + "/nl-psi-unit-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        #expect(mkdir(directory, 0o755) == 0, "mkdir \(directory): \(String(cString: strerror(errno)))")
    }
    var pressureFile: String { directory + "/memory.pressure" }
    func remove() { rmdir(directory) }
}

@Suite(.timeLimit(.minutes(2)))
struct PressureTriggerWatcherTests {
    @Test func aFileThatIsNotThereIsAnErrorOfTheOpen() throws {
        let loop = try EventLoop()
        #expect(throws: PressureTriggerWatcher.ArmError(step: .open, path: "/nonexistent/memory.pressure", trigger: "some 150000 2000000",
                                                        errno: Errno(rawValue: ENOENT))) {
            try PressureTriggerWatcher(loop: loop, path: "/nonexistent/memory.pressure", trigger: "some 150000 2000000") { _ in }
        }
        #expect(loop.registeredObjectCount == 0)
    }

    @Test(.enabled(if: pressureCgroups, "no writable cgroup2 hierarchy with pressure stall information here"))
    func aTriggerTheKernelRefusesIsAnErrorOfTheWrite() throws {
        let loop = try EventLoop()
        let cgroup = try ScratchCgroup()
        defer { cgroup.remove() }
        // A window past 10 s, a stall of 0, a stall longer than the window, words the kernel does not know.
        for trigger in ["some 100000 12000000", "some 0 2000000", "full 3000000 2000000", "often 1 2"] {
            #expect(throws: PressureTriggerWatcher.ArmError(step: .write, path: cgroup.pressureFile, trigger: trigger, errno: Errno(rawValue: EINVAL))) {
                try PressureTriggerWatcher(loop: loop, path: cgroup.pressureFile, trigger: trigger) { _ in }
            }
            #expect(throws: PressureTriggerWatcher.ArmError(step: .write, path: cgroup.pressureFile, trigger: trigger, errno: Errno(rawValue: EINVAL))) {
                try PressureTriggerWatcher.check(path: cgroup.pressureFile, trigger: trigger)
            }
        }
        let error = PressureTriggerWatcher.ArmError(step: .write, path: "/p", trigger: "some 1 2", errno: Errno(rawValue: EINVAL))
        #expect(error.description == "write 'some 1 2' to /p: Invalid argument")
        #expect(loop.registeredObjectCount == 0)
    }

    @Test(.enabled(if: pressureCgroups, "no writable cgroup2 hierarchy with pressure stall information here"))
    func anIdleTriggerStaysSilentAndClosingItRemovesIt() throws {
        let loop = try EventLoop()
        let cgroup = try ScratchCgroup()
        defer { cgroup.remove() }
        // The whole trigger reaches the kernel, its last digit included: 2 s is a window it takes from any
        // process, where 200 ms (the trigger cut by one digit) it takes from none.
        try PressureTriggerWatcher.check(path: cgroup.pressureFile, trigger: "some 100000 2000000")
        var events: [PressureTriggerWatcher.Event] = []
        let watcher = try PressureTriggerWatcher(loop: loop, path: cgroup.pressureFile, trigger: "some 100000 2000000") { events.append($0) }
        #expect(watcher.isWatching && watcher.path == cgroup.pressureFile)
        #expect(loop.registeredObjectCount == 1)
        let start = MonotonicTime.now()
        runLoop(loop, timeout: .milliseconds(700)) { false }
        #expect(MonotonicTime.now() - start >= .milliseconds(650))
        #expect(events.isEmpty, "nothing stalls in an empty cgroup: \(events.count) events")
        watcher.close()
        watcher.close()
        #expect(!watcher.isWatching && loop.registeredObjectCount == 0)
    }

    @Test(.enabled(if: pressureCgroups, "no writable cgroup2 hierarchy with pressure stall information here"))
    func aTriggerWhoseCgroupIsRemovedSaysGoneOnceAndStopsWatching() throws {
        let loop = try EventLoop()
        let cgroup = try ScratchCgroup()
        var events: [PressureTriggerWatcher.Event] = []
        let watcher = try PressureTriggerWatcher(loop: loop, path: cgroup.pressureFile, trigger: "some 100000 2000000") { events.append($0) }
        cgroup.remove()
        #expect(access(cgroup.directory, F_OK) != 0)
        #expect(runLoop(loop, timeout: .seconds(2)) { !events.isEmpty })
        // The removed file reports an error at every poll: once watching stopped, nothing more comes.
        runLoop(loop, timeout: .milliseconds(200)) { false }
        #expect(events == [.gone])
        #expect(!watcher.isWatching && loop.registeredObjectCount == 0)
    }
}
