#if canImport(Testing)   // built only for the tests: see Package.swift
// Config texts for a TestDaemon: an echo app (with or without the [daemon] section), an app with a data socket
// speaking `line` to a PeerServer, an app serving files over HTTP, and an app running the repository's
// Python reference client of the lifecycle protocol.

import Foundation

/// A config with one app `app` and one echo listener `main` on `port`, plus extra lines for the app and
/// the listener.
public func echoConfig(app: String = "echo", port: UInt16, appLines: String = "", listenerLines: String = "", daemonLines: String = "") -> String {
    """
    [daemon]
    \(daemonLines)

    [app \(app)]
    \(appLines)

    [listener \(app).main]
    address = 127.0.0.1:\(port)
    service = echo
    \(listenerLines)
    """
}

/// An `[app NAME]` section with one echo listener on `127.0.0.1:0`.
public func echoApp(_ name: String, appLines: String = "", listenerLines: String = "") -> String {
    """
    [app \(name)]
    \(appLines)

    [listener \(name).main]
    address = 127.0.0.1:0
    service = echo
    \(listenerLines)

    """
}

/// An `[app NAME]` (never auto-suspended, so that tests suspend it themselves) with one `[socket NAME.s]`
/// speaking `line` to `server`.
public func lineSocketApp(_ name: String, _ server: PeerServer, socket: String = "s", appLines: String = "",
                   socketLines: String = "") -> String {
    """
    [app \(name)]
    auto-suspend = never
    \(appLines)

    [socket \(name).\(socket)]
    connect = \(server.address)
    protocol = line
    \(socketLines)

    """
}

/// An app `files` whose listener `main` serves `root` over HTTP.
/// The transfer tests' app: its background time runs out 0.5 s after it goes to the background, so a
/// download it runs pauses.
public let fetcherConfig = """
    [daemon]
    [app fetcher]
    auto-suspend = never
    task-time = 1s
    expiration-lead = 500ms
    """

/// The size of the file at `path`; 0 when there is none.
public func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
}

public func httpApp(root: String, listenerLines: String = "") -> String {
    """
    [daemon]
    [app files]
    auto-suspend = never

    [listener files.main]
    address = 127.0.0.1:0
    service = http
    root = \(root)
    \(listenerLines)

    """
}

/// The repository's Python reference client of the lifecycle protocol, run as netlife's demo echo server.
public let demoScript = repositoryDirectory + "/Examples/netlife_events.py"

/// The Debian python, named explicitly (not whatever `python3` is first in PATH).
public let systemPython = "/usr/bin/python3"

/// An `[app NAME]` running the demo with `environment` (NETLIFE_DEMO_* knobs; values without spaces) and one
/// listener `main` on 127.0.0.1:0.
public func demoApp(_ name: String, environment: [String: String] = [:], appLines: String = "") -> String {
    let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    return """
        [app \(name)]
        exec = \(systemPython) \(demoScript)
        \(variables.isEmpty ? "" : "environment = \(variables)")
        \(appLines)

        [listener \(name).main]
        address = 127.0.0.1:0

        """
}
#endif
