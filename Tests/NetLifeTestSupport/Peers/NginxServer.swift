#if canImport(Testing)   // built only for the tests: see Package.swift
// A real HTTP server of another make for the download tests: Debian's nginx-light on two random 127.a.b.c
// addresses (port 8080 on each, so that parallel tests never collide and no port is guessed by binding and
// closing), serving a file with its own strong ETag and byte ranges, slowed down with `limit_rate`; with a
// `PeerCertificates`, over TLS with HTTP/2 (`listen ... ssl http2`, nginx 1.22's syntax). Both addresses
// serve the same files; the second is "another host" for redirects: `/chain/NAME` answers 301 to
// `/hop/NAME`, which answers 302 to NAME on the second address; `/moved/NAME` 302 to NAME on the same one;
// `/away/NAME` 302 straight to the second address; `/loop/...` redirects to itself forever. Its access log
// shows what each request asked and got, on which address, over which protocol, and with which
// Authorization.

import Foundation

/// An nginx owned by one test; `stop()` ends it and removes its directory.
public final class NginxServer {
    /// The server's directory: `www`, the config, the certificate and the logs.
    public let directory = TemporaryDirectory()
    /// The loopback address nginx listens on, such as "127.83.4.201".
    public private(set) var host = ""
    /// A second loopback address of the same server, the other host of the redirects.
    public private(set) var secondHost = ""
    /// The port nginx listens on (on both addresses).
    public let port = 8080
    /// Whether it serves https (HTTP/2 or HTTP/1.1 by ALPN) rather than http.
    public let tls: Bool
    private var process: BackgroundProcess?

    /// Starts nginx serving `directory/www` with each connection limited to `rate` bytes per second; over
    /// TLS with a server certificate from `certificates` (its CA signs one for the two addresses) if given.
    public init(rate: Int, certificates: PeerCertificates? = nil, timeout: TimeInterval = 10) throws {
        tls = certificates != nil
        try FileManager.default.createDirectory(atPath: directory.file("www"), withIntermediateDirectories: true)
        // A busy address (another test's nginx or dovecot) makes nginx exit at once: try others.
        for _ in 0..<5 {
            host = Self.randomLoopbackAddress()
            secondHost = Self.randomLoopbackAddress()
            guard host != secondHost else { continue }
            var listen = "listen \(host):\(port);\n        listen \(secondHost):\(port);"
            if let certificates {
                try certificates.issue(certificate: directory.file("server.pem"), key: directory.file("server.key"),
                                       ipAddresses: [host, secondHost])
                listen = """
                    listen \(host):\(port) ssl http2;
                            listen \(secondHost):\(port) ssl http2;
                            ssl_certificate \(directory.file("server.pem"));
                            ssl_certificate_key \(directory.file("server.key"));
                    """
            }
            directory.write("nginx.conf", """
                user root;
                worker_processes 1;
                pid \(directory.file("nginx.pid"));
                error_log \(directory.file("error.log"));
                events { worker_connections 64; }
                http {
                    log_format resume '$request_method $uri range="$http_range" if-range="$http_if_range" addr=$server_addr proto=$server_protocol auth="$http_authorization" $status $body_bytes_sent';
                    access_log \(directory.file("access.log")) resume;
                    client_body_temp_path \(directory.file("tmp"));
                    proxy_temp_path \(directory.file("tmp"));
                    server {
                        \(listen)
                        root \(directory.file("www"));
                        limit_rate \(rate);
                        location /chain/ { rewrite ^/chain/(.*)$ /hop/$1 permanent; }
                        location /hop/ { rewrite ^/hop/(.*)$ $scheme://\(secondHost):$server_port/$1 redirect; }
                        location /moved/ { rewrite ^/moved/(.*)$ /$1 redirect; }
                        location /away/ { rewrite ^/away/(.*)$ $scheme://\(secondHost):$server_port/$1 redirect; }
                        location /loop/ { rewrite ^ /loop/again redirect; }
                    }
                }
                """)
            let process = try BackgroundProcess(["/usr/sbin/nginx", "-c", directory.file("nginx.conf"), "-p", directory.path, "-g", "daemon off;"])
            if waitUntil(timeout: timeout, { !process.isRunning || directory.read("nginx.pid").count > 0 && probe(host) && probe(secondHost) })
                && process.isRunning {
                self.process = process
                return
            }
            _ = process.wait(timeout: 1)
        }
        throw TestFailure("nginx did not start: \(directory.read("error.log"))")
    }

    private static func randomLoopbackAddress() -> String {
        "127.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 2...254))"
    }

    private func probe(_ host: String) -> Bool {
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

    /// The URL of `path` (such as "file.bin" or "chain/file.bin") on `host` (the first address unless
    /// given), with `credentials` ("user:password") in it if given.
    public func url(_ path: String, host: String? = nil, credentials: String? = nil) -> String {
        "\(tls ? "https" : "http")://\(credentials.map { $0 + "@" } ?? "")\(host ?? self.host):\(port)/\(path)"
    }

    /// Puts `content` in the server's root as `name`.
    public func put(_ name: String, _ content: [UInt8]) {
        directory.write("www/" + name, bytes: content)
    }

    /// The ETag nginx gives the file `name` of its root as it is now: "MTIME-SIZE" in hex, quoted.
    public func etag(_ name: String) -> String {
        let attributes = (try? FileManager.default.attributesOfItem(atPath: directory.file("www/" + name))) ?? [:]
        let modified = Int((attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0)
        let size = attributes[.size] as? Int ?? 0
        return "\"" + String(modified, radix: 16) + "-" + String(size, radix: 16) + "\""
    }

    /// One line per request: `GET /file.bin range="bytes=N-" if-range="ETAG" addr=127.1.2.3 proto=HTTP/2.0
    /// auth="-" 206 BYTES` (nginx writes a quote inside a value as \x22, an absent header as -).
    public var accessLog: [String] { directory.read("access.log").split(separator: "\n").map(String.init) }

    /// The access log, parsed.
    public var requests: [NginxRequest] { accessLog.compactMap(NginxRequest.init(line:)) }

    /// Ends nginx and removes its directory.
    public func stop() {
        if let pid = Int32(directory.read("nginx.pid").trimmingCharacters(in: .whitespacesAndNewlines)) { kill(pid, SIGQUIT) }
        _ = process?.wait(timeout: 5)
        process = nil
        directory.remove()
    }

    deinit { stop() }
}

/// One line of `NginxServer`'s access log.
public struct NginxRequest: CustomStringConvertible {
    /// The method, such as "GET".
    public var method: String
    /// The path asked for, such as "/chain/file.bin".
    public var path: String
    /// The Range header, nil when absent.
    public var range: String?
    /// The If-Range header (quotes restored), nil when absent.
    public var ifRange: String?
    /// The address the request came in on: which of the server's two hosts.
    public var address: String
    /// "HTTP/1.1" or "HTTP/2.0".
    public var httpVersion: String
    /// The Authorization header, nil when absent.
    public var authorization: String?
    /// The status nginx answered.
    public var status: Int
    /// The body bytes nginx sent.
    public var bytes: Int
    /// The log line.
    public var description: String

    /// Parses a line in the format of `NginxServer.accessLog`; nil for anything else.
    public init?(line: String) {
        // Tokens are separated by spaces, except inside quotes (nginx escapes quotes inside values).
        var tokens: [String] = []
        var current = ""
        var quoted = false
        for character in line {
            if character == "\"" { quoted.toggle(); continue }
            if character == " " && !quoted {
                tokens.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        tokens.append(current)
        var fields: [String: String] = [:]
        for token in tokens.dropFirst(2).dropLast(2) {
            guard let equals = token.firstIndex(of: "=") else { return nil }
            fields[String(token[..<equals])] = String(token[token.index(after: equals)...])
        }
        func header(_ key: String) -> String? {
            fields[key].flatMap { $0 == "-" ? nil : $0.replacingOccurrences(of: "\\x22", with: "\"") }
        }
        guard tokens.count == 9, let status = Int(tokens[7]), let bytes = Int(tokens[8]),
              let address = fields["addr"], let httpVersion = fields["proto"] else { return nil }
        method = tokens[0]
        path = tokens[1]
        range = header("range")
        ifRange = header("if-range")
        self.address = address
        self.httpVersion = httpVersion
        authorization = header("auth")
        self.status = status
        self.bytes = bytes
        description = line
    }

    /// The first byte of a `bytes=N-` range, nil when there is none.
    public var rangeStart: Int? {
        guard let range, range.hasPrefix("bytes=") else { return nil }
        return range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false).first.flatMap { Int($0) }
    }
}
#endif
