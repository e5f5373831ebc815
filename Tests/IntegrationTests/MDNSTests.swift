// mDNS: a listener with `mdns = _type._tcp` is announced through avahi-daemon while open,
// withdrawn on background, announced again on foreground, renamed on a name collision and announced again
// when avahi-daemon restarts; without avahi-daemon netlifed warns once and serves on. Each test runs its own
// dbus-daemon (a private system bus) and avahi-daemon inside a network namespace of its own, where `lo`
// has the MULTICAST flag the host's lacks; netlifed and avahi-browse reach avahi-daemon over that bus.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct MDNSTests {
    static let type = "_netlife-test._tcp"

    static func config(name: String? = nil) -> String {
        """
        [daemon]

        [app web]
        auto-suspend = never

        [listener web.main]
        address = 127.0.0.1:0
        service = echo
        mdns = \(type)
        \(name.map { "mdns-name = \($0)" } ?? "")
        mdns-txt = path=/ "note=hello world"
        """
    }

    @Test func announcedWhileActiveWithdrawnOnBackgroundAnnouncedAgainOnForeground() throws {
        let lab = try MDNSLab(withAvahi: true)
        defer { lab.stop() }
        let browser = try lab.browse(Self.type)
        let started = Date()
        let daemon = try TestDaemon(config: Self.config(), environment: lab.environment)
        defer { daemon.stop() }
        let port = daemon.port(of: "web")

        #expect(browser.waitForLine(prefix: "=;lo;IPv4;web;\(Self.type);", containing: ";\(port);", timeout: 5),
                "not announced; browse:\n\(browser.output)\nlog:\n\(daemon.log)")
        let registered = Date().timeIntervalSince(started)
        let resolved = browser.lines.first { $0.hasPrefix("=;lo;IPv4;web;") } ?? ""
        #expect(resolved.contains("\"path=/\"") && resolved.contains("\"note=hello world\""), "TXT: \(resolved)")
        // 127.0.0.1 is IPv4 on lo: not announced over IPv6, where a peer could not connect to it.
        #expect(!browser.lines.contains { $0.contains(";IPv6;web;") }, "browse:\n\(browser.output)")

        #expect(daemon.ctl("background", "web").status == 0)
        let backgrounded = Date()
        #expect(browser.waitForLine(prefix: "-;lo;IPv4;web;\(Self.type);", timeout: 3), "not withdrawn; browse:\n\(browser.output)")
        let withdrawn = Date().timeIntervalSince(backgrounded)
        // netlifed withdraws before `background` returns; a browser then drops the service 1 s after the
        // goodbye packet (RFC 6762 section 10.1, which avahi follows), so 1.0 s is what a peer sees.
        #expect(withdrawn < 1.5, "withdrawn \(withdrawn) s after `background` returned")

        #expect(daemon.ctl("foreground", "web").status == 0)
        let foregrounded = Date()
        #expect(browser.waitForLine(prefix: "+;lo;IPv4;web;\(Self.type);", occurrence: 2, timeout: 5),
                "not announced again; browse:\n\(browser.output)")
        let reannounced = Date().timeIntervalSince(foregrounded)
        print(String(format: "mDNS: seen by avahi-browse %.0f ms after start, withdrawn %.0f ms after `background`, announced again %.0f ms after `foreground`",
                     registered * 1000, withdrawn * 1000, reannounced * 1000))
    }

    @Test func aTakenNameIsRenamed() throws {
        let lab = try MDNSLab(withAvahi: true)
        defer { lab.stop() }
        let other = try lab.spawn(["/usr/bin/avahi-publish", "-s", "web", Self.type, "1"])
        #expect(waitUntil(timeout: 5) { other.output.contains("Established") }, "avahi-publish: \(other.output)")
        let browser = try lab.browse(Self.type)
        let daemon = try TestDaemon(config: Self.config(), environment: lab.environment)
        defer { daemon.stop() }
        // avahi-browse -p escapes ' ' as \032 and '#' as \035: "web #2".
        #expect(browser.waitForLine(prefix: "+;lo;IPv4;web\\032\\0352;\(Self.type);", timeout: 5),
                "not renamed; browse:\n\(browser.output)\nlog:\n\(daemon.log)")
        #expect(daemon.log.contains("announcing it as 'web #2'"))
    }

    @Test func announcedAgainWhenAvahiRestarts() throws {
        let lab = try MDNSLab(withAvahi: true)
        defer { lab.stop() }
        let daemon = try TestDaemon(config: Self.config(name: "restart"), environment: lab.environment)
        defer { daemon.stop() }
        #expect(waitUntil(timeout: 5) { daemon.log.contains("mDNS: announced web.main") }, "log:\n\(daemon.log)")

        try lab.restartAvahi()
        // avahi-browse ends with the avahi-daemon it followed: a new one watches the new avahi-daemon.
        let browser = try lab.browse(Self.type)
        #expect(browser.waitForLine(prefix: "+;lo;IPv4;restart;\(Self.type);", timeout: 8),
                "not announced after the restart; browse:\n\(browser.output)\nlog:\n\(daemon.log)")
        #expect(daemon.log.contains("mDNS: avahi-daemon is running"))
    }

    @Test func withoutAvahiOneWarningAndServesOn() throws {
        let lab = try MDNSLab(withAvahi: false)
        defer { lab.stop() }
        let daemon = try TestDaemon(config: Self.config(), environment: lab.environment)
        defer { daemon.stop() }
        let port = daemon.port(of: "web")
        #expect(waitUntil(timeout: 3) { daemon.log.contains("avahi-daemon is not running") }, "log:\n\(daemon.log)")
        // A whole cycle reopens the listener: still one warning.
        #expect(daemon.ctl("background", "web").status == 0)
        #expect(daemon.ctl("foreground", "web").status == 0)
        let peer = try #require(Peer.connect(port: port))
        defer { peer.close() }
        #expect(peer.roundTrip("still here\n") == "still here\n")
        #expect(daemon.state("web") == "active")
        let warnings = daemon.log.split(separator: "\n").filter { $0.hasPrefix("<4>") && $0.contains("mDNS") }
        #expect(warnings.filter { $0.contains("avahi-daemon") }.count == 1, "log:\n\(daemon.log)")
        // The listener is on 127.0.0.1: announced on lo only, which is said once, not at every reopen.
        #expect(warnings.filter { $0.contains("a loopback address: announced on lo only") }.count == 1, "log:\n\(daemon.log)")
    }
}

/// A private system bus and, optionally, an avahi-daemon in a network namespace of its own; `stop()` ends
/// every process it started (by PID) and removes the namespace.
private final class MDNSLab {
    private static let counter = Counter()
    let directory = TemporaryDirectory()
    let namespace: String
    private var bus: Spawned?
    private var avahi: Spawned?
    private var spawned: [Spawned] = []
    private var namespaceMade = false
    var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory.file("system_bus_socket"))"] }

    init(withAvahi: Bool) throws {
        namespace = "nl-mdns-\(getpid())-\(Self.counter.next())"
        do {
            try startBus()
            if withAvahi { try startNamespace(); try startAvahi() }
        } catch {
            stop()
            throw error
        }
    }

    private func startBus() throws {
        directory.write("bus.conf", """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig><type>system</type><listen>unix:path=\(directory.file("system_bus_socket"))</listen>
            <auth>EXTERNAL</auth><policy context="default"><allow user="*"/><allow own="*"/>
            <allow send_destination="*"/><allow receive_sender="*"/></policy></busconfig>
            """)
        // In the foreground: a forking daemon keeps the descriptor Foundation's Process watches for the exit.
        let daemon = try spawn(["/usr/bin/dbus-daemon", "--config-file=\(directory.file("bus.conf"))", "--nofork"])
        bus = daemon
        guard waitUntil(timeout: 10, { FileManager.default.fileExists(atPath: directory.file("system_bus_socket")) || !daemon.isRunning }),
              daemon.isRunning else {
            throw LabError("dbus-daemon did not start: \(daemon.output)")
        }
    }

    private func startNamespace() throws {
        let made = run(["/usr/sbin/ip", "netns", "add", namespace], timeout: 10)
        guard made.status == 0 else { throw LabError("ip netns add: \(made)") }
        namespaceMade = true
        for arguments in [["link", "set", "lo", "up"], ["link", "set", "lo", "multicast", "on"]] {
            let result = run(["/usr/sbin/ip", "-n", namespace] + arguments, timeout: 10)
            guard result.status == 0 else { throw LabError("ip \(arguments): \(result)") }
        }
        let base = (try? String(contentsOfFile: "/etc/avahi/avahi-daemon.conf", encoding: .utf8)) ?? "[server]\n"
        let config = base.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            if line.range(of: "^#?allow-interfaces=", options: .regularExpression) != nil { return "allow-interfaces=lo" }
            if line == "use-ipv6=yes" { return "use-ipv6=no" }
            if line == "enable-wide-area=yes" { return "enable-wide-area=no" }
            return String(line)
        }.joined(separator: "\n")
        directory.write("avahi.conf", config)
    }

    private func startAvahi() throws {
        // A tmpfs on /run, private to this command, keeps avahi-daemon's pid file and socket apart. The shell
        // stays as its parent: avahi-daemon closes every inherited descriptor, one of which Foundation's
        // Process watches to learn that its child ended. SIGTERM to the shell is passed on.
        let command = "mount -t tmpfs tmpfs /run && { /usr/sbin/avahi-daemon -f \(directory.file("avahi.conf")) --no-drop-root --no-chroot --no-rlimits --no-proc-title & pid=$!; trap 'kill $pid; wait $pid' TERM; wait $pid; }"
        let daemon = try spawn(["/usr/sbin/ip", "netns", "exec", namespace, "/bin/sh", "-c", command])
        avahi = daemon
        guard waitUntil(timeout: 10, { daemon.output.contains("Server startup complete") || !daemon.isRunning }),
              daemon.isRunning else {
            throw LabError("avahi-daemon did not start: \(daemon.output)")
        }
    }

    /// Stops avahi-daemon (SIGTERM, waiting for its exit) and starts a new one in the same namespace.
    func restartAvahi() throws {
        avahi?.stop()
        try startAvahi()
    }

    /// Starts a program with the lab's bus; it is stopped by `stop()`.
    func spawn(_ arguments: [String]) throws -> Spawned {
        let process = try Spawned(arguments, environment: environment, directory: directory)
        spawned.append(process)
        return process
    }

    /// A continuous, line-buffered `avahi-browse -pr TYPE`.
    func browse(_ type: String) throws -> Spawned {
        try spawn(["/usr/bin/stdbuf", "-oL", "/usr/bin/avahi-browse", "-pr", type])
    }

    func stop() {
        // The bus last (it was spawned first); dbus-daemon as a system bus ignores SIGTERM.
        for process in spawned.reversed() { process.stop(signal: process === bus ? SIGKILL : SIGTERM) }
        spawned = []
        bus = nil
        if namespaceMade {
            _ = run(["/usr/sbin/ip", "netns", "del", namespace], timeout: 10)
            namespaceMade = false
        }
        directory.remove()
    }
}

private struct LabError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func next() -> Int { lock.withLock { value += 1; return value } }
}

/// A program started with an environment, its stdout and stderr in one file; stopped by PID.
private final class Spawned {
    private let process = Process()
    private let path: String

    init(_ arguments: [String], environment extra: [String: String], directory: TemporaryDirectory) throws {
        path = directory.file("out-\(UUID().uuidString)")
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let output = FileHandle(forWritingAtPath: path)
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }
    var output: String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    var lines: [String] { output.split(separator: "\n").map(String.init) }

    /// Waits until the `occurrence`-th line starting with `prefix` (and containing `containing`) is printed.
    func waitForLine(prefix: String, containing: String = "", occurrence: Int = 1, timeout: TimeInterval) -> Bool {
        waitUntil(timeout: timeout) {
            lines.filter { $0.hasPrefix(prefix) && (containing.isEmpty || $0.contains(containing)) }.count >= occurrence
        }
    }

    func stop(signal: Int32 = SIGTERM) {
        if process.isRunning {
            kill(process.processIdentifier, signal)
            if !waitUntil(timeout: 5, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
    }
}
