// What `--check-config` knows of the systemd unit that runs the config it checks: under the unit's
// ProtectSystem=strict every path is read-only but the unit's own directories and its ReadWritePaths=, so a
// path the config must write (an access log's directory, an upload-root) that is writable from the
// operator's shell can still keep the daemon from starting. When systemd runs a unit whose ExecStart= names
// the file being checked (`systemctl show`), each such path is checked against the unit's writable places,
// and one outside them is an error with its remedy: "ok" then means the unit starts.
//
// The rules are a pure value (`UnitSandbox`), the `systemctl show` call a thin shell.

@preconcurrency import Glibc
import NetLife

/// The writable places of a unit with ProtectSystem=strict.
struct UnitSandbox: Equatable {
    /// The unit, for messages.
    var unit: String
    /// Its writable places: ReadWritePaths= and the directories systemd makes for it.
    var writable: [String]

    /// The sandbox of `properties` (`systemctl show` output: KEY=VALUE lines) when its ExecStart= runs the
    /// config at `configPath` and it makes the file system read-only (ProtectSystem=strict); nil otherwise.
    static func of(unit: String, properties: String, configPath: String) -> UnitSandbox? {
        var values: [String: String] = [:]
        for line in properties.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        guard values["ProtectSystem"] == "strict", let exec = values["ExecStart"],
              exec.contains("--config \(configPath) ") || exec.contains("--config \(configPath);") || exec.hasSuffix("--config \(configPath)")
        else { return nil }
        var writable = (values["ReadWritePaths"] ?? "").split(separator: " ").map { String($0.hasPrefix("-") ? $0.dropFirst() : $0) }
        for (key, root) in [("StateDirectory", "/var/lib/"), ("RuntimeDirectory", "/run/"), ("LogsDirectory", "/var/log/"),
                            ("CacheDirectory", "/var/cache/"), ("ConfigurationDirectory", "/etc/")] {
            for name in (values[key] ?? "").split(separator: " ") { writable.append(root + name) }
        }
        // PrivateTmp= gives the unit a /tmp and /var/tmp of its own, writable (but not the ones the shell sees).
        if values["PrivateTmp"] == "yes" { writable += ["/tmp", "/var/tmp"] }
        return UnitSandbox(unit: unit, writable: writable.filter { $0.hasPrefix("/") })
    }

    /// Why `path`, which netlifed must write, is read-only under the unit (nil when it is writable there).
    func refusal(_ path: String) -> String? {
        let inside = writable.contains { place in path == place || path.hasPrefix(place.hasSuffix("/") ? place : place + "/") }
        return inside ? nil : "\(path) is read-only under \(unit) (ProtectSystem=strict): a drop-in (systemctl edit \(unit)) with ReadWritePaths=\(path) makes it writable"
    }

    /// The places a config makes netlifed write, each with the file and line that names it.
    static func writtenPaths(_ configuration: DaemonConfiguration) -> [(key: String, path: String)] {
        var paths: [(key: String, path: String)] = []
        for app in configuration.apps {
            for listener in app.listeners {
                if let log = listener.serviceOptions["access-log"], log.hasPrefix("/"), let slash = log.lastIndex(of: "/") {
                    paths.append(("access-log", slash == log.startIndex ? "/" : String(log[..<slash])))
                }
                if let root = listener.serviceOptions["upload-root"], root.hasPrefix("/") { paths.append(("upload-root", root)) }
            }
        }
        return paths
    }

    /// The sandbox of the unit that runs `configPath`, asked of systemd (`systemctl show`); nil when systemd
    /// does not run here, or no such unit does. The corresponding C function is `posix_spawn`.
    static func current(configPath: String, unit: String = "netlifed.service") -> UnitSandbox? {
        guard access("/run/systemd/system", F_OK) == 0, access("/usr/bin/systemctl", X_OK) == 0 else { return nil }
        let output = runSystemctl(["show", unit, "-p", "ExecStart", "-p", "ProtectSystem", "-p", "ReadWritePaths",
                                   "-p", "StateDirectory", "-p", "RuntimeDirectory", "-p", "LogsDirectory",
                                   "-p", "CacheDirectory", "-p", "ConfigurationDirectory", "-p", "PrivateTmp"])
        return output.flatMap { of(unit: unit, properties: $0, configPath: configPath) }
    }

    /// systemctl's standard output, or nil when it fails.
    private static func runSystemctl(_ arguments: [String]) -> String? {
        // Close-on-exec both ends: the child gets its writing end as its stdout, and no other child the
        // daemon starts inherits either.
        guard let pipe = try? FileCalls.pipe() else { return nil }
        let reading = FileDescriptor(owning: pipe.reading, name: "systemctl's output")
        let writing = FileDescriptor(owning: pipe.writing, name: "systemctl's output")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipe.writing, 1)
        posix_spawn_file_actions_addclose(&actions, pipe.reading)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = (["/usr/bin/systemctl"] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/systemctl", &actions, nil, argv, environ)
        // The child has its own writing end: with ours closed, its exit ends the reads.
        _ = try? writing.close()
        guard spawned == 0 else { return nil }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            guard let count = try? chunk.withUnsafeMutableBytes({ try reading.read(into: $0) }), count > 0 else { break }
            bytes += chunk[0..<count]
        }
        var status: CInt = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status == 0 ? String(decoding: bytes, as: UTF8.self) : nil
    }
}
