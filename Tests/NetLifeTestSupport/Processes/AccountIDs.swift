#if canImport(Testing)   // built only for the tests: see Package.swift
// Looking up a user's or a group's id from a test. Tests run in parallel threads of one process, and
// getpwnam and getgrnam return a buffer shared by every thread: one test's lookup can overwrite another's
// between the call and the read (a harness once chowned its directories to another test's new user). These
// use the reentrant calls, each with a buffer of its own.

import Foundation

/// The uid of the user `name`, nil when there is none.
public func userID(named name: String) -> uid_t? { account(named: name)?.uid }

/// The uid and primary gid of the user `name`, nil when there is none.
public func account(named name: String) -> (uid: uid_t, gid: gid_t)? {
    var entry = passwd()
    var result: UnsafeMutablePointer<passwd>?
    var buffer = [CChar](repeating: 0, count: 16384)
    guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
    return (entry.pw_uid, entry.pw_gid)
}

/// The gid of the group `name`, nil when there is none.
public func groupID(named name: String) -> gid_t? {
    var entry = group()
    var result: UnsafeMutablePointer<group>?
    var buffer = [CChar](repeating: 0, count: 65536)
    guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
    return entry.gr_gid
}
#endif
