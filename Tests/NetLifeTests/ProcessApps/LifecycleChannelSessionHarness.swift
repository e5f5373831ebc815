// The invariants of netlifed's end of the lifecycle channel on a real loop and socketpair, for any byte stream
// a program writes, split any way, as one function shared by two packages: LifecycleChannelSessionTests runs
// it on generated streams, and the libFuzzer target fuzz-channel runs it on every input (Fuzz/Sources/
// fuzz-channel links this very file). So it uses only the public API and reports a failure as a value.
//
// The program's end is driven from here, turn by turn: it writes the stream (repeated, so that some streams
// pass a turn's share and the kernel's queue) in pieces, reads the answers or never does, then closes its
// end. netlifed's end is shaped as ProcessProgram shapes it: a blocking socketpair end (Connection makes it
// non-blocking), its bytes fed to a LifecycleChannelState, each line sent only while the pending output is
// under the limit, the session closed on a cut-off.

@preconcurrency import Glibc
import NetLife
import NetLifeEvent
import NetLifeJSON

/// What the harness chooses besides the stream itself; drawn from a hash of the input by the fuzz target.
struct ChannelSessionPlan {
    /// The stream is written this many times over (1 to 8).
    var repetitions: Int
    /// The largest piece written at once (the pieces' sizes vary below it).
    var largestPiece: Int
    /// Whether the program reads the answers as they come, or never (until it has written everything).
    var programReads: Bool
}

/// Runs the session on `stream` as `plan` says, with `next()` giving the pseudo-random numbers for piece sizes.
/// Returns the invariant that failed, or nil: the bytes handed to the codec are exactly the bytes written, in
/// order, at most `bytesPerTurn` at a time, until a cut-off; the session never holds more than one read
/// callback's share; the pending output stays within the limit and a line; every line the program reads is
/// one JSON object within 4 KiB; at most 16 errors; a cut-off closes the program's channel; the end of the
/// stream reaches the session within a bounded number of turns.
func checkLifecycleChannelSession(_ stream: [UInt8], plan: ChannelSessionPlan, loop: EventLoop,
                                  next: () -> UInt64) -> String? {
    var fds: [CInt] = [-1, -1]
    guard socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else { return nil }
    let (ours, program) = (fds[0], fds[1])
    defer { close(program) }
    _ = fcntl(program, F_SETFL, fcntl(program, F_GETFL) | O_NONBLOCK)

    var state = LifecycleChannelState()
    var handed: [UInt8] = []
    var failure: String?
    var cutOff = false
    var closedSeen = false
    var session: LifecycleChannelSession?
    let bufferedLimit = Connection.readsPerCallback * (256 << 10)
    let pendingLimit = LifecycleChannelState.maxPendingOutputBytes + LifecycleChannelState.maxLineBytes + 1
    var nextTask: BackgroundTaskIdentifier = 0
    func perform(_ actions: [LifecycleChannelState.Action]) {
        for action in actions {
            switch action {
            case .send(let line):
                guard let current = session, current.isOpen else { continue }
                if current.pendingBytes > LifecycleChannelState.maxPendingOutputBytes {
                    perform([.cutOff("it does not read")])
                    return
                }
                current.send(line)
                if current.pendingBytes > pendingLimit { failure = failure ?? "pending output \(current.pendingBytes) bytes" }
            case .cutOff:
                cutOff = true
                session?.close()
                perform(state.peerClosed())
            default:
                break
            }
        }
    }
    do {
        session = try LifecycleChannelSession(loop: loop, fd: ours, onBytes: { bytes in
            if bytes.count > LifecycleChannelSession.bytesPerTurn { failure = failure ?? "\(bytes.count) bytes handed over at once" }
            handed += bytes
            let tasks = ProgramTasks(begin: { _ in
                nextTask += 1
                return nextTask % 3 == 0 ? 0 : nextTask
            }, end: { _ in }, isOpen: { _ in true }, endAll: {})
            perform(state.receive(bytes, tasks: tasks))
        }, closed: { closedSeen = true })
    } catch {
        return "the session could not be made: \(error)"
    }
    // The closures above hold `session` (through `perform`): let go of it at the end, or it keeps itself.
    defer {
        session?.close()
        session = nil
    }

    let stopper = EventTimer(loop: loop) { loop.stop() }
    defer { stopper.close() }
    func turn() {
        stopper.arm(after: .zero)
        try? loop.run()
        if let session, session.bufferedBytes > bufferedLimit {
            failure = failure ?? "the session holds \(session.bufferedBytes) bytes"
        }
    }
    var answers: [UInt8] = []
    var scratch = [UInt8](repeating: 0, count: 64 << 10)
    func readAnswers() {
        while true {
            let got = read(program, &scratch, scratch.count)
            guard got > 0 else { return }
            answers += scratch[0..<got]
        }
    }

    let total = stream.count * plan.repetitions
    // Pieces no smaller on average than a 2,000th of the whole, so that the turns stay bounded.
    let largestPiece = max(plan.largestPiece, total / 1_000)
    var written = 0
    var turns = 0
    // Each turn the program writes a piece (what the kernel takes of it); a stalled session shows as turns
    // without progress, bounded here so that it fails rather than hangs.
    while written < total, !cutOff, failure == nil, turns < 100_000 {
        let size = min(total - written, 1 + Int(next() % UInt64(max(1, largestPiece))))
        var piece: [UInt8] = []
        piece.reserveCapacity(size)
        var position = written
        while piece.count < size {
            let offset = position % max(1, stream.count)
            let take = min(size - piece.count, stream.count - offset)
            piece += stream[offset..<(offset + take)]
            position += take
        }
        let sent = piece.withUnsafeBytes { send(program, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        if sent > 0 { written += sent }
        if plan.programReads { readAnswers() }
        turn()
        turns += 1
    }
    if failure == nil, !cutOff, written < total { failure = "the program could write only \(written) of \(total) bytes in \(turns) turns" }
    shutdown(program, CInt(SHUT_WR))
    // The end of the stream: everything written is handed over, then the close is seen.
    var endTurns = 0
    while !closedSeen, !cutOff, failure == nil, endTurns < 1_000 {
        readAnswers()
        turn()
        endTurns += 1
    }
    readAnswers()
    if let failure { return failure }
    if !cutOff {
        guard closedSeen else { return "the end of the stream was not seen after \(endTurns) turns (\(handed.count) of \(written) bytes handed over)" }
        guard handed.count == written else { return "\(handed.count) bytes handed over, \(written) written" }
    }
    // What was handed over is what was written, in order (the stream repeated), up to the cut-off.
    for (index, byte) in handed.enumerated() where byte != stream[index % stream.count] {
        return "byte \(index) handed over is not the byte written"
    }
    if state.errorCount > LifecycleChannelState.maxErrors { return "\(state.errorCount) errors" }
    if cutOff, !state.isClosed { return "cut off, but the codec is open" }
    // Every whole line the program read is one JSON object within the limit.
    var start = 0
    for (index, byte) in answers.enumerated() where byte == UInt8(ascii: "\n") {
        let line = Array(answers[start..<index])
        start = index + 1
        guard line.count <= LifecycleChannelState.maxLineBytes, case .object? = try? JSON.parse(line) else {
            return "the program read a line that is not one JSON object within 4 KiB"
        }
    }
    return nil
}
