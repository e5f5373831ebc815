// The unit file: systemd/netlifed.service passes `systemd-analyze verify` and scores 2.0 or
// lower in `systemd-analyze security --offline=true`, every check the analyzer still faults is explained in
// the unit, and the lines the daemon's contract relies on are there. Both run on copies of the unit in a
// temporary directory; no systemd manager is started (none runs on the test machines). systemd-analyze
// comes with Debian's `systemd` package (scripts/install-deps): when it is missing these tests fail.

import Foundation
import Testing
import NetLifeTestSupport

private let repository = URL(fileURLWithPath: repositoryDirectory)
private let unitPath = repository.appendingPathComponent("systemd/netlifed.service").path

/// The highest exposure score the unit may have.
private let highestScore = 2.0

/// systemd-analyze's path, or nil when it is not installed.
private func systemdAnalyze() -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
    return directories.map { $0 + "/systemd-analyze" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

private func requireSystemdAnalyze() throws -> String {
    try #require(systemdAnalyze(), "systemd-analyze is missing: scripts/install-deps installs Debian's systemd package")
}

private func unitText() throws -> String {
    try String(contentsOfFile: unitPath, encoding: .utf8)
}

/// The unit's settings in order, as (key, value), without comments.
private func settings(_ text: String) -> [(key: String, value: String)] {
    text.split(separator: "\n").compactMap { line in
        let line = line.trimmingCharacters(in: .whitespaces)
        guard !line.hasPrefix("#"), !line.hasPrefix(";"), !line.hasPrefix("["), let equals = line.firstIndex(of: "=") else { return nil }
        return (String(line[..<equals]), String(line[line.index(after: equals)...]))
    }
}

/// A copy of the unit named netlifed.service in `directory`, with `ExecStart`'s program replaced by `netlifed`.
private func copyOfUnit(in directory: TemporaryDirectory, netlifed: String? = nil) throws -> String {
    var text = try unitText()
    if let netlifed {
        let original = "ExecStart=/usr/local/bin/netlifed "
        try #require(text.contains("\n" + original), "the unit's ExecStart no longer starts with /usr/local/bin/netlifed")
        text = text.replacingOccurrences(of: "\n" + original, with: "\nExecStart=\(netlifed) ")
        // verify wants every Exec*= program to exist: ExecReload='s netlifectl is the built one next to it.
        let reload = "ExecReload=/usr/local/bin/netlifectl "
        try #require(text.contains("\n" + reload), "the unit's ExecReload no longer runs /usr/local/bin/netlifectl")
        text = text.replacingOccurrences(of: "\n" + reload, with: "\nExecReload=\(product("netlifectl")) ")
    }
    directory.write("netlifed.service", text)
    return directory.file("netlifed.service")
}

/// The score from "→ Overall exposure level for netlifed.service: 1.9 OK 🙂".
private func exposureScore(_ output: String) -> Double? {
    guard let line = output.split(separator: "\n").last(where: { $0.contains("Overall exposure level") }),
          let number = line.split(separator: ":").last?.split(separator: " ").first else { return nil }
    return Double(number)
}

@Suite(.timeLimit(.minutes(5)))
struct SystemdUnitTests {
    @Test func theUnitScoresTwoOrLowerInSystemdAnalyzeSecurity() throws {
        let analyze = try requireSystemdAnalyze()
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let unit = try copyOfUnit(in: directory)
        // --threshold is in tenths: the command itself fails above 2.0, and the test reads the score too.
        let result = run([analyze, "security", "--offline=true", "--threshold=\(Int(highestScore * 10))", unit], timeout: 20)
        let score = try #require(exposureScore(result.stdout), "no score in the output:\n\(result)")
        #expect(score <= highestScore, "the unit scores \(score), above \(highestScore):\n\(result.stdout)")
        #expect(result.status == 0, "\(result)")
    }

    @Test func everyCheckTheAnalyzerStillFaultsIsExplainedInTheUnit() throws {
        let analyze = try requireSystemdAnalyze()
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let unit = try copyOfUnit(in: directory)
        let result = run([analyze, "security", "--offline=true", "--threshold=100", unit], timeout: 20)
        #expect(result.status == 0, "\(result)")
        let lines = try unitText().split(separator: "\n").map(String.init)
        let comments = lines.filter { $0.hasPrefix("#") }
        // A faulted check is either a setting the unit makes with a comment right above it (a partial
        // restriction, such as the address families it keeps), or one listed with its reason in a comment.
        let faulted = result.stdout.split(separator: "\n").filter { $0.hasPrefix("✗") }
        #expect(!faulted.isEmpty, "the analyzer printed no checks:\n\(result)")
        for check in faulted {
            let name = check.dropFirst().trimmingCharacters(in: .whitespaces)
            let key = String(name.prefix { $0 != "=" })
            let explainedWhereSet = lines.indices.contains { index in
                index > 0 && lines[index].hasPrefix(key + "=") && lines[index - 1].hasPrefix("#")
            }
            let explainedAsLeftOut = comments.contains { $0.contains(key + "=") }
            #expect(explainedWhereSet || explainedAsLeftOut, "the analyzer faults \(key)= and the unit does not say why: \(check)")
        }
    }

    @Test func theUnitPassesSystemdAnalyzeVerifyWithTheBuiltDaemon() throws {
        let analyze = try requireSystemdAnalyze()
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let unit = try copyOfUnit(in: directory, netlifed: product("netlifed"))
        // Plain `verify` exits 0 even on errors; --recursive-errors=no judges this unit only (not the targets
        // it names, which a test machine without systemd running may lack pieces of).
        let result = run([analyze, "verify", "--recursive-errors=no", unit], timeout: 20)
        #expect(result.status == 0, "\(result)")
        let complaints = (result.stdout + result.stderr).split(separator: "\n").filter { $0.contains("netlifed.service") }
        #expect(complaints.isEmpty, "systemd-analyze verify complains about the unit:\n\(complaints.joined(separator: "\n"))")
    }

    @Test func verifyCatchesAnErrorInTheUnit() throws {
        // The check above would be worthless if verify passed anything: a bad value fails it.
        let analyze = try requireSystemdAnalyze()
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let unit = try copyOfUnit(in: directory, netlifed: product("netlifed"))
        directory.write("netlifed.service", directory.read("netlifed.service").replacingOccurrences(of: "\nProtectHome=yes\n", with: "\nProtectHome=sometimes\n"))
        let result = run([analyze, "verify", "--recursive-errors=no", unit], timeout: 20)
        #expect(result.status != 0, "\(result)")
        #expect(result.stderr.contains("sometimes"), "\(result)")
    }

    @Test func theUnitCarriesTheLinesTheDaemonsContractNeeds() throws {
        let all = try settings(unitText())
        func values(_ key: String) -> [String] { all.filter { $0.key == key }.map(\.value) }
        #expect(values("Type") == ["notify"])
        #expect(values("NotifyAccess") == ["main"])
        #expect(values("Restart") == ["on-failure"])
        #expect(values("RuntimeDirectory") == ["netlifed"])
        // systemd's watchdog kills with SIGABRT, which Swift's crash handler would otherwise catch.
        #expect(values("Environment").contains("SWIFT_BACKTRACE=enable=no"))
        let watchdog = try #require(values("WatchdogSec").last, "no WatchdogSec=")
        let seconds = Double(watchdog.hasSuffix("s") ? String(watchdog.dropLast()) : watchdog) ?? 0
        #expect(seconds >= 1, "WatchdogSec=\(watchdog) must be a positive number of seconds")
        #expect(values("ExecStart").first?.hasPrefix("/usr/local/bin/netlifed --config /etc/netlifed/netlifed.conf") == true)
        // A reload waits for the daemon's answer and fails on a broken config; a broken config at start is
        // not restarted in a loop; the open-file limit is not Debian's 1024.
        #expect(values("ExecReload") == ["/usr/local/bin/netlifectl reload"])
        #expect(values("RestartPreventExitStatus").contains("78"))
        let files = values("LimitNOFILE").last.flatMap { UInt64($0.split(separator: ":").first ?? "") } ?? 0
        #expect(files >= 65536, "LimitNOFILE=\(values("LimitNOFILE"))")
    }
}
