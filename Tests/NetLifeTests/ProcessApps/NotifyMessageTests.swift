// The parser of notify datagrams (systemd's sd_notify protocol) as a process app's program sends them, and
// the pure state of one run's readiness, status line and watchdog, driven with a fake clock.

import NetLife
import NetLifeEvent
import Testing

private func parse(_ text: String) -> Result<NotifyMessage, NotifyMessage.Refusal> { NotifyMessage.parse(Array(text.utf8)) }
private func at(_ ms: UInt64) -> MonotonicTime { MonotonicTime(nanoseconds: 1_000_000_000 + ms * 1_000_000) }

@Suite struct NotifyMessageTests {
    @Test func aDatagramSaysEachOfItsAssignments() throws {
        let message = try parse("READY=1\nSTATUS=Serving 3 clients\nWATCHDOG=1\nMAINPID=42\n").get()
        #expect(message.ready)
        #expect(!message.stopping && !message.reloading)
        #expect(message.status == "Serving 3 clients")
        #expect(message.watchdog == .ping)
        #expect(message.ignored == 1)
        #expect(try parse("STOPPING=1").get().stopping)
        #expect(try parse("RELOADING=1\nMONOTONIC_USEC=12").get().reloading)
    }

    @Test func onlyTheValuesSystemdActsOnCount() throws {
        let message = try parse("READY=0\nREADY=yes\nready=1\nREADY\n=1\nWATCHDOG=2\nSTOPPING=1 \n").get()
        #expect(message == NotifyMessage(ignoredCount: 7))
        #expect(try parse("WATCHDOG=1\nWATCHDOG=trigger\nWATCHDOG=1").get().watchdog == .trigger)
        #expect(try parse("").get() == NotifyMessage())
        #expect(try parse("\n\n\n").get() == NotifyMessage())
        // CRLF lines are not LF lines: the CR is part of the value.
        #expect(try !parse("READY=1\r\n").get().ready)
    }

    @Test func aDatagramWithANULIsRefusedWhole() {
        #expect(NotifyMessage.parse(Array("READY=1\n".utf8) + [0] + Array("STATUS=x".utf8)) == .failure(.embeddedNUL))
    }

    @Test func theStatusIsOneBoundedPrintableLineAndTheLastOneWins() throws {
        #expect(try parse("STATUS=a\nSTATUS=b").get().status == "b")
        #expect(try parse("STATUS=").get().status == "")
        #expect(try parse("STATUS=tab\there\u{1B}[31mred\u{7F}\u{85}ok é").get().status == "tabhere[31mredok é")
        let long = try parse("STATUS=" + String(repeating: "é", count: 400)).get().status ?? ""
        #expect(long.utf8.count == NotifyMessage.maxStatusBytes)
        #expect(long.allSatisfy { $0 == "é" })
        // Invalid UTF-8 becomes U+FFFD, never a trap.
        let bytes = Array("STATUS=".utf8) + [0xFF, 0xC3, 0x41]
        #expect(try NotifyMessage.parse(bytes).get().status == "\u{FFFD}\u{FFFD}A")
    }

    @Test func aLongDatagramIsReadInOnePass() throws {
        let lines = String(repeating: "X=1\n", count: 20_000) + "READY=1"
        let message = try parse(lines).get()
        #expect(message.ready)
        #expect(message.ignored == 20_000)
    }
}

@Suite struct ProgramNotifyStateTests {
    @Test func readyAndStatusAreKeptAndReadyIsTold() {
        var state = ProgramNotifyState(watchdog: nil, startedAt: at(0))
        #expect(state.deadline == nil)
        var message = NotifyMessage()
        message.status = "loading"
        #expect(state.receive(message, now: at(5)).isEmpty)
        #expect(state.statusText == "loading" && !state.isReady)
        message.ready = true
        message.status = "up"
        #expect(state.receive(message, now: at(6)) == [.notify(.ready)])
        #expect(state.isReady && state.statusText == "up")
        var both = NotifyMessage()
        both.reloading = true
        both.ready = true
        both.stopping = true
        #expect(state.receive(both, now: at(7)) == [.notify(.reloading), .notify(.ready), .notify(.stopping)])
    }

    @Test func aMissedPingIsAWatchdogKillAtTheIntervalAndNotBefore() {
        var state = ProgramNotifyState(watchdog: .seconds(1), startedAt: at(0))
        #expect(state.deadline == at(1_000))
        #expect(state.clock(now: at(999)).isEmpty)
        #expect(state.receive(NotifyMessage(watchdog: .ping), now: at(900)).isEmpty)
        #expect(state.deadline == at(1_900))
        #expect(state.clock(now: at(1_000)).isEmpty)
        let kill = state.clock(now: at(1_950))
        #expect(kill == [.watchdogKill(WatchdogTimeout(stage: .programWatchdog(triggered: false), budget: .seconds(1), elapsed: .milliseconds(1_050)))])
        #expect(state.deadline == nil)
        // Once killed, nothing more is acted on.
        #expect(state.clock(now: at(5_000)).isEmpty)
        #expect(state.receive(NotifyMessage(watchdog: .trigger), now: at(5_000)).isEmpty)
    }

    @Test func triggerKillsAtOnceWithOrWithoutAWatchdog() {
        var state = ProgramNotifyState(watchdog: .seconds(2), startedAt: at(0))
        #expect(state.receive(NotifyMessage(watchdog: .trigger), now: at(300))
                == [.watchdogKill(WatchdogTimeout(stage: .programWatchdog(triggered: true), budget: .seconds(2), elapsed: .milliseconds(300)))])
        var none = ProgramNotifyState(watchdog: nil, startedAt: at(0))
        #expect(none.receive(NotifyMessage(watchdog: .trigger), now: at(300))
                == [.watchdogKill(WatchdogTimeout(stage: .programWatchdog(triggered: true), budget: .zero, elapsed: .zero))])
        #expect(WatchdogStage.programWatchdog(triggered: true).description == "program-watchdog-trigger")
        #expect(WatchdogStage.programWatchdog(triggered: false).description == "program-watchdog")
        #expect(WatchdogStage.programReady.description == "program-ready")
    }

    @Test func theClockStopsWhileFrozenAndStartsAfreshOnThaw() {
        var state = ProgramNotifyState(watchdog: .seconds(1), startedAt: at(0))
        state.froze()
        #expect(state.deadline == nil)
        #expect(state.clock(now: at(60_000)).isEmpty)
        // A ping that reached the queue before the freeze does not restart a stopped clock.
        #expect(state.receive(NotifyMessage(watchdog: .ping), now: at(60_000)).isEmpty)
        #expect(state.deadline == nil)
        state.thawed(now: at(60_500))
        #expect(state.deadline == at(61_500))
        #expect(state.clock(now: at(61_499)).isEmpty)
        #expect(state.clock(now: at(61_500)).count == 1)
        // Without a watchdog a thaw arms nothing.
        var none = ProgramNotifyState(watchdog: nil, startedAt: at(0))
        none.thawed(now: at(5))
        #expect(none.deadline == nil)
    }
}

extension NotifyMessage {
    init(watchdog: WatchdogNotice? = nil, ignoredCount: Int = 0) {
        self.init()
        self.watchdog = watchdog
        self.ignored = ignoredCount
    }
}
