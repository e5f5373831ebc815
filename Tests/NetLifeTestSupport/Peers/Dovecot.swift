#if canImport(Testing)   // built only for the tests: see Package.swift
// A real IMAP server for the tests of netlife's IMAP IDLE client: Debian's dovecot-imapd, started by the test
// in the foreground with its own config, a throwaway passwd-file user and a maildir in a temporary directory,
// and stopped by PID with every process it forked.
//
// It is spawned with posix_spawn, not Foundation.Process: a child of Foundation.Process inherits the calling
// thread's signal mask, in which the test runner blocks SIGTERM and SIGCHLD, so dovecot would neither stop on
// SIGTERM nor notice its own children exit. Here it gets an empty mask, default dispositions, no inherited
// descriptor but stdin, stdout and stderr, and a process group of its own, which `stop()` empties.
//
// Address: a random 127.a.b.c (never 127.0.0.x) with the fixed port 1143, so that tests running in parallel
// never collide and no port is guessed by binding and closing; a start that fails with EADDRINUSE is retried
// on another address.
//
// What the client sent: dovecot's rawlog (`rawlog_dir`, a per-session pair of files `*.in` and `*.out` in the
// user's home). It covers the session after login only: LOGIN and anything else said to imap-login is not in
// it. The imap process writes each chunk to `*.in` unbuffered, as it reads it and before it acts on it, so
// a command is in the file by the time its reply reaches the client; a line the client sent without waiting
// for an answer (DONE, LOGOUT before a close) shows up as soon as the server has read it: poll for it
// with `waitUntil`.
//
// Permissions: dovecot runs as root here but its auth process runs as `dovecot` and the mail process as
// `nobody`; a mkdtemp directory (mode 0700) hides the users file from auth ("Temporary authentication
// failure"), so the directory is made traversable (0711) and mail and home belong to nobody.

import Foundation
import Testing

/// Why a Dovecot could not be started or driven.
public struct DovecotError: Error, CustomStringConvertible {
    /// The text a test failure shows.
    public var description: String
    /// An error that says `description`.
    public init(_ description: String) { self.description = description }
}

/// A dovecot IMAP server owned by one test. `stop()` (or deinit) ends it and removes its directory.
public final class Dovecot {
    /// The server binary (Debian's dovecot-core, pulled in by dovecot-imapd).
    public static let executable = "/usr/sbin/dovecot"
    /// Dovecot's admin tool, which delivers messages.
    public static let doveadm = "/usr/bin/doveadm"

    /// The server's directory: config, users, mail, logs.
    public let directory = TemporaryDirectory()
    /// The loopback address dovecot listens on, such as "127.83.4.201".
    public private(set) var host = ""
    /// The IMAP port (plain text, no TLS).
    public let port: UInt16 = 1143
    /// The one user, with a maildir INBOX.
    public let user = "netlife"
    /// The user's password.
    public let password: String
    /// A file holding the password on one line (with a newline), as netlifed's `password-file` reads it.
    public let passwordFile: String
    /// The config file's path.
    public let configPath: String
    /// The directory where the imap process writes each session's rawlog.
    public let rawlogDirectory: String
    /// The dovecot master process, a child of this process until `stop()` reaps it.
    private var master: SpawnedProgram?
    /// The master's pid (0 when none runs).
    public var pid: pid_t { master?.pid ?? 0 }
    private var deliveries = 0
    private var stopped = false

    /// Writes the config and starts dovecot, returning once it greets a client. Throws, with the reason,
    /// when dovecot is not installed or does not start within `timeout`.
    public init(timeout: TimeInterval = 15) throws {
        password = "pw-" + UUID().uuidString.prefix(8).lowercased()
        passwordFile = directory.file("password")
        configPath = directory.file("dovecot.conf")
        rawlogDirectory = directory.file("home/\(user)/rawlog")
        do {
            try start(timeout: timeout)
        } catch {
            stop()
            throw error
        }
    }

    // Safety net for a test that throws before its `defer { dovecot.stop() }`: never leave a server behind.
    deinit { stop() }

    /// The server's own log (dovecot's log_path, then what it printed before its log process ran).
    public var log: String { directory.read("dovecot.log") + directory.read("dovecot.stderr") }

    /// Whether the master process runs (it stays a zombie, so its PID cannot be reused, until `stop()`).
    public var isRunning: Bool { pid > 0 && !processIsGone(pid) }

    private func start(timeout: TimeInterval) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable),
              FileManager.default.isExecutableFile(atPath: Self.doveadm) else {
            throw DovecotError("\(Self.executable) is not installed: install dovecot-imapd (scripts/install-deps)")
        }
        try prepareDirectory()
        let deadline = Date().addingTimeInterval(timeout)
        for _ in 0..<5 {
            host = "127.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 2...254))"
            directory.write("dovecot.conf", config())
            directory.write("dovecot.log", "")
            directory.write("dovecot.stderr", "")
            // -F: in the foreground, so that this process is its parent and can stop it by PID.
            master = try SpawnedProgram([Self.executable, "-F", "-c", configPath], output: directory.file("dovecot.stderr"))
            // Connections are accepted at once, but the greeting waits until the auth process is ready.
            var lastError = "no attempt"
            let greeted = waitUntil(timeout: max(0, deadline.timeIntervalSinceNow)) {
                guard isRunning else { return true }
                do {
                    let peer = try connect(timeout: 1)
                    peer.close()
                    return true
                } catch {
                    lastError = "\(error)"
                    return false
                }
            }
            if isRunning && greeted { return }
            let log = self.log
            terminate()
            if log.contains("Address already in use") { continue }
            throw DovecotError(greeted ? "dovecot exited at start-up; log:\n\(log)"
                                       : "dovecot did not greet within \(timeout) s (\(lastError)); log:\n\(log)")
        }
        throw DovecotError("dovecot found no free loopback address in 5 tries; log:\n\(log)")
    }

    private func prepareDirectory() throws {
        let files = FileManager.default
        for name in ["run", "state", "mail", "home/\(user)/rawlog"] {
            try files.createDirectory(atPath: directory.file(name), withIntermediateDirectories: true)
        }
        directory.write("users", "\(user):{PLAIN}\(password)\n")
        directory.write("password", password + "\n")
        guard chmod(directory.path, 0o711) == 0, chmod(directory.file("users"), 0o644) == 0,
              let nobody = userID(named: "nobody"), let nogroup = groupID(named: "nogroup") else {
            throw DovecotError("cannot set up \(directory.path) for dovecot's users: \(String(cString: strerror(errno)))")
        }
        for name in ["mail", "home", "home/\(user)", "home/\(user)/rawlog"] {
            guard chown(directory.file(name), nobody, nogroup) == 0 else {
                throw DovecotError("chown nobody:nogroup \(directory.file(name)): \(String(cString: strerror(errno)))")
            }
        }
    }

    private func config() -> String {
        let root = directory.path
        return """
            base_dir = \(root)/run
            state_dir = \(root)/state
            log_path = \(root)/dovecot.log
            protocols = imap
            listen = \(host)
            ssl = no
            disable_plaintext_auth = no
            auth_mechanisms = plain login
            # A wrong password is answered at once, not after the default 2 s.
            auth_failure_delay = 0
            mail_location = maildir:\(root)/mail/%u
            first_valid_uid = 1
            passdb {
              driver = passwd-file
              args = scheme=PLAIN username_format=%u \(root)/users
            }
            userdb {
              driver = static
              args = uid=nobody gid=nogroup home=\(root)/home/%u
            }
            service imap-login {
              inet_listener imap {
                address = \(host)
                port = \(port)
              }
              inet_listener imaps {
                port = 0
              }
            }
            protocol imap {
              imap_idle_notify_interval = 5 secs
              rawlog_dir = %h/rawlog
            }

            """
    }

    /// Connects to the server and reads its greeting (`* OK ... ready.`); the returned peer is past it.
    public func connect(timeout: TimeInterval = 5) throws -> Peer {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DovecotError("socket: \(String(cString: strerror(errno)))") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let error = errno
            close(fd)
            throw DovecotError("connect to \(host):\(port): \(String(cString: strerror(error)))")
        }
        let peer = Peer(fd: fd)
        var greeting = ""
        let deadline = Date().addingTimeInterval(timeout)
        while !greeting.contains("\r\n") && Date() < deadline {
            guard case .bytes(let bytes) = peer.read(timeout: max(0.01, deadline.timeIntervalSinceNow)) else { break }
            greeting += String(decoding: bytes, as: UTF8.self)
        }
        guard greeting.hasPrefix("* OK") && greeting.contains("\r\n") else {
            peer.close()
            throw DovecotError("no greeting from \(host):\(port) (got \(greeting.debugDescription))")
        }
        return peer
    }

    /// Delivers a small message to the user's INBOX with `doveadm save`, as a mail server would; a client
    /// idling on INBOX sees `* N EXISTS` about half a second later.
    public func deliver(subject: String, body: String = "hello from the test") throws {
        deliveries += 1
        let name = "message-\(deliveries).eml"
        directory.write(name, "From: sender@example.invalid\r\nTo: \(user)@example.invalid\r\n"
                        + "Subject: \(subject)\r\nMessage-ID: <\(UUID().uuidString)@example.invalid>\r\n\r\n\(body)\r\n")
        // doveadm save reads the message from stdin only.
        let result = run(["/bin/sh", "-c", "exec \"$0\" -c \"$1\" save -u \"$2\" -m INBOX < \"$3\"",
                          Self.doveadm, configPath, user, directory.file(name)], timeout: 20)
        guard result.status == 0 else { throw DovecotError("doveadm save failed: \(result)\nlog:\n\(log)") }
    }

    /// Every complete line clients sent after login, in the order the server read them, across sessions,
    /// without the line ends. See the top of the file for when a line appears.
    public func clientLines() -> [String] {
        let lines = sessionLogs().enumerated().flatMap { session, lines in
            lines.enumerated().map { (time: $1.time, session: session, index: $0, text: $1.text) }
        }
        return lines.sorted { ($0.time, $0.session, $0.index) < ($1.time, $1.session, $1.index) }.map(\.text)
    }

    /// The lines of each session after login (one entry per logged-in connection), oldest session first.
    public func clientSessions() -> [[String]] { sessionLogs().map { $0.map(\.text) } }

    /// Each rawlog `*.in` file parsed into (read time in microseconds, line), sessions ordered by first line.
    private func sessionLogs() -> [[(time: Int64, text: String)]] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: rawlogDirectory)) ?? []).filter { $0.hasSuffix(".in") }
        let sessions = names.sorted().map { name -> [(time: Int64, text: String)] in
            let data = FileManager.default.contents(atPath: rawlogDirectory + "/" + name) ?? Data()
            // Each line starts with "SECONDS.MICROSECONDS " (when the server read it); a last line without its
            // line end is still arriving.
            var lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            lines.removeLast()
            return lines.map { line in
                var text = String(decoding: line, as: UTF8.self)
                if text.hasSuffix("\r") { text.removeLast() }
                guard let space = text.firstIndex(of: " ") else { return (0, text) }
                let stamp = text[..<space].split(separator: ".")
                let time = (Int64(stamp.first ?? "") ?? 0) * 1_000_000 + (Int64(stamp.dropFirst().first ?? "") ?? 0)
                return (time, String(text[text.index(after: space)...]))
            }
        }
        return sessions.sorted { ($0.first?.time ?? .max) < ($1.first?.time ?? .max) }
    }

    /// Stops dovecot (SIGTERM, which takes it about a second; SIGKILL after 5 s), makes sure every process it
    /// forked is gone, and removes its directory. Idempotent.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        terminate()
        directory.remove()
    }

    /// Ends the running dovecot, if any, and every process left in its process group. The master stops its
    /// children, then its log process, then sleeps a second before it exits: SIGKILL only after 5 s.
    private func terminate() {
        master?.end(grace: 5)
        master = nil
    }
}

#endif
