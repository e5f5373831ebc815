// The daemon's dispatch comes from the command table: every entry has a handler, and nothing else does.

@testable import NetLifeDaemon
import NetLifeControl
import Testing

@Suite struct ControlHandlerTests {
    @Test(arguments: ControlCommand.all)
    func everyCommandOfTheTableHasAHandler(_ command: ControlCommand) {
        #expect(ControlCommands.handlers[command] != nil, "netlifed has no handler for \(command.name)")
    }

    @Test func everyHandlerIsForACommandOfTheTable() {
        #expect(Set(ControlCommands.handlers.keys) == Set(ControlCommand.all))
    }
}
