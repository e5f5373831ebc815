// Which control socket a client uses when none is named: the user's own, then the system daemon's.

@preconcurrency import Glibc
@testable import NetLifeControl
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ControlSocketPathTests {
    @Test func aUserTriesItsOwnSocketThenTheSystemDaemons() {
        let environment = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(ControlProtocol.clientSocketPaths(environment: environment, euid: 1000)
            == ["/run/user/1000/netlifed/control.sock", "/run/netlifed/control.sock"])
        #expect(ControlProtocol.clientSocketPaths(environment: [:], euid: 1000)
            == ["/tmp/netlifed-1000/control.sock", "/run/netlifed/control.sock"])
        #expect(ControlProtocol.clientSocketPaths(environment: environment, euid: 0) == ["/run/netlifed/control.sock"],
                "root's own default is the system daemon's socket: tried once")
    }

    @Test func theFirstSocketThatExistsIsUsed() {
        let candidates = ["/run/user/1000/netlifed/control.sock", "/run/netlifed/control.sock"]
        #expect(ControlProtocol.socketToUse(candidates) { _ in true } == candidates[0], "the user's own daemon first")
        #expect(ControlProtocol.socketToUse(candidates) { $0 == candidates[1] } == candidates[1],
                "without one of its own, the system daemon")
        #expect(ControlProtocol.socketToUse(candidates) { _ in false } == nil)
    }

    @Test func aPathThatCannotBeLookedAtMayExist() {
        #expect(ControlProtocol.pathMayExist("/"))
        #expect(!ControlProtocol.pathMayExist("/nonexistent-\(getpid())/control.sock"))
        #expect(!ControlProtocol.pathMayExist("/etc/hostname/control.sock"), "ENOTDIR: nothing there")
    }
}
