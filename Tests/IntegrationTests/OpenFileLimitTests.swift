// netlifed raises its soft RLIMIT_NOFILE to the hard limit at start: started with a soft limit of 64 and a
// hard limit of 4,096 (prlimit), it serves 1,000 echo connections at once, says the limit in its start-up
// log and in the `version` reply, and logs no `Too many open files`.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(1)))
struct OpenFileLimitTests {
    @Test func aThousandConnectionsAreServedWithASoftLimitOf64() throws {
        let daemon = try TestDaemon(config: echoConfig(port: 0), launcher: ["/usr/bin/prlimit", "--nofile=64:4096", "--"])
        defer { daemon.stop() }
        let address = (daemon.status("echo")["listeners"] as? [[String: Any]])?.first?["address"] as? String
        let port = try #require(address?.split(separator: ":").last.flatMap { UInt16($0) })

        let count = 1000
        var peers: [Peer] = []
        defer { for peer in peers { peer.close() } }
        for _ in 0..<count {
            guard let peer = Peer.connect(port: port) else { break }
            peers.append(peer)
        }
        #expect(peers.count == count)
        for (index, peer) in peers.enumerated() { peer.send("line \(index)\n") }

        // Every connection stays open; the echoes are awaited together, with one deadline for all.
        var received = [[UInt8]](repeating: [], count: peers.count)
        var pending = Set(peers.indices)
        let deadline = Date().addingTimeInterval(15)
        while !pending.isEmpty && Date() < deadline {
            var pollers = pending.map { pollfd(fd: peers[$0].fd, events: Int16(POLLIN), revents: 0) }
            let indices = Array(pending)
            guard poll(&pollers, nfds_t(pollers.count), 200) > 0 else { continue }
            for (slot, poller) in pollers.enumerated() where poller.revents != 0 {
                let index = indices[slot]
                var buffer = [UInt8](repeating: 0, count: 256)
                let got = recv(poller.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if got > 0 { received[index] += buffer[0..<got] }
                if got <= 0 || received[index].last == UInt8(ascii: "\n") { pending.remove(index) }
            }
        }
        let served = peers.indices.filter { String(decoding: received[$0], as: UTF8.self) == "line \($0)\n" }.count
        print("echo connections served under a soft limit of 64 (hard 4096): \(served) of \(peers.count)")
        #expect(served == count)
        // A daemon out of descriptors cannot accept control connections either: no use asking it more.
        guard served == count else { return }

        let connections = (daemon.status("echo")["listeners"] as? [[String: Any]])?.first?["connections"] as? Int
        #expect(connections == count)
        let version = daemon.ctl("--json", "version")
        let reply = try JSONSerialization.jsonObject(with: Data(version.stdout.utf8)) as? [String: Any]
        let openFiles = reply?["openFiles"] as? [String: Any]
        #expect(openFiles?["limit"] as? Int == 4096, "\(version)")
        #expect(openFiles?["hardLimit"] as? Int == 4096)
        #expect((openFiles?["open"] as? Int ?? 0) >= count, "each connection holds a descriptor")
        let text = daemon.ctl("version")
        #expect(text.stdout.contains("open files: "), "\(text)")
        #expect(text.stdout.contains(" of 4096 (hard limit 4096)"), "\(text)")
        #expect(daemon.log.contains("<5>netlifed: open files: limit 4096 (hard limit 4096), raised from 64"), "\(daemon.log)")
        #expect(daemon.log.contains("open files limit 4096"))
        #expect(!daemon.log.contains("Too many open files"))
    }
}
