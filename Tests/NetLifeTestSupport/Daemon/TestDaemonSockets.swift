#if canImport(Testing)   // built only for the tests: see Package.swift
// What tests read of a TestDaemon's data sockets: a socket as `status --json` shows it, a wait for its state,
// and the time from a control request until something a test watches happens.

import Foundation
import Testing

extension TestDaemon {
    /// A data socket of an app as `status --json` shows it.
    public func socket(_ app: String, _ name: String = "s") -> [String: Any]? {
        (status(app)["sockets"] as? [[String: Any]])?.first { $0["name"] as? String == name }
    }

    /// Waits until the socket's state is `state`.
    public func waitForSocket(_ app: String, _ name: String = "s", state: String, timeout: TimeInterval = 5) -> Bool {
        waitUntil(timeout: timeout) { socket(app, name)?["state"] as? String == state }
    }

    /// Sends one request on a fresh raw control connection and returns the time until `until` returns
    /// true (polled without pause), in milliseconds; the reply is read afterwards.
    public func timeAfterRequest(_ request: String, timeout: TimeInterval = 2, until: () -> Bool) -> Double? {
        guard let client = RawControlClient(path: controlPath) else { return nil }
        defer { client.close() }
        let start = Date()
        client.send(request)
        while Date().timeIntervalSince(start) < timeout {
            if until() { return Date().timeIntervalSince(start) * 1000 }
        }
        return nil
    }
}
#endif
