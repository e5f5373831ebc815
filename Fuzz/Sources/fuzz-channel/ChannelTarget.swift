// Fuzz target: netlifed's end of the lifecycle channel (LifecycleChannelSession on a real loop and socketpair,
// feeding LifecycleChannelState), for any byte stream a process app's program writes on NETLIFE_EVENTS. The
// input is the stream; a hash of it chooses how often it is repeated (up to 8 times, so that a stream passes a
// turn's 64 KiB and the kernel's queue), the pieces it is written in, and whether the program reads its
// answers or never does. The checks are checkLifecycleChannelSession, the harness the unit tests run too
// (LifecycleChannelSessionHarness.swift is a link to Tests/NetLifeTests/ProcessApps): every byte handed over once and
// in order, never more than a turn's share at once or a read's share held, output bounded, every answer one
// JSON object, the end of the stream seen.

import FuzzSupport

/// One loop for the whole run: libFuzzer calls the target on its main thread, one input at a time.
nonisolated(unsafe) private let loop = try? EventLoop()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzChannel(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard size > 0, let data, let loop else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var random = SplitMix(hashing: input)
    let plan = ChannelSessionPlan(repetitions: 1 + Int(random.next() % 8),
                                  largestPiece: [1, 16, 4096, 256 << 10][Int(random.next() % 4)],
                                  programReads: random.next() % 2 == 0)
    if let failure = checkLifecycleChannelSession(input, plan: plan, loop: loop, next: { random.next() }) {
        fatalError("\(plan): \(failure)")
    }
    return 0
}
