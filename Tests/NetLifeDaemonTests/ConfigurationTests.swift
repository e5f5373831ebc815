// The config's meaning: sections, keys, values, profiles and errors with line numbers.

@preconcurrency import Glibc
@testable import NetLifeDaemon
import NetLife
import NetLifeEvent
import NetLifeServices
import NetLifeTestSupport
import Testing

private func parse(_ text: String) throws(ConfigErrors) -> DaemonConfiguration {
    try ConfigLoader.parse(text, file: "test.conf", services: .builtin)
}

private func errors(_ text: String) -> [String] {
    do {
        _ = try parse(text)
        return []
    } catch {
        return error.errors.map(\.description)
    }
}

@Suite struct ConfigurationTests {
    @Test func readsAFullConfig() throws {
        let config = try parse("""
            # comment
            [daemon]
            control = /run/x/control.sock
            loop-stall = 3s
            debug-commands = yes
            log-level = debug

            [app files]
            profile = ios7
            background-budget = 500ms
            task-time = 10m
            on-did-enter-background = /usr/local/bin/flush --all "two words"
            on-expiration = 'end task'
            auto-suspend = never
            exits-on-suspend = no
            background-mode = continuous
            launch = background

            ; a listener
            [listener files.main]
            address = [::1]:8080
            service = echo
            connections = close
            max-connections = 100
            """)
        #expect(config.control == "/run/x/control.sock")
        #expect(config.loopStall == .seconds(3))
        #expect(config.debugCommands)
        #expect(config.logLevel == .debug)
        let app = try #require(config.apps.first)
        #expect(app.name == "files")
        #expect(app.launch == .background)
        #expect(app.budgets.taskTime == .seconds(600), "an explicit key overrides the profile")
        #expect(app.budgets.background == .milliseconds(500))
        #expect(app.budgets.foreground == .seconds(10))
        #expect(app.hooks[.didEnterBackground]?.arguments == ["/usr/local/bin/flush", "--all", "two words"])
        #expect(app.expirationHook?.arguments == ["end task"])
        #expect(app.autoSuspend == nil)
        #expect(app.backgroundMode == .continuous)
        let listener = try #require(app.listeners.first)
        #expect(listener.address == .ipv6("::1", port: 8080))
        #expect(listener.connections == .close)
        #expect(listener.maxConnections == 100)
    }

    @Test func profilesSetTheTaskTime() throws {
        for (profile, seconds) in [("ios4", 600), ("ios7", 180), ("ios13", 30)] {
            let config = try parse("[app a]\nprofile = \(profile)\n")
            #expect(config.apps[0].budgets.taskTime == .seconds(seconds))
            #expect(config.apps[0].budgets.launch == .seconds(20))
        }
        #expect(try parse("[app a]\n").apps[0].budgets.taskTime == .seconds(30), "ios13 is the default")
    }

    @Test func reportsEveryErrorWithItsLine() {
        #expect(errors("[daemon]\nnope = 1\n") == ["test.conf:2: unknown key 'nope' in [daemon]"])
        #expect(errors("[app a]\nlaunch = maybe\n") == ["test.conf:2: launch must be foreground, background or no, got 'maybe'"])
        #expect(errors("[app a]\nauto-suspend = 5 s\n") == ["test.conf:2: auto-suspend: '5 s' is not a duration (write e.g. 250ms, 5s, 10m or 1h)"])
        #expect(errors("[app a]\nmultitasking = perhaps\n") == ["test.conf:2: multitasking must be yes or no, got 'perhaps'"])
        #expect(errors("[app a]\non-did-become-active = echo 'open\n") == ["test.conf:2: on-did-become-active: unterminated single quote"])
        #expect(errors("[app a]\nlaunch = no\nlaunch = no\n") == ["test.conf:3: duplicate key 'launch' (first at line 2)"])
        #expect(errors("[app a]\n[app a]\n") == ["test.conf:2: duplicate section [app a] (first at line 1)"])
        #expect(errors("key = value\n") == ["test.conf:1: 'key' is outside any section; start with [daemon] or [app NAME]"])
        #expect(errors("[app a]\njunk\n") == ["test.conf:2: expected 'key = value' or a [section], got 'junk'"])
        #expect(errors("[app a]\n[listener a.x]\naddress = 127.0.0.1:1\nservice = nope\n") == ["test.conf:4: unknown service 'nope'; known: echo, http"])
        #expect(errors("[app a]\n[listener a.x]\nservice = echo\n") == ["test.conf:2: listener a.x needs 'address = ...'"])
        #expect(errors("[app a]\ntask-time = 3s\nexpiration-lead = 5s\n").first?.hasPrefix("test.conf:2: expiration-lead") == true)
        #expect(errors("[app a]\nreclaim-on-suspend = maybe\n") == ["test.conf:2: reclaim-on-suspend must be yes or no, got 'maybe'"])
        #expect(errors("[app a]\n[listener a.x]\naddress = 127.0.0.1:9\nservice = echo\n[app b]\n[listener b.y]\naddress = 127.0.0.1:9\nservice = echo\n")
                == ["test.conf:6: listener b.y uses 127.0.0.1:9, as listener a.x does"])
        #expect(errors("[daemon]\nfoo = 1\n[app a]\nlaunch = x\n").count == 2, "every error is reported, not just the first")
    }

    @Test func durationsBooleansAndCommandLines() throws {
        #expect(ConfigValues.duration("250ms") == .milliseconds(250))
        #expect(ConfigValues.duration("5s") == .seconds(5))
        #expect(ConfigValues.duration("10m") == .seconds(600))
        #expect(ConfigValues.duration("1h") == .seconds(3600))
        #expect(ConfigValues.duration("0") == .zero)
        for bad in ["", "5", "s", "-1s", "1.5s", "5 s", "5sec"] { #expect(ConfigValues.duration(bad) == nil, "\(bad)") }
        #expect(ConfigValues.boolean("yes") == true)
        #expect(ConfigValues.boolean("no") == false)
        #expect(ConfigValues.boolean("maybe") == nil)
        #expect(try ConfigValues.splitCommandLine(#"a  'b c' "d \"e\" $HOME" f\ g"#) == ["a", "b c", #"d "e" $HOME"#, "f g"])
        #expect(try ConfigValues.splitCommandLine(#"'' x"#) == ["", "x"])
        #expect(throws: ConfigValues.SplitError.self) { try ConfigValues.splitCommandLine(#"a "b"#) }
        #expect(throws: ConfigValues.SplitError.self) { try ConfigValues.splitCommandLine("a \\") }
    }

    @Test func daemonOptions() throws {
        let options = try DaemonOptions(arguments: ["--config", "/etc/x.conf", "--control=/tmp/c.sock", "--log-level", "debug"])
        #expect(options.configPath == "/etc/x.conf")
        #expect(options.controlPath == "/tmp/c.sock")
        #expect(options.logLevel == .debug)
        #expect(try DaemonOptions(arguments: ["--check-config", "f"]).action == .checkConfig("f"))
        #expect(throws: DaemonOptions.UsageError.self) { try DaemonOptions(arguments: ["--config"]) }
        #expect(throws: DaemonOptions.UsageError.self) { try DaemonOptions(arguments: ["--bogus"]) }
    }

    @Test func metricsTakesATCPAddressAndIsOffWithout() throws {
        #expect(try parse("[daemon]\n").metrics == nil)
        #expect(try parse("[daemon]\nmetrics = 127.0.0.1:9464\n").metrics == .ipv4("127.0.0.1", port: 9464))
        #expect(try parse("[daemon]\nmetrics = [::1]:0\n").metrics == .ipv6("::1", port: 0))
        #expect(try parse("[daemon]\nmetrics = *:9464\n").metrics == .ipv4("0.0.0.0", port: 9464))
        #expect(errors("[daemon]\nmetrics = /run/metrics.sock\n")
                == ["test.conf:2: metrics needs a TCP address such as 127.0.0.1:9464 or [::1]:9464, got '/run/metrics.sock'"])
        #expect(errors("[daemon]\nmetrics = localhost:9464\n").count == 1)
    }

    @Test func aCRLFConfigReadsAsItsLFTwin() throws {
        // Found while building the fuzz corpus: "\r\n" is one Character, so a CRLF file was one long line.
        let lf = "[daemon]\nloop-stall = 3s\n\n[app a]\nlaunch = no\n"
        let crlf = lf.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\r\n")
        let fromCRLF = try parse(crlf)
        let fromLF = try parse(lf)
        #expect(fromCRLF == fromLF)
        #expect(errors("[app a]\r\nlaunch = maybe\r\n") == ["test.conf:2: launch must be foreground, background or no, got 'maybe'"])
    }

    @Test func readsSocketSections() throws {
        let config = try parse("""
            [daemon]
            keepalive-min = 2s
            [app mail]
            reclaim-on-suspend = yes
            on-voip-data = /usr/bin/logger voip
            [socket mail.imap]
            connect = 127.0.0.1:1143
            protocol = line
            policy = quiet
            quiet-enter = PAUSE
            quiet-exit = RESUME
            voip = yes
            keepalive = 5s
            keepalive-message = PING
            """)
        let app = try #require(config.apps.first)
        #expect(app.reclaimOnSuspend)
        #expect(app.voipDataHook?.arguments == ["/usr/bin/logger", "voip"])
        let socket = try #require(app.sockets.first)
        #expect(socket.name == "imap")
        #expect(socket.address == .ipv4("127.0.0.1", port: 1143))
        #expect(socket.policy == .quiet)
        #expect(socket.voip)
        #expect(socket.keepalive == .seconds(5))
        #expect(socket.protocolOptions["quiet-enter"] == "PAUSE")
        #expect(try parse("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\n").apps[0].sockets[0].policy == .keep)
    }

    @Test func socketErrorsNameTheirLine() {
        #expect(errors("[app a]\n[socket a.s]\nprotocol = line\n") == ["test.conf:2: socket a.s needs 'connect = ...'"])
        #expect(errors("[app a]\n[socket b.s]\nconnect = 127.0.0.1:9\nprotocol = line\n")
                == ["test.conf:2: socket b.s belongs to app 'b', which has no [app b] section"])
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = smtp\n").first?.hasPrefix("test.conf:4: unknown protocol 'smtp'") == true)
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:0\nprotocol = line\n") == ["test.conf:3: connect needs a port other than 0, got '127.0.0.1:0'"])
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\npolicy = sleep\n")
                == ["test.conf:5: policy must be close, quiet or keep, got 'sleep'"])
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\npolicy = quiet\n")
                == ["test.conf:2: protocol line: policy = quiet needs quiet-enter = LINE (the line that asks the peer for quiet mode)"])
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\nuser = x\n") == ["test.conf:5: unknown key 'user' in [socket]"])
    }

    @Test func voipOnlyOnAnOutboundTCPSocketThatStaysOpen() {
        #expect(errors("[app a]\nvoip = yes\n") == ["test.conf:2: voip belongs to an outbound TCP [socket APP.NAME] section, not to [app]"])
        #expect(errors("[app a]\n[listener a.m]\naddress = 127.0.0.1:0\nservice = echo\nvoip = yes\n")
                == ["test.conf:5: voip belongs to an outbound TCP [socket APP.NAME] section; a listener cannot be a VoIP socket"])
        #expect(errors("[app a]\n[socket a.s]\nconnect = unix:/run/x.sock\nprotocol = line\nvoip = yes\n")
                == ["test.conf:5: voip = yes needs an outbound TCP socket; a.s connects to a Unix socket"])
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\npolicy = close\nvoip = yes\n")
                == ["test.conf:6: voip = yes keeps the socket open in the background, which policy = close contradicts (use keep or quiet)"])
    }

    @Test func aProgramsUserIsResolvedWhenTheConfigIsRead() throws {
        let config = try parse("[app web]\nexec = /usr/sbin/lighttpd -D\nuser = nobody\n")
        let nobody = try #require(account(named: "nobody"))
        #expect(config.apps.first?.program?.user == ProgramUser(name: "nobody", uid: nobody.uid, gid: nobody.gid))
        #expect(try parse("[app web]\nexec = /usr/sbin/lighttpd -D\n").apps.first?.program?.user == nil)
        #expect(errors("[app web]\nexec = /usr/sbin/lighttpd -D\nuser = no-such-user\n") == ["test.conf:3: user: no user named 'no-such-user'"])
        #expect(errors("[app web]\nexec = /bin/sleep\nuser = nobody\u{0}x\n").first?.hasPrefix("test.conf:3: user: no user named") == true,
                "a NUL does not cut the name short")
        #expect(errors("[app web]\nuser = nobody\n") == ["test.conf:2: user needs exec = PROGRAM in the same [app] section"])
    }

    @Test func readyAndWatchdogOfAProgramAreReadAndChecked() throws {
        let plain = try parse("[app web]\nexec = /bin/sleep\n").apps[0].program
        #expect(plain?.ready == .start && plain?.watchdog == nil)
        let set = try parse("[app web]\nexec = /bin/sleep\nready = notify\nwatchdog = 250ms\n").apps[0].program
        #expect(set?.ready == .notify && set?.watchdog == .milliseconds(250))
        #expect(try parse("[app web]\nexec = /bin/sleep\nwatchdog = no\n").apps[0].program?.watchdog == nil)
        #expect(errors("[app web]\nexec = /bin/sleep\nready = yes\n") == ["test.conf:3: ready must be start or notify, got 'yes'"])
        #expect(errors("[app web]\nexec = /bin/sleep\nwatchdog = 10ms\n").first?.hasPrefix("test.conf:3: watchdog") == true)
        #expect(errors("[app web]\nready = notify\nwatchdog = 1s\n") == ["test.conf:2: ready needs exec = PROGRAM in the same [app] section",
                                                                      "test.conf:3: watchdog needs exec = PROGRAM in the same [app] section"])
    }

    @Test func adoptIsReadOnAProcessAppsListenerWithAnExplicitPort() throws {
        let app = try parse("[app web]\nexec = /bin/sleep\n[listener web.http]\naddress = 127.0.0.9:8080\nadopt = yes\n[listener web.admin]\naddress = 127.0.0.9:8081\n").apps[0]
        #expect(app.listeners.map(\.adopt) == [true, false])
        #expect(try parse("[app web]\nexec = /bin/sleep\n[listener web.http]\naddress = 127.0.0.9:8080\nadopt = no\n").apps[0].listeners[0].adopt == false)
        #expect(errors("[app web]\nexec = /bin/sleep\n[listener web.http]\naddress = 127.0.0.9:0\nadopt = yes\n")
                == ["test.conf:4: listener web.http: adopt = yes needs an explicit port (the port the program binds), not 127.0.0.9:0"])
        #expect(errors("[app web]\nexec = /bin/sleep\n[listener web.http]\naddress = 127.0.0.9:8080\nadopt = maybe\n")
                == ["test.conf:5: adopt must be yes or no, got 'maybe'"])
        #expect(errors("[app web]\n[listener web.http]\naddress = 127.0.0.9:8080\nservice = echo\nadopt = yes\n")
                == ["test.conf:5: adopt belongs to a listener of a process app (exec): only a program binds its own listeners"])
        // A missing port is an error of the address itself.
        #expect(errors("[app web]\nexec = /bin/sleep\n[listener web.http]\naddress = 127.0.0.9\nadopt = yes\n").first?.hasPrefix("test.conf:4: address") == true)
    }

    @Test func transferLimitsHaveDefaultsAndRanges() throws {
        #expect(try parse("[daemon]\n").transferLimits == TransferLimits(idleTimeout: .seconds(60), lowSpeedLimit: 100, lowSpeedTime: .seconds(60)))
        let set = try parse("[daemon]\ntransfer-idle-timeout = 250ms\ntransfer-low-speed-limit = 0\ntransfer-low-speed-time = 2m\n")
        #expect(set.transferLimits == TransferLimits(idleTimeout: .milliseconds(250), lowSpeedLimit: 0, lowSpeedTime: .seconds(120)))
        #expect(errors("[daemon]\ntransfer-idle-timeout = 0\n") == ["test.conf:2: transfer-idle-timeout must be between 100ms and 24h, got '0'"])
        #expect(errors("[daemon]\ntransfer-low-speed-time = 50ms\n") == ["test.conf:2: transfer-low-speed-time must be between 100ms and 24h, got '50ms'"])
        for bad in ["-1", "1k", "", "1073741825", "99999999999999999999"] {
            #expect(errors("[daemon]\ntransfer-low-speed-limit = \(bad)\n").first?.hasPrefix("test.conf:2: transfer-low-speed-limit must be a whole number") == true, "\(bad)")
        }
    }

    @Test func keepaliveMustReachKeepaliveMin() {
        let below = errors("[daemon]\nkeepalive-min = 30s\n[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\nvoip = yes\nkeepalive = 10s\nkeepalive-message = PING\n")
        #expect(below == ["test.conf:8: keepalive must be between 30s and 24h, got '10s'"])
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\nvoip = yes\nkeepalive = 1h\n")
                == ["test.conf:6: protocol line: keepalive needs keepalive-message = LINE (the line sent as the keep-alive)"])
    }

    @Test func keepaliveBelongsToAVoIPSocketOnly() {
        // On iOS only a VoIP app has a keep-alive handler: a keep-alive on another socket would wake the app.
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\nkeepalive = 1h\nkeepalive-message = PING\n")
                == ["test.conf:5: keepalive belongs to a VoIP socket (voip = yes): on iOS only a VoIP app has a keep-alive handler"])
        #expect(errors("[app a]\n[socket a.s]\nconnect = 127.0.0.1:9\nprotocol = line\nkeepalive = 1h\nkeepalive-message = PING\nvoip = yes\n").isEmpty)
    }

    @Test func accessKeysNameExistingUsersAndGroups() throws {
        let config = try parse("[daemon]\nadmin-group = root\n[app a]\nallow-users = root 4242\nallow-groups = root 0\n[app b]\n")
        #expect(config.adminGroup == NamedID(name: "root", id: 0))
        #expect(config.appAccess["a"] == AppAccess(users: [NamedID(name: "root", id: 0), NamedID(name: "4242", id: 4242)],
                                                  groups: [NamedID(name: "root", id: 0), NamedID(name: "0", id: 0)]))
        #expect(config.appAccess["b"] == nil, "an app without the keys is open to every member")
        #expect(errors("[app a]\nallow-users = root no-such-user-here\n") == ["test.conf:2: allow-users: no user named 'no-such-user-here'"])
        #expect(errors("[app a]\nallow-groups = no-such-group-here\n") == ["test.conf:2: allow-groups: no group named 'no-such-group-here'"])
        #expect(errors("[app a]\nallow-users =\n") == ["test.conf:2: allow-users needs at least one user name"])
        #expect(errors("[daemon]\nadmin-group = root nogroup\n") == ["test.conf:2: admin-group takes one group, got 'root nogroup'"])
        #expect(errors("[daemon]\nallow-users = root\n") == ["test.conf:2: unknown key 'allow-users' in [daemon]"])
    }

    @Test func includedFilesAddAppsAndTheirErrorsNameTheirOwnFileAndLine() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        #expect(mkdir(directory.file("conf.d"), 0o755) == 0)
        // Read in name order; a listener may name an app of another file.
        directory.write("conf.d/20-web.conf", "[app web]\n[listener main.http]\naddress = 127.0.0.1:0\nservice = echo\n")
        directory.write("conf.d/10-mail.conf", "[app mail]\nauto-suspend = 5s\n")
        directory.write("conf.d/notes.txt", "not a config")
        let main = "[daemon]\ninclude = conf.d/*.conf\n[app main]\n"
        let config = try ConfigLoader.parse(main, file: directory.file("netlifed.conf"), services: .builtin)
        #expect(config.apps.map(\.name) == ["main", "mail", "web"])
        #expect(config.apps[0].listeners.map(\.name) == ["http"])
        // An empty conf.d is no error.
        #expect(try ConfigLoader.parse("[daemon]\ninclude = /nonexistent-netlife/*.conf\n", file: directory.file("x.conf"), services: .builtin).apps.isEmpty)
        // Errors name the included file and its line; [daemon] and a duplicate app are refused there.
        directory.write("conf.d/30-bad.conf", "[app bad]\nauto-suspend = soon\n[daemon]\nloop-stall = 1s\n[app mail]\n")
        do {
            _ = try ConfigLoader.parse(main, file: directory.file("netlifed.conf"), services: .builtin)
            Issue.record("an included file's errors were not reported")
        } catch {
            let bad = directory.file("conf.d/30-bad.conf")
            #expect(error.errors.map(\.description) == [
                "\(bad):2: auto-suspend: 'soon' is not a duration (write e.g. 250ms, 5s, 10m or 1h)",
                "\(bad):3: [daemon] belongs to the main config (\(directory.file("netlifed.conf"))), not to a file it includes",
                "\(bad):5: duplicate section [app mail] (first at \(directory.file("conf.d/10-mail.conf")):1)",
            ], "\(error)")
        }
    }
}
