// What a user reads: messages that say what is true (a suspend refused for a continuous background mode
// says so, a member of the wrong type is named), netlifectl's help for a command, unknown options, both
// versions and text for every command, and a netlifectl that links neither libevent nor the framework.

import Foundation
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(5)))
struct NetlifectlTextTests {
    @Test func messagesSayWhatIsTrue() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app", appLines: "background-mode = continuous"))
        defer { daemon.stop() }
        #expect(daemon.ctl("background", "app").status == 0)
        let suspend = daemon.ctl("suspend", "app")
        #expect(suspend.status == 0)
        #expect(suspend.stdout.contains("background mode is continuous"), "\(suspend.stdout)")
        #expect(!suspend.stdout.contains("task"), "no word of tasks: there are none")

        let client = try #require(RawControlClient(path: daemon.controlPath))
        defer { client.close() }
        client.send("{\"cmd\": \"status\", \"app\": 5}\n")
        let wrongType = (client.reply()?["error"] as? [String: Any])?["message"] as? String
        #expect(wrongType == "\"app\" must be a string", "\(wrongType ?? "no reply")")
        client.send("{\"cmd\": \"launch\", \"app\": \"app\", \"background\": \"yes\"}\n")
        let wrongBool = (client.reply()?["error"] as? [String: Any])?["message"] as? String
        #expect(wrongBool == "\"background\" must be true or false", "\(wrongBool ?? "no reply")")
    }

    @Test func netlifectlExplainsItselfAndPrintsTextForEveryCommand() throws {
        let daemon = try TestDaemon(config: "[daemon]\n" + echoApp("app"))
        defer { daemon.stop() }
        let ctl = product("netlifectl")
        for arguments in [["help", "task"], ["task", "--help"]] {
            let help = run([ctl] + arguments)
            #expect(help.status == 0)
            #expect(help.stdout.contains("task begin APP") && help.stdout.contains("task end APP ID")
                    && help.stdout.contains("task list APP"), "\(arguments): \(help.stdout)")
            #expect(!help.stdout.contains("SUBCOMMANDS"), "that command's usage, not the whole help")
        }
        let launchHelp = run([ctl, "help", "launch"])
        #expect(launchHelp.stdout.hasPrefix("USAGE: netlifectl launch APP [--background]"))
        let bogus = run([ctl, "--bogus"])
        #expect(bogus.status == 2)
        #expect(bogus.stderr.contains("unknown option '--bogus'"), "\(bogus.stderr)")
        let version = daemon.ctl("--version")
        #expect(version.status == 0)
        let lines = version.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines[0].hasPrefix("netlifectl ") && lines[1].hasPrefix("netlifed "), "\(version.stdout)")
        let noDaemon = run([ctl, "--control", daemon.directory.file("none.sock"), "--version"])
        #expect(noDaemon.status == 0, "its own version is what was asked: \(noDaemon)")
        #expect(noDaemon.stdout.hasPrefix("netlifectl ") && noDaemon.stdout.split(separator: "\n").count == 1, "its own version even without a daemon")
        #expect(noDaemon.stderr.contains("netlifed is not running"), "and why the daemon's is missing: \(noDaemon)")
        for arguments in [["status"], ["task", "list", "app"], ["version"], ["reload"], ["mode", "app", "idle"],
                          ["task", "begin", "app"], ["background", "app"], ["foreground", "app"]] {
            let result = daemon.ctl(arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            #expect(!result.stdout.contains("{") && !result.stdout.isEmpty, "\(arguments) printed text: \(result.stdout)")
        }
    }

    @Test func netlifectlLinksNeitherLibeventNorTheFramework() {
        let ldd = run(["/usr/bin/ldd", product("netlifectl")])
        #expect(ldd.status == 0)
        #expect(!ldd.stdout.contains("libevent"), "\(ldd.stdout)")
        let symbols = run(["/bin/sh", "-c", "nm -C \(product("netlifectl")) | grep -c 'NetLifeEvent\\|NetLifeDaemon\\|event_base' || true"])
        #expect(symbols.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "no framework code inside: \(symbols.stdout)")
    }
}
