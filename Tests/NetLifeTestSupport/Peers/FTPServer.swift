#if canImport(Testing)   // built only for the tests: see Package.swift
// A real FTP server for the FTP download tests: Debian's pyftpdlib (python3-pyftpdlib) run by /usr/bin/python3
// on 127.0.0.1 port 0 (it prints the port the kernel chose: no port is guessed), anonymous and read-only on
// a temporary directory, its data connections throttled (pyftpdlib's ThrottledDTPHandler) so that the
// lifecycle can interrupt a transfer. It logs each command it receives (`CMD REST 4096`) and the bytes each
// data connection sent when it closes (`SENT 123456`), for the test to read. With `PeerCertificates` it speaks
// explicit TLS (RFC 4217, pyftpdlib's TLS_FTPHandler with python3-openssl) and requires it: `AUTH TLS` before
// USER, `PROT P` before a data connection; anything else is answered 550.

import Foundation
import Testing

/// A pyftpdlib server owned by one test; `stop()` ends it and removes its directory.
public final class FTPServer {
    /// The server's directory: its root, script and log.
    public let directory = TemporaryDirectory()
    private let process: BackgroundProcess
    /// The control port it listens on.
    public let port: UInt16

    /// The server's program: arguments ROOT LOG RATE REST [CERTIFICATE KEY], REST `refuse` to answer 502 to
    /// REST; with a certificate and key, TLS is required on the control and the data connections.
    private static let script = """
        import logging, sys
        from pyftpdlib.authorizers import DummyAuthorizer
        from pyftpdlib.handlers import FTPHandler, ThrottledDTPHandler
        from pyftpdlib.servers import FTPServer

        root, log_path, rate, rest = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
        tls = len(sys.argv) > 6
        log = open(log_path, "a", buffering=1)
        logging.basicConfig(level=logging.ERROR)
        DataBase, ControlBase = ThrottledDTPHandler, FTPHandler
        if tls:
            from pyftpdlib.handlers import TLS_DTPHandler, TLS_FTPHandler
            class DataBase(TLS_DTPHandler, ThrottledDTPHandler):
                pass
            ControlBase = TLS_FTPHandler

        class Data(DataBase):
            read_limit = rate
            write_limit = rate
            logged = False

            def readable(self):
                # A TLS client starts its handshake as soon as the data connection is up, before RETR; pyftpdlib
                # 1.5.7 takes a readable data connection that is not receiving for one the client closed, and
                # closes it. While the handshake is pending, reading is what it needs.
                if getattr(self, "_ssl_accepting", False):
                    return True
                return super().readable()

            def close(self):
                # Once: closing a TLS connection first sends close_notify, then closes (close runs twice).
                if not self.logged and not self._closed and not self.receive:
                    self.logged = True
                    log.write("SENT %d\\n" % self.tot_bytes_sent)
                super().close()

        class Control(ControlBase):
            dtp_handler = Data

            def pre_process_command(self, line, cmd, arg):
                log.write("CMD %s\\n" % line)
                super().pre_process_command(line, cmd, arg)

            def ftp_REST(self, line):
                if rest == "refuse":
                    self.respond("502 REST not implemented.")
                else:
                    super().ftp_REST(line)

        if tls:
            Control.certfile, Control.keyfile = sys.argv[5], sys.argv[6]
            Control.tls_control_required = Control.tls_data_required = True

        authorizer = DummyAuthorizer()
        authorizer.add_anonymous(root)
        Control.authorizer = authorizer
        server = FTPServer(("127.0.0.1", 0), Control)
        print(server.address[1], flush=True)
        server.serve_forever()
        """

    /// Starts the server on `directory/root`, sending at most `rate` bytes per second on each data connection;
    /// requiring explicit TLS with the server certificate of `certificates` if given.
    public init(rate: Int, refusesREST: Bool = false, certificates: PeerCertificates? = nil) throws {
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: true)
        directory.write("server.py", Self.script)
        directory.write("server.log", "")
        let process = try BackgroundProcess(["/usr/bin/python3", directory.file("server.py"), directory.file("root"),
                                             directory.file("server.log"), String(rate), refusesREST ? "refuse" : "accept"]
                                            + (certificates.map { [$0.certificatePath, $0.keyPath] } ?? []))
        self.process = process
        let port = process.waitForPort()
        self.port = port
        if port == 0 {
            let result = process.wait(timeout: 0).result
            directory.remove()
            throw TestFailure("pyftpdlib did not start: \(result)")
        }
    }

    /// The URL of a file in the server's root.
    public func url(_ name: String) -> String { "ftp://127.0.0.1:\(port)/\(name)" }

    /// Puts `content` in the server's root as `name`, modified at `modified` (MDTM's answer) when given.
    public func put(_ name: String, _ content: [UInt8], modified: Date? = nil) throws {
        let path = directory.file("root/" + name)
        try Data(content).write(to: URL(fileURLWithPath: path))
        if let modified { try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: path) }
    }

    /// The path of a file in the server's root.
    public func path(_ name: String) -> String { directory.file("root/" + name) }

    private var logLines: [String] { directory.read("server.log").split(separator: "\n").map(String.init) }

    /// The commands received, in order (`REST 4096`).
    public var commands: [String] { logLines.filter { $0.hasPrefix("CMD ") }.map { String($0.dropFirst(4)) } }

    /// The bytes each closed data connection sent, in order.
    public var sent: [Int] { logLines.filter { $0.hasPrefix("SENT ") }.compactMap { Int($0.dropFirst(5)) } }

    /// Ends the server and removes its directory.
    public func stop() {
        _ = process.wait(timeout: 0)
        directory.remove()
    }
}
#endif
