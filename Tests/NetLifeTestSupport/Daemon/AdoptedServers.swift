#if canImport(Testing)   // built only for the tests: see Package.swift
// Unmodified servers that bind their own listeners, run as process apps whose listener netlifed adopts
// (`adopt = yes`): Debian's nginx (a master and two workers, with or without `reuseport`), Python's
// http.server, memcached and redis-server (`supervised systemd`: its app waits for READY=1, then adopts). Each listens on a random 127.a.b.c with an explicit port, so parallel tests
// never collide and no port is guessed by binding and closing; each has a request and what its answer
// contains.

import Foundation

/// A server of another make, as a process app whose listener `main` is adopted.
public final class AdoptedServer {
    /// Which server.
    public enum Kind: String {
        case nginx, nginxReusePort = "nginx-reuseport", pythonHTTP = "python-http", memcached, redis
    }

    public let kind: Kind
    /// The server's directory: its config, document root and logs.
    public let directory = TemporaryDirectory()
    /// The loopback address it binds, such as "127.83.4.201".
    public let host: String
    /// The port it binds, explicitly.
    public let port: UInt16 = 8080
    /// A request it answers, and a text its answer contains.
    public let request: String
    public let answer: String

    /// nginx's second port (`secondPort`), when asked for.
    public let secondPort: UInt16 = 8081

    /// Writes what `kind` needs to serve on a fresh random loopback address; nginx also on `secondPort` when
    /// `twoPorts`.
    public init(_ kind: Kind, twoPorts: Bool = false) {
        self.kind = kind
        host = "127.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 2...254))"
        let body = "hello from \(kind.rawValue) under netlifed\n"
        try? FileManager.default.createDirectory(atPath: directory.file("www"), withIntermediateDirectories: true)
        try? FileManager.default.createDirectory(atPath: directory.file("tmp"), withIntermediateDirectories: true)
        directory.write("www/index.txt", body)
        switch kind {
        case .memcached:
            request = "version\r\n"
            answer = "VERSION "
        case .redis:
            request = "PING\r\n"
            answer = "+PONG"
            directory.write("redis.conf", redisConfiguration(host: host, port: port, directory: directory))
        case .nginx, .nginxReusePort, .pythonHTTP:
            request = "GET /index.txt HTTP/1.1\r\nHost: \(host)\r\n\r\n"
            answer = body
        }
        if kind == .nginx || kind == .nginxReusePort {
            // The workers run as root to read the test's private directory (as NginxServer's do).
            directory.write("nginx.conf", """
                user root;
                worker_processes 2;
                pid \(directory.file("nginx.pid"));
                error_log \(directory.file("error.log"));
                events { worker_connections 64; }
                http {
                    access_log off;
                    keepalive_timeout 60s;
                    client_body_temp_path \(directory.file("tmp"));
                    proxy_temp_path \(directory.file("tmp"));
                    fastcgi_temp_path \(directory.file("tmp"));
                    uwsgi_temp_path \(directory.file("tmp"));
                    scgi_temp_path \(directory.file("tmp"));
                    server {
                        listen \(host):\(port)\(kind == .nginxReusePort ? " reuseport" : "");
                        \(twoPorts ? "listen \(host):\(secondPort);" : "")
                        root \(directory.file("www"));
                    }
                }

                """)
        }
    }

    /// The program's command line.
    public var exec: String {
        switch kind {
        case .nginx, .nginxReusePort:
            "/usr/sbin/nginx -g 'daemon off; master_process on;' -c \(directory.file("nginx.conf")) -p \(directory.path)"
        case .pythonHTTP:
            "\(systemPython) -m http.server --bind \(host) --directory \(directory.file("www")) \(port)"
        case .memcached:
            // As root memcached wants a user to become; as another user -u is ignored.
            "/usr/bin/memcached -l \(host) -p \(port) -U 0 -u nobody"
        case .redis:
            "/usr/bin/redis-server \(directory.file("redis.conf"))"
        }
    }

    /// An `[app NAME]` running the server, with its listener `main` adopted (and `listenerLines`); redis
    /// launches once it says READY=1.
    public func app(_ name: String, appLines: String = "", address: String? = nil, listenerLines: String = "") -> String {
        """
        [app \(name)]
        exec = \(exec)
        \(kind == .redis ? "ready = notify\n" : "")\(appLines)

        [listener \(name).main]
        address = \(address ?? "\(host):\(port)")
        adopt = yes
        \(listenerLines)

        """
    }

    /// Removes its directory.
    public func remove() { directory.remove() }
}

/// A redis.conf for a redis-server on `host`:`port` that keeps nothing on disk (working in `directory`), logs
/// to its standard output and speaks systemd's notify protocol (`supervised systemd`).
public func redisConfiguration(host: String, port: UInt16, directory: TemporaryDirectory) -> String {
    """
    bind \(host)
    port \(port)
    supervised systemd
    daemonize no
    save ""
    appendonly no
    dir \(directory.path)
    logfile ""

    """
}
#endif
