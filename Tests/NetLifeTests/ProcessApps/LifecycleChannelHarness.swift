// The invariants of the NETLIFE_EVENTS codec for any bytes a program sends, as one function shared by two
// packages: LifecycleChannelTests runs it on generated mixtures of protocol lines and garbage, and the
// libFuzzer target fuzz-lifecycle runs it on every input (Fuzz/Sources/fuzz-lifecycle links this very file
// through a symbolic link: a test target cannot be a dependency of another package, and the harness should
// not ship in NetLife). So it uses only the public API, imports only what both packages see, and
// reports a failure as a value instead of `#expect` or `fatalError`.

import NetLife
import NetLifeJSON

/// Runs the channel on `input`, what a program sends, fed whole and in pieces of `pieceSize()` bytes, with the
/// owner answering every begin-task at once (every third refused), a stage awaited from the start, and the
/// even-numbered tasks expiring at the end. Returns the invariant that failed, or nil: the same actions and
/// state either way; every line sent is one JSON object within the limit; at most `maxErrors` errors, and
/// closed after a cut-off; at most `maxVoIPDescriptors` VoIP descriptors; nothing sent after a cut-off; no stage
/// awaited once closed.
func checkLifecycleChannel(_ input: [UInt8], pieceSize: () -> Int) -> String? {
    func run(_ pieces: [ArraySlice<UInt8>]) -> ([LifecycleChannelState.Action], LifecycleChannelState, Set<BackgroundTaskIdentifier>) {
        var channel = LifecycleChannelState()
        var actions = channel.receive(Array("{\"hello\":1}\n".utf8), tasks: .none)
        actions += channel.deliver(.didEnterBackground, budget: .seconds(5))
        var nextID: BackgroundTaskIdentifier = 0
        let registry = TestProgramTasks { _ in
            nextID += 1
            return nextID % 3 == 0 ? 0 : nextID
        }
        for piece in pieces {
            let received = channel.receive(piece, tasks: registry.access)
            registry.perform(received)
            actions += received
        }
        // The registry's expirations come between reads; only at the end, so that pieces cannot matter.
        for id in registry.open.sorted() where id % 2 == 0 {
            actions += channel.taskExpiring(id, budget: .seconds(1))
        }
        return (actions, channel, registry.open)
    }
    var pieces: [ArraySlice<UInt8>] = []
    var start = 0
    while start < input.count {
        let end = min(input.count, start + max(1, pieceSize()))
        pieces.append(input[start..<end])
        start = end
    }
    let (whole, wholeState, wholeOpen) = run([input[...]])
    let (split, splitState, splitOpen) = run(pieces)
    guard whole == split else { return "fed in pieces, other actions" }
    guard wholeState.errorCount == splitState.errorCount, wholeState.isClosed == splitState.isClosed,
          wholeOpen == splitOpen, wholeState.voipDescriptors == splitState.voipDescriptors,
          wholeState.awaited == splitState.awaited else {
        return "fed in pieces, another state"
    }
    for action in whole {
        guard case .send(let line) = action else { continue }
        guard line.utf8.count <= LifecycleChannelState.maxLineBytes + 1, line.hasSuffix("\n"),
              line.utf8.filter({ $0 == 10 }).count == 1, case .object? = try? JSON.parse(String(line.dropLast())) else {
            return "a line sent is not one JSON object within the limit: \(line.prefix(100))"
        }
    }
    if wholeState.errorCount > LifecycleChannelState.maxErrors { return "more errors than the limit" }
    let cut = whole.firstIndex { if case .cutOff = $0 { return true }; return false }
    if cut != nil && !wholeState.isClosed { return "cut off but open" }
    if wholeState.voipDescriptors.count > LifecycleChannelState.maxVoIPDescriptors { return "too many VoIP descriptors" }
    if let cut, whole[(cut + 1)...].contains(where: { if case .send = $0 { return true }; return false }) {
        return "a line sent after the cut-off"
    }
    if wholeState.isClosed && wholeState.awaited != nil { return "closed with a stage still waiting for the program" }
    return nil
}

/// The app's registry as the channel's tests and its fuzz target stand it in: begin-task gets the ids `next`
/// gives (0: refused), and it remembers which are open, as the registry does for a program's tasks.
final class TestProgramTasks {
    private(set) var open: Set<BackgroundTaskIdentifier> = []
    private(set) var begun: [String?] = []
    private let next: (String?) -> BackgroundTaskIdentifier

    init(_ next: @escaping (String?) -> BackgroundTaskIdentifier = { _ in 0 }) { self.next = next }

    var access: ProgramTasks {
        ProgramTasks(begin: { [self] name in
            begun.append(name)
            let id = next(name)
            if id != 0 { open.insert(id) }
            return id
        }, end: { [self] id in open.remove(id) }, isOpen: { [self] id in open.contains(id) }, endAll: { [self] in open.removeAll() })
    }

    /// Performs what the channel asks of the registry in its actions: a task ended, every task at its close.
    func perform(_ actions: [LifecycleChannelState.Action]) {
        for action in actions {
            if case .endTask(let id) = action { open.remove(id) }
            if action == .endProgramTasks { open.removeAll() }
        }
    }
}
