// Which suspended apps memory pressure ends, and in what order, as pure decisions.

import NetLife
import Testing

private func app(_ name: String, _ bytes: Int, voip: Bool = false) -> JetsamCandidate {
    JetsamCandidate(name: name, bytes: bytes, voip: voip)
}

private func ended(_ candidates: [JetsamCandidate], free: Int?) -> [String] {
    MemoryPressureRules.appsToEnd(candidates, free: free).map(\.name)
}

@Suite struct MemoryPressureRulesTests {
    @Test func withoutAnAmountEverySuspendedAppIsEndedLargestFirst() {
        #expect(ended([app("a", 10), app("b", 300), app("c", 20)], free: nil) == ["b", "c", "a"])
    }

    @Test func anAmountEndsOnlyAsManyAsItNeedsLargestFirst() {
        let apps = [app("small", 1_000), app("big", 100_000), app("mid", 20_000)]
        #expect(ended(apps, free: 110_000) == ["big", "mid"])
        #expect(ended(apps, free: 100_000) == ["big"], "exactly enough stops there")
        #expect(ended(apps, free: 1) == ["big"])
        #expect(ended(apps, free: 120_001) == ["big", "mid", "small"])
    }

    @Test func anAmountNoAppsCanFreeEndsThemAll() {
        #expect(ended([app("a", 10), app("b", 20)], free: 1_000_000) == ["b", "a"])
    }

    @Test func nothingToFreeEndsNothing() {
        #expect(ended([app("a", 10), app("b", 20, voip: true)], free: 0).isEmpty)
        #expect(ended([app("a", 10)], free: -5).isEmpty)
    }

    @Test func voipAppsAreEndedLastWhateverTheirSize() {
        let apps = [app("phone", 500_000, voip: true), app("mail", 100), app("chat", 50_000, voip: true), app("news", 2_000)]
        #expect(ended(apps, free: nil) == ["news", "mail", "phone", "chat"])
        #expect(ended(apps, free: 2_100) == ["news", "mail"], "the other apps free enough: no VoIP app ends")
        #expect(ended(apps, free: 2_101) == ["news", "mail", "phone"], "then the largest VoIP app")
    }

    @Test func appsOfEqualSizeAreEndedInNameOrderWhateverTheInputOrder() {
        let apps = [app("c", 5), app("a", 5), app("b", 5)]
        #expect(ended(apps, free: nil) == ["a", "b", "c"])
        #expect(ended(Array(apps.reversed()), free: nil) == ["a", "b", "c"])
        #expect(ended(apps, free: 6) == ["a", "b"])
    }

    @Test func appsThatHoldNothingAreEndedOnlyWhenTheOthersDoNotSuffice() {
        let apps = [app("empty", 0), app("full", 100)]
        #expect(ended(apps, free: 100) == ["full"])
        #expect(ended(apps, free: 101) == ["full", "empty"])
    }

    @Test func hugeSizesDoNotOverflow() {
        let apps = [app("a", .max), app("b", .max), app("c", 1)]
        #expect(ended(apps, free: .max) == ["a"])
        #expect(ended(apps, free: nil) == ["a", "b", "c"])
    }

    @Test func noSuspendedAppEndsNothing() {
        #expect(ended([], free: nil).isEmpty)
        #expect(ended([], free: 10).isEmpty)
    }

    @Test func eachEventOfTheKernelsTriggerEndsTheFirstAppOfTheLadder() {
        // Largest first, VoIP last, equal sizes by name: one app per event, and the next event (if the stall
        // goes on) finds the ladder one app shorter.
        var apps = [app("phone", 500_000, voip: true), app("mail", 100), app("news", 2_000), app("chat", 2_000)]
        var order: [String] = []
        while case .end(let next) = MemoryPressureRules.step(apps) {
            order.append(next.name)
            apps.removeAll { $0.name == next.name }
        }
        #expect(order == ["chat", "news", "mail", "phone"])
        #expect(MemoryPressureRules.step(apps) == .nothingSuspended)
        #expect(MemoryPressureRules.step([app("phone", 1, voip: true)]) == .end(app("phone", 1, voip: true)), "a VoIP app when it is the only one")
    }
}
