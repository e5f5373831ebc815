// The pure core of mDNS announcements: what is published or withdrawn as listeners open and close and
// avahi-daemon comes and goes, renames on a collision, and gives up after a refusal.

@testable import NetLifeDaemon
import Testing

@Suite(.timeLimit(.minutes(5))) struct MDNSRegistryTests {
    let web = MDNSServiceKey(app: "files", listener: "http")
    let ssh = MDNSServiceKey(app: "admin", listener: "ssh")
    let webService = MDNSService(name: "files", type: "_http._tcp", port: 8080, txt: ["v=1"])
    let sshService = MDNSService(name: "admin", type: "_ssh._tcp", port: 2222, txt: [])

    @Test func nothingIsPublishedUntilAvahiIsReadyThenEverythingOpenIs() {
        var registry = MDNSRegistry()
        #expect(registry.listenerOpened(web, webService) == [])
        #expect(registry.listenerOpened(ssh, sshService) == [])
        #expect(registry.serverChanged(ready: true) == [.publish(ssh, sshService), .publish(web, webService)],
                "in key order")
        #expect(registry.serverChanged(ready: true) == [], "no change, no action")
    }

    @Test func aListenerIsAnnouncedWhileOpenAndWithdrawnWhenItCloses() {
        var registry = MDNSRegistry()
        _ = registry.serverChanged(ready: true)
        #expect(registry.listenerOpened(web, webService) == [.publish(web, webService)])
        #expect(registry.listenerClosed(web) == [.withdraw(web)])
        #expect(registry.listenerClosed(web) == [], "closing twice withdraws once")
        // Reopening with another port replaces the registration.
        var moved = webService
        moved.port = 9090
        _ = registry.listenerOpened(web, webService)
        #expect(registry.listenerOpened(web, moved) == [.withdraw(web), .publish(web, moved)])
    }

    @Test func avahiGoingAwayDropsEverythingAndItsReturnPublishesItAgain() {
        var registry = MDNSRegistry()
        _ = registry.serverChanged(ready: true)
        _ = registry.listenerOpened(web, webService)
        _ = registry.listenerOpened(ssh, sshService)
        #expect(registry.serverChanged(ready: false) == [.withdraw(ssh), .withdraw(web)])
        #expect(registry.published.isEmpty)
        #expect(registry.listenerClosed(ssh) == [], "nothing to withdraw while avahi is away")
        #expect(registry.serverChanged(ready: true) == [.publish(web, webService)], "only what is still open")
    }

    @Test func aCollisionRenamesAndARefusalGivesUpUntilTheListenerReopens() {
        var registry = MDNSRegistry()
        _ = registry.serverChanged(ready: true)
        _ = registry.listenerOpened(web, webService)
        var renamed = webService
        renamed.name = "files #2"
        #expect(registry.nameCollided(web, alternative: "files #2") == [.withdraw(web), .publish(web, renamed)])
        #expect(registry.nameCollided(ssh, alternative: "x") == [], "not published: nothing to rename")
        #expect(registry.publishFailed(web) == [.withdraw(web)])
        #expect(registry.publishFailed(web) == [])
        #expect(registry.listenerOpened(web, webService) == [.publish(web, webService)])
    }
}
