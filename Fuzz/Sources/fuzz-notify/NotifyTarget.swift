// Fuzz target: the notify datagrams a process app's program (or anyone who finds its NOTIFY_SOCKET) sends,
// through NotifyMessage.parse and ProgramNotifyState. The input is a sequence of datagrams separated by the
// byte 0xFE (which UTF-8 never uses), each parsed and handed to a state whose watchdog and clock come from a
// hash of the input. Checked: a datagram is refused exactly when it holds a NUL; READY=1, RELOADING=1,
// STOPPING=1 and WATCHDOG=trigger are seen exactly when a line says so (a plain reference splitter); the
// status is at most 256 bytes of UTF-8 without control characters; no more lines are ignored than there are;
// the state tells READY=1 once per datagram that says it, kills at most once and tells nothing after a kill.

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNotify(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard size > 0, let data else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var random = SplitMix(hashing: input)
    let watchdog: Duration? = random.next() % 2 == 0 ? nil : .milliseconds(Int64(1 + random.next() % 1000))
    var now = MonotonicTime(nanoseconds: 1_000_000_000)
    var state = ProgramNotifyState(watchdog: watchdog, startedAt: now)
    var kills = 0
    for datagram in input.split(separator: 0xFE, omittingEmptySubsequences: false) {
        let lines = datagram.split(separator: UInt8(ascii: "\n"))
        let says = { (text: String) in lines.contains { $0.elementsEqual(text.utf8) } }
        switch NotifyMessage.parse(datagram) {
        case .failure:
            precondition(datagram.contains(0), "a datagram without NUL was refused")
        case .success(let message):
            precondition(!datagram.contains(0), "a datagram with a NUL was accepted")
            precondition(message.ready == says("READY=1") && message.reloading == says("RELOADING=1") && message.stopping == says("STOPPING=1"))
            precondition((message.watchdog == .trigger) == says("WATCHDOG=trigger"))
            precondition(message.ignored <= lines.count)
            if let status = message.status {
                precondition(status.utf8.count <= NotifyMessage.maxStatusBytes, "status of \(status.utf8.count) bytes")
                precondition(!status.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "a control character")
            }
            let wasOver = state.isOver
            now = now + .milliseconds(Int64(random.next() % 500))
            let actions = state.receive(message, now: now) + state.clock(now: now)
            if wasOver { precondition(actions.isEmpty, "told \(actions) after a kill") }
            precondition(actions.filter { $0 == .notify(.ready) }.count <= 1)
            kills += actions.filter { if case .watchdogKill = $0 { true } else { false } }.count
            precondition(kills <= 1, "killed twice")
            if random.next() % 4 == 0 { state.froze() } else if random.next() % 4 == 0 { state.thawed(now: now) }
        }
    }
    return 0
}
