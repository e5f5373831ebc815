#if canImport(Testing)   // built only for the tests: see Package.swift
// A real HTTP server of another make for the download tests: Debian's nginx-light on a random 127.a.b.c
// (port 8080, so that parallel tests never collide and no port is guessed by binding and closing), serving a
// file with its own strong ETag and byte ranges, slowed down with `limit_rate`; its access log shows what
// each request asked and got.

import Foundation

/// An nginx owned by one test; `stop()` ends it and removes its directory.
public final class NginxServer {
    /// The server's directory: `www`, the config and the logs.
    public let directory = TemporaryDirectory()
    /// The loopback address nginx listens on, such as "127.83.4.201".
    public private(set) var host = ""
    /// The port nginx listens on.
    public let port = 8080
    private var process: BackgroundProcess?

    /// Starts nginx serving `directory/www` with each connection limited to `rate` bytes per second.
    public init(rate: Int, timeout: TimeInterval = 10) throws {
        try FileManager.default.createDirectory(atPath: directory.file("www"), withIntermediateDirectories: true)
        // A busy address (another test's nginx or dovecot) makes nginx exit at once: try another.
        for _ in 0..<5 {
            host = "127.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 2...254))"
            directory.write("nginx.conf", """
                user root;
                worker_processes 1;
                pid \(directory.file("nginx.pid"));
                error_log \(directory.file("error.log"));
                events { worker_connections 64; }
                http {
                    log_format resume '$request_method $uri range="$http_range" if-range="$http_if_range" $status $body_bytes_sent';
                    access_log \(directory.file("access.log")) resume;
                    client_body_temp_path \(directory.file("tmp"));
                    proxy_temp_path \(directory.file("tmp"));
                    server {
                        listen \(host):\(port);
                        root \(directory.file("www"));
                        limit_rate \(rate);
                    }
                }
                """)
            let process = try BackgroundProcess(["/usr/sbin/nginx", "-c", directory.file("nginx.conf"), "-p", directory.path, "-g", "daemon off;"])
            if waitUntil(timeout: timeout, { !process.isRunning || directory.read("nginx.pid").count > 0 && probe() }) && process.isRunning {
                self.process = process
                return
            }
            _ = process.wait(timeout: 1)
        }
        throw TestFailure("nginx did not start: \(directory.read("error.log"))")
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

    /// One line per request: `GET /file.bin range="bytes=N-" if-range="ETAG" 206 BYTES`.
    public var accessLog: [String] { directory.read("access.log").split(separator: "\n").map(String.init) }

    /// Ends nginx and removes its directory.
    public func stop() {
        if let pid = Int32(directory.read("nginx.pid").trimmingCharacters(in: .whitespacesAndNewlines)) { kill(pid, SIGQUIT) }
        _ = process?.wait(timeout: 5)
        process = nil
        directory.remove()
    }

    deinit { stop() }
}
#endif
