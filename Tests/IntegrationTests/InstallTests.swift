// scripts/install and scripts/uninstall into a temporary DESTDIR with PREFIX=/usr, taking the debug binaries
// next to the tests (NETLIFE_BIN_DIR) instead of a release build: the tree they leave, a config that a second
// install does not overwrite, and what an uninstall leaves behind.

import Foundation
import Testing

private let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Runs scripts/NAME with DESTDIR and PREFIX=/usr, and the built binaries instead of a release build.
private func script(_ name: String, destdir: String) -> ProcessResult {
    var environment = ProcessInfo.processInfo.environment
    environment["DESTDIR"] = destdir
    environment["PREFIX"] = "/usr"
    environment["NETLIFE_BIN_DIR"] = productsDirectory
    return run([repository.appendingPathComponent("scripts/" + name).path], environment: environment, timeout: 30)
}

/// Every regular file under `root`, as paths relative to it ("/usr/bin/netlifed").
private func files(under root: String) -> Set<String> {
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

private func contents(_ path: String) -> String {
    (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
}

private let installedFiles: Set<String> = [
    "/usr/bin/netlifed",
    "/usr/bin/netlifectl",
    "/etc/netlifed/netlifed.conf",
    "/etc/systemd/system/netlifed.service",
    "/usr/share/doc/netlife/README.md",
]

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
        let help = run([root + "/usr/bin/netlifectl", "--help"], timeout: 10)
        #expect(help.status == 0 && help.stdout.contains("USAGE"), "\(help)")
        // The installed daemon accepts the installed config.
        let check = run([root + "/usr/bin/netlifed", "--check-config", root + "/etc/netlifed/netlifed.conf"], timeout: 10)
        #expect(check.status == 0, "\(check)")
        #expect(contents(root + "/etc/netlifed/netlifed.conf") == contents(repository.appendingPathComponent("Config/netlifed.conf").path))
        #expect(contents(root + "/usr/share/doc/netlife/README.md") == contents(repository.appendingPathComponent("README.md").path))
        // The unit names the final paths, not the staging directory.
        let unit = contents(root + "/etc/systemd/system/netlifed.service").split(separator: "\n")
        #expect(unit.filter { $0.hasPrefix("ExecStart=") } == ["ExecStart=/usr/bin/netlifed --config /etc/netlifed/netlifed.conf"])
        #expect(unit.filter { $0.hasPrefix("ExecReload=") } == ["ExecReload=/usr/bin/netlifectl reload"])
        #expect(unit.filter { $0.hasPrefix("Documentation=") } == ["Documentation=file:///usr/share/doc/netlife/README.md"])
        #expect(!unit.contains { $0.contains(root) })
        #expect(first.stdout.contains("installed \(root)/usr/bin/netlifed"), "\(first)")

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
        #expect(!FileManager.default.fileExists(atPath: root + "/usr/share/doc/netlife"))
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
}
