// Process apps whose programs misbehave, run by the real netlifed: a child that takes a while to die when a
// restart comes, a program that ignores SIGTERM and is launched again while it ends, a program that makes
// cgroups inside its own and children that leave its session, a fork storm that ignores SIGTERM, and 2,000
// processes whose `status` must cost what one costs. Each ends with the daemon alive and nothing of the
// program left: no process, no cgroup directory.

import Foundation
import Testing
import NetLifeTestSupport

/// Where cgroup2 is mounted here (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid machine), nil
/// when it is not.
private func cgroup2MountPoint() -> String? {
    let mountinfo = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
    for line in mountinfo.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count, fields[dash + 1] == "cgroup2" else { continue }
        return String(fields[4])
    }
    return nil
}

/// This process's directory in the v1 freezer hierarchy, nil when there is none (a v2-only machine).
private func v1FreezerDirectory() -> String? {
    let cgroups = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? ""
    guard let line = cgroups.split(separator: "\n").first(where: { $0.split(separator: ":", maxSplits: 2).dropFirst().first?.split(separator: ",").contains("freezer") == true }),
          let path = line.split(separator: ":", maxSplits: 2).last else { return nil }
    let directory = "/sys/fs/cgroup/freezer" + (path == "/" ? "" : String(path))
    return access(directory + "/cgroup.procs", W_OK) == 0 ? directory : nil
}

/// The cgroup directories under `parent` whose names begin with `prefix`, and everything below them.
private func cgroupDirectories(under parent: String, prefix: String) -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? []
    var found: [String] = []
    for name in names where name.hasPrefix(prefix) {
        found.append(parent + "/" + name)
        let below = FileManager.default.enumerator(atPath: parent + "/" + name)
        while let entry = below?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: parent + "/" + name + "/" + entry, isDirectory: &isDirectory), isDirectory.boolValue {
                found.append(parent + "/" + name + "/" + entry)
            }
        }
    }
    return found
}

/// The pids of processes whose command line mentions `text` (a test's scratch directory).
private func processesMentioning(_ text: String) -> [Int32] {
    let me = getpid()
    return ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }.filter { pid in
        guard pid != me, let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
        return String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self).contains(text)
    }
}

/// The processes in cgroup `directory` and every cgroup below it, as the kernel lists them.
private func subtreeMembers(_ directory: String) -> Int {
    ([directory] + cgroupDirectories(under: (directory as NSString).deletingLastPathComponent,
                                     prefix: (directory as NSString).lastPathComponent).dropFirst())
        .reduce(0) { $0 + CgroupProbe(directory: $1).members.count }
}

/// An app running `/bin/sh SCRIPT` with no listener, and `lines` more.
private func scriptApp(_ name: String, script: String, lines: String = "") -> String {
    """
    [app \(name)]
    exec = /bin/sh \(script)
    \(lines)

    """
}

@Suite(.timeLimit(.minutes(1)), .serialized)
struct ProcessLifetimeTests {
    /// Every test here needs a cgroup netlifed can write; as root (here and in CI) it has one.
    private static var cgroupIsWritable: Bool {
        guard let mount = cgroup2MountPoint() else { return v1FreezerDirectory() != nil }
        return access(mount + "/cgroup.procs", W_OK) == 0 || v1FreezerDirectory() != nil
    }

    @Test(.enabled(if: cgroupIsWritable, "no writable cgroup on this machine: process apps run in a process group"))
    func whatAKilledDaemonLeftRunningIsKilledAndRemovedByTheNextOne() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        // A program with a child, both ignoring SIGTERM: only a kill of the whole cgroup ends them.
        scratch.write("stay.sh", "trap '' TERM\nsleep 1000 &\nwait\n")
        let first = try TestDaemon(config: "[daemon]\n" + scriptApp("orphan", script: scratch.file("stay.sh")), expectedEnd: .anything)
        let program = first.program("orphan")
        let cgroup = try #require(program["cgroup"] as? String)
        let pid = try #require((program["pid"] as? Int).map(Int32.init))
        defer { kill(pid, SIGKILL) }
        #expect((cgroup as NSString).lastPathComponent.contains("-d\(first.pid)-"), "the cgroup names its daemon: \(cgroup)")
        kill(first.pid, SIGKILL)
        #expect(first.waitForExit())
        first.stop()
        // Any netlifed that starts from now on removes what the killed one left: the second one here, or
        // another test's daemon starting at the same moment (they share this process's cgroup). Either way
        // the program and its cgroup are gone within one sweep; the daemon that removed them names them.
        let second = try TestDaemon(config: "[daemon]\n" + echoApp("other"))
        defer { second.stop() }
        #expect(waitUntil(timeout: 10) { processIsGone(pid) && !FileManager.default.fileExists(atPath: cgroup) },
                "left: program \(processIsGone(pid) ? "gone" : "running"), cgroup \(FileManager.default.fileExists(atPath: cgroup) ? "there" : "gone"); log:\n\(second.log.suffix(1500))")
        if second.log.contains("that a netlifed no longer running left behind") {
            #expect(second.log.contains((cgroup as NSString).lastPathComponent), "the log names what it removed: \(second.log.suffix(1500))")
        }
    }

    @Test(.enabled(if: cgroupIsWritable, "no writable cgroup on this machine: process apps run in a process group"))
    func aRestartWhileTheLastRunsChildIsStillDyingWaitsAndLeavesNoCgroup() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        // The program starts a child and writes its pid, then exits 3 once told to (a file appears).
        scratch.write("slow.sh", """
            sleep 1000 &
            echo $! > \(scratch.file("child.$$"))
            while [ ! -e \(scratch.file("crash")) ]; do sleep 0.02; done
            rm -f \(scratch.file("crash"))
            exit 3

            """)
        let daemon = try TestDaemon(config: "[daemon]\n" + scriptApp("slowdie", script: scratch.file("slow.sh"), lines: "restart = on-failure"))
        defer { daemon.stop() }
        let first = daemon.program("slowdie")
        let firstCgroup = try #require(first["cgroup"] as? String)
        let parent = (firstCgroup as NSString).deletingLastPathComponent
        let firstPid = try #require(first["pid"] as? Int)
        #expect(waitUntil { FileManager.default.fileExists(atPath: scratch.file("child.\(firstPid)")) })
        let child = try #require(Int32(scratch.read("child.\(firstPid)").trimmingCharacters(in: .whitespacesAndNewlines)))

        // The child cannot die while a v1 freezer holds it frozen (a v1 frozen task takes SIGKILL only once
        // thawed): its run's cgroup empties 400 ms after the program's exit, past the 100 ms restart delay.
        // On a machine without the v1 freezer the child dies at once and only the restart is checked.
        var hold: String?
        if let freezer = v1FreezerDirectory() {
            let directory = freezer + "/netlife-test-hold-\(getpid())-\(child)"
            if mkdir(directory, 0o755) == 0 {
                hold = directory
                try "\(child)\n".write(toFile: directory + "/cgroup.procs", atomically: false, encoding: .utf8)
                try "FROZEN\n".write(toFile: directory + "/freezer.state", atomically: false, encoding: .utf8)
            }
        }
        defer {
            if let hold {
                try? "THAWED\n".write(toFile: hold + "/freezer.state", atomically: false, encoding: .utf8)
                kill(child, SIGKILL)
                _ = waitUntil { rmdir(hold) == 0 || errno == ENOENT }
            }
        }
        scratch.write("crash", "")
        #expect(waitUntil { daemon.log.contains("restarting the program") })
        if let hold {
            usleep(400_000)
            try "THAWED\n".write(toFile: hold + "/freezer.state", atomically: false, encoding: .utf8)
        }
        #expect(waitUntil(timeout: 5) { daemon.programPid("slowdie").map { Int($0) != firstPid } ?? false }, "a new run started")
        let second = daemon.program("slowdie")
        #expect(second["containment"] as? String == first["containment"] as? String, "the new run is held as the first was: \(second)")
        let secondCgroup = second["cgroup"] as? String
        #expect(secondCgroup != nil && secondCgroup != firstCgroup, "the new run has a cgroup of its own: \(second)")
        #expect(waitUntil { !FileManager.default.fileExists(atPath: firstCgroup) }, "the first run's cgroup is removed")
        #expect(processIsGone(child))
        #expect(!daemon.log.contains("cannot remove"), "\(daemon.log)")

        #expect(daemon.ctl("terminate", "slowdie").status == 0)
        #expect(waitUntil { cgroupDirectories(under: parent, prefix: "netlife-slowdie-").isEmpty },
                "left: \(cgroupDirectories(under: parent, prefix: "netlife-slowdie-"))")
        #expect(waitUntil { processesMentioning(scratch.path).isEmpty })
    }

    @Test(.enabled(if: cgroupIsWritable, "no writable cgroup on this machine: process apps run in a process group"))
    func aLaunchWhileAProgramIgnoringSIGTERMStillEndsWaitsForItsKill() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("stubborn.sh", """
            trap '' TERM
            while :; do sleep 0.05; done

            """)
        let daemon = try TestDaemon(config: "[daemon]\n" + scriptApp("stubborn", script: scratch.file("stubborn.sh"),
                                                                   lines: "terminate-budget = 500ms"))
        defer { daemon.stop() }
        let oldPid = try #require(daemon.programPid("stubborn"))
        let oldCgroup = try #require(daemon.program("stubborn")["cgroup"] as? String)

        #expect(daemon.ctl("terminate", "stubborn").status == 0)
        #expect(daemon.state("stubborn") == "not-running")
        #expect(!processIsGone(oldPid), "it ignores SIGTERM and runs on for the terminate budget")
        let started = Date()
        let launch = daemon.ctl("launch", "stubborn")
        let waited = milliseconds(since: started)
        #expect(launch.status == 0, "\(launch)")
        let after = daemon.program("stubborn")
        let newPid = after["pid"] as? Int
        #expect(daemon.state("stubborn") == "active")
        #expect(newPid != nil && newPid != Int(oldPid), "the launch started a new program: \(after)")
        #expect(processIsGone(oldPid), "the launch completed only once the old run was gone")
        #expect(!FileManager.default.fileExists(atPath: oldCgroup))
        #expect(daemon.log.contains("run 1 still running 500ms after SIGTERM: killed"), "the old run's kill is logged")
        #expect(daemon.log.contains("run 1 (pid \(oldPid)) ended: killed by signal 9"), "the old run's end is logged:\n\(daemon.log)")
        print("launch while the previous run ignores SIGTERM: answered after \(format(ms: waited)) (terminate budget 500 ms)")

        #expect(daemon.ctl("terminate", "stubborn").status == 0)
        daemon.stop()
        #expect(processesMentioning(scratch.path).isEmpty)
        #expect(cgroupDirectories(under: (oldCgroup as NSString).deletingLastPathComponent, prefix: "netlife-stubborn-").isEmpty)
    }

    @Test(.enabled(if: cgroup2MountPoint().map { access($0 + "/cgroup.procs", W_OK) == 0 } ?? false,
                   "no writable cgroup2 on this machine: a program cannot make a cgroup of its own"))
    func cgroupsTheProgramMakesInsideItsOwnAreCountedSignalledAndRemoved() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let mount = try #require(cgroup2MountPoint())
        // The program makes `inner` inside its cgroup and moves a child there; another child leaves its
        // session. The inner child writes a file when SIGTERM reaches it.
        scratch.write("inner.sh", """
            trap 'echo term > \(scratch.file("inner-term")); exit 0' TERM
            echo $$ > "$1/inner/cgroup.procs"
            echo ready > \(scratch.file("inner-ready"))
            while :; do sleep 0.05; done

            """)
        scratch.write("nest.sh", """
            dir=\(mount)$(sed -n 's/^0:://p' /proc/self/cgroup)
            mkdir "$dir/inner"
            /bin/sh \(scratch.file("inner.sh")) "$dir" &
            setsid /bin/sh -c 'exec sleep 1000 # \(scratch.path)' &
            # Ends a while after SIGTERM, so that the inner child's handler runs before the cleanup's SIGKILL.
            trap 'sleep 0.5; exit 0' TERM
            while :; do sleep 0.05; done

            """)
        let daemon = try TestDaemon(config: "[daemon]\n" + scriptApp("nested", script: scratch.file("nest.sh"), lines: "terminate-budget = 2s"))
        defer { daemon.stop() }
        let baseline = ResourceBaseline(daemon.probe)

        for round in ["terminate", "daemon stop"] {
            if round == "daemon stop" {
                try? FileManager.default.removeItem(atPath: scratch.file("inner-term"))
                try? FileManager.default.removeItem(atPath: scratch.file("inner-ready"))
                #expect(daemon.ctl("launch", "nested").status == 0)
            }
            #expect(waitUntil { FileManager.default.fileExists(atPath: scratch.file("inner-ready")) })
            let cgroup = try #require(daemon.program("nested")["cgroup"] as? String)
            let parent = (cgroup as NSString).deletingLastPathComponent
            #expect(FileManager.default.fileExists(atPath: cgroup + "/inner"))
            // main, its sleep, the setsid sleep, the inner shell and its sleep (sleeps come and go).
            let kernel = subtreeMembers(cgroup)
            let shown = daemon.program("nested")["members"] as? Int ?? 0
            #expect(shown >= 3 && abs(shown - kernel) <= 2, "status counts the whole subtree: \(shown), kernel \(kernel)")

            if round == "terminate" {
                #expect(daemon.ctl("terminate", "nested").status == 0)
                #expect(waitUntil { FileManager.default.fileExists(atPath: scratch.file("inner-term")) }, "SIGTERM reached the inner cgroup")
                #expect(waitUntil { cgroupDirectories(under: parent, prefix: "netlife-nested-").isEmpty },
                        "left after terminate: \(cgroupDirectories(under: parent, prefix: "netlife-nested-"))")
                #expect(waitUntil { processesMentioning(scratch.path).isEmpty }, "left: \(processesMentioning(scratch.path))")
                daemon.expectHealthy(comparedTo: baseline, label: "nested cgroups, terminate")
            } else {
                daemon.stop()
                #expect(FileManager.default.fileExists(atPath: scratch.file("inner-term")), "SIGTERM reached the inner cgroup")
                #expect(cgroupDirectories(under: parent, prefix: "netlife-nested-").isEmpty,
                        "left after daemon stop: \(cgroupDirectories(under: parent, prefix: "netlife-nested-"))")
                #expect(waitUntil { processesMentioning(scratch.path).isEmpty }, "left: \(processesMentioning(scratch.path))")
            }
        }
    }

    @Test(.enabled(if: cgroupIsWritable, "no writable cgroup on this machine: process apps run in a process group"))
    func statusCostsTheSameWith2000ProcessesAsWithOne() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("many.sh", """
            n=0
            while [ $n -lt $1 ]; do sleep 1000 & n=$((n + 1)); done
            echo ready > \(scratch.file("ready.$1"))
            wait

            """)
        let daemon = try TestDaemon(config: "[daemon]\n"
                                        + scriptApp("one", script: scratch.file("many.sh") + " 1")
                                        + scriptApp("many", script: scratch.file("many.sh") + " 2000"))
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 40) { FileManager.default.fileExists(atPath: scratch.file("ready.2000")) })
        #expect(waitUntil { FileManager.default.fileExists(atPath: scratch.file("ready.1")) })
        let many = daemon.program("many")
        #expect((many["members"] as? Int ?? 0) >= 2000, "\(many)")
        let one = daemon.statusLatency(count: 31, request: "{\"cmd\":\"status\",\"app\":\"one\"}\n")
        let thousands = daemon.statusLatency(count: 31, request: "{\"cmd\":\"status\",\"app\":\"many\"}\n")
        print("status of a process app: median \(format(ms: one.median)) (worst \(format(ms: one.worst))) with 2 processes, "
              + "\(format(ms: thousands.median)) (worst \(format(ms: thousands.worst))) with 2,001; memory \(many["memory"] ?? "null")")
        #expect(one.failures == 0 && thousands.failures == 0)
        #expect(thousands.median < 10 * slowdown, "status with 2,000 processes: median \(thousands.median) ms")
        #expect(thousands.median < one.median + 2 * slowdown, "2,000 processes cost \(thousands.median) ms, one \(one.median) ms")
        // The cgroup's own figure, not 2,000 resident sets that share their pages (about 3.5 GB summed).
        if let memory = many["memory"] as? Int { #expect(memory < 1 << 30, "memory \(memory)") }

        let cgroup = try #require(many["cgroup"] as? String)
        daemon.stop()
        #expect(!FileManager.default.fileExists(atPath: cgroup))
        #expect(processesMentioning(scratch.path).isEmpty)
    }

    @Test(.enabled(if: cgroupIsWritable, "no writable cgroup on this machine: process apps run in a process group"))
    func aRestartLoopWhoseChildrenIgnoreSIGTERMAndLeaveTheSessionEndsWithNothingLeft() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        // Each run leaves a child behind in a session of its own and fails at once: restarted after 100,
        // 200, 400 ms...
        scratch.write("loop.sh", """
            setsid /bin/sh -c "trap '' TERM; sleep 1000; : \(scratch.path)" &
            sleep 0.02
            exit 3

            """)
        let daemon = try TestDaemon(config: "[daemon]\n" + scriptApp("looping", script: scratch.file("loop.sh"), lines: "restart = on-failure"))
        defer { daemon.stop() }
        let baseline = ResourceBaseline(daemon.probe)
        #expect(waitUntil(timeout: 5) { daemon.log.components(separatedBy: "started /bin/sh").count > 4 }, "it was restarted")
        #expect(processesMentioning(scratch.path).count <= 2, "each run's child ends with its run")
        #expect(daemon.ctl("terminate", "looping").status == 0)
        let parent = try #require(cgroup2MountPoint() ?? v1FreezerDirectory())
        #expect(waitUntil { processesMentioning(scratch.path).isEmpty }, "left: \(processesMentioning(scratch.path))")
        #expect(waitUntil { cgroupDirectories(under: parent, prefix: "netlife-looping-").isEmpty })
        #expect(!daemon.log.contains("cannot remove"))
        daemon.expectHealthy(comparedTo: baseline, label: "restart loop ended")
    }

    @Test(.enabled(if: cgroupIsWritable, "no writable cgroup on this machine: process apps run in a process group"))
    func aReloadThatRemovesAProgramIgnoringSIGTERMLeavesNothingOfIt() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("stubborn.sh", """
            trap '' TERM
            /bin/sh -c "trap '' TERM; sleep 1000 # \(scratch.path)" &
            while :; do sleep 0.05; done

            """)
        let kept = scriptApp("kept", script: "/dev/null")
        let daemon = try TestDaemon(config: "[daemon]\n" + kept + scriptApp("dropped", script: scratch.file("stubborn.sh"),
                                                                            lines: "terminate-budget = 300ms"))
        defer { daemon.stop() }
        let cgroup = try #require(daemon.program("dropped")["cgroup"] as? String)
        let parent = (cgroup as NSString).deletingLastPathComponent
        #expect(waitUntil { !processesMentioning(scratch.path).isEmpty })
        daemon.directory.write("netlifed.conf", "[daemon]\n" + kept)
        let reload = daemon.ctl("reload")
        #expect(reload.status == 0, "\(reload)")
        #expect(waitUntil { cgroupDirectories(under: parent, prefix: "netlife-dropped-").isEmpty },
                "left after the reload: \(cgroupDirectories(under: parent, prefix: "netlife-dropped-"))")
        #expect(waitUntil { processesMentioning(scratch.path).isEmpty }, "left: \(processesMentioning(scratch.path))")
    }

    @Test(.enabled(if: cgroupIsWritable, "no writable cgroup on this machine: process apps run in a process group"))
    func aForkStormThatIgnoresSIGTERMEndsWithNothingLeft() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        // Children that ignore SIGTERM, some leaving the session, started as fast as the shell can.
        scratch.write("storm.sh", """
            trap '' TERM
            while :; do
              /bin/sh -c "trap '' TERM; sleep 1000 # \(scratch.path)" &
              setsid /bin/sh -c "trap '' TERM; sleep 1000 # \(scratch.path)" &
              sleep 0.005
            done

            """)
        let daemon = try TestDaemon(config: "[daemon]\n" + scriptApp("storm", script: scratch.file("storm.sh"), lines: "terminate-budget = 300ms"))
        defer { daemon.stop() }
        let baseline = ResourceBaseline(daemon.probe)
        let cgroup = try #require(daemon.program("storm")["cgroup"] as? String)
        let parent = (cgroup as NSString).deletingLastPathComponent
        #expect(waitUntil { (daemon.program("storm")["members"] as? Int ?? 0) > 200 })
        daemon.expectHealthy(comparedTo: nil, label: "fork storm running")
        for _ in 0..<2 {
            #expect(daemon.ctl("terminate", "storm").status == 0)
            #expect(daemon.ctl("launch", "storm").status == 0)
            #expect(daemon.programPid("storm") != nil)
        }
        #expect(daemon.ctl("terminate", "storm").status == 0)
        #expect(waitUntil { cgroupDirectories(under: parent, prefix: "netlife-storm-").isEmpty })
        #expect(waitUntil { processesMentioning(scratch.path).isEmpty }, "left: \(processesMentioning(scratch.path).count)")
        daemon.expectHealthy(comparedTo: baseline, label: "fork storm ended")
        #expect(daemon.ctl("launch", "storm").status == 0)
        usleep(200_000)
        daemon.stop()
        #expect(cgroupDirectories(under: parent, prefix: "netlife-storm-").isEmpty)
        #expect(waitUntil { processesMentioning(scratch.path).isEmpty }, "left after daemon stop: \(processesMentioning(scratch.path).count)")
    }
}
