#if canImport(Testing)   // built only for the tests: see Package.swift
// Servers that misbehave in the ways the downloader must survive, written in Python (standard library only)
// on raw sockets so that each misbehaviour is exact: an HTTP server that accepts and never answers, sends a
// head and part of the body and falls silent, trickles a byte at a time, sends an empty body, or answers a resume with 416 and a HEAD
// whose length contradicts what it announced; and an FTP server that never greets, says `150` and falls
// silent, sends the data but never `226`, or serves an empty file. Each listens on 127.0.0.1 port 0, prints
// the port it got, logs each request (`GET bytes=300000-`, `CMD RETR file.bin`) to `requests.log`, and is
// killed by `stop()`.

import Foundation
import Testing

/// One misbehaving server process owned by a test.
public final class MisbehavingServer {
    /// What the HTTP server does.
    public enum HTTPMode: String {
        /// Accepts the connection and never reads or answers.
        case silentAfterAccept = "silent-after-accept"
        /// Answers 200 with the whole length and a strong ETag, sends `cut` bytes, then holds the connection.
        case silentAfterHead = "silent-after-head"
        /// Answers 200 with the whole length, then sends one byte every 200 ms: never idle, always slow.
        case trickle
        /// Answers 200 with `Content-Length: 0` and a strong ETag.
        case emptyBody = "empty-body"
        /// The first GET as `silentAfterHead`; any GET with Range gets 416 `bytes */CUT`; a HEAD gets 200 with the
        /// same ETag and `Content-Length: CUT` (contradicting the first answer); a GET without Range afterwards
        /// gets the whole file.
        case lyingAfter416 = "lying-after-416"
        /// Answers 200 with the whole file and its `Repr-Digest: sha-256=:...:` (RFC 9530).
        case digest
        /// As `digest`, with the digest of other bytes.
        case wrongDigest = "wrong-digest"
        /// Answers `101 Switching Protocols` and two bytes, then holds the connection.
        case switchingProtocols = "switching-protocols"
    }

    /// What the FTP server does.
    public enum FTPMode: String {
        /// Accepts the control connection and never greets.
        case silentAfterAccept = "silent-after-accept"
        /// Answers RETR with `150` and then neither opens the data nor replies.
        case silentAfter150 = "silent-after-150"
        /// Sends the file on the data connection and closes it, but never sends `226`.
        case no226 = "no-226"
        /// Serves the file (empty in the empty-file test) and says `226`.
        case normal
        /// As `normal`, but answers SIZE with a number of 26 digits.
        case hugeSize = "huge-size"
    }

    /// The server's directory: the file served, the script and the request log.
    public let directory = TemporaryDirectory()
    private let process: BackgroundProcess
    /// The port it listens on (127.0.0.1).
    public let port: UInt16

    /// An HTTP server for `content` in `mode`; `cut` is where `silentAfterHead` and `lyingAfter416` stop.
    public init(http mode: HTTPMode, content: [UInt8] = [], cut: Int = 0) throws {
        (process, port) = try Self.start(Self.httpScript, mode: mode.rawValue, content: content, cut: cut, in: directory)
    }

    /// An FTP server holding `content` as `file.bin`, in `mode`.
    public init(ftp mode: FTPMode, content: [UInt8] = []) throws {
        (process, port) = try Self.start(Self.ftpScript, mode: mode.rawValue, content: content, cut: 0, in: directory)
    }

    private static func start(_ script: String, mode: String, content: [UInt8], cut: Int,
                              in directory: TemporaryDirectory) throws -> (BackgroundProcess, UInt16) {
        _ = FileManager.default.createFile(atPath: directory.file("file.bin"), contents: Data(content))
        directory.write("server.py", script)
        directory.write("requests.log", "")
        let process = try BackgroundProcess(["/usr/bin/python3", directory.file("server.py"), mode, directory.path, String(cut)])
        let port = process.waitForPort()
        if port == 0 {
            let result = process.wait(timeout: 0).result
            directory.remove()
            throw TestFailure("the \(mode) server did not start: \(result)")
        }
        return (process, port)
    }

    /// The requests (HTTP: `METHOD RANGE-or--`) or commands (FTP: `CMD ...`) received, in order.
    public var requests: [String] { directory.read("requests.log").split(separator: "\n").map(String.init) }

    /// Kills the server (its silent connections with it) and removes its directory.
    public func stop() {
        _ = process.wait(timeout: 0)
        directory.remove()
    }

    private static let common = """
        import base64, hashlib, os, socket, sys, threading, time
        mode, root, cut = sys.argv[1], sys.argv[2], int(sys.argv[3])
        data = open(os.path.join(root, "file.bin"), "rb").read()
        log = open(os.path.join(root, "requests.log"), "a", buffering=1)
        lock = threading.Lock()
        def hold(conn):
            # Silent, but the connection stays open until the test kills the server.
            time.sleep(600)
        def serve(handler):
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            print(listener.getsockname()[1], flush=True)
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=handler, args=(conn,), daemon=True).start()

        """

    private static let httpScript = common + """
        state = {"gets": 0}
        def read_head(conn):
            buf = b""
            while b"\\r\\n\\r\\n" not in buf:
                chunk = conn.recv(4096)
                if not chunk:
                    return None
                buf += chunk
            lines = buf.split(b"\\r\\n\\r\\n")[0].decode("latin-1").split("\\r\\n")
            fields = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
            return lines[0].split(" ")[0], fields
        def answer(conn, status, fields, body=b""):
            head = "HTTP/1.1 %s\\r\\n" % status + "".join("%s: %s\\r\\n" % kv for kv in fields) + "\\r\\n"
            conn.sendall(head.encode() + body)
        def handle(conn):
            try:
                if mode == "silent-after-accept":
                    return hold(conn)
                request = read_head(conn)
                if request is None:
                    return
                method, fields = request
                rng = fields.get("range", "-")
                with lock:
                    log.write("%s %s\\n" % (method, rng))
                    if method == "GET" and rng == "-":
                        state["gets"] += 1
                    first = state["gets"] == 1
                base = [("ETag", '"v1"'), ("Accept-Ranges", "bytes"), ("Connection", "close")]
                if mode == "switching-protocols":
                    conn.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: x\\r\\nConnection: Upgrade\\r\\n\\r\\nab")
                    return hold(conn)
                if mode == "trickle":
                    answer(conn, "200 OK", base + [("Content-Length", str(len(data)))])
                    for byte in data:
                        time.sleep(0.2)
                        conn.sendall(bytes([byte]))
                    return
                if mode == "empty-body":
                    return answer(conn, "200 OK", base + [("Content-Length", "0")])
                if mode in ("digest", "wrong-digest"):
                    hashed = data if mode == "digest" else data + b"x"
                    announced = "sha-256=:%s:" % base64.b64encode(hashlib.sha256(hashed).digest()).decode()
                    return answer(conn, "200 OK", base + [("Repr-Digest", announced), ("Content-Length", str(len(data)))], data)
                if mode == "silent-after-head" or (method == "GET" and rng == "-" and first):
                    answer(conn, "200 OK", base + [("Content-Length", str(len(data)))], data[:cut])
                    return hold(conn)
                if rng != "-":
                    return answer(conn, "416 Range Not Satisfiable", base + [("Content-Range", "bytes */%d" % cut), ("Content-Length", "0")])
                if method == "HEAD":
                    return answer(conn, "200 OK", base + [("Content-Length", str(cut))])
                answer(conn, "200 OK", base + [("Content-Length", str(len(data)))], data)
            except OSError:
                pass
            finally:
                conn.close()
        serve(handle)
        """

    private static let ftpScript = common + """
        def handle(conn):
            try:
                if mode == "silent-after-accept":
                    return hold(conn)
                reader = conn.makefile("rb")
                conn.sendall(b"220 ready\\r\\n")
                passive = None
                while True:
                    line = reader.readline()
                    if not line:
                        return
                    line = line.decode("latin-1").strip()
                    log.write("CMD %s\\n" % line)
                    verb = line.split(" ")[0].upper()
                    if verb == "USER":
                        conn.sendall(b"230 logged in\\r\\n")
                    elif verb == "TYPE":
                        conn.sendall(b"200 binary\\r\\n")
                    elif verb == "SIZE" and mode == "huge-size":
                        conn.sendall(b"213 99999999999999999999999999\\r\\n")
                    elif verb == "SIZE":
                        conn.sendall(b"213 %d\\r\\n" % len(data))
                    elif verb == "MDTM":
                        conn.sendall(b"213 20231114221320\\r\\n")
                    elif verb == "EPSV":
                        passive = socket.socket()
                        passive.bind(("127.0.0.1", 0))
                        passive.listen(1)
                        conn.sendall(b"229 Entering Extended Passive Mode (|||%d|)\\r\\n" % passive.getsockname()[1])
                    elif verb == "RETR":
                        conn.sendall(b"150 opening data connection\\r\\n")
                        if mode == "silent-after-150":
                            return hold(conn)
                        data_conn, _ = passive.accept()
                        data_conn.sendall(data)
                        data_conn.close()
                        if mode == "no-226":
                            return hold(conn)
                        conn.sendall(b"226 transfer complete\\r\\n")
                    elif verb == "QUIT":
                        conn.sendall(b"221 bye\\r\\n")
                        return
                    else:
                        conn.sendall(b"502 not implemented\\r\\n")
            except OSError:
                pass
            finally:
                conn.close()
        serve(handle)
        """
}
#endif
