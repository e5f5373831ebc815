#if canImport(Testing)   // built only for the tests: see Package.swift
// An unmodified lighttpd run as a process app: a document root with one file and a config that takes its
// listener from netlifed by socket activation.

import Foundation

/// Where Debian's lighttpd lives; the lighttpd test fails without it.
public let lighttpdPath = "/usr/sbin/lighttpd"
/// Whether lighttpd is installed.
public let lighttpdIsInstalled = FileManager.default.isExecutableFile(atPath: lighttpdPath)

/// A document root with one file and a lighttpd config that takes its listener by socket activation.
public final class LighttpdSite {
    /// The site's directory: the document root `www`, the config and the error log.
    public let directory = TemporaryDirectory()
    /// The file's path on the server and its body.
    public let path = "/index.txt"
    /// The file's body.
    public let body = "hello from lighttpd under netlifed\n"

    /// Writes the document root and the config.
    public init() {
        try? FileManager.default.createDirectory(atPath: directory.file("www"), withIntermediateDirectories: true)
        directory.write("www/index.txt", body)
        // A keep-alive idle limit well past the test's pauses, so that a kept connection stays open.
        directory.write("lighttpd.conf", """
            server.document-root = "\(directory.file("www"))"
            server.systemd-socket-activation = "enable"
            server.errorlog = "\(directory.file("error.log"))"
            server.max-keep-alive-idle = 60

            """)
    }

    /// An `[app NAME]` running lighttpd in the foreground, with one listener `main` on 127.0.0.1:0.
    public func app(_ name: String, appLines: String = "") -> String {
        """
        [app \(name)]
        exec = \(lighttpdPath) -D -f \(directory.file("lighttpd.conf"))
        \(appLines)

        [listener \(name).main]
        address = 127.0.0.1:0

        """
    }

    /// A keep-alive HTTP/1.1 request for the file.
    public var request: String { "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" }

    /// Removes the site's directory.
    public func remove() { directory.remove() }
}
#endif
