// Memory pressure against the real binary: `memory-pressure --free BYTES` ends only as many
// suspended apps as it needs, largest first; a VoIP app is ended after every other app and comes back in the
// background, with its sockets connected afresh. An app's size here is what its data sockets hold: bytes a
// peer sent after the app was suspended stay unread in the kernel, on the app's account.

import Foundation
import Testing
import NetLifeTestSupport

extension TestDaemon {
    /// `netlifectl --json memory-pressure ARGUMENTS`: the apps terminated, in order, as the reply lists them.
    func memoryPressure(_ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
        let result = ctl(["--json", "memory-pressure"] + arguments)
        #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
        let reply = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        return reply?["terminated"] as? [[String: Any]] ?? []
    }

    /// The reason of the app's last termination.
    func terminationReason(_ app: String) -> String? {
        (status(app)["lastTermination"] as? [String: Any])?["reason"] as? String
    }
}

/// `[socket APP.NAME]` with `voip = yes`, speaking `line` to `server`.
private func voipSocket(_ app: String, _ server: PeerServer, name: String = "v") -> String {
    "[socket \(app).\(name)]\nconnect = \(server.address)\nprotocol = line\nvoip = yes\n\n"
}

@Suite(.timeLimit(.minutes(5))) struct MemoryPressureTests {
    @Test func anAmountToFreeEndsOnlyAsManySuspendedAppsAsItNeedsLargestFirst() throws {
        // Named, and configured, in orders that are not the order by size.
        let small = try #require(PeerServer())
        let big = try #require(PeerServer())
        let mid = try #require(PeerServer())
        defer { small.close(); big.close(); mid.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("asmall", small) + lineSocketApp("zbig", big)
                                    + lineSocketApp("mmid", mid))
        defer { daemon.stop() }
        let smallPeer = try #require(small.accept())
        let bigPeer = try #require(big.accept())
        let midPeer = try #require(mid.accept())
        defer { smallPeer.close(); bigPeer.close(); midPeer.close() }
        for app in ["asmall", "zbig", "mmid"] {
            #expect(daemon.ctl("background", app).status == 0)
            #expect(daemon.ctl("suspend", app).status == 0)
        }
        _ = bigPeer.send(bytes: [UInt8](repeating: 0x61, count: 100_000))
        _ = midPeer.send(bytes: [UInt8](repeating: 0x61, count: 20_000))
        _ = smallPeer.send(bytes: [UInt8](repeating: 0x61, count: 1_000))
        usleep(200_000)

        // zbig alone (100,000 bytes) is not enough; zbig and mmid are.
        let terminated = daemon.memoryPressure("--free", "110000")
        #expect(terminated.map { $0["app"] as? String } == ["zbig", "mmid"], "\(terminated)")
        #expect((terminated.first?["bytes"] as? Int ?? 0) >= 100_000, "\(terminated)")
        #expect((terminated.last?["bytes"] as? Int ?? 0) >= 20_000, "\(terminated)")
        #expect(terminated.allSatisfy { $0["relaunched"] as? Bool == false }, "\(terminated)")
        for app in ["zbig", "mmid"] {
            #expect(daemon.state(app) == "not-running")
            #expect(daemon.terminationReason(app) == "memory-pressure")
        }
        #expect(daemon.state("asmall") == "suspended", "enough was freed without it")
        #expect(daemon.status("asmall")["lastTermination"] is NSNull)
        #expect(smallPeer.read(timeout: 0.1) == .timedOut, "its connection is untouched")

        // Nothing to free ends nothing; the text output names what was ended and what it held.
        #expect(daemon.memoryPressure("--free", "0").isEmpty)
        let text = daemon.ctl("memory-pressure", "--free", "1")
        #expect(text.status == 0)
        #expect(text.stdout.hasPrefix("asmall: terminated (memory pressure), held "), "\(text)")
        #expect(text.stdout.split(separator: "\n").count == 1, "\(text)")
        #expect(daemon.state("asmall") == "not-running")
        #expect(!daemon.log.contains("will-terminate"), "no callbacks")
    }

    @Test func anAmountThatIsNoNumberOfBytesIsAUsageError() {
        // Refused before any daemon is asked.
        for value in ["1M", "-1", "lots", "+5", " 5", "0x10"] {
            let result = run([product("netlifectl"), "--control", "/nonexistent/control.sock", "memory-pressure", "--free", value],
                             timeout: 10)
            #expect(result.status == 2, "\(result)")
            #expect(result.stderr.contains("--free takes a whole number of bytes"), "\(result)")
        }
    }

    @Test func aSizeUpToTheLargestCountIsAcceptedAndMeansEverything() throws {
        // 2^53 + 1 and 2^64 - 1 are whole numbers of bytes: taken (the daemon ends every suspended app).
        for value in ["9007199254740993", "18446744073709551615"] {
            let parsed = run([product("netlifectl"), "--control", "/nonexistent/control.sock", "memory-pressure", "--free", value], timeout: 10)
            #expect(parsed.status == 3, "parsed, then no daemon: \(parsed)")
        }
        #expect(run([product("netlifectl"), "--control", "/nonexistent/control.sock", "memory-pressure", "--free", "18446744073709551616"],
                    timeout: 10).status == 2, "2^64 is past every size")
        let server = try #require(PeerServer())
        defer { server.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("held", server))
        defer { daemon.stop() }
        let peer = try #require(server.accept())
        defer { peer.close() }
        #expect(daemon.ctl("background", "held").status == 0)
        #expect(daemon.ctl("suspend", "held").status == 0)
        let terminated = daemon.memoryPressure("--free", "18446744073709551615")
        #expect(terminated.map { $0["app"] as? String } == ["held"], "\(terminated)")
    }

    @Test func aReclaimedSocketThatHoldsNothingCountsForNothing() throws {
        // One app's socket is reclaimed (dissolved: the kernel freed its queues); the other's holds 30,000
        // bytes its peer sent while it was suspended. Freeing 1 byte ends the one that holds something.
        let emptyServer = try #require(PeerServer())
        let fullServer = try #require(PeerServer())
        defer { emptyServer.close(); fullServer.close() }
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("aempty", emptyServer) + lineSocketApp("zfull", fullServer))
        defer { daemon.stop() }
        let emptyPeer = try #require(emptyServer.accept())
        let fullPeer = try #require(fullServer.accept())
        defer { emptyPeer.close(); fullPeer.close() }
        for app in ["aempty", "zfull"] {
            #expect(daemon.ctl("background", app).status == 0)
            #expect(daemon.ctl("suspend", app).status == 0)
        }
        #expect(daemon.ctl("reclaim", "aempty").status == 0)
        _ = fullPeer.send(bytes: [UInt8](repeating: 0x61, count: 30_000))
        usleep(200_000)
        let terminated = daemon.memoryPressure("--free", "1")
        #expect(terminated.map { $0["app"] as? String } == ["zfull"], "\(terminated)")
        #expect((terminated.first?["bytes"] as? Int ?? 0) >= 30_000, "\(terminated)")
        #expect(daemon.state("aempty") == "suspended", "a dissolved socket holds nothing")
    }

    @Test func aVoIPAppIsEndedLastAndRelaunchedIntoTheBackground() throws {
        let phoneBulk = try #require(PeerServer())
        let phoneVoIP = try #require(PeerServer())
        let mail = try #require(PeerServer())
        let news = try #require(PeerServer())
        defer { phoneBulk.close(); phoneVoIP.close(); mail.close(); news.close() }
        // phone holds the most, on its non-VoIP socket (data on its VoIP socket would wake it).
        let daemon = try TestDaemon(config: "[daemon]\n" + lineSocketApp("phone", phoneBulk) + voipSocket("phone", phoneVoIP)
                                    + lineSocketApp("mail", mail) + lineSocketApp("news", news))
        defer { daemon.stop() }
        let bulkPeer = try #require(phoneBulk.accept())
        let voipPeer = try #require(phoneVoIP.accept())
        let mailPeer = try #require(mail.accept())
        let newsPeer = try #require(news.accept())
        defer { bulkPeer.close(); voipPeer.close(); mailPeer.close(); newsPeer.close() }
        for app in ["phone", "mail", "news"] {
            #expect(daemon.ctl("background", app).status == 0)
            #expect(daemon.ctl("suspend", app).status == 0)
        }
        _ = bulkPeer.send(bytes: [UInt8](repeating: 0x61, count: 100_000))
        _ = newsPeer.send(bytes: [UInt8](repeating: 0x61, count: 2_000))
        _ = mailPeer.send(bytes: [UInt8](repeating: 0x61, count: 1_000))
        usleep(200_000)

        // The other apps are ended first, though phone is the largest: news frees enough alone.
        let first = daemon.memoryPressure("--free", "1500")
        #expect(first.map { $0["app"] as? String } == ["news"], "\(first)")
        #expect(daemon.state("phone") == "suspended")
        #expect(voipPeer.read(timeout: 0.1) == .timedOut, "the VoIP app and its socket are untouched")

        // Without an amount every suspended app is ended: mail, then phone, which comes back in the background.
        let result = daemon.ctl("memory-pressure")
        #expect(result.status == 0, "\(result)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(result)")
        #expect(lines.first?.hasPrefix("mail: terminated (memory pressure), held ") == true, "\(result)")
        #expect(lines.last?.hasPrefix("phone: terminated (memory pressure), held ") == true, "\(result)")
        #expect(lines.last?.hasSuffix("; relaunched into the background (VoIP)") == true, "\(result)")

        // The old connections were closed with the app; the relaunch connected both sockets afresh.
        #expect(voipPeer.readEnd(timeout: 2) != .timedOut, "the ended app's VoIP connection is closed")
        #expect(bulkPeer.readEnd(timeout: 2) != .timedOut, "the ended app's other connection is closed")
        let newVoIPPeer = try #require(phoneVoIP.accept(), "the relaunched app connects its VoIP socket again")
        let newBulkPeer = try #require(phoneBulk.accept(), "and its other socket (policy keep)")
        defer { newVoIPPeer.close(); newBulkPeer.close() }
        let phone = daemon.status("phone")
        #expect(phone["state"] as? String == "background", "\(phone)")
        #expect((phone["lastTermination"] as? [String: Any])?["reason"] as? String == "memory-pressure", "\(phone)")
        let stages = (phone["lastStages"] as? [[String: Any]])?.map { $0["name"] as? String }
        #expect(stages == ["did-finish-launching", "did-enter-background"], "a launch into the background: \(phone)")
        #expect(daemon.waitForSocket("phone", "v", state: "connected"))
        #expect(daemon.state("mail") == "not-running")
        #expect(daemon.terminationReason("mail") == "memory-pressure")

        // A relaunched VoIP app is a VoIP app again: data on its socket wakes it once it is suspended.
        #expect(daemon.ctl("suspend", "phone").status == 0)
        newVoIPPeer.send("ring\n")
        #expect(waitUntil(timeout: 2) { daemon.log.contains("woken: data on VoIP socket v") }, "\(daemon.log.suffix(2000))")
    }
}
