// Fair use of the control socket: a client sending partial requests cannot lock the others out. Against the
// real netlifed.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct ControlFairUseTests {
    @Test func partialRequestsCannotLockOutOtherClients() throws {
        let daemon = try TestDaemon(config: echoApp("a"))
        defer { daemon.stop() }
        let connected = Date()
        var holders: [RawControlClient] = []
        defer { holders.forEach { $0.close() } }
        for _ in 0..<32 {
            let holder = try #require(RawControlClient(path: daemon.controlPath))
            holder.send("{\"cmd\":\"status\"")
            holders.append(holder)
        }
        usleep(100_000)
        let start = Date()
        let status = daemon.ctl("status", timeout: 10)
        let took = Date().timeIntervalSince(start)
        print("netlifectl status with 32 partial requests holding the socket: exit \(status.status) after \(String(format: "%.0f", took * 1000)) ms")
        #expect(status.status == 0, "\(status)")
        #expect(took < 1, "status took \(took) s")
        var closedAfter: [TimeInterval] = []
        var codes: [String: Int] = [:]
        for holder in holders {
            let ended = holder.waitForEnd(timeout: max(0.1, 8 - Date().timeIntervalSince(connected)))
            closedAfter.append(ended ? Date().timeIntervalSince(connected) : .infinity)
            let code = holder.lastLine().flatMap { errorCode(of: $0) } ?? "none"
            codes[code, default: 0] += 1
        }
        print("partial holders closed after at most \(String(format: "%.2f", closedAfter.max() ?? 0)) s; replies \(codes)")
        #expect(closedAfter.allSatisfy { $0 < 7 }, "every partial holder is closed within about 5 s: \(closedAfter)")
        #expect(Set(codes.keys).isSubset(of: ["timeout", "too-many-connections"]), "\(codes)")
        #expect(codes["too-many-connections", default: 0] >= 1, "the newcomer evicted a holder")
        #expect(daemon.isRunning)
    }
}

/// A byte count shared between threads.
final class ByteCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func add(_ bytes: Int) { lock.withLock { count += bytes } }
}
