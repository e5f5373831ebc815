#if canImport(Testing)   // built only for the tests: see Package.swift
// A real HTTP proxy for the proxy tests: Debian's tinyproxy in the foreground (`-d -c CONFIG`), on a random
// 127.a.b.c, port 8888 (tinyproxy refuses port 0; a random address per test keeps parallel tests apart and
// no port is guessed by binding and closing). It tunnels CONNECT (https through a proxy) to any port and
// forwards plain http requests, and logs at level Connect: each client request line (`Request (file
// descriptor 5): CONNECT 127.1.2.3:8080 HTTP/1.1`), which a test reads to prove the transfer went through it.

import Foundation

/// A tinyproxy owned by one test; `stop()` ends it and removes its directory.
public final class ConnectProxy {
    /// The proxy's directory: its config and log.
    public let directory = TemporaryDirectory()
    /// The loopback address it listens on.
    public private(set) var host = ""
    /// The port it listens on.
    public let port = 8888
    private var process: BackgroundProcess?

    /// Starts tinyproxy, accepting clients from 127.0.0.0/8.
    public init(timeout: TimeInterval = 10) throws {
        // A busy address makes tinyproxy exit at once: try others.
        for _ in 0..<5 {
            host = "127.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 2...254))"
            directory.write("tinyproxy.log", "")
            // No ConnectPort line: CONNECT to any port (nginx's 8080 among them). No User: it runs as the test.
            directory.write("tinyproxy.conf", """
                Port \(port)
                Listen \(host)
                Timeout 30
                MaxClients 32
                Allow 127.0.0.0/8
                LogLevel Connect
                LogFile "\(directory.file("tinyproxy.log"))"
                PidFile "\(directory.file("tinyproxy.pid"))"

                """)
            let process = try BackgroundProcess(["/usr/bin/tinyproxy", "-d", "-c", directory.file("tinyproxy.conf")])
            if waitUntil(timeout: timeout, { !process.isRunning || probe() }) && process.isRunning {
                self.process = process
                return
            }
            _ = process.wait(timeout: 1)
        }
        throw TestFailure("tinyproxy did not start: \(directory.read("tinyproxy.log"))")
    }

    private func probe() -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// The proxy's URL, for `https_proxy` and `http_proxy`: "http://127.1.2.3:8888".
    public var url: String { "http://\(host):\(port)" }

    /// What tinyproxy has logged so far.
    public var log: String { directory.read("tinyproxy.log") }

    /// The request line of every request a client made through the proxy, in order:
    /// "CONNECT 127.1.2.3:8080 HTTP/1.1", "GET http://127.1.2.3:8080/file.bin HTTP/1.1".
    public var requests: [String] {
        log.split(separator: "\n").compactMap { line in
            line.range(of: "]: Request (file descriptor ").flatMap { found in
                line[found.upperBound...].firstIndex(of: ":").map { String(line[line.index($0, offsetBy: 2)...]) }
            }
        }
    }

    /// The targets of the CONNECT requests, in order: "127.1.2.3:8080".
    public var connectTargets: [String] {
        requests.compactMap { $0.hasPrefix("CONNECT ") ? $0.split(separator: " ").dropFirst().first.map(String.init) : nil }
    }

    /// Ends tinyproxy and removes its directory.
    public func stop() {
        process?.signal(SIGTERM)
        _ = process?.wait(timeout: 5)
        process = nil
        directory.remove()
    }

    deinit { stop() }
}
#endif
