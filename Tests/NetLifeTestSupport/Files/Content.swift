#if canImport(Testing)   // built only for the tests: see Package.swift
// Test content: bytes whose every slice can be checked, and a file's SHA-256 as sha256sum prints it.

import Foundation

/// A file of `count` bytes whose byte i is a function of i (so that any slice can be checked).
public func patternBytes(_ count: Int, seed: Int = 7) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ ($0 >> 8) ^ seed) }
}

/// The SHA-256 of the file at `path`, in hex, as sha256sum prints it ("" when it cannot run).
public func sha256(_ path: String) -> String {
    run(["/usr/bin/sha256sum", path]).stdout.split(separator: " ").first.map(String.init) ?? ""
}
#endif
