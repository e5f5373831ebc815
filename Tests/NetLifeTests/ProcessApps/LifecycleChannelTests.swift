// The NETLIFE_EVENTS protocol as a pure value: hello and stages, answers matched (an answer not asked for is
// an error; how long a stage may wait is the pipeline's, not the channel's), tasks begun, ended and expiring
// (ids of the registry's tasks, kept only to know the program's own), VoIP declarations,
// framing across pieces, overlong and malformed lines, and the cut-off of a program that floods errors; and the
// fuzz harness (checkLifecycleChannel, in LifecycleChannelHarness.swift, shared with Fuzz/fuzz-lifecycle) on
// generated mixtures of lines and garbage.

@testable import NetLife
import NetLifeEvent
import NetLifeJSON
import Testing

private extension LifecycleChannelState {
    /// Feeds `text`, with `tasks` as the app's registry (none by default: every begin-task refused).
    mutating func receive(_ text: String, tasks: TestProgramTasks = TestProgramTasks()) -> [Action] {
        let actions = receive(Array(text.utf8), tasks: tasks.access)
        tasks.perform(actions)
        return actions
    }
}

/// The JSON of a `.send` action, for comparing members rather than spelling.
private func sent(_ action: LifecycleChannelState.Action?) -> JSON? {
    guard case .send(let line) = action, line.hasSuffix("\n"), line.filter({ $0 == "\n" }).count == 1 else { return nil }
    return try? JSON.parse(String(line.dropLast()))
}

private func isError(_ action: LifecycleChannelState.Action?) -> Bool {
    sent(action)?["error"]?.stringValue != nil
}

@Suite struct LifecycleChannelTests {
    @Test func withoutAHelloStagesCompleteAtOnceAndNothingIsSent() {
        var channel = LifecycleChannelState()
        #expect(channel.deliver(.didFinishLaunching, budget: .seconds(20)) == [.stageCompleted(.didFinishLaunching)])
        #expect(channel.awaited == nil)
    }

    @Test func aHelloSubscribesAndStagesWaitForTheirAnswers() {
        var channel = LifecycleChannelState()
        #expect(sent(channel.receive("{\"hello\": 1}\n").first) == .object(["hello": 1]))
        #expect(channel.isSubscribed)
        let actions = channel.deliver(.didEnterBackground, budget: .milliseconds(4999.5), listeners: .stopPolling)
        #expect(sent(actions.first) == .object(["event": "did-enter-background", "budget_ms": 5000, "listeners": "stop-polling"]))
        #expect(channel.awaited == .didEnterBackground)
        #expect(channel.receive("{\"done\":\"did-enter-background\",\"extra\":[1,2]}\n") == [.stageCompleted(.didEnterBackground)])
        #expect(channel.awaited == nil)
        #expect(isError(channel.receive("{\"done\":\"did-enter-background\"}\n").first), "answered twice")
        #expect(channel.errorCount == 1)
    }

    @Test func aConfiguredProgramIsSubscribedFromTheStart() {
        var channel = LifecycleChannelState(subscribed: true)
        let actions = channel.deliver(.didFinishLaunching, budget: .seconds(20), listeners: .resumePolling)
        #expect(sent(actions.first) == .object(["event": "did-finish-launching", "budget_ms": 20000, "listeners": "resume-polling"]))
    }

    @Test func anAnswerToAStageNotAskedIsAnError() {
        var channel = LifecycleChannelState(subscribed: true)
        _ = channel.deliver(.willResignActive, budget: .seconds(5))
        #expect(isError(channel.receive("{\"done\":\"did-become-active\"}\n").first))
        #expect(isError(channel.receive("{\"done\":\"no-such-stage\"}\n").first))
        #expect(isError(channel.receive("{\"done\":42}\n").first))
        #expect(channel.awaited == .willResignActive, "the awaited stage still waits")
    }

    @Test func aStageWaitsForItsAnswerHoweverLongTheChannelIsLeft() {
        // The channel has no clock: the pipeline's watchdog decides when a stage has waited too long, and
        // kills the program, which closes the channel; until then the stage waits.
        var channel = LifecycleChannelState(subscribed: true)
        _ = channel.deliver(.willTerminate, budget: .seconds(5))
        #expect(channel.awaited == .willTerminate && !channel.isClosed)
        #expect(channel.peerClosed() == [.stageCompleted(.willTerminate), .endProgramTasks])
        #expect(channel.receive("{\"done\":\"will-terminate\"}\n") == [], "a late answer after the end is ignored")
        #expect(channel.errorCount == 0)
        #expect(channel.deliver(.didBecomeActive, budget: .seconds(1)) == [.stageCompleted(.didBecomeActive)])
    }

    @Test func tasksAreBegunEndedAndExpiredThroughTheRegistry() {
        var channel = LifecycleChannelState()
        var ids: [BackgroundTaskIdentifier] = [7, 0]
        let registry = TestProgramTasks { _ in ids.removeFirst() }
        let answers = channel.receive("{\"begin-task\":\"upload\"}\n{\"begin-task\":null}\n{\"end-task\":7}\n{\"end-task\":7}\n",
                                      tasks: registry)
        #expect(registry.begun == ["upload", nil])
        #expect(sent(answers[0]) == .object(["task": 7, "name": "upload"]))
        #expect(sent(answers[1]) == .object(["task": 0, "name": nil]), "refused: the invalid id")
        #expect(answers.count == 4 && answers[2] == .endTask(7), "a task begun earlier in the same read can be ended")
        #expect(isError(answers.last), "once: the second end-task in the same read is refused")
        #expect(registry.open.isEmpty)

        let tasks = TestProgramTasks { _ in 7 }
        _ = channel.receive("{\"begin-task\":\"upload\"}\n", tasks: tasks)
        #expect(tasks.open == [7])
        let expiring = channel.taskExpiring(7, budget: .seconds(1))
        #expect(sent(expiring.first) == .object(["task-expiring": 7, "budget_ms": 1000]))
        #expect(channel.receive("{\"end-task\":7}\n", tasks: tasks) == [.endTask(7)])
        #expect(tasks.open.isEmpty, "the registry ended it")
        #expect(isError(channel.receive("{\"end-task\":7}\n", tasks: tasks).first), "already ended")
        #expect(isError(channel.receive("{\"end-task\":3}\n", tasks: tasks).first), "not the program's")
        #expect(isError(channel.receive("{\"end-task\":0}\n", tasks: tasks).first))
        #expect(isError(channel.receive("{\"end-task\":\"7\"}\n", tasks: tasks).first))

        let sync = TestProgramTasks { _ in 9 }
        _ = channel.receive("{\"begin-task\":\"sync\"}\n", tasks: sync)
        _ = channel.taskExpiring(9, budget: .seconds(1))
        #expect(channel.receive("{\"done\":\"task-expiring\",\"task\":9}\n", tasks: sync) == [], "taken; the registry's grace bounds the task")
        #expect(isError(channel.receive("{\"done\":\"task-expiring\",\"task\":3}\n", tasks: sync).first), "not an open task of the program")
        #expect(sync.open == [9], "the handler finished; the task stays open")
        #expect(isError(channel.receive("{\"begin-task\":\"\(String(repeating: "n", count: 257))\"}\n").first))
    }

    @Test func voipDescriptorsAreDeclaredOnceAndBounded() {
        var channel = LifecycleChannelState()
        let first = channel.receive("{\"voip\":5}\n")
        #expect(first.first == .declareVoIP(5) && sent(first.last) == .object(["voip": 5]))
        #expect(channel.receive("{\"voip\":5}\n").count == 1, "again: answered, not declared twice")
        for bad in ["-1", "1.5", "\"5\"", "null", "99999999999"] {
            #expect(isError(channel.receive("{\"voip\":\(bad)}\n").first), "\(bad)")
        }
        var many = LifecycleChannelState()
        for fd in 0..<64 { _ = many.receive("{\"voip\":\(fd)}\n") }
        #expect(isError(many.receive("{\"voip\":64}\n").first))
        #expect(many.voipDescriptors.count == 64)
    }

    @Test func linesMayArriveInPiecesAndTogether() {
        var channel = LifecycleChannelState(subscribed: true)
        _ = channel.deliver(.didBecomeActive, budget: .seconds(5))
        let text = "{\"voip\":3}\n\n  \r\n{\"done\":\"did-become-active\"}\n{\"begin-task\":\"x\"}"
        var actions: [LifecycleChannelState.Action] = []
        for byte in text.utf8 { actions += channel.receive([byte], tasks: TestProgramTasks { _ in 1 }.access) }
        #expect(actions.count == 3)
        #expect(actions.contains(.stageCompleted(.didBecomeActive)) && actions.contains(.declareVoIP(3)))
        let registry = TestProgramTasks { _ in 5 }
        #expect(sent(channel.receive("\n", tasks: registry).first) == .object(["task": 5, "name": "x"]))
        #expect(registry.begun == ["x"])
        #expect(channel.errorCount == 0)
    }

    @Test func overlongAndMalformedLinesAreAnsweredAndCounted() {
        var channel = LifecycleChannelState()
        let long = "{\"begin-task\":\"" + String(repeating: "a", count: 5000) + "\"}\n"
        let actions = channel.receive(long + "{\"voip\":1}\n")
        #expect(actions.count == 3 && isError(actions.first) && actions[1] == .declareVoIP(1))
        #expect(sent(actions.first)?["error"]?.stringValue?.contains("4096") == true)
        for bad in ["not json", "[1,2]", "{}", "{\"hello\":1,\"voip\":2}", "{\"unknown\":1}", "{\"hello\":0}",
                    "{\"a\":{\"b\":{\"c\":{\"d\":{}}}}}", "{\"voip\":1,\"voip\":1}", "\u{FF}"] {
            #expect(isError(channel.receive(bad + "\n").first), "\(bad)")
        }
        #expect(channel.errorCount == 10)
        #expect(!channel.isClosed)
        // Every answer stays a single line within the limit.
        let weird = channel.receive("{\"done\":\"\u{1}\u{2}\"}\n")
        if case .send(let line) = weird.first { #expect(line.utf8.count <= LifecycleChannelState.maxLineBytes + 1) }
    }

    @Test func aProgramThatKeepsSendingErrorsIsCutOff() {
        var channel = LifecycleChannelState(subscribed: true)
        let registry = TestProgramTasks { _ in 4 }
        _ = channel.receive("{\"begin-task\":\"t\"}\n", tasks: registry)
        _ = channel.taskExpiring(4, budget: .seconds(1))
        _ = channel.deliver(.didEnterBackground, budget: .seconds(5))
        var actions: [LifecycleChannelState.Action] = []
        actions += channel.receive(String(repeating: "garbage\n", count: 1000), tasks: registry)
        #expect(channel.errorCount == LifecycleChannelState.maxErrors, "nothing is handled after the cut-off")
        #expect(channel.isClosed)
        #expect(actions.filter(isError).count == LifecycleChannelState.maxErrors)
        #expect(actions.contains { if case .cutOff = $0 { return true }; return false })
        #expect(actions.suffix(2) == [.stageCompleted(.didEnterBackground), .endProgramTasks],
                "the stage goes on without the program, and its task ends")
        #expect(registry.open.isEmpty)
        #expect(channel.receive("{\"hello\":1}\n") == [])
    }

    @Test func whenTheProgramClosesItsEndTheWaitingEnds() {
        var channel = LifecycleChannelState(subscribed: true)
        _ = channel.deliver(.willEnterForeground, budget: .seconds(5))
        #expect(channel.peerClosed() == [.stageCompleted(.willEnterForeground), .endProgramTasks])
        #expect(channel.peerClosed() == [])
        #expect(channel.deliver(.didBecomeActive, budget: .seconds(5)) == [.stageCompleted(.didBecomeActive)])
    }

    @Test func theCodecIsLinearOnLargeInput() {
        // A megabyte of one unterminated line, then a megabyte of short lines: the kept part stays bounded.
        var channel = LifecycleChannelState()
        let refused = channel.receive(Array(repeating: UInt8(ascii: "x"), count: 1 << 20), tasks: .none)
        #expect(refused.count == 1 && isError(refused.first), "one overlong line, refused as it arrives")
        let actions = channel.receive(Array(repeating: UInt8(ascii: "\n"), count: 1 << 20), tasks: .none)
        #expect(actions.isEmpty, "then empty lines that ask nothing")
    }

    @Test func aLineIsRefusedWhenItPassesTheLimitNotAtItsNewline() {
        var channel = LifecycleChannelState()
        let exactly = channel.receive(String(repeating: "x", count: LifecycleChannelState.maxLineBytes))
        #expect(exactly.isEmpty, "a line of exactly the limit waits for its newline")
        let passed = channel.receive("x")
        #expect(passed.count == 1 && isError(passed.first), "one byte more and it is refused at once")
        #expect(channel.receive(String(repeating: "y", count: 1 << 16)).isEmpty, "the rest is skipped, not refused again")
        #expect(channel.errorCount == 1)
        // A 10 MB line, then 20 bad lines: 1 + 15 errors reach the cut-off.
        var endless = LifecycleChannelState()
        _ = endless.receive(Array(repeating: UInt8(ascii: "z"), count: 10 << 20), tasks: .none)
        let actions = endless.receive("\n" + String(repeating: "bad\n", count: 20))
        #expect(endless.isClosed && endless.errorCount == LifecycleChannelState.maxErrors)
        #expect(actions.contains { if case .cutOff = $0 { return true }; return false })
    }
}

/// The harness fuzz-lifecycle runs, on mixtures of protocol lines and garbage.
@Suite struct LifecycleChannelFuzzHarnessTests {
    @Test func theHarnessHoldsOnProtocolLinesGarbageAndTheirMixtures() {
        let tokens = ["{\"hello\":1}\n", "{\"done\":\"did-enter-background\"}\n", "{\"begin-task\":\"t\"}\n", "{\"begin-task\":null}\n",
                      "{\"end-task\":1}\n", "{\"end-task\":2}\n", "{\"done\":\"task-expiring\",\"task\":2}\n", "{\"voip\":7}\n",
                      "{\"voip\":", "\n", "\r\n", "garbage", "{", "}", "\"", "\\u0000", "\u{0}", "\u{FF}", "[[[[[[",
                      String(repeating: "z", count: 5000)]
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> Int {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Int(state % 1_000_000)
        }
        for round in 0..<300 {
            var input: [UInt8] = []
            for _ in 0..<(next() % 40) { input += Array(tokens[next() % tokens.count].utf8) }
            if round % 5 == 0 { for _ in 0..<(next() % 200) { input.append(UInt8(next() % 256)) } }
            let failure = checkLifecycleChannel(input) { 1 + next() % 64 }
            #expect(failure == nil, "\(failure ?? ""): \(String(decoding: input.prefix(200), as: UTF8.self))")
        }
        var many: [UInt8] = []
        for fd in 0..<100 { many += Array("{\"voip\":\(fd)}\n".utf8) }
        #expect(checkLifecycleChannel(many) { 7 } == nil)
    }
}
