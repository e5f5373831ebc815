// scripts/install and scripts/uninstall into a temporary DESTDIR with PREFIX=/usr, taking the debug binaries
// next to the tests (NETLIFE_BIN_DIR) instead of a release build: the tree they leave, a config that a second
// install does not overwrite, what an uninstall leaves behind, where the unit goes, and that the release
// binaries carry the Swift runtime in themselves. scripts/install-test-deps with a stand-in for apt-get.

import Foundation
import Testing
import NetLifeTestSupport

private let repository = URL(fileURLWithPath: repositoryDirectory)

/// Runs scripts/NAME with DESTDIR, PREFIX=/usr, the unit directory /etc/systemd/system unless `environment`
/// says otherwise, and the built binaries instead of a release build.
private func script(_ name: String, destdir: String, environment extra: [String: String] = [:], repository root: URL = repository) -> ProcessResult {
    var environment = ProcessInfo.processInfo.environment
    environment["DESTDIR"] = destdir
    environment["PREFIX"] = "/usr"
    environment["SYSTEMD_UNIT_DIR"] = "/etc/systemd/system"
    environment["NETLIFE_BIN_DIR"] = productsDirectory
    for (key, value) in extra { environment[key] = value }
    return run([root.appendingPathComponent("scripts/" + name).path], environment: environment.filter { !$0.value.isEmpty }, timeout: 30)
}

/// Every regular file under `root`, as paths relative to it ("/usr/bin/netlifed").
func files(under root: String) -> Set<String> {
    guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
    var found: Set<String> = []
    while let relative = walker.nextObject() as? String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory), !isDirectory.boolValue {
            found.insert("/" + relative)
        }
    }
    return found
}

func contents(_ path: String) -> String {
    (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
}

/// The files installed besides the binaries, the config and the unit, with the repository file each copies:
/// these, and every page of docs/.
let installedCopies: [String: String] = docsPages.reduce(into: [
    "/usr/share/doc/netlife/README.md": "README.md",
    "/usr/share/netlife/systemd/netlifed-process-apps.conf": "systemd/netlifed-process-apps.conf",
    "/usr/share/netlife/systemd/netlifed-members.conf": "systemd/netlifed-members.conf",
    "/usr/share/netlife/examples/netlifed.conf": "Config/netlifed.conf",
    "/usr/share/netlife/examples/netlife_events.py": "Examples/netlife_events.py",
    "/usr/share/man/man8/netlifed.8": "man/netlifed.8",
    "/usr/share/man/man1/netlifectl.1": "man/netlifectl.1",
    "/usr/share/man/man5/netlifed.conf.5": "man/netlifed.conf.5",
]) { copies, page in copies["/usr/share/doc/netlife/docs/" + page] = "docs/" + page }

private var docsPages: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: repository.appendingPathComponent("docs").path)) ?? []).filter { $0.hasSuffix(".md") }
}

private let installedFiles: Set<String> = Set(installedCopies.keys).union([
    "/usr/bin/netlifed",
    "/usr/bin/netlifectl",
    "/etc/netlifed/netlifed.conf",
    "/etc/systemd/system/netlifed.service",
    "/usr/share/bash-completion/completions/netlifectl",
])

/// The release binaries, when they were built as scripts/install builds them (with the Swift runtime linked
/// statically); nil otherwise (no release build, or a plain `swift build -c release`).
let staticReleaseDirectory: String? = {
    let directory = repository.appendingPathComponent(".build/release").path
    for binary in ["netlifed", "netlifectl"] {
        let dynamic = run(["/usr/bin/readelf", "-d", directory + "/" + binary], timeout: 20)
        guard dynamic.status == 0, !dynamic.stdout.contains("libswiftCore"), !dynamic.stdout.contains("RUNPATH") else { return nil }
    }
    return directory
}()

@Suite(.timeLimit(.minutes(5)))
struct InstallTests {
    @Test func installBuildsTheTreeKeepsAChangedConfigAndUninstallLeavesOnlyThatConfig() throws {
        let destdir = TemporaryDirectory()
        defer { destdir.remove() }
        let root = destdir.path

        let first = script("install", destdir: root)
        try #require(first.status == 0, "\(first)")
        #expect(files(under: root) == installedFiles, "\(first.stdout)")
        for binary in ["netlifed", "netlifectl"] {
            #expect(FileManager.default.isExecutableFile(atPath: root + "/usr/bin/" + binary))
            #expect(FileManager.default.contentsEqual(atPath: root + "/usr/bin/" + binary, andPath: product(binary)), "\(binary) is not the built one")
        }
        for (installed, source) in installedCopies {
            #expect(FileManager.default.contentsEqual(atPath: root + installed, andPath: repository.appendingPathComponent(source).path), "\(installed)")
        }
        // The completion is the one the installed netlifectl writes.
        let completion = run([root + "/usr/bin/netlifectl", "completion", "bash"], timeout: 10)
        #expect(completion.status == 0 && !completion.stdout.isEmpty, "\(completion)")
        #expect(contents(root + "/usr/share/bash-completion/completions/netlifectl") == completion.stdout)
        // The process-apps drop-in is shipped, not active: nothing is in netlifed.service.d.
        #expect(!FileManager.default.fileExists(atPath: root + "/etc/systemd/system/netlifed.service.d"))
        let help = run([root + "/usr/bin/netlifectl", "--help"], timeout: 10)
        #expect(help.status == 0 && help.stdout.contains("USAGE"), "\(help)")
        // The installed daemon accepts the installed config.
        let check = run([root + "/usr/bin/netlifed", "--check-config", root + "/etc/netlifed/netlifed.conf"], timeout: 10)
        #expect(check.status == 0, "\(check)")
        // The installed default runs no app and reads conf.d; the annotated config is an example.
        #expect(contents(root + "/etc/netlifed/netlifed.conf") == contents(repository.appendingPathComponent("Config/system.conf").path))
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: root + "/etc/netlifed/conf.d", isDirectory: &isDirectory) && isDirectory.boolValue)
        // The unit names the final paths, not the staging directory.
        let unit = contents(root + "/etc/systemd/system/netlifed.service").split(separator: "\n")
        #expect(unit.filter { $0.hasPrefix("ExecStart=") } == ["ExecStart=/usr/bin/netlifed --config /etc/netlifed/netlifed.conf"])
        #expect(unit.filter { $0.hasPrefix("ExecReload=") } == ["ExecReload=/usr/bin/netlifectl reload"])
        #expect(unit.filter { $0.hasPrefix("Documentation=") } == ["Documentation=file:///usr/share/doc/netlife/README.md file:///usr/share/doc/netlife/docs/operations.md"])
        #expect(!unit.contains { $0.contains(root) || !$0.hasPrefix("#") && $0.contains("/usr/local/") })
        #expect(first.stdout.contains("installed \(root)/usr/bin/netlifed"), "\(first)")
        // The debug binaries need the toolchain's runtime, and install says so.
        #expect(first.stdout.contains("warning: the binaries in"), "\(first)")

        // A second install keeps the admin's config, and says so.
        let changed = contents(root + "/etc/netlifed/netlifed.conf") + "\n# changed by the admin\n"
        destdir.write("etc/netlifed/netlifed.conf", changed)
        let second = script("install", destdir: root)
        #expect(second.status == 0, "\(second)")
        #expect(contents(root + "/etc/netlifed/netlifed.conf") == changed)
        #expect(second.stdout.contains("kept \(root)/etc/netlifed/netlifed.conf"), "\(second)")
        #expect(files(under: root) == installedFiles)

        // Uninstall removes everything but the changed config, and says why it stays.
        let uninstall = script("uninstall", destdir: root)
        #expect(uninstall.status == 0, "\(uninstall)")
        #expect(files(under: root) == ["/etc/netlifed/netlifed.conf"], "\(uninstall.stdout)")
        #expect(contents(root + "/etc/netlifed/netlifed.conf") == changed)
        #expect(uninstall.stdout.contains("kept \(root)/etc/netlifed/netlifed.conf"), "\(uninstall)")
        for directory in ["/usr/share/doc/netlife", "/usr/share/netlife"] {
            #expect(!FileManager.default.fileExists(atPath: root + directory), "\(directory)")
        }
    }

    @Test func uninstallRemovesAnUnchangedConfigAndLeavesNoFile() throws {
        let destdir = TemporaryDirectory()
        defer { destdir.remove() }
        let install = script("install", destdir: destdir.path)
        try #require(install.status == 0, "\(install)")
        let uninstall = script("uninstall", destdir: destdir.path)
        #expect(uninstall.status == 0, "\(uninstall)")
        #expect(files(under: destdir.path).isEmpty, "\(uninstall.stdout)")
        // A second uninstall finds nothing and still succeeds.
        let again = script("uninstall", destdir: destdir.path)
        #expect(again.status == 0, "\(again)")
    }

    @Test func theUnitGoesWhereSystemdsPkgConfigFileSaysElseToEtc() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(atPath: scratch.file("pc"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: scratch.file("empty"), withIntermediateDirectories: true)
        scratch.write("pc/systemd.pc", "systemdsystemunitdir=/usr/lib/test-units\nName: systemd\nDescription: x\nVersion: 252\n")
        let cases: [(environment: [String: String], unit: String)] = [
            (["SYSTEMD_UNIT_DIR": "", "PKG_CONFIG_PATH": scratch.file("pc")], "/usr/lib/test-units/netlifed.service"),
            (["SYSTEMD_UNIT_DIR": "", "PKG_CONFIG_PATH": "", "PKG_CONFIG_LIBDIR": scratch.file("empty")], "/etc/systemd/system/netlifed.service"),
            (["SYSTEMD_UNIT_DIR": "/lib/systemd/system/"], "/lib/systemd/system/netlifed.service"),
        ]
        for (index, test) in cases.enumerated() {
            let root = scratch.file("root\(index)")
            let install = script("install", destdir: root, environment: test.environment)
            #expect(install.status == 0, "\(install)")
            #expect(FileManager.default.fileExists(atPath: root + test.unit), "\(test.environment): \(install.stdout)")
            let uninstall = script("uninstall", destdir: root, environment: test.environment)
            #expect(uninstall.status == 0, "\(uninstall)")
            #expect(files(under: root).isEmpty, "\(uninstall.stdout)")
        }
    }

    @Test func everyUsrLocalPathOfTheUnitPointsIntoThePrefix() throws {
        // A copy of the repository's scripts and installed files, with a unit whose ExecReload= names
        // netlifectl.
        let copy = TemporaryDirectory()
        defer { copy.remove() }
        for path in ["scripts", "Config", "systemd", "man", "README.md", "docs", "Examples/netlife_events.py"] {
            let target = copy.file(path)
            try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: repository.appendingPathComponent(path).path, toPath: target)
        }
        let unit = contents(copy.file("systemd/netlifed.service")).split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("ExecReload=") }.joined(separator: "\n")
            .replacingOccurrences(of: "[Service]\n", with: "[Service]\nExecReload=/usr/local/bin/netlifectl reload\n")
        copy.write("systemd/netlifed.service", unit)
        let root = copy.file("root")
        let install = script("install", destdir: root, environment: ["PREFIX": "/opt/netlife"], repository: URL(fileURLWithPath: copy.path))
        try #require(install.status == 0, "\(install)")
        let installed = contents(root + "/etc/systemd/system/netlifed.service").split(separator: "\n")
        #expect(installed.filter { $0.hasPrefix("ExecReload=") } == ["ExecReload=/opt/netlife/bin/netlifectl reload"])
        #expect(installed.filter { $0.hasPrefix("ExecStart=") } == ["ExecStart=/opt/netlife/bin/netlifed --config /etc/netlifed/netlifed.conf"])
        #expect(installed.filter { $0.hasPrefix("Documentation=") } == ["Documentation=file:///opt/netlife/share/doc/netlife/README.md file:///opt/netlife/share/doc/netlife/docs/operations.md"])
        #expect(!installed.contains { !$0.hasPrefix("#") && $0.contains("/usr/local/") })
    }

    @Test func installFailsWithAMessageWhenTheBinariesAreMissing() {
        let destdir = TemporaryDirectory()
        defer { destdir.remove() }
        destdir.write("empty", "")
        var environment = ProcessInfo.processInfo.environment
        environment["DESTDIR"] = destdir.file("root")
        environment["NETLIFE_BIN_DIR"] = destdir.path
        let result = run([repository.appendingPathComponent("scripts/install").path], environment: environment, timeout: 30)
        #expect(result.status != 0, "\(result)")
        #expect(result.stderr.contains("netlifed is missing"), "\(result)")
        #expect(files(under: destdir.file("root")).isEmpty)
    }

    @Test func installRefusesToOverwriteTheFilesOfADebianPackage() throws {
        // No DESTDIR, but every path in a temporary directory but the config's; the binaries are missing, so
        // that an install that got past the check would stop before writing anything.
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(atPath: scratch.file("bin"), withIntermediateDirectories: true)
        scratch.write("bin/dpkg-query", "#!/bin/sh\n[ \"$1\" = -S ] && echo \"netlife: $2\"\n")
        chmod(scratch.file("bin/dpkg-query"), 0o755)
        var environment = ProcessInfo.processInfo.environment
        environment["DESTDIR"] = nil
        environment["PREFIX"] = scratch.file("usr")
        environment["SYSTEMD_UNIT_DIR"] = scratch.file("units")
        environment["NETLIFE_BIN_DIR"] = scratch.file("bin")
        environment["PATH"] = scratch.file("bin") + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        let result = run([repository.appendingPathComponent("scripts/install").path], environment: environment, timeout: 30)
        #expect(result.status != 0, "\(result)")
        #expect(result.stderr.contains("\(scratch.file("usr"))/bin/netlifed belongs to the Debian package netlife"), "\(result)")
        #expect(files(under: scratch.path) == ["/bin/dpkg-query"])
    }

    /// The release binaries scripts/install builds name no library of the toolchain, and run where the
    /// toolchain is hidden: in a mount namespace with an empty directory over it, with a bare environment.
    @Test(.enabled(if: staticReleaseDirectory != nil && getuid() == 0, "needs the static release build of scripts/install, and root"))
    func theReleaseBinariesRunWithoutTheToolchain() throws {
        let directory = try #require(staticReleaseDirectory)
        let swift = try #require(ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":").map { $0 + "/swift" }
            .first { FileManager.default.isExecutableFile(atPath: $0) })
        // The toolchain's root: DIR for DIR/usr/bin/swift. A toolchain installed in /usr itself cannot be
        // hidden without hiding the system.
        let toolchain = URL(fileURLWithPath: swift).resolvingSymlinksInPath().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
        try #require(!["/", "/usr"].contains(toolchain), "the toolchain is in \(toolchain)")
        for binary in ["netlifed", "netlifectl"] {
            let dynamic = run(["/usr/bin/readelf", "-d", directory + "/" + binary], timeout: 20)
            #expect(!dynamic.stdout.contains("RUNPATH") && !dynamic.stdout.contains("RPATH") && !dynamic.stdout.contains(toolchain), "\(dynamic)")
            #expect(!dynamic.stdout.contains("libswift") && !dynamic.stdout.contains("libFoundation"), "\(dynamic)")
        }
        // They check a config, and serve: an app launched, its status read, SIGTERM answered with exit 0.
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        scratch.write("netlifed.conf", "[app alpha]\n[listener alpha.main]\naddress = 127.0.0.1:0\nservice = echo\n")
        let config = scratch.file("netlifed.conf"), control = scratch.file("control/control.sock")
        let hidden = run(["/usr/bin/unshare", "--mount", "/bin/sh", "-c", """
            mount -t tmpfs none '\(toolchain)' && test -z "$(ls '\(toolchain)')" || exit 99
            env -i PATH=/usr/bin:/bin '\(directory)/netlifectl' --version
            env -i PATH=/usr/bin:/bin '\(directory)/netlifed' --check-config '\(config)' || exit 1
            # env execs netlifed: $! is the daemon's pid, killed whatever happens (it holds this process's
            # descriptors, and the test waits for them).
            env -i PATH=/usr/bin:/bin '\(directory)/netlifed' --config '\(config)' --control '\(control)' \
                > /dev/null 2> '\(scratch.file("log"))' < /dev/null & pid=$!
            trap 'kill -KILL $pid 2> /dev/null' EXIT
            i=0; while [ ! -S '\(control)' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
            env -i PATH=/usr/bin:/bin '\(directory)/netlifectl' --control '\(control)' status
            kill -TERM $pid; wait $pid; echo "netlifed exited $?"
            """], timeout: 30)
        #expect(hidden.status == 0, "\(hidden)\n\(scratch.read("log"))")
        #expect(hidden.stdout.hasPrefix("netlifectl "), "\(hidden)")
        #expect(hidden.stdout.contains("\(config): ok"), "\(hidden)")
        #expect(hidden.stdout.contains("alpha: active"), "\(hidden)\n\(scratch.read("log"))")
        #expect(hidden.stdout.contains("netlifed exited 0"), "\(hidden)\n\(scratch.read("log"))")
    }
}

/// scripts/install-test-deps with a stand-in for apt-get that records what /usr/sbin/policy-rc.d (here a path
/// in a temporary directory) held while it ran, and whether running it exits 101 (no service may start).
@Suite(.timeLimit(.minutes(1)))
struct TestDependencyScriptTests {
    /// Runs scripts/install-test-deps with stand-ins for apt-get (which asks the policy whether nginx may
    /// start, and enables the units `enables` as a package's postinst would) and for systemctl (which disables
    /// a unit as the real one does, unless it is named in `stuck`).
    private func runScript(in directory: TemporaryDirectory, aptExits status: Int, enables: [String] = [], stuck: [String] = []) -> ProcessResult {
        let wants = directory.file("systemd/multi-user.target.wants")
        directory.write("apt-get", """
            #!/bin/sh
            echo "apt-get $*" >> \(directory.file("calls"))
            \(directory.file("policy-rc.d")) nginx start; echo "policy $?" >> \(directory.file("calls"))
            case "$1" in install) for unit in \(enables.joined(separator: " ")); do ln -s /lib/systemd/system/$unit \(wants)/$unit; done;; esac
            exit \(status)

            """)
        directory.write("systemctl", """
            #!/bin/sh
            echo "systemctl $*" >> \(directory.file("calls"))
            case " \(stuck.joined(separator: " ")) " in *" $3 "*) exit 1;; esac
            rm -f \(wants)/$3

            """)
        chmod(directory.file("apt-get"), 0o755)
        chmod(directory.file("systemctl"), 0o755)
        try? FileManager.default.createDirectory(atPath: wants, withIntermediateDirectories: true)
        var environment = ProcessInfo.processInfo.environment
        environment["POLICY_RC_D"] = directory.file("policy-rc.d")
        environment["APT_GET"] = directory.file("apt-get")
        environment["SYSTEMCTL"] = directory.file("systemctl")
        environment["SYSTEMD_ETC"] = directory.file("systemd")
        return run([repository.appendingPathComponent("scripts/install-test-deps").path], environment: environment, timeout: 30)
    }

    @Test func theUnitsTheInstallEnabledAreDisabledAndTheAdminsAreLeft() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        try FileManager.default.createDirectory(atPath: directory.file("systemd/multi-user.target.wants"), withIntermediateDirectories: true)
        symlink("/lib/systemd/system/redis-server.service", directory.file("systemd/multi-user.target.wants/redis-server.service"))
        let result = runScript(in: directory, aptExits: 0, enables: ["nginx.service", "dovecot.service"])
        #expect(result.status == 0, "\(result)")
        let calls = directory.read("calls").split(separator: "\n").filter { $0.hasPrefix("systemctl ") }
        #expect(Set(calls) == ["systemctl disable --quiet nginx.service", "systemctl disable --quiet dovecot.service"], "\(calls)")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.file("systemd/multi-user.target.wants"))
        #expect(left == ["redis-server.service"], "the admin's unit stays enabled")
        #expect(result.stdout.contains("install-test-deps: disabled nginx.service (installed for the tests only)"), "\(result)")

        // A unit that cannot be disabled is named in a warning; the packages are installed, so the run succeeds.
        let again = TemporaryDirectory()
        defer { again.remove() }
        let stuck = runScript(in: again, aptExits: 0, enables: ["lighttpd.service"], stuck: ["lighttpd.service"])
        #expect(stuck.status == 0, "\(stuck)")
        #expect(stuck.stderr.contains("could not disable lighttpd.service"), "\(stuck)")
    }

    @Test func aptRunsWithAPolicyThatForbidsStartsAndTheAdminsPolicyComesBackUntouched() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        directory.write("policy-rc.d", "#!/bin/sh\nexit 0\n")
        chmod(directory.file("policy-rc.d"), 0o750)
        let before = try FileManager.default.attributesOfItem(atPath: directory.file("policy-rc.d"))

        let result = runScript(in: directory, aptExits: 0)
        #expect(result.status == 0, "\(result)")
        let calls = directory.read("calls").split(separator: "\n")
        #expect(calls.first == "apt-get update -qq", "\(calls)")
        #expect(calls.contains { $0.hasPrefix("apt-get install -y -qq --no-install-recommends ") && $0.contains(" nginx-light ") })
        #expect(calls.filter { $0.hasPrefix("policy ") } == ["policy 101", "policy 101"], "\(calls)")
        // The admin's file is back: same inode, mode and contents; nothing else is left.
        let after = try FileManager.default.attributesOfItem(atPath: directory.file("policy-rc.d"))
        #expect(after[.systemFileNumber] as? Int == before[.systemFileNumber] as? Int)
        #expect(after[.posixPermissions] as? Int == 0o750)
        #expect(directory.read("policy-rc.d") == "#!/bin/sh\nexit 0\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["apt-get", "calls", "policy-rc.d", "systemctl", "systemd"])
    }

    @Test func withoutAPolicyBeforeNoneIsLeftEvenWhenAptFails() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let result = runScript(in: directory, aptExits: 100)
        #expect(result.status != 0, "\(result)")
        #expect(directory.read("calls").contains("policy 101"), "\(directory.read("calls"))")
        #expect(!FileManager.default.fileExists(atPath: directory.file("policy-rc.d")))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["apt-get", "calls", "systemctl", "systemd"])
    }

    @Test func theBuildDependenciesHoldNoServer() {
        let text = (try? String(contentsOf: repository.appendingPathComponent("scripts/install-deps"), encoding: .utf8)) ?? ""
        // The words of `packages=( ... )`, comments left out.
        let list = text.components(separatedBy: "packages=(").dropFirst().first?.components(separatedBy: "\n)").first ?? ""
        let packages = Set(list.split(separator: "\n").flatMap { $0.split(separator: "#", maxSplits: 1).first?.split(separator: " ") ?? [] }.map(String.init))
        #expect(packages.isSuperset(of: ["libevent-dev", "libavahi-client-dev", "pkg-config"]), "\(packages)")
        for server in ["nginx-light", "lighttpd", "dovecot-imapd", "avahi-daemon", "dbus", "python3-pyftpdlib", "systemd"] {
            #expect(!packages.contains(server), "scripts/install-deps installs \(server)")
        }
    }
}
