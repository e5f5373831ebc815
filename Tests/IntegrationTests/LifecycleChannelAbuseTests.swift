// Programs that misbehave on their lifecycle channel (NETLIFE_EVENTS), against the real netlifed: one that
// floods requests and never reads the answers, one that writes an endless line, one that sends a hello
// after 200,000 blank lines. Each ends with the daemon alive, `status` answering within a few
// milliseconds, the daemon's memory bounded, and the program cut off (or answered) as the protocol says.

import Foundation
import Testing
import NetLifeTestSupport

/// A Python program that waits for the file `go` beside it, then does `body` (with `events`, the channel's
/// descriptor, and `write_all(bytes)`, which stops at EPIPE), then writes the file `done` and sleeps.
private func channelProgram(_ directory: TemporaryDirectory, _ body: String) -> String {
    let script = directory.file("program.py")
    directory.write("program.py", """
        import os, sys, time
        here = os.path.dirname(os.path.abspath(__file__))
        events = int(os.environ["NETLIFE_EVENTS"])
        def write_all(data):
            # Until everything is written or netlifed closes its end (a program cut off gets EPIPE).
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(events, view):]
            except BrokenPipeError:
                pass
        while not os.path.exists(os.path.join(here, "go")):
            time.sleep(0.01)
        \(body)
        open(os.path.join(here, "done"), "w").close()
        time.sleep(600)

        """)
    return "\(systemPython) \(script)"
}

@Suite(.timeLimit(.minutes(2)))
struct LifecycleChannelAbuseTests {
    @Test func aProgramFloodingItsNotifySocketCostsACounterNotTheLog() throws {
        let scripts = TemporaryDirectory()
        defer { scripts.remove() }
        // 14,000 READY=1 in a burst (a line each were 500 KB of log), then one more after a pause.
        let program = channelProgram(scripts, """
            import socket
            address = os.environ["NOTIFY_SOCKET"]
            target = "\\0" + address[1:] if address.startswith("@") else address
            notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            for _ in range(14000):
                try:
                    notify.sendto(b"READY=1", target)
                except BlockingIOError:
                    time.sleep(0.001)
            time.sleep(1.5)
            notify.sendto(b"READY=1", target)
            time.sleep(0.5)
            """)
        let daemon = try TestDaemon(config: "[app noisy]\nexec = \(program)\n" + echoApp("other"))
        defer { daemon.stop() }
        let started = Date()
        scripts.write("go", "")
        #expect(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: scripts.file("done")) })
        let seconds = Date().timeIntervalSince(started)
        let said = daemon.log.components(separatedBy: "the program says READY=1").count - 1
        // The burst (20) and 5 a second after it, whatever the program sends.
        #expect(said >= 20 && Double(said) <= 21 + 5 * seconds, "\(said) records in \(seconds) s")
        #expect(daemon.log.contains("more such record(s) dropped (at most 20 at once, then 5 a second)"), "\(daemon.log.suffix(1500))")
        #expect(daemon.state("other") == "active")
    }

    @Test func aProgramsChannelsReachOnlyItsOwnApp() throws {
        let scripts = TemporaryDirectory()
        defer { scripts.remove() }
        // On the lifecycle channel: requests that name another app or a daemon command; on the notify
        // socket: a datagram that names another app. Nothing of it may touch `other` or the daemon.
        let program = channelProgram(scripts, """
            write_all(b'{"hello":1}\\n{"begin-task":"mine","app":"other"}\\n{"cmd":"reload"}\\n'
                      b'{"cmd":"background","app":"other"}\\n{"end-task":1,"app":"other"}\\n{"cmd":"memory-pressure"}\\n')
            import socket
            notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            address = os.environ["NOTIFY_SOCKET"]
            notify.sendto(b"STATUS=sent by prog\\nNETLIFE_APP=other", "\\0" + address[1:] if address.startswith("@") else address)
            time.sleep(0.5)
            """)
        let daemon = try TestDaemon(config: "[app prog]\nexec = \(program)\n" + echoApp("other", appLines: "auto-suspend = never"))
        defer { daemon.stop() }
        #expect(daemon.ctl("task", "begin", "other", "--name", "root's").status == 0)
        scripts.write("go", "")
        #expect(waitUntil(timeout: 20) { FileManager.default.fileExists(atPath: scripts.file("done")) }, "\(daemon.log.suffix(3000))")
        // The task it began is its own app's, and the end-task that named `other` ended that one (ids are per app).
        #expect(daemon.log.contains("app prog: background task 1 begun ('mine')"), "\(daemon.log)")
        #expect(daemon.log.contains("app prog: background task 1 ended"), "\(daemon.log)")
        #expect(daemon.state("other") == "active", "another app is out of the program's reach")
        let tasks = daemon.status("other")["tasks"] as? [[String: Any]] ?? []
        #expect(tasks.count == 1 && tasks.first?["name"] as? String == "root's", "its task was not ended by the program: \(tasks)")
        #expect(!daemon.log.contains("reloaded"), "no reload came of it")
        #expect(!daemon.log.contains("asked: background") && !daemon.log.contains("asked: memory-pressure"), "no control request came of it")
        #expect(daemon.state("prog") == "active", "the program runs on: \(daemon.log.suffix(2000))")
        #expect(!(String(describing: daemon.status("other")).contains("sent by prog")), "the notify line went to its own app only")
        #expect(daemon.isRunning)
    }

    @Test func aProgramThatFloodsRequestsAndNeverReadsIsCutOffWithoutStallingTheLoop() throws {
        let scripts = TemporaryDirectory()
        defer { scripts.remove() }
        let program = channelProgram(scripts, """
            write_all(b'{"hello":1}\\n' + b'{"begin-task":"t"}\\n' * 20000)
            """)
        let daemon = try TestDaemon(config: "[app flood]\nexec = \(program)\n" + echoApp("other"))
        defer { daemon.stop() }
        let baseline = ResourceBaseline(daemon.probe)
        scripts.write("go", "")
        #expect(waitUntil(timeout: 20) { FileManager.default.fileExists(atPath: scripts.file("done")) }, "the program wrote its 20,000 requests")
        #expect(waitUntil(timeout: 10) { daemon.log.contains("lifecycle channel cut off: it does not read what netlifed sends") },
                "the program is cut off; log tail:\n\(daemon.log.suffix(2000))")
        #expect(daemon.state("flood") == "active", "the app goes on without the protocol")
        #expect((daemon.status("flood")["tasks"] as? [Any])?.count == 0, "the tasks it began end with its channel")
        #expect(daemon.state("other") == "active")
        daemon.expectHealthy(comparedTo: baseline, label: "a program flooding requests and reading no answer")
    }

    @Test func anEndlessLineKeepsTheDaemonsMemoryBoundedAndStillCountsTowardTheCutOff() throws {
        let scripts = TemporaryDirectory()
        defer { scripts.remove() }
        // 64 MB without a newline (6 MB under a sanitizer, where the resident size is not judged; all of it
        // took 24 s under AddressSanitizer), then the end of that line and 20 lines that are not JSON.
        let megabytes = sanitizerScaled(64)
        let program = channelProgram(scripts, """
            chunk = b'x' * (1 << 20)
            for _ in range(\(megabytes)):
                write_all(chunk)
            write_all(b'\\n' + b'not json\\n' * 20)
            """)
        let daemon = try TestDaemon(config: "[app endless]\nexec = \(program)\n")
        defer { daemon.stop() }
        let before = daemon.probe.residentBytes
        scripts.write("go", "")
        #expect(waitUntil(timeout: 60) { FileManager.default.fileExists(atPath: scripts.file("done")) }, "the program wrote its \(megabytes) MB")
        #expect(waitUntil(timeout: 10) { daemon.log.contains("lifecycle channel cut off: 16 protocol errors") },
                "1 overlong line and 15 bad lines reach the cut-off; log tail:\n\(daemon.log.suffix(2000))")
        let peak = daemon.probe.peakResidentBytes
        print("endless line: resident \(before >> 10) KiB before, peak \(peak >> 10) KiB after \(megabytes) MB without a newline")
        // Under AddressSanitizer the freed reads wait in its quarantine, so the resident size says nothing.
        if rssIsMeaningful {
            #expect(peak - before < 16 << 20, "the daemon grew by \((peak - before) >> 10) KiB")
        }
        daemon.expectHealthy(comparedTo: nil, label: "a program writing a 64 MB line")
    }

    @Test func aHelloAfter200000BlankLinesIsAnswered() throws {
        let scripts = TemporaryDirectory()
        defer { scripts.remove() }
        // 20,000 under a sanitizer: blank lines are skipped, never counted, at any volume.
        let program = channelProgram(scripts, """
            write_all(b'\\n' * \(sanitizerScaled(200_000)) + b'{"hello":1}\\n')
            reply = b''
            while not reply.endswith(b'\\n'):
                reply += os.read(events, 4096)
            open(os.path.join(here, "reply"), "wb").write(reply)
            """)
        let daemon = try TestDaemon(config: "[app patient]\nexec = \(program)\n")
        defer { daemon.stop() }
        scripts.write("go", "")
        #expect(waitUntil(timeout: 20) { FileManager.default.fileExists(atPath: scripts.file("done")) },
                "the hello was answered; log tail:\n\(daemon.log.suffix(2000))")
        #expect(scripts.read("reply") == "{\"hello\":1}\n")
        #expect(daemon.program("patient")["protocol"] as? Bool == true)
        daemon.expectHealthy(comparedTo: nil, label: "a hello after 200,000 blank lines")
    }
}

@Suite(.timeLimit(.minutes(2)))
struct LifecycleChannelSilenceTests {
    @Test func aProgramThatSaysHelloThenNeitherReadsNorAnswersIsKilledAtItsBudgetAndLeavesNothing() throws {
        let scripts = TemporaryDirectory()
        defer { scripts.remove() }
        // It forks a child that ignores SIGTERM too, so that only the cgroup's kill can end both.
        let program = channelProgram(scripts, """
            import signal
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if os.fork() == 0:
                time.sleep(600)
            write_all(b'{"hello":1}\\n')
            """)
        let daemon = try TestDaemon(config: "[app silent]\nexec = \(program)\nbackground-budget = 500ms\n" + echoApp("other"))
        defer { daemon.stop() }
        let baseline = ResourceBaseline(daemon.probe)
        scripts.write("go", "")
        #expect(waitUntil(timeout: 10) { daemon.program("silent")["protocol"] as? Bool == true }, "the program said hello")
        let cgroup = (daemon.program("silent")["cgroup"] as? String).map(CgroupProbe.init)
        let members = cgroup?.members ?? []
        let background = daemon.ctl("background", "silent")
        #expect(background.status == 1 && background.stderr.contains("0x8badf00d"), "\(background)")
        #expect(daemon.lastTermination("silent")?["reason"] as? String == "watchdog")
        #expect(waitUntil(timeout: 6) { members.allSatisfy(processIsGone) && !(cgroup?.exists ?? false) },
                "left: \(members.filter { !processIsGone($0) }), cgroup \(cgroup?.exists == true ? "still there" : "gone")")
        #expect(daemon.state("other") == "active")
        daemon.expectHealthy(comparedTo: baseline, label: "a program silent on its channel")
    }
}
