// netlife's Debian package under a real systemd: each test boots a Debian root with systemd as PID 1
// (scripts/systemd-box: systemd-nspawn, a private network, the root left as it was), installs the package
// with apt as an operator does, and drives the service with systemctl, netlifectl and journalctl inside.
// What `systemd-analyze --offline` (SystemdUnitTests) cannot show: READY, a reload that waits and fails, the
// watchdog, the sandbox with the process-apps drop-in, and the journal's fields.

import Foundation
import Testing
import NetLifeTestSupport

/// An echo app, as the annotated example shows one (the package's default config runs no app).
private let echoApp = """
    [app echo]
    launch = foreground

    [listener echo.main]
    address = 127.0.0.1:7070
    service = echo
    """

/// A config: the daemon keys `daemon`, then `apps`.
private func config(daemon: String = "", apps: String = echoApp) -> String {
    "[daemon]\n\(daemon)\n\n\(apps)\n"
}

/// Boots a box, installs the package, runs `body`, and powers the box off.
private func withInstalledBox(_ body: (SystemdBox) throws -> Void) throws {
    let box = try SystemdBox()
    defer { box.halt() }
    try box.installPackage()
    try body(box)
}

@Suite(.serialized, .timeLimit(.minutes(20)))
struct SystemdContainerTests {
    @Test func thePackageStartsTheServiceWhichSignalsReadyAndStopsCleanly() throws {
        try withInstalledBox { box in
            // The maintainer scripts enabled and started it; Type=notify: active only after READY=1.
            #expect(box.sh("systemctl is-enabled netlifed").stdout.contains("enabled"))
            #expect(box.property("ActiveState") == "active")
            #expect(box.property("SubState") == "running")
            // The packaged default runs no app: nothing listens until one is configured.
            #expect(box.property("StatusText") == "no app configured")
            #expect(box.sh("netlifectl status").status == 0)
            #expect(box.echo("ping", port: 7070) == "")
            // An app dropped in conf.d, checked and reloaded, as an operator adds one.
            box.write("/etc/netlifed/conf.d/echo.conf", echoApp)
            let added = box.sh("netlifed --check-config /etc/netlifed/netlifed.conf && systemctl reload netlifed")
            #expect(added.status == 0, "\(added)")
            #expect(box.property("StatusText") == "echo active")
            #expect(box.echo("ping", port: 7070) == "ping")
            let status = box.sh("netlifectl status")
            #expect(status.status == 0 && status.stdout.contains("echo: active"), "\(status)")
            // The sandbox rates as the offline analysis does.
            let security = box.sh("systemd-analyze security netlifed --no-pager").stdout
            let score = security.components(separatedBy: "Overall exposure level for netlifed.service: ").dropFirst().first
                .flatMap { Double($0.prefix { $0 == "." || $0.isNumber }) }
            #expect(score != nil && score! <= 2.0, "\(security.suffix(300))")
            // Stop: will-terminate for every app, exit 0, the runtime directory and the port gone.
            let stopped = box.sh("systemctl stop netlifed")
            #expect(stopped.status == 0, "\(stopped)")
            #expect(box.property("ActiveState") == "inactive")
            #expect(box.property("Result") == "success")
            #expect(box.property("ExecMainStatus") == "0")
            #expect(box.sh("test -e /run/netlifed").status != 0)
            #expect(box.echo("ping", port: 7070) == "")
            #expect(box.sh("journalctl -u netlifed -o cat").stdout.contains("app echo: stopped: terminated (by shutdown)"))
        }
    }

    @Test func theJournalHoldsEachAppsRecordsWithItsFieldsAndPriorities() throws {
        try withInstalledBox { box in
            box.write("/etc/netlifed/conf.d/echo.conf", echoApp)
            #expect(box.sh("systemctl reload netlifed").status == 0)
            // Under systemd the records go to journald with their fields, so one app's are one query.
            let app = box.sh("journalctl NETLIFE_APP=echo -o cat")
            #expect(app.stdout.contains("app echo: inactive -> active"), "\(app)")
            #expect(!app.stdout.contains("control: listening"), "a daemon record carries no app field")
            #expect(box.sh("journalctl -u netlifed -o cat").stdout.contains("open files: limit"))
            // The records are the service's own (journalctl -u), with the identifier and priority they had as
            // `<N>` lines.
            let verbose = box.sh("journalctl -u netlifed NETLIFE_APP=echo -o verbose").stdout
            #expect(verbose.contains("SYSLOG_IDENTIFIER=netlifed") && verbose.contains("PRIORITY=6"), "\(verbose.prefix(2000))")
            #expect(!verbose.contains("MESSAGE=<"), "no `<N>` prefix left in a message")
            // A config error at reload is an error-priority record.
            box.write("/etc/netlifed/netlifed.conf", config() + "bogus line\n")
            #expect(box.sh("systemctl reload netlifed").status != 0)
            let errors = box.sh("journalctl -u netlifed -p err -o cat").stdout
            #expect(errors.contains("netlifed.conf:") && errors.contains("bogus line"), "\(errors)")
        }
    }

    @Test func reloadWaitsForTheNewConfigAndAFailedOneLeavesTheOldServing() throws {
        try withInstalledBox { box in
            let pid = box.property("MainPID")
            box.write("/etc/netlifed/netlifed.conf", config(apps: echoApp + """


                [app two]
                launch = foreground

                [listener two.main]
                address = 127.0.0.1:7071
                service = echo
                """))
            // ExecReload= is `netlifectl reload`: when systemctl returns, the new app serves.
            let reload = box.sh("systemctl reload netlifed && netlifectl status two && printf 'x\\n' | timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/7071; cat >&3; head -n1 <&3'")
            #expect(reload.status == 0 && reload.stdout.contains("two: active") && reload.stdout.hasSuffix("x\n"), "\(reload)")
            // A broken config: the reload fails, nothing changes, nothing restarts.
            box.write("/etc/netlifed/netlifed.conf", config() + "[app three]\nlaunch = sometimes\n")
            let failed = box.sh("systemctl reload netlifed")
            #expect(failed.status != 0, "\(failed)")
            #expect(box.property("ActiveState") == "active")
            #expect(box.property("MainPID") == pid)
            #expect(box.property("NRestarts") == "0")
            #expect(box.echo("one", port: 7070) == "one")
            #expect(box.echo("two", port: 7071) == "two")
            #expect(box.sh("netlifectl status").stdout.contains("two: active"))
        }
    }

    @Test func aConfigErrorAtStartFailsOnceWithItsLineAndIsNotRestarted() throws {
        try withInstalledBox { box in
            box.write("/etc/netlifed/netlifed.conf", config() + "[app three]\nlaunch = sometimes\n")
            #expect(box.sh("systemctl restart netlifed").status != 0)
            // RestartSec=1s: a restart loop would have started again by now.
            usleep(2_500_000)
            #expect(box.property("ActiveState") == "failed")
            #expect(box.property("ExecMainStatus") == "78")
            #expect(box.property("NRestarts") == "0")
            let errors = box.sh("journalctl -u netlifed -p err -o cat").stdout
            #expect(errors.contains("/etc/netlifed/netlifed.conf:") && errors.contains("sometimes"), "\(errors)")
        }
    }

    @Test func netlifedsLoopStallWatchdogEndsInResultWatchdogAndARestart() throws {
        try withInstalledBox { box in
            box.write("/etc/netlifed/netlifed.conf", config(daemon: "debug-commands = yes\nloop-stall = 1s"))
            #expect(box.sh("systemctl restart netlifed").status == 0)
            let pid = box.property("MainPID")
            // The loop blocks; after 1 s netlifed sends WATCHDOG=trigger and systemd kills it as a watchdog
            // failure, then restarts it (Restart=on-failure).
            _ = box.sh("netlifectl debug stall 10s", timeout: 15)
            let restarted = waitUntil(timeout: 10) { box.property("NRestarts") == "1" && box.property("ActiveState") == "active" }
            #expect(restarted, "\(box.sh("journalctl -u netlifed -o cat | tail -n 20"))")
            let journal = box.sh("journalctl -u netlifed -o cat").stdout
            #expect(journal.contains("Failed with result 'watchdog'"), "\(journal.suffix(1500))")
            #expect(box.property("MainPID") != pid)
            #expect(box.echo("back", port: 7070) == "back")
        }
    }

    @Test func systemdsOwnWatchdogCatchesAStallWhenNetlifedsWaitsLonger() throws {
        try withInstalledBox { box in
            // netlifed pings from its loop: a stalled loop stops the pings, whatever netlifed's own threshold.
            box.write("/etc/systemd/system/netlifed.service.d/watchdog.conf", "[Service]\nWatchdogSec=2s\n")
            box.write("/etc/netlifed/netlifed.conf", config(daemon: "debug-commands = yes\nloop-stall = 60s"))
            #expect(box.sh("systemctl daemon-reload && systemctl restart netlifed").status == 0)
            _ = box.sh("timeout 2 netlifectl debug stall 8s", timeout: 5)
            let restarted = waitUntil(timeout: 10) { box.property("NRestarts") == "1" && box.property("ActiveState") == "active" }
            let journal = box.sh("journalctl -u netlifed -o cat").stdout
            #expect(restarted, "\(journal.suffix(1500))")
            #expect(journal.contains("Watchdog timeout") && journal.contains("Failed with result 'watchdog'"), "\(journal.suffix(1500))")
            #expect(!journal.contains("the event loop has stalled"))
        }
    }

    @Test func theProcessAppsDropInRunsAProgramAsItsUserAndLetsLighttpdDropPrivileges() throws {
        try withInstalledBox { box in
            box.sh("mkdir -p /etc/systemd/system/netlifed.service.d && cp /usr/share/netlife/systemd/netlifed-process-apps.conf /etc/systemd/system/netlifed.service.d/process-apps.conf")
            box.write("/etc/lighttpd/netlife.conf", """
                server.document-root = "/var/www/html"
                server.username = "www-data"
                server.groupname = "www-data"
                server.systemd-socket-activation = "enable"

                """)
            box.write("/var/www/html/index.html", "served by lighttpd\n")
            box.write("/etc/netlifed/netlifed.conf", config(apps: """
                [app sleeper]
                exec = /bin/sleep 1000
                user = nobody

                [app web]
                exec = /usr/sbin/lighttpd -D -f /etc/lighttpd/netlife.conf

                [listener web.http]
                address = 127.0.0.1:8081
                """))
            #expect(box.sh("chmod 0644 /var/www/html/index.html && systemctl daemon-reload && systemctl restart netlifed").status == 0)
            let served = waitUntil(timeout: 10) { box.sh("curl -sf http://127.0.0.1:8081/index.html").stdout == "served by lighttpd\n" }
            #expect(served, "\(box.sh("journalctl -u netlifed -o cat | tail -n 20"))")
            let status = box.sh("netlifectl status").stdout
            #expect(status.contains("sleeper: active") && status.contains("web: active"), "\(status)")
            #expect(status.contains("cgroup-v2"), "the drop-in's Delegate=yes gives netlifed a cgroup subtree: \(status)")
            // setpriv ran the program as nobody; lighttpd, started as root, switched itself to www-data.
            #expect(box.sh("ps -o user= -C sleep").stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "nobody")
            #expect(box.sh("ps -o user= -C lighttpd").stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "www-data")
            // The lifecycle under the sandbox: refused in the background, frozen when suspended, the same
            // process serving again in the foreground.
            let pid = box.sh("pidof lighttpd").stdout
            #expect(box.sh("netlifectl background web").status == 0)
            #expect(box.sh("curl -s http://127.0.0.1:8081/index.html").status == 7, "connection refused")
            _ = box.sh("netlifectl suspend web")
            #expect(waitUntil(timeout: 5) { box.sh("netlifectl status web").stdout.contains("frozen") })
            #expect(box.sh("netlifectl foreground web").status == 0)
            #expect(box.sh("curl -sf http://127.0.0.1:8081/index.html").stdout == "served by lighttpd\n")
            #expect(box.sh("pidof lighttpd").stdout == pid)
            // Stop leaves no program behind.
            #expect(box.sh("systemctl stop netlifed").status == 0)
            #expect(box.sh("pidof lighttpd sleep").stdout.isEmpty)
            #expect(box.property("Result") == "success")
        }
    }

    @Test func aDownloadGoesUnderTheStateDirectoryAndAPlaceTheSandboxHidesIsRefusedWithItsRemedy() throws {
        try withInstalledBox { box in
            box.write("/var/www/html/report.txt", "a report\n")
            box.write("/etc/netlifed/netlifed.conf", config(apps: """
                [app files]
                launch = foreground

                [listener files.http]
                address = 127.0.0.1:8082
                service = http
                root = /var/www/html

                [app fetcher]
                launch = foreground
                """))
            #expect(box.sh("systemctl restart netlifed").status == 0)
            let url = "http://127.0.0.1:8082/report.txt"
            // No --output: the unit's StateDirectory=, the one place the sandbox lets netlifed write.
            let done = box.sh("netlifectl download fetcher \(url)")
            #expect(done.status == 0 && done.stdout.contains("-> /var/lib/netlifed/downloads/fetcher/report.txt: done"), "\(done)")
            #expect(box.sh("cat /var/lib/netlifed/downloads/fetcher/report.txt").stdout == "a report\n")
            // PrivateTmp=: netlifed's /tmp is not the client's.
            let tmp = box.sh("netlifectl download fetcher \(url) --output /tmp/report.txt")
            #expect(tmp.status == 1 && tmp.stderr.contains("netlifed sees another /tmp than netlifectl does"), "\(tmp)")
            // ProtectSystem=strict: read-only until a drop-in lists it.
            box.sh("mkdir -p /srv/downloads")
            let readOnly = box.sh("netlifectl download fetcher \(url) --output /srv/downloads/report.txt")
            #expect(readOnly.status == 1 && readOnly.stderr.contains("netlifed cannot write in /srv/downloads (Read-only file system)")
                    && readOnly.stderr.contains("ReadWritePaths=/srv/downloads"), "\(readOnly)")
            box.write("/etc/systemd/system/netlifed.service.d/downloads.conf", "[Service]\nReadWritePaths=/srv/downloads\n")
            #expect(box.sh("systemctl daemon-reload && systemctl restart netlifed").status == 0)
            let written = box.sh("netlifectl download fetcher \(url) --output /srv/downloads/report.txt")
            #expect(written.status == 0, "\(written)")
            #expect(box.sh("cat /srv/downloads/report.txt").stdout == "a report\n")
        }
    }

    @Test func aMembersRequestsRunWithItsRightsAndAreAttributedInTheJournal() throws {
        try withInstalledBox { box in
            box.sh("groupadd nlctl && useradd -M -N -g nlctl nlmember && mkdir -p /srv/downloads/member /srv/downloads/root-only"
                   + " && chown nlmember:nlctl /srv/downloads/member && chmod 0755 /srv/downloads/root-only")
            let uid = box.sh("id -u nlmember").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            box.write("/var/www/html/report.txt", "a report\n")
            box.sh("chmod 0644 /var/www/html/report.txt")
            box.write("/etc/netlifed/netlifed.conf", config(daemon: "control-group = nlctl", apps: echoApp + """

                [app files]
                [listener files.http]
                address = 127.0.0.1:8082
                service = http
                root = /var/www/html

                [app fetcher]
                """))
            box.sh("mkdir -p /etc/systemd/system/netlifed.service.d && cp /usr/share/netlife/systemd/netlifed-members.conf /etc/systemd/system/netlifed.service.d/members.conf")
            box.write("/etc/systemd/system/netlifed.service.d/site.conf", "[Service]\nSupplementaryGroups=nlctl\nReadWritePaths=/srv/downloads\n")
            #expect(box.sh("systemctl daemon-reload && systemctl restart netlifed").status == 0, "\(box.sh("journalctl -u netlifed -o cat | tail -n 20"))")
            let member = "setpriv --reuid=nlmember --regid=nlctl --init-groups netlifectl"
            let background = box.sh("\(member) background echo")
            #expect(background.status == 0, "\(background)")
            // The journal says who asked, as fields a query can select.
            let verbose = box.sh("journalctl -u netlifed NETLIFE_UID=\(uid) -o verbose").stdout
            #expect(verbose.contains("asked: background echo") && verbose.contains("NETLIFE_PID=") && verbose.contains("NETLIFE_APP=echo")
                    && verbose.contains("NETLIFE_COMMAND=background"), "\(verbose.prefix(3000))")
            // Under the drop-in a member's download runs with its rights: its own directory yes, root's no.
            let url = "http://127.0.0.1:8082/report.txt"
            let own = box.sh("\(member) download fetcher \(url) --output /srv/downloads/member/report.txt")
            #expect(own.status == 0, "\(own)")
            #expect(box.sh("stat -c %U /srv/downloads/member/report.txt").stdout == "nlmember\n")
            let refused = box.sh("\(member) download fetcher \(url) --output /srv/downloads/root-only/report.txt")
            #expect(refused.status == 1 && refused.stderr.contains("uid \(uid) cannot write in /srv/downloads/root-only"), "\(refused)")
            #expect(box.sh("ls -A /srv/downloads/root-only").stdout.isEmpty)
            // Daemon-wide commands are root's (or admin-group's).
            #expect(box.sh("\(member) reload").status == 4)
        }
    }

    @Test func checkConfigKnowsTheUnitsSandboxAndAccessLogsAreReadByAdm() throws {
        try withInstalledBox { box in
            box.sh("mkdir -p /srv/logs /var/www/html && echo page > /var/www/html/index.html && chmod 0644 /var/www/html/index.html")
            func files(log: String) -> String {
                config(apps: "[app files]\n[listener files.http]\naddress = 127.0.0.1:8083\nservice = http\nroot = /var/www/html\naccess-log = \(log)\n")
            }
            // A directory writable from the shell but read-only under the unit: the check says so, with the remedy.
            box.write("/etc/netlifed/netlifed.conf", files(log: "/srv/logs/access.log"))
            let sandboxed = box.sh("netlifed --check-config /etc/netlifed/netlifed.conf")
            #expect(sandboxed.status == 1 && sandboxed.stderr.contains("/srv/logs is read-only under netlifed.service")
                    && sandboxed.stderr.contains("ReadWritePaths=/srv/logs"), "\(sandboxed)")
            // The package's log directory: ok, and the log it makes is read by adm.
            box.write("/etc/netlifed/netlifed.conf", files(log: "/var/log/netlife/access.log"))
            let checked = box.sh("netlifed --check-config /etc/netlifed/netlifed.conf")
            #expect(checked.status == 0, "\(checked)")
            #expect(box.sh("systemctl restart netlifed").status == 0)
            #expect(box.sh("curl -sf http://127.0.0.1:8083/index.html").stdout == "page\n")
            #expect(waitUntil(timeout: 5) { box.sh("stat -c '%a %G' /var/log/netlife/access.log").stdout == "640 adm\n" },
                    "\(box.sh("ls -la /var/log/netlife"))")
            // Degraded (a listener whose port another process holds): the unit stays active, STATUS= and
            // `netlifectl status` say so, and status exits 5 for a health check.
            box.sh("systemd-run --unit=holder /usr/bin/systemd-socket-activate -l 127.0.0.1:8084 /bin/sleep 600")
            box.write("/etc/netlifed/conf.d/taken.conf", "[app taken]\n[listener taken.main]\naddress = 127.0.0.1:8084\nservice = echo\n")
            box.write("/etc/netlifed/netlifed.conf", config(daemon: "include = /etc/netlifed/conf.d/*.conf",
                                                           apps: "[app files]\n[listener files.http]\naddress = 127.0.0.1:8083\nservice = http\nroot = /var/www/html\n"))
            #expect(waitUntil(timeout: 5) { box.sh("systemctl is-active holder").stdout == "active\n" }, "the holder listens")
            #expect(box.sh("systemctl restart netlifed").status == 0)
            #expect(box.property("ActiveState") == "active")
            #expect(box.property("StatusText").hasPrefix("degraded (listener taken.main on 127.0.0.1:8084"), "\(box.property("StatusText"))")
            let health = box.sh("netlifectl status")
            #expect(health.status == 5 && health.stdout.hasPrefix("netlifed: degraded:"), "\(health)")
        }
    }

    @Test func theUnitLetsNetlifedArmItsMemoryPressureTriggerOnlyOnItsOwnCgroupAndOnlyWithWholeTwoSecondWindows() throws {
        try withInstalledBox { box in
            // ProtectControlGroups=yes makes the cgroup tree read-only; the unit's ReadWritePaths= gives back
            // its own cgroup's memory.pressure (under /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host).
            box.write("/etc/netlifed/netlifed.conf", config(daemon: "memory-pressure-trigger = some 150ms 2s"))
            let started = box.sh("systemctl restart netlifed")
            let journal = { box.sh("journalctl -u netlifed -o cat").stdout }
            #expect(started.status == 0 && box.property("ActiveState") == "active", "\(started)\n\(journal())")
            let armed = journal().split(separator: "\n").first { $0.contains("memory pressure: trigger some 150ms 2s ('some 150000 2000000') armed on ") }
            #expect(armed?.hasSuffix("/system.slice/netlifed.service/memory.pressure (netlifed's cgroup)") == true, "\(journal())")
            #expect(box.echo("ping", port: 7070) == "ping")

            // Without that line the file is read-only: the start stops and says so.
            box.write("/etc/systemd/system/netlifed.service.d/no-pressure.conf", "[Service]\nReadWritePaths=\nReadWritePaths=-/var/log/netlife\n")
            #expect(box.sh("systemctl daemon-reload").status == 0)
            #expect(box.sh("systemctl restart netlifed").status != 0)
            #expect(box.property("ExecMainStatus") == "78")
            let readOnly = box.sh("journalctl -u netlifed -p err -o cat").stdout
            #expect(readOnly.contains("EROFS (Read-only file system): the cgroup tree is read-only here"), "\(readOnly)")
            box.sh("rm /etc/systemd/system/netlifed.service.d/no-pressure.conf && systemctl daemon-reload")

            // The unit grants no CAP_SYS_RESOURCE: from Linux 6.5 the kernel takes only whole 2 s windows.
            guard kernelHasTheTwoSecondRule() else { return }
            box.write("/etc/netlifed/netlifed.conf", config(daemon: "memory-pressure-trigger = some 150ms 1s"))
            #expect(box.sh("systemctl restart netlifed").status != 0)
            usleep(2_500_000)
            #expect(box.property("ActiveState") == "failed" && box.property("NRestarts") == "0")
            let refused = box.sh("journalctl -u netlifed -p err -o cat").stdout
            #expect(refused.contains("memory-pressure-trigger = some 150ms 1s: the kernel refused the trigger: writing 'some 150000 1000000' to ")
                    && refused.contains("failed with EINVAL (Invalid argument). netlifed runs without CAP_SYS_RESOURCE"), "\(refused)")
        }
    }
}

