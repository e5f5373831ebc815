#if canImport(Testing)   // built only for the tests: see Package.swift
// An HTTP server that stops mid-response, for the download tests: a lifecycle transition interrupts a
// download it serves, and the resume must fetch only the missing bytes.

import Foundation

/// A small HTTP server in Python (standard library only) that serves one file with a strong ETag and byte
/// ranges, sends at most `stallAfter` bytes of the first response and then holds the connection (so that
/// a download can be interrupted mid-way), and counts the body bytes it sent in `sent.txt`.
public final class StallingHTTPServer {
    /// The server's directory: the file served, its ETag, the script and `sent.txt`.
    public let directory = TemporaryDirectory()
    private let process: BackgroundProcess
    /// The port it listens on (127.0.0.1).
    public let port: UInt16

    /// Serves `content` with `etag`, the first response cut after `stallAfter` bytes.
    public init(content: [UInt8], stallAfter: Int, etag: String = "\"v1\"") throws {
        _ = FileManager.default.createFile(atPath: directory.file("file.bin"), contents: Data(content))
        directory.write("etag.txt", etag)
        directory.write("server.py", """
            import http.server, os, sys, time
            root = sys.argv[1]; stall = int(sys.argv[2])
            state = {"first": True, "sent": 0}
            class H(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def log_message(self, *a): pass
                def do_GET(self):
                    data = open(os.path.join(root, "file.bin"), "rb").read()
                    etag = open(os.path.join(root, "etag.txt")).read().strip()
                    start, status = 0, 200
                    rng, cond = self.headers.get("Range"), self.headers.get("If-Range")
                    if rng and rng.startswith("bytes=") and rng.endswith("-") and (cond is None or cond == etag):
                        start, status = int(rng[6:-1]), 206
                    body = data[start:]
                    self.send_response(status)
                    self.send_header("ETag", etag)
                    self.send_header("Accept-Ranges", "bytes")
                    self.send_header("Content-Length", str(len(body)))
                    if status == 206:
                        self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
                    self.end_headers()
                    if state["first"]:
                        state["first"] = False
                        body = body[:stall]
                        self.wfile.write(body); self.wfile.flush()
                        state["sent"] += len(body)
                        open(os.path.join(root, "sent.txt"), "w").write(str(state["sent"]))
                        time.sleep(60)
                        return
                    self.wfile.write(body)
                    state["sent"] += len(body)
                    open(os.path.join(root, "sent.txt"), "w").write(str(state["sent"]))
            s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
            s.daemon_threads = True
            print(s.server_address[1], flush=True)
            s.serve_forever()
            """)
        let process = try BackgroundProcess(["/usr/bin/python3", directory.file("server.py"), directory.path, String(stallAfter)])
        let port = process.waitForPort()
        self.process = process
        self.port = port
    }

    /// The body bytes sent so far.
    public var sent: Int { Int(directory.read("sent.txt")) ?? 0 }

    /// Kills the server and removes its directory.
    public func stop() {
        _ = process.wait(timeout: 0)
        directory.remove()
    }
}
#endif
