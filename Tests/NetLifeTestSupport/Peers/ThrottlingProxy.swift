#if canImport(Testing)   // built only for the tests: see Package.swift
// A TCP relay in Python (standard library only) between a client and a server on 127.0.0.1, which forwards
// the client's bytes at a limited rate, so that a fast local transfer can be cut mid-way, and counts what it
// forwarded upstream on each connection (`up-N.txt`, one file per connection, in order).

import Foundation

/// A rate-limited TCP relay to 127.0.0.1:`upstreamPort`, owned by one test; `stop()` ends it.
public final class ThrottlingProxy {
    /// The proxy's directory: its script and the per-connection counts.
    public let directory = TemporaryDirectory()
    private let process: BackgroundProcess
    /// The port clients connect to (127.0.0.1).
    public let port: UInt16

    /// Starts the relay, forwarding client bytes at most `bytesPerSecond`.
    public init(upstreamPort: UInt16, bytesPerSecond: Int) throws {
        directory.write("proxy.py", """
            import socket, sys, threading, time, os
            target, rate, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
            counter = [0]
            def count(name, sent):
                # Replaced in one rename: a reader never sees a file truncated and not yet rewritten.
                path = os.path.join(root, name)
                with open(path + ".new", "w") as f: f.write(str(sent))
                os.replace(path + ".new", path)
            def pump(src, dst, limit, name):
                sent = 0
                try:
                    while True:
                        data = src.recv(16384 if limit else 65536)
                        if not data: break
                        dst.sendall(data)
                        sent += len(data)
                        if name: count(name, sent)
                        if limit: time.sleep(len(data) / limit)
                except OSError: pass
                for s in (dst, src):
                    try: s.shutdown(socket.SHUT_RDWR)
                    except OSError: pass
            listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(16)
            print(listener.getsockname()[1], flush=True)
            while True:
                client, _ = listener.accept()
                upstream = socket.create_connection(("127.0.0.1", target))
                counter[0] += 1
                name = "up-%d.txt" % counter[0]
                count(name, 0)
                threading.Thread(target=pump, args=(client, upstream, rate, name), daemon=True).start()
                threading.Thread(target=pump, args=(upstream, client, 0, None), daemon=True).start()
            """)
        let process = try BackgroundProcess(["/usr/bin/python3", directory.file("proxy.py"), String(upstreamPort), String(bytesPerSecond), directory.path])
        let port = process.waitForPort()
        self.process = process
        self.port = port
    }

    /// The client bytes forwarded upstream on each connection so far, in the order they were accepted.
    public var forwarded: [Int] {
        (1...).lazy.map { "up-\($0).txt" }.prefix { FileManager.default.fileExists(atPath: self.directory.file($0)) }
            .map { Int(self.directory.read($0)) ?? 0 }
    }

    /// Kills the relay and removes its directory.
    public func stop() {
        _ = process.wait(timeout: 0)
        directory.remove()
    }
}
#endif
