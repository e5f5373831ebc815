// Cgroups of process apps: the layout found in /proc/self/cgroup and mountinfo texts (hybrid, pure v2, pure
// v1, none, escaped and container mounts), the choice of hierarchy, the files' parsers; and, for real on this
// machine (root), a program spawned into a new cgroup, frozen (its counter stops), thawed (it runs again),
// killed with what it left outside its process group, and the cgroup removed, in v2 and in the v1 freezer.

import Foundation
@testable import NetLifeEvent
import Testing
import NetLifeTestSupport

/// What this machine offers, probed once.
enum CgroupMachine {
    static let layout = try? CgroupLayout.current()
    static var v2Parent: String? {
        guard let directory = layout?.unified?.directory, ProcessCgroup.isWritable(directory) else { return nil }
        return directory
    }
    static var memoryParent: String? {
        guard let directory = layout?.memory?.directory, ProcessCgroup.isWritable(directory) else { return nil }
        return directory
    }
    static var pidsParent: String? {
        guard let directory = layout?.pids?.directory, ProcessCgroup.isWritable(directory) else { return nil }
        return directory
    }
    static var v1Parent: String? {
        guard let directory = layout?.freezer?.directory, ProcessCgroup.isWritable(directory) else { return nil }
        return directory
    }
}

@Suite(.timeLimit(.minutes(2)))
struct CgroupLayoutTests {
    static let hybridMountinfo = """
        31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
        32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
        37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
        39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
        """

    @Test func aHybridLayoutHasBothHierarchies() {
        let layout = CgroupLayout(procSelfCgroup: "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/process_api/a0\n0::/\n",
                                  mountinfo: Self.hybridMountinfo)
        #expect(layout.unified == .init(mountPoint: "/sys/fs/cgroup/unified", cgroupPath: "/", directory: "/sys/fs/cgroup/unified"))
        #expect(layout.freezer == .init(mountPoint: "/sys/fs/cgroup/freezer", cgroupPath: "/", directory: "/sys/fs/cgroup/freezer"))
        #expect(layout.memory == .init(mountPoint: "/sys/fs/cgroup/memory", cgroupPath: "/process_api/a0",
                                       directory: "/sys/fs/cgroup/memory/process_api/a0"))
        #expect(layout.pids == .init(mountPoint: "/sys/fs/cgroup/pids", cgroupPath: "/", directory: "/sys/fs/cgroup/pids"))
    }

    @Test func pureV2UnderSystemdFindsTheServiceDirectory() {
        let layout = CgroupLayout(procSelfCgroup: "0::/system.slice/netlifed.service\n",
                                  mountinfo: "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n")
        #expect(layout.unified?.directory == "/sys/fs/cgroup/system.slice/netlifed.service")
        #expect(layout.freezer == nil)
    }

    @Test func pureV1HasOnlyTheFreezer() {
        let layout = CgroupLayout(procSelfCgroup: "6:freezer:/lxc/box\n4:cpu,cpuacct:/lxc/box\n",
                                  mountinfo: "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime shared:9 master:2 - cgroup cgroup rw,freezer\n")
        #expect(layout.unified == nil)
        #expect(layout.freezer?.directory == "/sys/fs/cgroup/freezer/lxc/box")
    }

    @Test func nothingMountedOrNothingInProcIsNil() {
        #expect(CgroupLayout(procSelfCgroup: "0::/\n", mountinfo: "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n") == CgroupLayout(unified: nil, freezer: nil))
        #expect(CgroupLayout(procSelfCgroup: "", mountinfo: Self.hybridMountinfo) == CgroupLayout(unified: nil, freezer: nil))
        #expect(CgroupLayout(procSelfCgroup: "garbage\n::\n0:", mountinfo: "1 2 3\n - - -\n") == CgroupLayout(unified: nil, freezer: nil))
    }

    @Test func escapedMountPointsAreUnescaped() {
        let layout = CgroupLayout(procSelfCgroup: "0::/a b\n",
                                  mountinfo: "41 31 0:38 / /mnt/my\\040cgroups\\134x rw - cgroup2 cgroup2 rw\n")
        #expect(layout.unified?.mountPoint == "/mnt/my cgroups\\x")
        #expect(layout.unified?.directory == "/mnt/my cgroups\\x/a b")
        #expect(MountinfoLine.unescaped("a\\04") == "a\\04", "a cut escape stays as it is")
        #expect(MountinfoLine.unescaped("a\\999") == "a\\999")
    }

    @Test func aMountOfASubtreeIsUsedOnlyWhenItContainsTheCgroup() {
        let inside = CgroupLayout(procSelfCgroup: "0::/docker/abc/app\n",
                                  mountinfo: "41 31 0:38 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
        #expect(inside.unified?.directory == "/sys/fs/cgroup/app")
        let exact = CgroupLayout(procSelfCgroup: "0::/docker/abc\n",
                                 mountinfo: "41 31 0:38 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
        #expect(exact.unified?.directory == "/sys/fs/cgroup")
        let outside = CgroupLayout(procSelfCgroup: "0::/docker/abcdef\n",
                                   mountinfo: "41 31 0:38 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
        #expect(outside.unified == nil, "/docker/abcdef is not below /docker/abc")
        let escaped = CgroupLayout(procSelfCgroup: "0::/../..\n",
                                   mountinfo: "41 31 0:38 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
        #expect(escaped.unified == nil)
        let outsideNamespace = CgroupLayout(procSelfCgroup: "0::/../../system.slice/x.service\n",
                                            mountinfo: "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
        #expect(outsideNamespace.unified == nil, "a cgroup outside the namespace cannot be reached through the mount")
    }

    @Test func theChoicePrefersV2ThenTheFreezerThenTheProcessGroup() {
        let layout = CgroupLayout(procSelfCgroup: "6:freezer:/\n0::/\n", mountinfo: Self.hybridMountinfo)
        #expect(layout.choose(isWritable: { _ in true }) == .v2(parent: "/sys/fs/cgroup/unified"))
        #expect(layout.choose(isWritable: { $0.hasSuffix("freezer") }) == .v1Freezer(parent: "/sys/fs/cgroup/freezer"))
        guard case .processGroup(let reason) = layout.choose(isWritable: { _ in false }) else {
            Issue.record("expected the process group")
            return
        }
        #expect(reason.contains("/sys/fs/cgroup/unified is not writable") && reason.contains("can observe"))
        // The remedy named fits who netlifed runs as: root under a sandbox needs the drop-in, not root.
        if case .processGroup(let asRoot) = layout.choose(isWritable: { _ in false }, asRoot: true) {
            #expect(!asRoot.contains("run as root") && asRoot.contains("Delegate=yes"), "\(asRoot)")
        }
        if case .processGroup(let asUser) = layout.choose(isWritable: { _ in false }, asRoot: false) {
            #expect(asUser.contains("run as root"), "\(asUser)")
        }
        guard case .processGroup(let none) = CgroupLayout(unified: nil, freezer: nil).choose(isWritable: { _ in true }) else {
            Issue.record("expected the process group")
            return
        }
        #expect(none.contains("no cgroup2 or v1 freezer hierarchy"))
    }

    @Test func netlifedEnablesTheAppsControllersOnlyWhereItIsAloneOrAtTheRoot() {
        let me: Int32 = 4242
        // systemd's Delegate=yes: the controllers are available, netlifed alone in its cgroup.
        #expect(CgroupDelegation.plan(isRoot: false, controllers: "cpu io memory pids\n", subtreeControl: "\n",
                                      procs: "4242\n", ownPid: me) == .moveToLeafThenEnable(["memory", "pids"]))
        #expect(CgroupDelegation.plan(isRoot: false, controllers: "cpu memory pids\n", subtreeControl: "memory\n",
                                      procs: "", ownPid: me) == .enable(["pids"]))
        #expect(CgroupDelegation.plan(isRoot: true, controllers: "memory pids\n", subtreeControl: "\n",
                                      procs: "1\n4242\n", ownPid: me) == .enable(["memory", "pids"]))
        // A login session's scope (a shell beside it) is left alone, as is a hybrid layout's cgroup2.
        #expect(CgroupDelegation.plan(isRoot: false, controllers: "memory pids\n", subtreeControl: "\n",
                                      procs: "100\n4242\n", ownPid: me) == .notAlone)
        #expect(CgroupDelegation.plan(isRoot: true, controllers: "hugetlb\n", subtreeControl: "\n", procs: "1\n", ownPid: me) == .none)
        #expect(CgroupDelegation.plan(isRoot: false, controllers: "memory pids\n", subtreeControl: "memory pids\n",
                                      procs: "4242\n", ownPid: me) == .none)
        #expect(CgroupDelegation.appsDirectory(forOwn: "/sys/fs/cgroup/system.slice/netlifed.service/netlife-daemon")
                == "/sys/fs/cgroup/system.slice/netlifed.service")
        #expect(CgroupDelegation.appsDirectory(forOwn: "/sys/fs/cgroup/unified") == "/sys/fs/cgroup/unified")
        #expect(CgroupDelegation.appsDirectory(forOwn: "/sys/fs/cgroup/x/my-netlife-daemon") == "/sys/fs/cgroup/x/my-netlife-daemon")
    }

    @Test func freezeStatesMemoryAndNamesAreReadFromTheFiles() {
        #expect(ProcessCgroup.v2FreezeState(freeze: "1\n", events: "populated 1\nfrozen 1\n") == .frozen)
        #expect(ProcessCgroup.v2FreezeState(freeze: "1\n", events: "populated 1\nfrozen 0\n") == .freezing)
        #expect(ProcessCgroup.v2FreezeState(freeze: "0\n", events: "populated 1\nfrozen 0\n") == .thawed)
        #expect(ProcessCgroup.v1FreezeState("FREEZING\n") == .freezing)
        #expect(ProcessCgroup.v1FreezeState("FROZEN\n") == .frozen)
        #expect(ProcessCgroup.v1FreezeState("THAWED\n") == .thawed)
        let name = ProcessCgroup.name(forApp: "my app/../x")
        // The app, this process's pid and pid namespace (CgroupLeftovers), then 8 hex digits.
        let prefix = "netlife-my_app____x-d\(getpid())-n\(CgroupLeftovers.ownPidNamespace ?? 0)-"
        #expect(name.hasPrefix(prefix) && name.utf8.count == prefix.utf8.count + 8, "\(name)")
        #expect(!ProcessCgroup.name(forApp: String(repeating: "é", count: 100)).contains("é"))
        #expect(ProcessCgroup.name(forApp: "web", run: 12).hasPrefix("netlife-web-r12-"))
        // cgroup.procs is counted by its newlines, across read chunks.
        let path = "/tmp/netlife-lines-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        let text = (1...20_000).map { "\($0)\n" }.joined()
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        #expect((try? KernelFile.countLines(path, limit: 1 << 20)) == 20_000)
        #expect((try? KernelFile.countLines("/dev/null", limit: 1 << 20)) == 0)
        #expect(ProcessCgroup.name(forApp: "web", run: 12) != ProcessCgroup.name(forApp: "web", run: 12))
    }
}

@Suite(.serialized, .timeLimit(.minutes(2)))
struct ProcessCgroupTests {
    @Test(.enabled(if: CgroupMachine.v2Parent != nil, "no writable cgroup2 hierarchy here (needs root or Delegate=yes)"))
    func aProgramInAV2CgroupIsFrozenThawedKilledAndRemoved() throws {
        let parent = try #require(CgroupMachine.v2Parent)
        try exercise(.v2(parent: parent))
    }

    @Test(.enabled(if: CgroupMachine.v1Parent != nil, "no writable v1 freezer hierarchy here"))
    func aProgramInAV1FreezerCgroupIsFrozenThawedKilledAndRemoved() throws {
        let parent = try #require(CgroupMachine.v1Parent)
        try exercise(.v1Freezer(parent: parent))
    }

    /// A shell loop that writes a counter to a file, with a `setsid sleep` it leaves outside its process
    /// group, joins a new cgroup before it runs; the cgroup stops and restarts it, then kills both.
    func exercise(_ choice: CgroupChoice) throws {
        let loop = try EventLoop()
        let cgroup = try #require(try ProcessCgroup.create(named: ProcessCgroup.name(forApp: "unit"), in: choice))
        defer {
            _ = try? cgroup.kill()
            for _ in 0..<100 where (try? cgroup.members().isEmpty) == false { usleep(10_000) }
            try? cgroup.remove()
        }
        let counter = "/tmp/netlife-cgroup-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(counter) }
        var status: ChildExitStatus?
        let child = try ChildProcess(
            loop: loop, arguments: ["/bin/sh", "-c", "setsid sleep 60 & i=0; while :; do i=$((i+1)); echo $i > \"$0\"; sleep 0.005; done", counter],
            environment: ["PATH": "/usr/bin:/bin"], options: ChildLaunchOptions(joinCgroups: [cgroup.directory]),
            onOutput: { _ in }, onExit: { status = $0 })
        #expect(runLoop(loop) { readCounter(counter) > 2 })
        let members = try cgroup.members()
        #expect(members.contains(child.pid), "the program joined the cgroup before it ran")
        #expect(members.count >= 2, "the setsid sleep is a member too: \(members)")
        // A hybrid layout's cgroup2 accounts no memory (AccountingCgroup does, in v1).
        if let bytes = cgroup.memoryBytes() { #expect(bytes > 0) }

        try cgroup.freeze()
        let asked = MonotonicTime.now()
        var frozen: Bool?
        var frozenAfter = Duration.zero
        cgroup.whenFrozen(loop: loop, timeout: .seconds(2)) { frozen = $0; frozenAfter = MonotonicTime.now() - asked }
        #expect(runLoop(loop) { frozen != nil })
        #expect(frozen == true)
        #expect(try cgroup.freezeState() == .frozen)
        print("\(cgroup.kind.rawValue): frozen \(frozenAfter.milliseconds) ms after the request")
        let stopped = readCounter(counter)
        runLoop(loop, timeout: .milliseconds(150)) { false }
        #expect(readCounter(counter) == stopped, "a frozen program does not advance")

        try cgroup.thaw()
        #expect(try cgroup.freezeState() == .thawed)
        #expect(runLoop(loop) { readCounter(counter) > stopped + 2 }, "a thawed program runs again")

        // A suspended app is terminated frozen: the kill must reach frozen members.
        try cgroup.freeze()
        frozen = nil
        cgroup.whenFrozen(loop: loop, timeout: .seconds(2)) { frozen = $0 }
        #expect(runLoop(loop) { frozen != nil })
        var empty: Bool?
        let killed = MonotonicTime.now()
        var emptyAfter = Duration.zero
        cgroup.killUntilEmpty(loop: loop, timeout: .seconds(2)) { empty = $0; emptyAfter = MonotonicTime.now() - killed }
        #expect(runLoop(loop) { empty != nil && status != nil })
        #expect(empty == true)
        print("\(cgroup.kind.rawValue): \(members.count) frozen members killed, the cgroup empty after \(emptyAfter.milliseconds) ms")
        #expect(status == .signaled(SIGKILL))
        #expect(try cgroup.members().isEmpty)
        for pid in members { #expect(!processIsLive(pid), "member \(pid) is gone") }
        try cgroup.remove()
        #expect(access(cgroup.directory, F_OK) != 0)
        try cgroup.remove()   // again: nothing
        #expect(loop.registeredObjectCount == 0)
    }

    @Test(.enabled(if: CgroupMachine.v2Parent != nil, "no writable cgroup2 hierarchy here (needs root or Delegate=yes)"))
    func aCgroupTheProgramMakesInsideItsOwnIsCountedSignalledKilledAndRemoved() throws {
        let loop = try EventLoop()
        let parent = try #require(CgroupMachine.v2Parent)
        let cgroup = try #require(try ProcessCgroup.create(named: ProcessCgroup.name(forApp: "unit", run: 1), in: .v2(parent: parent)))
        let inner = cgroup.directory + "/inner/deeper"
        defer {
            _ = try? cgroup.kill()
            for _ in 0..<100 where cgroup.subtreeMemberCount() > 0 { usleep(10_000) }
            try? cgroup.removeSubtree()
        }
        #expect(mkdir(cgroup.directory + "/inner", 0o755) == 0 && mkdir(inner, 0o755) == 0)
        #expect(cgroup.subtree() == [inner, cgroup.directory + "/inner", cgroup.directory], "deepest first")
        var status: ChildExitStatus?
        let child = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.2; done"],
                                     environment: ["PATH": "/usr/bin:/bin"], options: ChildLaunchOptions(joinCgroups: [inner]),
                                     onOutput: { _ in }, onExit: { status = $0 })
        // Its sleep is there once the trap is set (the pid joins before the shell runs).
        #expect(runLoop(loop) { cgroup.subtreeMembers().contains(child.pid) && cgroup.subtreeMemberCount() >= 2 })
        #expect(try cgroup.members().isEmpty, "the cgroup's own cgroup.procs lists none of them")
        #expect(cgroup.subtreeMemberCount() >= 1)
        #expect(throws: SystemError.self) { try cgroup.remove() }
        #expect(cgroup.signalSubtree(SIGTERM) >= 1)
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(7), "SIGTERM reached the process two cgroups down")
        var empty: Bool?
        cgroup.killUntilEmpty(loop: loop, timeout: .seconds(2)) { empty = $0 }
        #expect(runLoop(loop) { empty != nil })
        #expect(empty == true)
        try cgroup.removeSubtree()
        #expect(access(cgroup.directory, F_OK) != 0)
        #expect(loop.registeredObjectCount == 0)
    }

    @Test(.enabled(if: CgroupMachine.memoryParent != nil, "no writable v1 memory hierarchy here (a v2-only machine)"))
    func aV1MemoryCgroupCountsItsMembersPages() throws {
        let loop = try EventLoop()
        let parent = try #require(CgroupMachine.memoryParent)
        let memory = try AccountingCgroup(creating: parent + "/" + ProcessCgroup.name(forApp: "unit", run: 1), controller: .memory)
        defer { try? memory.remove() }
        var status: ChildExitStatus?
        let child = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 60 & done; wait"],
                                     environment: ["PATH": "/usr/bin:/bin"], options: ChildLaunchOptions(joinCgroups: [memory.directory]),
                                     onOutput: { _ in }, onExit: { status = $0 })
        let procs = memory.directory + "/cgroup.procs"
        #expect(runLoop(loop) { (try? KernelFile.countLines(procs, limit: 4096)) == 9 && (memory.count() ?? 0) > 0 })
        child.signalGroup(SIGKILL)
        #expect(runLoop(loop) { status != nil && (try? KernelFile.countLines(procs, limit: 4096)) == 0 })
        try memory.remove()
        #expect(access(memory.directory, F_OK) != 0)
        try memory.remove()   // again: nothing
    }

    @Test(.enabled(if: CgroupMachine.pidsParent != nil, "no writable v1 pids hierarchy here (a v2-only machine)"))
    func aV1PidsCgroupCountsItsTasksWithoutListingThem() throws {
        let loop = try EventLoop()
        let parent = try #require(CgroupMachine.pidsParent)
        let pids = try AccountingCgroup(creating: parent + "/" + ProcessCgroup.name(forApp: "unit", run: 1), controller: .pids)
        defer { try? pids.remove() }
        var status: ChildExitStatus?
        let child = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 60 & done; wait"],
                                     environment: ["PATH": "/usr/bin:/bin"], options: ChildLaunchOptions(joinCgroups: [pids.directory]),
                                     onOutput: { _ in }, onExit: { status = $0 })
        #expect(runLoop(loop) { pids.count() == 9 })
        child.signalGroup(SIGKILL)
        #expect(runLoop(loop) { status != nil && pids.count() == 0 })
        try pids.remove()
        #expect(access(pids.directory, F_OK) != 0)
    }

    @Test(.enabled(if: CgroupMachine.v2Parent != nil, "no writable cgroup2 hierarchy here"))
    func errorsNameTheFile() throws {
        let cgroup = ProcessCgroup(existing: "/sys/fs/cgroup/unified/netlife-missing-\(getpid())", kind: .v2)
        #expect {
            try cgroup.freeze()
        } throws: { error in
            (error as? SystemError).map { $0.function.contains("netlife-missing") && $0.errno.rawValue == ENOENT } ?? false
        }
        let parent = try #require(CgroupMachine.v2Parent)
        let real = try #require(try ProcessCgroup.create(named: ProcessCgroup.name(forApp: "unit"), in: .v2(parent: parent)))
        defer { try? real.remove() }
        #expect(throws: SystemError.self) { try real.add(pid: 999_999_999) }
        #expect(try real.members().isEmpty)
        #expect((real.memoryBytes() ?? 0) == 0)
        #expect(throws: SystemError.self) { try ProcessCgroup(creating: real.directory, kind: .v2) }
    }
}

private func readCounter(_ path: String) -> Int {
    (try? String(contentsOfFile: path, encoding: .utf8)).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
}

/// What a netlifed that is gone left: its cgroups are told apart by the daemon pid in their names.
@Suite(.timeLimit(.minutes(1)))
struct CgroupLeftoversTests {
    @Test func theOwnerIsReadFromTheNameNetlifedGivesItsCgroups() {
        let name = ProcessCgroup.name(forApp: "web-app", run: 3)
        let namespace = CgroupLeftovers.ownPidNamespace
        #expect(name.hasPrefix("netlife-web-app-r3-d\(getpid())-n\(namespace ?? 0)-"))
        #expect(CgroupLeftovers.owner(ofCgroupNamed: name) == CgroupLeftovers.Owner(pid: getpid(), pidNamespace: namespace))
        #expect(CgroupLeftovers.owner(ofCgroupNamed: "netlife-a-d42-n4026531836-0000beef") == CgroupLeftovers.Owner(pid: 42, pidNamespace: 4026531836))
        // A name of an older netlifed records no namespace.
        #expect(CgroupLeftovers.owner(ofCgroupNamed: "netlife-a-d42-0000beef") == CgroupLeftovers.Owner(pid: 42, pidNamespace: nil))
        for other in ["netlife-a-r1-0000beef", "netlife-daemon", "netlife-test-hold-12-345", "netlife-a-d42-beef",
                      "netlife-a-dx-0000beef", "other-a-d42-0000beef", "netlife-a-d0-0000beef", "netlife-a-d-5-0000beef",
                      "netlife-a-n5-0000beef"] {
            #expect(CgroupLeftovers.ownerPid(ofCgroupNamed: other) == nil, "\(other)")
        }
    }

    @Test func onlyTheCgroupsOfNetlifedsThatAreGoneInThisPidNamespaceAreFound() throws {
        let parent = "/tmp/netlife-leftovers-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let here: UInt64 = 4026531836
        let names = ["netlife-gone-d41-n\(here)-0000beef", "netlife-alive-d42-n\(here)-0000cafe",
                     "netlife-mine-d\(getpid())-n\(here)-00000001",
                     // Another namespace's daemon, whose pid 41 means nothing here; an older netlifed's name.
                     "netlife-host-d41-n4026532000-0000f00d", "netlife-old-d41-0000d00d",
                     "netlife-daemon", "unrelated"]
        #expect(mkdir(parent, 0o755) == 0)
        for name in names { #expect(mkdir(parent + "/" + name, 0o755) == 0) }
        defer {
            for name in names { rmdir(parent + "/" + name) }
            rmdir(parent)
        }
        let found = CgroupLeftovers.find(in: parent, isRunning: { $0 == 42 }, namespace: here)
        #expect(found == [parent + "/netlife-gone-d41-n\(here)-0000beef"])
        #expect(CgroupLeftovers.find(in: parent, isRunning: { _ in false }, namespace: nil).isEmpty, "no namespace known: nothing judged")
        #expect(CgroupLeftovers.isAlive(getpid()))
        #expect(!CgroupLeftovers.isAlive(Int32.max), "no such process")
    }
}

@Suite struct CgroupMembershipTests {
    @Test func aProcessIsAMemberWhenItsCgroupPathNamesTheAppsCgroup() {
        let name = "netlife-web-r1-d10-0000abcd"
        let v2 = Array("0::/system.slice/netlifed.service/apps/\(name)/worker\n".utf8)
        #expect(ProcessCgroup.isMember(procCgroup: v2, kind: .v2, cgroupName: name))
        #expect(!ProcessCgroup.isMember(procCgroup: v2, kind: .v2, cgroupName: "netlife-web-r2-d10-0000abcd"))
        #expect(!ProcessCgroup.isMember(procCgroup: v2, kind: .v1Freezer, cgroupName: name))
        // A longer name that begins with the app's is another cgroup.
        let other = Array("0::/apps/\(name)x\n".utf8)
        #expect(!ProcessCgroup.isMember(procCgroup: other, kind: .v2, cgroupName: name))
        let hybrid = Array("12:freezer:/\(name)\n11:memory:/\n0::/user.slice\n".utf8)
        #expect(ProcessCgroup.isMember(procCgroup: hybrid, kind: .v1Freezer, cgroupName: name))
        #expect(!ProcessCgroup.isMember(procCgroup: hybrid, kind: .v2, cgroupName: name))
        #expect(!ProcessCgroup.isMember(procCgroup: v2, kind: .v2, cgroupName: ""))
    }
}
