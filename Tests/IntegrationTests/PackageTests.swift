// The operator's files: the man pages (lint clean; every netlifectl command, with every option of its command
// table's entry; every config key named under its section, with the default of its entry of the key table),
// the bash completion that `netlifectl completion bash` writes (every command and option of the table, file
// names for paths, and the app names of a running daemon), and scripts/package's Debian package, built from
// the binaries next to the tests (NETLIFE_BIN_DIR) or the static release build when there is one: its fields,
// its files, its maintainer scripts, and what lintian says of it.

import Foundation
import NetLifeControl
import NetLifeDaemon
import NetLifeServices
import Testing
import NetLifeTestSupport

private let repository = URL(fileURLWithPath: repositoryDirectory)

private func repositoryFile(_ path: String) -> String { repository.appendingPathComponent(path).path }

/// The first of `paths` that is an executable, if any.
private func tool(_ paths: String...) -> String? { paths.first { FileManager.default.isExecutableFile(atPath: $0) } }

/// A man page as `mandoc` renders it, without the overstrikes and tabs, `width` columns wide.
private func rendered(_ page: String, width: Int = 78) -> [String] {
    let text = run(["/bin/sh", "-c", "mandoc -Tascii -Owidth=\(width) '\(page)' | col -bx"], timeout: 20).stdout
    return text.split(separator: "\n").map(String.init)
}

/// The entry of netlifectl's command `words` in its rendered page: the tag line whose leading lowercase words
/// are `words` (`transfers [APP]` for ["transfers"], not `transfers cancel ...`), and the text under it.
private func entry(_ lines: [String], _ words: [String]) -> [String] {
    func isTag(_ line: String) -> Bool { line.hasPrefix("       ") && !line.hasPrefix("        ") }
    guard let start = lines.firstIndex(where: { isTag($0) && commandWords($0) == words }) else { return [] }
    return [lines[start]] + lines[(start + 1)...].prefix { !isTag($0) }
}

/// The leading words of `text` that are lowercase letters and dashes: the command words of a usage.
func commandWords(_ text: String) -> [String] {
    text.split(separator: " ").prefix { $0.allSatisfy { $0.isLowercase || $0 == "-" } }.map(String.init)
}

/// Whether `text` names `option` (`--cacert`), not only a longer option that begins with it.
func mentions(_ text: String, option: String) -> Bool {
    text.components(separatedBy: option).dropFirst().contains { rest in
        rest.first.map { !($0.isLetter || $0.isNumber || $0 == "-") } ?? true
    }
}

/// Whether `lines` hold an entry tagged `tag` (alone on its line, or followed by its text when it is short).
private func hasEntry(_ lines: [String], _ tag: String) -> Bool {
    lines.contains { $0 == "       " + tag || $0.hasPrefix("       " + tag + " ") }
}

/// The rendered lines of netlifed.conf(5) under each section's heading (`[daemon]`, `[app NAME]`, ...).
private func configPageSections(_ lines: [String]) -> [ConfigSection: [String]] {
    var sections: [ConfigSection: [String]] = [:]
    var current: ConfigSection?
    for line in lines {
        if let first = line.first, first != " " {
            current = ConfigSection.allCases.first { $0.header == line }
        } else if let current {
            sections[current, default: []].append(line)
        }
    }
    return sections
}

/// The text of the entry tagged `key` in `lines`: its tag line and the lines under it, up to the next tag.
private func configEntry(_ lines: [String], _ key: String) -> String {
    func isTag(_ line: String) -> Bool { line.hasPrefix("       ") && !line.hasPrefix("        ") }
    guard let start = lines.firstIndex(where: { $0 == "       " + key || $0.hasPrefix("       " + key + " ") }) else { return "" }
    return ([lines[start]] + lines[(start + 1)...].prefix { !isTag($0) }).joined(separator: " ")
}

/// The command words of each subcommand that `netlifectl --help` lists: ["status"], ["task", "begin"].
func netlifectlCommands() -> [[String]] {
    let help = run([product("netlifectl"), "--help"], timeout: 10).stdout
    guard let section = help.components(separatedBy: "SUBCOMMANDS:\n").dropFirst().first else { return [] }
    // A command's line starts two spaces in; a wrapped usage or summary goes on further in.
    return section.split(separator: "\n", omittingEmptySubsequences: false).prefix { !$0.isEmpty }
        .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }.map { line in
            line.split(separator: " ").prefix { $0.allSatisfy { $0.isLowercase || $0 == "-" } }.map(String.init)
        }
}

/// Every key of the config with the sections it may be written in: the entries of the daemon's key table
/// (ConfigKey.all) and the option keys the built-in services and protocols plug into [listener] and [socket].
func configKeySections() -> [String: Set<ConfigSection>] {
    var sections: [String: Set<ConfigSection>] = [:]
    for key in ConfigKey.all { sections[key.name, default: []].insert(key.section) }
    for section in ConfigSection.allCases {
        for key in section.optionKeys(.builtin) { sections[key, default: []].insert(section) }
    }
    return sections
}

/// Every key of the config (`configKeySections`).
func configKeys() -> Set<String> { Set(configKeySections().keys) }

/// The keys Config/netlifed.conf shows, set or commented out: each `key =` or `#key =` at the start of a line.
func annotatedConfigKeys() -> Set<String> {
    var keys: Set<String> = []
    for line in contents(repositoryFile("Config/netlifed.conf")).split(separator: "\n") {
        let text = line.hasPrefix("#") ? line.dropFirst() : line[...]
        if let equals = text.range(of: " ="), text[..<equals.lowerBound].allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" }),
           !text[..<equals.lowerBound].isEmpty {
            keys.insert(String(text[..<equals.lowerBound]))
        }
    }
    return keys
}

/// The candidates bash completion, as `netlifectl completion bash` writes it, offers for the last word of
/// `words` (empty: a new word), with `path` as PATH and `directory` as the current directory.
private func complete(_ words: [String], path: String = "/usr/bin:/bin", in directory: String = "/") -> [String] {
    let quoted = words.map { "'" + $0 + "'" }.joined(separator: " ")
    let script = """
        source <('\(product("netlifectl"))' completion bash) && cd '\(directory)' || exit 1
        COMP_WORDS=(\(quoted)); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        _netlifectl
        printf '%s\\n' "${COMPREPLY[@]}"
        """
    let result = run(["/bin/bash", "-c", script], environment: ["PATH": path], timeout: 20)
    return result.stdout.split(separator: "\n").map(String.init).sorted()
}

@Suite(.timeLimit(.minutes(5)))
struct ManPageTests {
    static let pages = ["man/netlifed.8", "man/netlifectl.1", "man/netlifed.conf.5"]

    @Test(arguments: pages)
    func lintsClean(_ page: String) {
        let mandoc = run(["/usr/bin/mandoc", "-Tlint", repositoryFile(page)], timeout: 20)
        #expect(mandoc.status == 0 && mandoc.stdout.isEmpty && mandoc.stderr.isEmpty, "\(mandoc)")
        let groff = run(["/usr/bin/groff", "-man", "-ww", "-z", repositoryFile(page)], timeout: 20)
        #expect(groff.status == 0 && groff.stderr.isEmpty, "\(groff)")
    }

    @Test func netlifectlsPageNamesEveryCommandAndExitStatus() {
        let commands = netlifectlCommands()
        #expect(commands.count >= 20, "\(commands)")
        let lines = rendered(repositoryFile("man/netlifectl.1"))
        for words in commands {
            #expect(hasEntry(lines, words.joined(separator: " ")), "netlifectl(1) has no entry for \(words.joined(separator: " "))")
        }
        for option in ["--control PATH", "--json", "--version", "-h, --help"] {
            #expect(lines.contains { $0.hasPrefix("       " + option) }, "netlifectl(1) has no entry for \(option)")
        }
        let exit = Array(lines.drop { $0 != "EXIT STATUS" }.prefix { $0 != "ENVIRONMENT" })
        for status in 0...3 {
            #expect(hasEntry(exit, String(status)), "exit status \(status)")
        }
    }

    @Test func netlifectlsPageNamesEveryOptionOfEveryCommandInItsEntry() {
        let lines = rendered(repositoryFile("man/netlifectl.1"), width: 400)
        for command in ControlCommand.all {
            let text = entry(lines, command.words).joined(separator: "\n")
            #expect(!text.isEmpty, "netlifectl(1) has no entry for \(command.words.joined(separator: " "))")
            for option in command.options {
                #expect(mentions(text, option: option.name), "netlifectl(1) does not name \(option.name) under \(command.words.joined(separator: " "))")
            }
        }
    }

    @Test func netlifedConfsPageNamesEveryKey() {
        let keys = configKeys()
        #expect(keys.isSuperset(of: ["control", "launch", "task-time", "loop-stall", "address", "connect", "exec", "max-ranges"]), "\(keys)")
        let lines = rendered(repositoryFile("man/netlifed.conf.5"))
        for key in keys.sorted() {
            #expect(hasEntry(lines, key), "netlifed.conf(5) has no entry for \(key)")
        }
    }

    @Test func netlifedConfsPageNamesEachKeyInItsSectionWithItsDefault() {
        let sections = configPageSections(rendered(repositoryFile("man/netlifed.conf.5"), width: 400))
        #expect(Set(sections.keys) == Set(ConfigSection.allCases), "\(sections.keys)")
        for (key, belongs) in configKeySections().sorted(by: { $0.key < $1.key }) {
            for section in belongs {
                #expect(hasEntry(sections[section] ?? [], key), "netlifed.conf(5) has no entry for \(key) under \(section.header)")
            }
        }
        for key in ConfigKey.all {
            guard let value = key.defaultValue else { continue }
            let text = configEntry(sections[key.section] ?? [], key.name).lowercased()
            #expect(text.contains("default \(value)") || text.contains("default: \(value)"),
                    "netlifed.conf(5) does not say \(key.name)'s default, \(value): \(text)")
        }
    }

    @Test func netlifedConfsExampleIsAValidConfig() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let source = contents(repositoryFile("man/netlifed.conf.5"))
        let example = try #require(source.components(separatedBy: ".EX\n").dropFirst().first?.components(separatedBy: ".EE\n").first)
        // Its paths made real: the served directory and the password file.
        try FileManager.default.createDirectory(atPath: scratch.file("files"), withIntermediateDirectories: true)
        scratch.write("secret", "hunter2\n")
        let config = example.replacingOccurrences(of: "\\-", with: "-")
            .replacingOccurrences(of: "/srv/files", with: scratch.file("files"))
            .replacingOccurrences(of: "/etc/netlifed/mail.secret", with: scratch.file("secret"))
        scratch.write("example.conf", config)
        let check = run([product("netlifed"), "--check-config", scratch.file("example.conf")], timeout: 20)
        #expect(check.status == 0, "\(check)\n\(config)")
    }

    @Test func netlifedsPageNamesEveryOption() {
        let lines = rendered(repositoryFile("man/netlifed.8"))
        for option in ["--config FILE", "--control PATH", "--log-level LEVEL", "--check-config FILE", "--version", "-h, --help"] {
            #expect(hasEntry(lines, option), "netlifed(8) has no entry for \(option)")
        }
    }
}

@Suite(.timeLimit(.minutes(5)))
struct CompletionTests {
    @Test func offersEveryCommandAndSubcommand() {
        let commands = netlifectlCommands()
        #expect(complete(["netlifectl", ""]) == Set(commands.map { $0[0] }).sorted())
        for family in ["task", "debug"] {
            let expected = commands.filter { $0.count == 2 && $0[0] == family }.map { $0[1] }.sorted()
            #expect(!expected.isEmpty)
            #expect(complete(["netlifectl", family, ""]) == expected, "\(family)")
        }
        #expect(complete(["netlifectl", "--"]) == ["--control", "--help", "--host", "--json", "--version"])
        #expect(complete(["netlifectl", "mode", "echo", ""]) == ["continuous", "idle"])
        #expect(complete(["netlifectl", "launch", "echo", "--b"]) == ["--background"])
        #expect(complete(["netlifectl", "memory-pressure", "--f"]) == ["--free"])
    }

    @Test func theScriptNamesEveryCommandAndOptionOfTheTableAndBashReadsIt() throws {
        let generated = run([product("netlifectl"), "completion", "bash"], timeout: 10)
        try #require(generated.status == 0 && generated.stderr.isEmpty, "\(generated)")
        let script = generated.stdout
        for command in ControlCommand.all {
            let name = command.words.joined(separator: " ")
            #expect(script.contains("\"\(name)\""), "the script does not name \(name)")
            for word in command.words {
                #expect(mentions(script, option: word), "the script does not name the word \(word) of \(name)")
            }
            for option in command.options {
                #expect(mentions(script, option: option.name), "the script does not name \(option.name) of \(name)")
            }
        }
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("netlifectl.bash", script)
        let syntax = run(["/bin/bash", "-n", scratch.file("netlifectl.bash")], timeout: 10)
        #expect(syntax.status == 0 && syntax.stderr.isEmpty, "\(syntax)")
    }

    @Test func completesTheOptionsOfEveryCommandAndFilesForTheirPaths() throws {
        #expect(complete(["netlifectl", "download", "--ca"]) == ["--cacert"])
        #expect(complete(["netlifectl", "upload", "app", "--in"]) == ["--insecure"])
        #expect(complete(["netlifectl", "download", "app", "http://x/", "--ss"]) == ["--ssl-reqd"])
        #expect(complete(["netlifectl", "transfers", "c"]) == ["cancel"])
        #expect(complete(["netlifectl", "transfers", "cancel", "--"]) == ["--app", "--control", "--help", "--host", "--json", "--url"])
        #expect(complete(["netlifectl", "completion", ""]) == ["bash"])
        #expect(complete(["netlifectl", "help", "tr"]) == ["transfers"])
        for command in ControlCommand.all {
            let offered = complete(["netlifectl"] + command.words + ["--"])
            #expect(Set(offered).isSuperset(of: command.options.map(\.name)), "\(command.words): \(offered)")
        }
        // A path's value is a file name, as bash splits `--output=PATH` too; a value that is no path is not
        // taken for an argument.
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("ca.pem", "")
        scratch.write("data.bin", "")
        #expect(complete(["netlifectl", "download", "app", "http://x/", "--cacert", "c"], in: scratch.path) == ["ca.pem"])
        #expect(complete(["netlifectl", "download", "app", "http://x/", "--output", "=", "d"], in: scratch.path) == ["data.bin"])
        #expect(complete(["netlifectl", "upload", "app", "d"], in: scratch.path) == ["data.bin"])
        #expect(complete(["netlifectl", "--control", "c"], in: scratch.path) == ["ca.pem"])
        #expect(complete(["netlifectl", "task", "begin", "app", "--name", "N", "--"]) == ["--control", "--help", "--host", "--json", "--name"])
        #expect(complete(["netlifectl", "mode", "--control", "/run/x.sock", "app", "c"]) == ["continuous"])
    }

    @Test func theCompletionCommandNeedsNoDaemonAndRefusesAnotherShell() {
        let ctl = product("netlifectl")
        let script = run([ctl, "--control", "/nonexistent/control.sock", "completion", "bash"], timeout: 10)
        #expect(script.status == 0 && script.stdout.hasPrefix("# bash completion for netlifectl") && script.stderr.isEmpty, "\(script)")
        for (arguments, message) in [(["zsh"], "no completion for the shell 'zsh'"), ([], "completion needs a shell"),
                                     (["bash", "bash"], "too many arguments"), (["--bash"], "unknown option '--bash'")] {
            let refused = run([ctl, "completion"] + arguments, timeout: 10)
            #expect(refused.status == 2 && refused.stdout.isEmpty, "\(arguments): \(refused)")
            #expect(refused.stderr.contains(message) && refused.stderr.contains("USAGE: netlifectl completion bash"), "\(arguments): \(refused)")
        }
        let help = run([ctl, "help", "completion"], timeout: 10)
        #expect(help.status == 0 && help.stdout.hasPrefix("USAGE: netlifectl completion bash\n"), "\(help)")
        #expect(run([ctl, "--help"], timeout: 10).stdout.contains("  completion bash "))
    }

    @Test func offersTheAppsOfTheRunningDaemonWithAndWithoutPython() throws {
        let daemon = try TestDaemon(config: echoApp("alpha") + "\n" + echoApp("beta", appLines: "launch = no"))
        defer { daemon.stop() }
        let ctl = product("netlifectl")
        for command in [["foreground"], ["status"], ["task", "begin"], ["mode"]] {
            #expect(complete([ctl, "--control", daemon.controlPath] + command + [""]) == ["alpha", "beta"], "\(command)")
        }
        #expect(complete([ctl, "--control=" + daemon.controlPath, "terminate", "a"]) == ["alpha"])
        #expect(complete([ctl, "--control", "=", daemon.controlPath, "terminate", "b"]) == ["beta"])
        #expect(complete([ctl, "--control", daemon.controlPath, "transfers", ""]) == ["alpha", "beta", "cancel"])
        #expect(complete([ctl, "--control", daemon.controlPath, "transfers", "cancel", "--app", ""]) == ["alpha", "beta"])

        // Without python3: a PATH holding only what the completion needs besides it.
        let bare = TemporaryDirectory()
        defer { bare.remove() }
        for name in ["timeout", "grep", "sed"] {
            let target = try #require(tool("/usr/bin/" + name, "/bin/" + name))
            try FileManager.default.createSymbolicLink(atPath: bare.file(name), withDestinationPath: target)
        }
        #expect(complete([ctl, "--control", daemon.controlPath, "background", ""], path: bare.path) == ["alpha", "beta"])
        #expect(run(["/bin/sh", "-c", "command -v python3"], environment: ["PATH": bare.path]).status != 0)

        // No daemon at the socket: no names, and no wait.
        let started = Date()
        #expect(complete([ctl, "--control", daemon.directory.file("none.sock"), "foreground", ""]).isEmpty)
        #expect(Date().timeIntervalSince(started) < 5)
    }
}

@Suite(.timeLimit(.minutes(8)))
struct PackageTests {
    @Test func packageHoldsTheInstallTreeTheFieldsAndTheMaintainerScriptsOfADebianPackage() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let binaries = staticReleaseDirectory ?? productsDirectory
        var environment = ProcessInfo.processInfo.environment
        environment["NETLIFE_BIN_DIR"] = binaries
        environment["OUTPUT_DIR"] = scratch.file("out")
        let built = run([repositoryFile("scripts/package")], environment: environment, timeout: 300)
        try #require(built.status == 0, "\(built)")
        let deb = try #require(built.stdout.split(separator: "\n").last.map(String.init))

        // The version is the one netlifectl prints, with the Debian revision.
        let printed = run([product("netlifectl"), "--version"], timeout: 10).stdout
        let version = try #require(printed.split(separator: "\n").first?.split(separator: " ").dropFirst().first.map(String.init), "\(printed)")
        let arch = run(["/usr/bin/dpkg", "--print-architecture"], timeout: 10).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(deb == scratch.file("out/netlife_\(version)-1_\(arch).deb"))
        #expect(FileManager.default.fileExists(atPath: deb))

        func field(_ name: String) -> String {
            run(["/usr/bin/dpkg-deb", "-f", deb, name], timeout: 20).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(field("Package") == "netlife")
        #expect(field("Version") == "\(version)-1")
        #expect(field("Architecture") == arch)
        #expect(field("Section") == "net" && field("Priority") == "optional")
        #expect(!field("Maintainer").isEmpty && Int(field("Installed-Size")) ?? 0 > 0)
        let depends = field("Depends")
        for library in ["libevent-2.1-7", "libavahi-client3", "libc6"] {
            #expect(depends.contains(library), "\(depends)")
        }

        // Its files, all root's.
        let listing = run(["/usr/bin/dpkg-deb", "-c", deb], timeout: 20).stdout.split(separator: "\n")
        #expect(listing.allSatisfy { $0.contains(" root/root ") }, "\(listing)")
        let listed = Set(listing.filter { $0.hasPrefix("-") }.compactMap { $0.split(separator: " ").last.map { String($0.dropFirst()) } })
        let expected = Set([
            "/usr/bin/netlifed", "/usr/bin/netlifectl", "/etc/netlifed/netlifed.conf", "/lib/systemd/system/netlifed.service",
            "/usr/share/man/man8/netlifed.8.gz", "/usr/share/man/man1/netlifectl.1.gz", "/usr/share/man/man5/netlifed.conf.5.gz",
            "/usr/share/bash-completion/completions/netlifectl", "/usr/share/doc/netlife/README.md",
            "/usr/share/doc/netlife/copyright", "/usr/share/doc/netlife/changelog.Debian.gz",
            "/usr/share/netlife/systemd/netlifed-process-apps.conf", "/usr/share/netlife/systemd/netlifed-members.conf",
            "/usr/share/netlife/examples/netlife_events.py", "/usr/share/netlife/examples/netlifed.conf",
        ]).union(installedCopies.keys.filter { $0.hasPrefix("/usr/share/doc/netlife/docs/") })
        #expect(listed == expected)

        let tree = scratch.file("tree")
        #expect(run(["/usr/bin/dpkg-deb", "-x", deb, tree], timeout: 60).status == 0)
        #expect(run(["/usr/bin/dpkg-deb", "-e", deb, tree + "/DEBIAN"], timeout: 20).status == 0)
        #expect(contents(tree + "/DEBIAN/conffiles") == "/etc/netlifed/netlifed.conf\n")
        // md5sums covers every file but the conffile, and matches them.
        let sums = contents(tree + "/DEBIAN/md5sums").split(separator: "\n").compactMap { $0.split(separator: " ").last.map { "/" + $0 } }
        #expect(Set(sums) == expected.subtracting(["/etc/netlifed/netlifed.conf"]))
        let check = run(["/bin/sh", "-c", "cd '\(tree)' && md5sum --quiet -c DEBIAN/md5sums"], timeout: 60)
        #expect(check.status == 0, "\(check)")
        #expect(contents(tree + "/etc/netlifed/netlifed.conf") == contents(repositoryFile("Config/system.conf")))
        // The completion is the one the packaged netlifectl writes.
        let completion = run([tree + "/usr/bin/netlifectl", "completion", "bash"], timeout: 10)
        #expect(completion.status == 0 && contents(tree + "/usr/share/bash-completion/completions/netlifectl") == completion.stdout, "\(completion)")
        let unit = contents(tree + "/lib/systemd/system/netlifed.service").split(separator: "\n")
        #expect(unit.contains("ExecStart=/usr/bin/netlifed --config /etc/netlifed/netlifed.conf"))
        #expect(!unit.contains { !$0.hasPrefix("#") && $0.contains("/usr/local/") })
        // Every other program the unit runs comes from an Essential package or one in Depends.
        for line in unit where line.hasPrefix("Exec") {
            guard let program = line.split(separator: "=", maxSplits: 1).last?.drop(while: { "-@:+!".contains($0) })
                .split(separator: " ").first.map(String.init), !program.hasPrefix("/usr/bin/netlife") else { continue }
            let owner = run(["/bin/sh", "-c", "dpkg-query -S '\(program)' | cut -d: -f1"], timeout: 20).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let essential = run(["/usr/bin/dpkg-query", "-W", "-f=${Essential}", owner], timeout: 20).stdout == "yes"
            #expect(!owner.isEmpty && (essential || depends.split(separator: ",").contains { $0.split(separator: " ").first == Substring(owner) }),
                    "\(line): \(owner) is not in Depends: \(depends)")
        }
        // Man pages and the changelog compressed with gzip -9n: no name, no time stamp.
        for page in ["man8/netlifed.8", "man1/netlifectl.1", "man5/netlifed.conf.5"] {
            let path = tree + "/usr/share/man/" + page + ".gz"
            let header = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)).prefix(10))
            #expect(header.count == 10 && header[3] & 0x08 == 0 && header[4...7].allSatisfy { $0 == 0 }, "\(page)")
            #expect(run(["/bin/sh", "-c", "gzip -dc '\(path)' | cmp -s - '\(repositoryFile("man/" + (page as NSString).lastPathComponent))'"], timeout: 20).status == 0, "\(page)")
        }
        #expect(run(["/bin/sh", "-c", "gzip -dc '\(tree)/usr/share/doc/netlife/changelog.Debian.gz' | head -1 | grep -q '^netlife (\(version)-1) '"], timeout: 20).status == 0)
        #expect(contents(tree + "/usr/share/doc/netlife/copyright").hasPrefix("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"))
        // The packaged binaries are stripped, and run.
        let file = run(["/usr/bin/readelf", "-S", tree + "/usr/bin/netlifed"], timeout: 20).stdout
        #expect(!file.contains(".symtab") && !file.contains(".comment"))
        #expect(run([tree + "/usr/bin/netlifed", "--check-config", tree + "/etc/netlifed/netlifed.conf"], timeout: 20).status == 0)

        // The maintainer scripts: executable, sh syntax, and the service handling of dh_installsystemd.
        for script in ["postinst", "prerm", "postrm"] {
            let path = tree + "/DEBIAN/" + script
            #expect(FileManager.default.isExecutableFile(atPath: path), "\(script)")
            let syntax = run(["/bin/sh", "-n", path], timeout: 10)
            #expect(syntax.status == 0, "\(script): \(syntax)")
            #expect(contents(path).hasPrefix("#!/bin/sh\n") && contents(path).contains("\nset -e\n"), "\(script)")
        }
        let postinst = contents(tree + "/DEBIAN/postinst")
        for line in ["deb-systemd-helper enable 'netlifed.service'", "deb-systemd-helper update-state 'netlifed.service'",
                     "if [ -d /run/systemd/system ]; then", "systemctl --system daemon-reload >/dev/null || true",
                     "deb-systemd-invoke $_dh_action 'netlifed.service'"] {
            #expect(postinst.contains(line), "postinst: \(line)")
        }
        #expect(contents(tree + "/DEBIAN/prerm").contains("deb-systemd-invoke stop 'netlifed.service'"))
        let postrm = contents(tree + "/DEBIAN/postrm")
        let purge = postrm.components(separatedBy: "if [ \"$1\" = \"purge\" ]; then").dropFirst().first ?? ""
        #expect(purge.contains("deb-systemd-helper purge 'netlifed.service'") && purge.contains("rm -rf /var/lib/netlifed"), "\(postrm)")

        // lintian finds no error. Binaries that need the toolchain's runtime (the debug build, when there is
        // no static release build) carry its RUNPATH, which lintian calls an error of its own.
        if let lintian = tool("/usr/bin/lintian") {
            let report = run([lintian, "--no-tag-display-limit", deb], timeout: 240)
            let errors = report.stdout.split(separator: "\n").filter { $0.hasPrefix("E: ") }
                .filter { staticReleaseDirectory != nil || !$0.contains("custom-library-search-path") }
            #expect(errors.isEmpty, "\(report)")
        }
    }
}

/// The maintainer scripts run with stand-ins for deb-systemd-helper, deb-systemd-invoke and systemctl that
/// record their arguments: what a first installation, an installation the admin had disabled, and a removal
/// ask of them. (Purge is not run: it removes /var/lib/netlifed of this machine.)
@Suite(.timeLimit(.minutes(1)))
struct MaintainerScriptTests {
    /// Runs packaging/debian/SCRIPT with ARGUMENTS; `wasEnabled` is what `deb-systemd-helper was-enabled`
    /// answers. Returns the calls made, one a line.
    private func calls(_ script: String, _ arguments: [String], wasEnabled: Bool = true) throws -> [String] {
        let stubs = TemporaryDirectory()
        defer { stubs.remove() }
        for name in ["deb-systemd-helper", "deb-systemd-invoke", "systemctl"] {
            stubs.write(name, """
                #!/bin/sh
                echo "\(name) $*" >> \(stubs.file("calls"))
                [ "$2" != was-enabled ] || exit \(wasEnabled ? 0 : 1)

                """)
            chmod(stubs.file(name), 0o755)
        }
        let result = run(["/bin/sh", repositoryFile("packaging/debian/" + script)] + arguments,
                         environment: ["PATH": stubs.path + ":/usr/bin:/bin"], timeout: 20)
        try #require(result.status == 0, "\(result)")
        return stubs.read("calls").split(separator: "\n").map(String.init)
    }

    /// What happens only under systemd as PID 1 (the scripts look for /run/systemd/system).
    private var underSystemd: Bool { FileManager.default.fileExists(atPath: "/run/systemd/system") }

    @Test func aFirstInstallationEnablesAndStartsTheService() throws {
        var expected = ["deb-systemd-helper unmask netlifed.service", "deb-systemd-helper --quiet was-enabled netlifed.service",
                        "deb-systemd-helper enable netlifed.service"]
        if underSystemd { expected += ["systemctl --system daemon-reload", "deb-systemd-invoke start netlifed.service"] }
        #expect(try calls("postinst", ["configure"]) == expected)
        // An upgrade restarts it instead.
        let upgrade = try calls("postinst", ["configure", "0.0.9-1"])
        #expect(upgrade.contains("deb-systemd-invoke restart netlifed.service") == underSystemd, "\(upgrade)")
    }

    @Test func anInstallationTheAdminHadDisabledOnlyUpdatesTheState() throws {
        let made = try calls("postinst", ["configure"], wasEnabled: false)
        #expect(made.contains("deb-systemd-helper update-state netlifed.service"), "\(made)")
        #expect(!made.contains("deb-systemd-helper enable netlifed.service"), "\(made)")
    }

    @Test func aRemovalStopsTheServiceAndMasksItAndAnUpgradeDoesNotStopIt() throws {
        #expect(try calls("prerm", ["remove"]) == (underSystemd ? ["deb-systemd-invoke stop netlifed.service"] : []))
        #expect(try calls("prerm", ["upgrade", "0.1.1-1"]).isEmpty)
        var expected = ["deb-systemd-helper mask netlifed.service"]
        if underSystemd { expected.insert("systemctl --system daemon-reload", at: 0) }
        #expect(try calls("postrm", ["remove"]) == expected)
    }
}
