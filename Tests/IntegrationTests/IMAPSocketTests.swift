// The imap protocol of data sockets against a real IMAP server (Debian's dovecot, started by the test):
// IDLE while the app is active, DONE in the background, IDLE again on foreground, LOGOUT on terminate, and
// what dovecot itself read from netlifed (its rawlog).

import Foundation
import Testing
import NetLifeTestSupport

/// An app `mail` with one IMAP socket to `dovecot`.
func imapApp(_ dovecot: Dovecot, passwordFile: String? = nil, appLines: String = "") -> String {
    """
    [daemon]
    [app mail]
    auto-suspend = never
    \(appLines)

    [socket mail.imap]
    connect = \(dovecot.host):\(dovecot.port)
    protocol = imap
    policy = quiet
    user = \(dovecot.user)
    password-file = \(passwordFile ?? dovecot.passwordFile)

    """
}

@Suite(.timeLimit(.minutes(5))) struct IMAPSocketTests {
    @Test func idlesWhileActiveIsQuietInTheBackgroundAndLogsOutOnTerminate() throws {
        let dovecot = try Dovecot()
        defer { dovecot.stop() }
        let daemon = try TestDaemon(config: imapApp(dovecot))
        defer { daemon.stop() }
        func imap() -> [String: Any] { daemon.socket("mail", "imap") ?? [:] }
        #expect(waitUntil(timeout: 5) { imap()["idle"] as? Bool == true }, "\(imap())\n\(daemon.log.suffix(2000))")
        #expect(imap()["exists"] as? Int == 0)

        // A message delivered while the app is active: the server pushes EXISTS into the IDLE.
        try dovecot.deliver(subject: "while active")
        #expect(waitUntil(timeout: 5) { imap()["exists"] as? Int == 1 }, "\(imap())")

        // Background: DONE, without blocking the pipeline; a background task waits for the server's OK.
        let background = daemon.ctl("--json", "background", "mail")
        #expect(background.status == 0)
        #expect(waitUntil(timeout: 3) { dovecot.clientLines().last == "DONE" }, "\(dovecot.clientLines())")
        #expect(daemon.log.contains("background task 1 begun ('quiet imap')"), "the quiet step held a background task")
        #expect(waitUntil(timeout: 3) { daemon.log.contains("background task 1 ended") && (daemon.status("mail")["tasks"] as? [Any])?.isEmpty == true },
                "the quiet task ends when OK Idle completed arrives")
        #expect(imap()["state"] as? String == "quiet")
        #expect(imap()["idle"] as? Bool == false)

        // Foreground: IDLE again on the same connection.
        #expect(daemon.ctl("foreground", "mail").status == 0)
        #expect(waitUntil(timeout: 3) { imap()["idle"] as? Bool == true })
        #expect(imap()["state"] as? String == "connected")
        #expect(imap()["connects"] as? Int == 1)
        try dovecot.deliver(subject: "after foreground")
        #expect(waitUntil(timeout: 5) { imap()["exists"] as? Int == 2 }, "\(imap())")

        // Terminate: DONE and LOGOUT reach the server.
        #expect(daemon.ctl("terminate", "mail").status == 0)
        #expect(waitUntil(timeout: 3) { dovecot.clientLines().last?.hasSuffix(" LOGOUT") == true }, "\(dovecot.clientLines())")
        let commands = dovecot.clientLines().map { $0.split(separator: " ").dropFirst().first.map(String.init) ?? $0 }
        #expect(commands == ["SELECT", "IDLE", "DONE", "IDLE", "DONE", "LOGOUT"], "\(dovecot.clientLines())")
    }

    @Test func aReclaimedIMAPSocketLogsInAgainAfterForeground() throws {
        let dovecot = try Dovecot()
        defer { dovecot.stop() }
        let daemon = try TestDaemon(config: imapApp(dovecot))
        defer { daemon.stop() }
        func imap() -> [String: Any] { daemon.socket("mail", "imap") ?? [:] }
        #expect(waitUntil(timeout: 5) { imap()["idle"] as? Bool == true })
        #expect(daemon.ctl("background", "mail").status == 0)
        #expect(waitUntil(timeout: 3) { imap()["state"] as? String == "quiet" && (daemon.status("mail")["tasks"] as? [Any])?.isEmpty == true })
        #expect(daemon.ctl("suspend", "mail").status == 0)
        #expect(daemon.ctl("reclaim", "mail").status == 0)
        #expect(imap()["state"] as? String == "defunct")
        #expect(daemon.ctl("foreground", "mail").status == 0)
        #expect(waitUntil(timeout: 5) { imap()["idle"] as? Bool == true && imap()["connects"] as? Int == 2 }, "\(imap())")
        #expect(dovecot.clientSessions().count == 2, "a second session: \(dovecot.clientSessions())")
    }

    @Test func aRefusedLoginIsShownAndRetriedNotFatal() throws {
        let dovecot = try Dovecot()
        defer { dovecot.stop() }
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("wrong.secret", "not-the-password\n")
        let daemon = try TestDaemon(config: imapApp(dovecot, passwordFile: scratch.file("wrong.secret")))
        defer { daemon.stop() }
        func imap() -> [String: Any] { daemon.socket("mail", "imap") ?? [:] }
        #expect(waitUntil(timeout: 5) { (imap()["error"] as? String)?.contains("login refused") == true }, "\(imap())")
        // Retried, with growing delays: a refused login is not hammered ten times a second.
        usleep(2_500_000)
        let connects = imap()["connects"] as? Int ?? 0
        print("a refused IMAP login: \(connects) connects in about 3 s")
        #expect(connects >= 2 && connects <= 7, "\(connects) connects")
        #expect(!daemon.log.contains("not-the-password"), "the password never reaches the log")
        #expect(!(imap()["error"] as? String ?? "").contains("not-the-password"))
        #expect(daemon.state("mail") == "active")
        #expect(daemon.isRunning)
    }
}
