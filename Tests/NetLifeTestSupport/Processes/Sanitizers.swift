#if canImport(Testing)   // built only for the tests: see Package.swift
// The sanitizer a test run is under (scripts/test-sanitized sets NETLIFE_SANITIZER) and what follows from it:
// the options a daemon under test runs with, and how far latency and memory figures can be judged.

import Foundation

/// The sanitizer the suite runs under (`scripts/test-sanitized` sets NETLIFE_SANITIZER), or nil.
public let activeSanitizer = ProcessInfo.processInfo.environment["NETLIFE_SANITIZER"].flatMap { $0.isEmpty ? nil : $0 }

/// How much slower than a plain debug build the daemon runs: sanitized builds take several times the CPU
/// per request, so latency limits scale with this.
public let slowdown: Double = activeSanitizer == nil ? 1 : 6

/// Whether RSS growth means anything: AddressSanitizer's quarantine holds freed memory on purpose (it grew a
/// daemon by 200+ MB in these tests), so under it the memory figures are printed but not judged.
public let rssIsMeaningful = activeSanitizer != "address"

/// How much of a volume-only workload (thousands of requests, megabytes of one line) a test drives: all of it
/// normally, a tenth under a sanitizer, which runs the suite one test at a time at several times the CPU per
/// request and finds what it finds in the same code paths with fewer repetitions. Only for workloads whose
/// checks hold at any volume (under AddressSanitizer the memory figures they would judge are not judged).
public func sanitizerScaled(_ count: Int) -> Int { activeSanitizer == nil ? count : max(1, count / 10) }

/// The exit status of a daemon that a sanitizer stopped (`exitcode` in the options below).
public let sanitizerExitStatus: Int32 = 66

/// Sanitizer options for the daemons the tests start: stop at the first report, with a status of its own.
/// They replace the test process's own options (its suppressions cover Foundation and XCTest, which a
/// daemon does not run): a daemon is checked with no suppressions. An uninstrumented build ignores them.
public func sanitizerEnvironment(base: [String: String]) -> [String: String] {
    let common = "halt_on_error=1:exitcode=\(sanitizerExitStatus)"
    var environment = base
    environment["ASAN_OPTIONS"] = common + ":detect_leaks=1:abort_on_error=0"
    environment["LSAN_OPTIONS"] = "exitcode=\(sanitizerExitStatus)"
    environment["TSAN_OPTIONS"] = common + ":second_deadlock_stack=1"
    return environment
}
#endif
