// Fuzz target: the lifecycle protocol of process apps (NETLIFE_EVENTS), whose codec reads every byte a
// program sends. The input is what a program sends on its events socket. LifecycleChannelState reads it
// whole, in pieces (sizes from a hash of the input) and one byte at a time, with a stage awaited and tasks
// begun, refused and expiring, and must act the same way each time; every line it sends is one JSON object
// within 4 KiB, it counts at most 16 errors and stays closed after cutting the program off, declares at most
// 64 VoIP descriptors and sends nothing after the cut-off. The checks are checkLifecycleChannel, the harness
// the unit tests run too (LifecycleChannelHarness.swift is a link to Tests/NetLifeTests/ProcessApps).

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLifecycle(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var random = SplitMix(hashing: input)
    let longest = random.next() % 2 == 0 ? 8 : 1024
    if let failure = checkLifecycleChannel(input, pieceSize: { 1 + Int(random.next() % UInt64(longest)) }) {
        fatalError("in pieces of up to \(longest) bytes: \(failure)")
    }
    if let failure = checkLifecycleChannel(input, pieceSize: { 1 }) {
        fatalError("one byte at a time: \(failure)")
    }
    return 0
}
