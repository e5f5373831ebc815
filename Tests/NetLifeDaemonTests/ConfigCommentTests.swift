// The config's one comment rule: `#` or `;` after whitespace starts a comment in every value; a quoted or
// backslash-escaped `#` stays literal in command lines, `\#` in any value, and a `#` after anything else is
// part of the value.

@testable import NetLifeDaemon
import NetLife
import Testing

private func parse(_ text: String) throws(ConfigErrors) -> DaemonConfiguration {
    try ConfigLoader.parse(text, file: "test.conf", services: .builtin)
}

@Suite(.timeLimit(.minutes(1)))
struct ConfigCommentTests {
    @Test func aCommentAfterWhitespaceEndsEveryKindOfValue() throws {
        let config = try parse("""
            [daemon]   # the daemon
            loop-stall = 3s   # a duration
            debug-commands = yes	; a boolean after a tab

            [app mail]
            launch-budget = 20s        # did-finish-launching (+ did-become-active)
            on-voip-data = /usr/local/libexec/ring     # run when VoIP data wakes the suspended app
            reclaim-on-suspend = no                    # yes: reclaim on every suspension (modern iOS)

            [listener mail.main]
            address = 127.0.0.1:0     # port 0: the kernel's choice
            service = echo            ; a comment after ';'
            mdns = _echo._tcp         # announced
            mdns-name = Mail          # the instance name
            mdns-txt = a=1 "b=2 3"    # two strings
            """)
        #expect(config.loopStall == .seconds(3))
        #expect(config.debugCommands)
        let app = try #require(config.apps.first)
        #expect(app.budgets.launch == .seconds(20))
        #expect(app.voipDataHook?.arguments == ["/usr/local/libexec/ring"], "the hook gets no words of the comment")
        #expect(app.reclaimOnSuspend == false)
        let listener = try #require(app.listeners.first)
        #expect(listener.address == .ipv4("127.0.0.1", port: 0))
        #expect(listener.service == "echo")
        #expect(listener.mdns?.type == "_echo._tcp")
        #expect(listener.mdns?.name == "Mail")
        #expect(listener.mdns?.txt == ["a=1", "b=2 3"])
    }

    @Test func aQuotedOrEscapedHashStaysInACommandLine() throws {
        let config = try parse("""
            [app a]
            on-voip-data = /bin/echo "# one" '#two' \\#three x#four "a \\" # b"  # the comment
            exec = /bin/echo --colour '#fff' ; 'semi ;colon'
            environment = NOTE='x # y' PLAIN=1 # comment
            """)
        let app = try #require(config.apps.first)
        #expect(app.voipDataHook?.arguments == ["/bin/echo", "# one", "#two", "#three", "x#four", "a \" # b"])
        #expect(app.program?.arguments == ["/bin/echo", "--colour", "#fff"])
        #expect(app.program?.environment["NOTE"] == "x # y")
        #expect(app.program?.environment["PLAIN"] == "1")
    }

    @Test func aHashNotAfterWhitespaceOrEscapedIsPartOfAPlainValue() throws {
        let config = try parse("""
            [app a]
            [listener a.main]
            address = 127.0.0.1:0
            service = echo
            mdns = _echo._tcp
            mdns-name = Room\\#1 \\; upstairs ;not#a-comment   # this is one
            """)
        #expect(config.apps.first?.listeners.first?.mdns?.name == "Room#1 ; upstairs")
        let unescaped = try parse("[app a]\n[listener a.main]\naddress = 127.0.0.1:0\nservice = echo\nmdns = _echo._tcp\nmdns-name = C#;x\n")
        #expect(unescaped.apps.first?.listeners.first?.mdns?.name == "C#;x")
    }

    @Test func aValueThatIsOnlyACommentIsEmpty() {
        #expect(throws: ConfigErrors.self) { try parse("[app a]\non-voip-data =   # nothing\n") }
        do {
            _ = try parse("[app a]\non-voip-data =   # nothing\n")
        } catch {
            #expect(error.errors.map(\.description) == ["test.conf:2: on-voip-data needs a command"])
        }
    }

    @Test func strippingIsThePureFunctionTheReaderUses() {
        #expect(INIFile.withoutComment("  5s  # x", commandLine: false) == "5s")
        #expect(INIFile.withoutComment("#x", commandLine: false) == "#x", "right after '=' a '#' follows no whitespace")
        #expect(INIFile.withoutComment("a \\# b", commandLine: false) == "a # b")
        #expect(INIFile.withoutComment("a \\# b", commandLine: true) == "a \\# b", "the splitter removes the backslash")
        #expect(INIFile.withoutComment("'unterminated # x", commandLine: true) == "'unterminated # x",
                "an open quote keeps the rest; the splitter reports it")
        #expect(INIFile.withoutComment("don't # x", commandLine: false) == "don't", "quotes mean nothing in a plain value")
        #expect(INIFile.withoutComment("trailing\\", commandLine: false) == "trailing\\")
    }
}
