#if canImport(Testing)   // built only for the tests: see Package.swift
// Hooks under test: the hook config that runs `true` on every transition, a driver that makes a daemon run
// them by the thousand through a raw control client, and the hook processes of an app found in /proc.

import Foundation

/// `true` as the hook of every transition event, and no auto-suspend: each background/foreground cycle runs
/// four hooks.
public let trueHooksOnEveryEvent = """
    auto-suspend = never
    on-will-resign-active = /bin/true
    on-did-enter-background = /bin/true
    on-will-enter-foreground = /bin/true
    on-did-become-active = /bin/true
    """

/// Sends background/foreground pairs for `app`, in batches of pipelined requests, and returns how many
/// replies were not ok (or missing).
public func driveHookRuns(_ client: RawControlClient, app: String, cycles: Int) -> Int {
    var failures = 0
    var done = 0
    while done < cycles {
        let batch = min(25, cycles - done)
        let pair = "{\"cmd\":\"background\",\"app\":\"\(app)\"}\n{\"cmd\":\"foreground\",\"app\":\"\(app)\"}\n"
        client.send(String(repeating: pair, count: batch))
        for index in 0..<(2 * batch) {
            guard let line = client.line(timeout: 10) else { return failures + 2 * (cycles - done) - index }
            if !isOK(line) { failures += 1 }
        }
        done += batch
    }
    return failures
}

/// Processes whose environment says they are hooks of `app` (NETLIFE_APP=app) and of this daemon's socket.
public func hookProcesses(app: String, control: String) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int32.init).filter { pid in
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return false }
        let variables = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return variables.contains("NETLIFE_APP=\(app)") && variables.contains("NETLIFE_CONTROL=\(control)")
            && !processIsGone(pid)
    }
}
#endif
