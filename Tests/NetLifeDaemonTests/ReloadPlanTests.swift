// What a reload does, decided from the two configs.

@testable import NetLifeDaemon
import NetLife
import NetLifeServices
import Testing

@Suite struct ReloadPlanTests {
    private func parse(_ text: String) throws -> DaemonConfiguration {
        try ConfigLoader.parse(text, file: "t.conf", services: .builtin)
    }

    @Test func classifiesEveryApp() throws {
        let old = try parse("""
            [app same]
            [app settings]
            [app listeners]
            [listener listeners.x]
            address = 127.0.0.1:1
            service = echo
            [app gone]
            """)
        let new = try parse("""
            [app same]
            [app settings]
            task-time = 9s
            [app listeners]
            [listener listeners.x]
            address = 127.0.0.1:2
            service = echo
            [app fresh]
            """)
        let plan = ReloadPlan(from: old.apps, to: new.apps)
        #expect(plan.added == ["fresh"])
        #expect(plan.removed == ["gone"])
        #expect(plan.restarted == ["listeners"])
        #expect(plan.updated == ["settings"])
        #expect(ReloadPlan.fixedSettingsChanged(from: old, to: try parse("[daemon]\ncontrol = /x/y.sock\n")) == ["control"])
        #expect(ReloadPlan.fixedSettingsChanged(from: old, to: try parse("[daemon]\nmetrics = 127.0.0.1:9464\n")) == ["metrics"])
    }
}
