// `memory-pressure-trigger` against the real netlifed and the real kernel: netlifed runs in a cgroup of the
// test's own (a cgroup2 directory, whose memory.pressure it watches, and a memory cgroup with a small limit),
// a process in the same cgroups churns the page cache (no swap here: memory past the limit that is not page
// cache would be an OOM kill), the kernel's trigger fires, and the suspended app is ended with reason
// memory-pressure and the pressure file's figures in `status`, `watch` and the log, while the active app stays.
// A trigger the kernel refuses stops the start (exit 78) and a reload (nothing changed) with the plain reason:
// without CAP_SYS_RESOURCE, which the test drops with setpriv, Linux 6.5 and later take only windows that are
// a multiple of 2 s.

import Foundation
import NetLifeEvent
import Testing
import NetLifeTestSupport

/// The test process's cgroups, where the test makes its own: the cgroup2 directory (to watch) and the place of
/// a memory limit (a v1 memory cgroup on a hybrid host, else cgroup2's memory controller).
private enum PressureMachine {
    static let layout = try? CgroupLayout.current()
    /// The writable cgroup2 directory, when the kernel keeps pressure stall information.
    static var unified: String? {
        guard getuid() == 0, let directory = layout?.unified?.directory, access(directory + "/cgroup.procs", W_OK) == 0,
              (try? PressureTriggerWatcher.read("/proc/pressure/memory"))?.hasPrefix("some ") == true else { return nil }
        return directory
    }
    /// The writable v1 memory directory (hybrid hosts).
    static var memoryV1: String? {
        guard let directory = layout?.memory?.directory, access(directory + "/cgroup.procs", W_OK) == 0 else { return nil }
        return directory
    }
    /// Whether a cgroup2 child of `unified` gets the memory controller.
    static var memoryV2: Bool {
        guard let unified else { return false }
        return ((try? String(contentsOfFile: unified + "/cgroup.subtree_control", encoding: .utf8)) ?? "").contains("memory")
    }
    static var canPress: Bool { unified != nil && (memoryV1 != nil || memoryV2) }

    static var hasTheTwoSecondRule: Bool { kernelHasTheTwoSecondRule() }
}

/// Whether the kernel takes only windows of whole 2 s steps from a process without CAP_SYS_RESOURCE (Linux 6.5
/// and later; earlier ones take any window on a cgroup's file).
func kernelHasTheTwoSecondRule() -> Bool {
    var name = utsname()
    uname(&name)
    let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
    return numbers.count == 2 && (numbers[0], numbers[1]) >= (6, 5)
}

/// A cgroup of the test's own in each hierarchy it uses, removed with what is left in it.
private final class PressureCgroup {
    let unified: String
    let memory: String?
    let name: String

    init() throws {
        let name = "nl-psi-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        self.name = name
        unified = try #require(PressureMachine.unified) + "/" + name
        memory = PressureMachine.memoryV1.map { $0 + "/" + name }
        try FileManager.default.createDirectory(atPath: unified, withIntermediateDirectories: false)
        if let memory { try FileManager.default.createDirectory(atPath: memory, withIntermediateDirectories: false) }
    }

    /// `sh -c` words that move the shell into these cgroups, then run `command`.
    func joining(_ command: String) -> [String] {
        let join = ([unified] + (memory.map { [$0] } ?? [])).map { "echo $$ > '\($0)/cgroup.procs'" }.joined(separator: " && ")
        return ["/bin/sh", "-c", join + " && " + command]
    }

    /// The bytes charged to the cgroup now.
    var usage: Int {
        let file = memory.map { $0 + "/memory.usage_in_bytes" } ?? unified + "/memory.current"
        return Int(((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// Caps the cgroup's memory at `bytes`.
    func limit(_ bytes: Int) throws {
        let file = memory.map { $0 + "/memory.limit_in_bytes" } ?? unified + "/memory.max"
        try "\(bytes)\n".write(toFile: file, atomically: false, encoding: .utf8)
    }

    /// Kills what is left in it and removes it (within 5 s).
    func remove() {
        for directory in [unified] + (memory.map { [$0] } ?? []) {
            for pid in ((try? String(contentsOfFile: directory + "/cgroup.procs", encoding: .utf8)) ?? "").split(separator: "\n") {
                if let pid = Int32(pid) { kill(pid, SIGKILL) }
            }
            _ = waitUntil(timeout: 5) { rmdir(directory) == 0 || errno == ENOENT }
        }
    }
}

/// setpriv words that drop CAP_SYS_RESOURCE (as netlifed's unit does), then run the rest of the command line.
private let withoutSysResource = ["/usr/bin/setpriv", "--inh-caps=-all", "--bounding-set=-sys_resource", "--"]

@Suite(.timeLimit(.minutes(3)))
struct KernelMemoryPressureTests {
    @Test(.enabled(if: PressureMachine.canPress, "needs root, a writable cgroup2 hierarchy with pressure stall information and a memory limit (cgroup v1 memory or the v2 controller)"))
    func theKernelsTriggerEndsTheSuspendedAppAndLeavesTheActiveOne() throws {
        let cgroup = try PressureCgroup()
        defer { cgroup.remove() }
        let cacheServer = try #require(PeerServer())
        let frontServer = try #require(PeerServer())
        defer { cacheServer.close(); frontServer.close() }
        let config = "[daemon]\nmemory-pressure-trigger = some 100ms 2s\n" + lineSocketApp("cache", cacheServer) + lineSocketApp("front", frontServer)
        // netlifed is in the test's cgroups from its first instruction: its own cgroup is the one it watches.
        let daemon = try TestDaemon(config: config, launcher: cgroup.joining("exec \"$@\"") + ["sh"])
        defer { daemon.stop() }
        let cachePeer = try #require(cacheServer.accept())
        let frontPeer = try #require(frontServer.accept())
        defer { cachePeer.close(); frontPeer.close() }
        let file = cgroup.unified + "/memory.pressure"
        #expect(daemon.log.contains("memory pressure: trigger some 100ms 2s ('some 100000 2000000') armed on \(file) (netlifed's cgroup)"),
                "\(daemon.log)")
        #expect(daemon.ctl("background", "cache").status == 0)
        #expect(daemon.ctl("suspend", "cache").status == 0)
        #expect(daemon.state("front") == "active")
        let watcher = try BackgroundProcess([product("netlifectl"), "--control", daemon.controlPath, "--json", "watch"])
        defer { watcher.signal(SIGTERM); _ = watcher.wait(timeout: 5) }
        // 32 MiB, or more when the daemon (under a sanitizer) already holds more than 8 MiB under it: the
        // churn must press on the page cache, never on the daemon's own memory.
        let limit = max(32 << 20, cgroup.usage + (24 << 20))
        try cgroup.limit(limit)

        let scratch = "/var/tmp/\(cgroup.name).churn"
        defer { unlink(scratch) }
        let churn = "i=0; while [ $i -lt 10 ]; do dd if=/dev/zero of='\(scratch)' bs=1M count=400 conv=fsync 2>/dev/null; "
            + "cat '\(scratch)' >/dev/null; i=$((i+1)); done"
        let started = Date()
        let churner = try BackgroundProcess(cgroup.joining(churn))
        let ended = waitUntil(timeout: 90, every: 0.1) { daemon.currentState("cache") == "not-running" }
        let seconds = Date().timeIntervalSince(started)
        churner.signal(SIGKILL)
        _ = churner.wait(timeout: 10)
        print("KernelMemoryPressureTests: limit \(limit >> 20) MiB; the suspended app was ended \(String(format: "%.1f", seconds)) s into the churn")
        #expect(ended, "no trigger event within 90 s of churn: \((try? String(contentsOfFile: file, encoding: .utf8)) ?? "")\n\(daemon.log.suffix(3000))")

        // status: the reason, and what the pressure file said when the trigger fired.
        let termination = try #require(daemon.lastTermination("cache"))
        #expect(termination["reason"] as? String == "memory-pressure", "\(termination)")
        let pressure = try #require(termination["pressure"] as? [String: Any], "\(termination)")
        #expect(pressure["file"] as? String == file)
        let some = try #require(pressure["some"] as? [String: Any], "\(pressure)")
        #expect((some["total"] as? Int ?? 0) > 0 && some["avg10"] is Double && some["avg60"] is Double, "\(pressure)")
        #expect(pressure["full"] is [String: Any], "a memory file has a full line: \(pressure)")
        let text = daemon.ctl("status", "cache").stdout
        #expect(text.contains("last termination: memory-pressure (\(file): some avg10="), "\(text)")
        // The daemon's part of status: the trigger, its file, watched, and how often it fired.
        #expect(text.contains("netlifed: memory-pressure-trigger some 100ms 2s on \(file): watching, fired "), "\(text)")
        let reply = try JSONSerialization.jsonObject(with: Data(daemon.ctl("--json", "status").stdout.utf8)) as? [String: Any]
        let trigger = try #require(reply?["memoryPressureTrigger"] as? [String: Any], "\(String(describing: reply))")
        #expect(trigger["file"] as? String == file && trigger["watching"] as? Bool == true && (trigger["events"] as? Int ?? 0) >= 1, "\(trigger)")

        // The active app is never ended; later events find nothing suspended.
        #expect(daemon.state("front") == "active")
        #expect(daemon.lastTermination("front") == nil)
        #expect(frontPeer.read(timeout: 0.1) == .timedOut, "its connection is untouched")

        // watch: the stopped event with the figures.
        #expect(waitUntil(timeout: 5) { watcher.output.contains(#""event":"stopped""#) }, "\(watcher.output)")
        let stopped = watcher.output.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }.first { $0["event"] as? String == "stopped" }
        #expect(stopped?["app"] as? String == "cache" && stopped?["reason"] as? String == "memory-pressure", "\(watcher.output)")
        #expect((stopped?["pressure"] as? [String: Any])?["file"] as? String == file, "\(watcher.output)")

        // The journal (here, the log): the event, what the file said, and the app ended.
        let log = daemon.log
        #expect(log.contains("memory pressure in \(file) (some avg10="), "\(log.suffix(3000))")
        #expect(log.contains("ending cache, the largest suspended app ("), "\(log.suffix(3000))")
        #expect(log.contains("terminated for memory pressure (held "), "\(log.suffix(3000))")
        #expect(!log.contains("ending front"))
    }

    @Test(.enabled(if: PressureMachine.unified != nil && PressureMachine.hasTheTwoSecondRule,
                   "needs root, a writable cgroup2 hierarchy with pressure stall information, and Linux 6.5 or later (the 2 s rule)"))
    func aWindowTheKernelRefusesWithoutCapSysResourceStopsTheStartAndSaysWhy() throws {
        let cgroup = try PressureCgroup()
        defer { cgroup.remove() }
        let file = cgroup.unified + "/memory.pressure"
        let daemon = try TestDaemon(config: echoConfig(port: 0, daemonLines: "memory-pressure-trigger = some 150ms 1s"), waitForReady: false, launcher: cgroup.joining("exec \"$@\"") + ["sh"] + withoutSysResource, expectedEnd: .anything)
        defer { daemon.stop() }
        #expect(daemon.waitForExit(timeout: 15))
        #expect(daemon.exitStatus == 78, "a config the kernel refuses: \(daemon.log)")
        let reason = "memory-pressure-trigger = some 150ms 1s: the kernel refused the trigger: writing 'some 150000 1000000' to \(file) "
            + "(netlifed's cgroup) failed with EINVAL (Invalid argument). netlifed runs without CAP_SYS_RESOURCE (netlifed's unit grants none), "
            + "and the kernel then takes only a window that is a multiple of 2s (2s, 4s, 6s, 8s or 10s): write memory-pressure-trigger = some 150ms 2s"
        #expect(daemon.log.contains("<3>netlifed: \(daemon.configPath): \(reason)\n"), "\(daemon.log)")
        #expect(!daemon.notify.messages.contains { $0.contains("READY=1") })

        // --check-config, from the same cgroup and without the capability, says the same.
        let checked = run(cgroup.joining("exec \"$@\"") + ["sh"] + withoutSysResource + [product("netlifed"), "--check-config", daemon.configPath])
        #expect(checked.status == 1 && checked.stderr.contains("\(daemon.configPath): \(reason)"), "\(checked)")
    }

    @Test(.enabled(if: PressureMachine.unified != nil, "needs root and a writable cgroup2 hierarchy with pressure stall information"))
    func aFileSystemdNamesThatIsNotThereStopsTheStartAndSaysWhy() throws {
        // systemd's variables count only when they were set for netlifed itself (SYSTEMD_EXEC_PID is its pid).
        let daemon = try TestDaemon(config: "[daemon]\nmemory-pressure-trigger = some 150ms 2s\n",
                                    environment: ["MEMORY_PRESSURE_WATCH": "/sys/fs/cgroup/nonexistent.service/memory.pressure",
                                                  "MEMORY_PRESSURE_WRITE": "c29tZSAyMDAwMDAgMjAwMDAwMAA="],
                                    waitForReady: false, launcher: ["/bin/sh", "-c", "SYSTEMD_EXEC_PID=$$ exec \"$@\"", "sh"], expectedEnd: .anything)
        defer { daemon.stop() }
        #expect(daemon.waitForExit(timeout: 15))
        #expect(daemon.exitStatus == 78, "\(daemon.log)")
        #expect(daemon.log.contains("memory-pressure-trigger = some 150ms 2s: cannot open /sys/fs/cgroup/nonexistent.service/memory.pressure "
                                    + "(from MEMORY_PRESSURE_WATCH) for reading and writing: ENOENT (No such file or directory): this kernel keeps "
                                    + "no pressure stall information there"), "\(daemon.log)")
        #expect(daemon.log.contains("MEMORY_PRESSURE_WRITE (MemoryPressureThresholdSec=) is not written: memory-pressure-trigger is"), "\(daemon.log)")

        // Inherited from another process (no SYSTEMD_EXEC_PID of netlifed's), the same variables are passed over.
        let inherited = try TestDaemon(config: "[daemon]\nmemory-pressure-trigger = some 150ms 2s\n",
                                       environment: ["MEMORY_PRESSURE_WATCH": "/sys/fs/cgroup/nonexistent.service/memory.pressure"])
        defer { inherited.stop() }
        #expect(inherited.log.contains("was set for another process (SYSTEMD_EXEC_PID is not netlifed's pid): not used"), "\(inherited.log)")
        #expect(inherited.log.contains("memory pressure: trigger some 150ms 2s ('some 150000 2000000') armed on "), "\(inherited.log)")
    }

    @Test(.enabled(if: PressureMachine.unified != nil && PressureMachine.hasTheTwoSecondRule,
                   "needs root, a writable cgroup2 hierarchy with pressure stall information, and Linux 6.5 or later (the 2 s rule)"))
    func aReloadArmsAChangedTriggerRefusesOneTheKernelRefusesAndRemovesOneNoLongerWritten() throws {
        let cgroup = try PressureCgroup()
        defer { cgroup.remove() }
        let file = cgroup.unified + "/memory.pressure"
        let daemon = try TestDaemon(config: echoConfig(port: 0, daemonLines: "memory-pressure-trigger = some 150ms 2s"),
                                    launcher: cgroup.joining("exec \"$@\"") + ["sh"] + withoutSysResource)
        defer { daemon.stop() }
        func armed(_ text: String) -> Int { daemon.log.components(separatedBy: "memory pressure: trigger \(text)").count - 1 }
        #expect(armed("some 150ms 2s ('some 150000 2000000') armed on \(file) (netlifed's cgroup)") == 1, "\(daemon.log)")

        // Unchanged: kept as it is. Changed: armed in its place.
        #expect(daemon.ctl("reload").status == 0)
        #expect(armed("some 150ms 2s ('some 150000 2000000') armed on") == 1, "an unchanged trigger is not armed again")
        daemon.directory.write("netlifed.conf", echoConfig(port: 0, daemonLines: "memory-pressure-trigger = full 300ms 4s"))
        #expect(daemon.ctl("reload").status == 0)
        #expect(armed("full 300ms 4s ('full 300000 4000000') armed on \(file)") == 1, "\(daemon.log)")

        // Refused by the kernel: the reload changes nothing and says why.
        daemon.directory.write("netlifed.conf", echoConfig(port: 0, daemonLines: "memory-pressure-trigger = some 150ms 1s"))
        let refused = daemon.ctl("reload")
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("memory-pressure-trigger = some 150ms 1s: the kernel refused the trigger: writing 'some 150000 1000000' to \(file)"), "\(refused)")
        #expect(refused.stderr.contains("only a window that is a multiple of 2s") && refused.stderr.contains("nothing was changed"), "\(refused)")
        #expect(!daemon.log.contains("removed from"), "the old trigger stays")

        #expect(daemon.ctl("status").stdout.contains("netlifed: memory-pressure-trigger full 300ms 4s on \(file): watching, fired 0 times"))

        // No longer written: removed.
        daemon.directory.write("netlifed.conf", echoConfig(port: 0))
        #expect(daemon.ctl("reload").status == 0)
        #expect(!daemon.ctl("status").stdout.contains("memory-pressure-trigger"), "status no longer names it")
        #expect(daemon.log.contains("memory pressure: trigger full 300ms 4s removed from \(file)"), "\(daemon.log)")
        #expect(daemon.state("echo") == "active")
    }
}
