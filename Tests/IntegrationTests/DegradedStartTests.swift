// A listener that cannot bind at start-up (its port is held by a socket of this test) leaves the daemon
// ready but degraded: READY=1 comes, STATUS= and `status` say degraded with the listener's error, the other
// apps serve; once the port is free again the retried open succeeds and the degradation is gone.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1))) struct DegradedStartTests {
    @Test func aListenerWhosePortIsTakenAtStartMakesTheDaemonDegradedButReady() throws {
        var held = PeerServer()
        let port = try #require(held?.port)
        defer { held?.close() }
        let config = echoConfig(app: "taken", port: port) + """

            [app other]
            [listener other.main]
            address = 127.0.0.1:0
            service = echo
            """
        let daemon = try TestDaemon(config: config)
        defer { daemon.stop() }
        let ready = daemon.notify.messages.first { $0.contains("READY=1") } ?? ""
        #expect(ready.contains("STATUS=degraded (listener taken.main on 127.0.0.1:\(port): "), "\(ready)")
        #expect(ready.contains("Address already in use"), "\(ready)")

        let result = daemon.ctl("--json", "status")
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(reply["degraded"] as? Bool == true, "\(reply)")
        let reasons = reply["degradedReasons"] as? [String] ?? []
        #expect(reasons.count == 1 && reasons.first?.contains("taken.main") == true && reasons.first?.contains("Address already in use") == true,
                "\(reasons)")
        #expect(daemon.state("other") == "active")
        #expect((daemon.status("other")["listeners"] as? [[String: Any]])?.first?["open"] as? Bool == true)
        let peer = try #require(Peer.connect(port: daemon.port(of: "other")))
        #expect(peer.roundTrip("served\n") == "served\n", "the other app serves")
        peer.close()
        let degraded = daemon.ctl("status")
        #expect(degraded.stdout.hasPrefix("netlifed: degraded: listener taken.main on 127.0.0.1:\(port): "))
        #expect(degraded.status == 5, "a health check can use the exit status: \(degraded)")
        #expect(result.status == 5, "with --json too")

        // The port comes free: the open is retried with back-off and the daemon is whole again.
        held?.close()
        held = nil
        #expect(waitUntil(timeout: 5) {
            (try? JSONSerialization.jsonObject(with: Data(daemon.ctl("--json", "status").stdout.utf8)) as? [String: Any])?["degraded"] as? Bool == false
        })
        #expect(waitUntil(timeout: 2) {
            daemon.notify.messages.last { $0.hasPrefix("STATUS=") }.map { !$0.contains("degraded") } == true
        }, "\(daemon.notify.messages.suffix(3))")
        let whole = daemon.ctl("status")
        #expect(!whole.stdout.contains("degraded") && whole.status == 0, "\(whole)")
    }
}
