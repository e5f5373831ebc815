// A server's announced digest (Repr-Digest, RFC 9530) checked by the real netlifed before the file goes into
// place: computed as the bytes arrive (no pass over the file at the end), and a wrong one fails the download
// with the file left out of place.

import Foundation
import NetLifeTestSupport
import Testing

@Suite(.timeLimit(.minutes(1))) struct DigestDownloadTests {
    @Test func anAnnouncedDigestIsCheckedAsTheBytesArrive() throws {
        let content = patternBytes(3_000_000, seed: 41)
        let server = try MisbehavingServer(http: .digest, content: content)
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
        defer { daemon.stop() }
        let output = out.file("f.bin")
        let done = daemon.ctl("download", "fetcher", "http://127.0.0.1:\(server.port)/f.bin", "--output", output)
        #expect(done.status == 0, "\(done)")
        #expect(FileManager.default.contents(atPath: output) == Data(content), "byte-exact")
        #expect(daemon.log.contains("sha-256 digest computed as the bytes arrived"), "\(daemon.log)")
        #expect(!daemon.log.contains("read back in slices"))
    }

    @Test func aWrongDigestFailsAndLeavesNothingInPlace() throws {
        let server = try MisbehavingServer(http: .wrongDigest, content: patternBytes(100_000, seed: 42))
        defer { server.stop() }
        let out = TemporaryDirectory()
        defer { out.remove() }
        let daemon = try TestDaemon(config: "[daemon]\n[app fetcher]\n")
        defer { daemon.stop() }
        let output = out.file("f.bin")
        let failed = daemon.ctl("download", "fetcher", "http://127.0.0.1:\(server.port)/f.bin", "--output", output)
        #expect(failed.status == 5, "\(failed)")
        #expect(failed.stdout.contains("failed (the file's sha-256 digest does not match the server's)"), "\(failed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(daemon.isRunning)
    }
}
