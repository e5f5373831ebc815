#if canImport(Testing)   // built only for the tests: see Package.swift
// A Debian root booted with systemd as PID 1 (scripts/systemd-box), with netlife's Debian package to install
// in it: the unit and its drop-ins under a real service manager.

import Foundation
import Testing

/// What the boxes need, made once per test run: the package (NETLIFE_TEST_DEB, as scripts/test builds it
/// before the suite, else scripts/package now, its release build in .build/package-build: `swift test`
/// holds .build's lock) and a root with its Depends: installed (NETLIFE_TEST_ROOTFS, else scripts/systemd-box
/// rootfs .build/systemd-rootfs now: about a minute, then kept).
public struct SystemdBoxArtifacts: Sendable {
    /// The path of the Debian package to install.
    public let package: String
    /// The Debian root with the package's Depends: installed.
    public let rootfs: String

    /// The artifacts, made on first use and shared by every box of the run.
    public static let shared: Result<SystemdBoxArtifacts, BoxError> = {
        let environment = ProcessInfo.processInfo.environment
        var package = environment["NETLIFE_TEST_DEB"] ?? ""
        if package.isEmpty {
            var building = environment
            building["NETLIFE_SCRATCH_PATH"] = repositoryDirectory + "/.build/package-build"
            let built = run([repositoryDirectory + "/scripts/package"], environment: building, timeout: 900)
            guard built.status == 0, let last = built.stdout.split(separator: "\n").last else {
                return .failure(BoxError("scripts/package failed: \(built)"))
            }
            package = String(last)
        }
        guard FileManager.default.fileExists(atPath: package) else { return .failure(BoxError("no package at \(package)")) }
        let rootfs = environment["NETLIFE_TEST_ROOTFS"].flatMap { $0.isEmpty ? nil : $0 } ?? repositoryDirectory + "/.build/systemd-rootfs"
        let made = run([repositoryDirectory + "/scripts/systemd-box", "rootfs", rootfs, "--for-package", package], timeout: 900)
        guard made.status == 0 else { return .failure(BoxError("scripts/systemd-box rootfs failed: \(made)")) }
        return .success(SystemdBoxArtifacts(package: package, rootfs: rootfs))
    }()
}

/// Why a box could not be made, booted or driven.
public struct BoxError: Error, CustomStringConvertible {
    /// The text a test failure shows.
    public let description: String
    /// An error that says `description`.
    public init(_ description: String) { self.description = description }
}

/// One booted box, with the package's directory bound read-only at /pkg. `halt()` powers it off.
public final class SystemdBox {
    /// The pid of the box's PID 1, for nsenter.
    public let leader: String
    /// The package's path inside the box (under /pkg).
    public let package: String
    private let work = TemporaryDirectory()

    /// Boots a box from the shared root; throws when the boot fails.
    public init() throws {
        let artifacts = try SystemdBoxArtifacts.shared.get()
        let directory = URL(fileURLWithPath: artifacts.package).deletingLastPathComponent().path
        package = "/pkg/" + URL(fileURLWithPath: artifacts.package).lastPathComponent
        let boot = run([repositoryDirectory + "/scripts/systemd-box", "boot", artifacts.rootfs, work.file("box"),
                        "--bind-ro=\(directory):/pkg"], timeout: 150)
        guard boot.status == 0, let leader = boot.stdout.split(separator: "\n").last.map(String.init), Int(leader) != nil else {
            work.remove()
            throw BoxError("scripts/systemd-box boot failed: \(boot)")
        }
        self.leader = leader
    }

    /// Runs a shell script in the box (as root, in no unit).
    @discardableResult
    public func sh(_ script: String, timeout: TimeInterval = 30) -> ProcessResult {
        run(["/usr/bin/nsenter", "-t", leader, "-a", "/bin/sh", "-c", script], timeout: timeout)
    }

    /// Writes a file in the box.
    public func write(_ path: String, _ text: String) {
        let result = sh("mkdir -p \"$(dirname '\(path)')\" && echo '\(Data(text.utf8).base64EncodedString())' | base64 -d > '\(path)'")
        #expect(result.status == 0, "writing \(path): \(result)")
    }

    /// `systemctl show netlifed -p NAME` (the value alone).
    public func property(_ name: String, unit: String = "netlifed") -> String {
        sh("systemctl show \(unit) -p \(name) --value").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Installs the package as an operator does, with apt (which runs its maintainer scripts: the service is
    /// enabled and started).
    public func installPackage() throws {
        let installed = sh("DEBIAN_FRONTEND=noninteractive apt-get install -y \(package)", timeout: 120)
        try #require(installed.status == 0, "apt-get install ./netlife: \(installed)")
    }

    /// What a client gets back from a line sent to 127.0.0.1:PORT in the box ("" when the connection fails).
    public func echo(_ line: String, port: Int) -> String {
        let script = "exec 3<>/dev/tcp/127.0.0.1/\(port) && printf '%s\\n' '\(line)' >&3 && timeout 3 head -n 1 <&3"
        let result = run(["/usr/bin/nsenter", "-t", leader, "-a", "/bin/bash", "-c", script], timeout: 10)
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Powers the box off and removes its directory.
    public func halt() {
        let halted = run([repositoryDirectory + "/scripts/systemd-box", "halt", work.file("box")], timeout: 30)
        #expect(halted.status == 0, "scripts/systemd-box halt: \(halted)")
        work.remove()
    }
}
#endif
