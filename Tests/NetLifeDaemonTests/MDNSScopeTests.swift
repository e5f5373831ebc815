// Where an mDNS announcement is made, from the listener's address: loopback on the loopback interface only,
// a specific address on the interface that holds it, a wildcard address everywhere.

@testable import NetLifeDaemon
import NetLifeEvent
import Testing

@Suite(.timeLimit(.minutes(1))) struct MDNSScopeTests {
    let interfaces = [
        MDNSScope.InterfaceAddress(name: "lo", address: "127.0.0.1", isLoopback: true),
        MDNSScope.InterfaceAddress(name: "lo", address: "::1", isLoopback: true),
        MDNSScope.InterfaceAddress(name: "eth0", address: "192.0.2.10", isLoopback: false),
        MDNSScope.InterfaceAddress(name: "eth0", address: "2001:db8::10", isLoopback: false),
        MDNSScope.InterfaceAddress(name: "wlan0", address: "198.51.100.7", isLoopback: false),
    ]

    @Test func aLoopbackAddressIsAnnouncedOnTheLoopbackInterfaceOnly() {
        #expect(MDNSScope.of(.ipv4("127.0.0.1", port: 80), interfaces: interfaces)
                == MDNSScope(interface: "lo", ipProtocol: .ipv4, loopback: true))
        #expect(MDNSScope.of(.ipv4("127.0.0.2", port: 80), interfaces: interfaces)
                == MDNSScope(interface: "lo", ipProtocol: .ipv4, loopback: true), "all of 127/8, listed or not")
        #expect(MDNSScope.of(.ipv6("::1", port: 80), interfaces: interfaces)
                == MDNSScope(interface: "lo", ipProtocol: .ipv6, loopback: true))
        #expect(MDNSScope.of(.ipv6("0:0:0:0:0:0:0:1", port: 80), interfaces: interfaces).interface == "lo", "any spelling")
        let renamed = [MDNSScope.InterfaceAddress(name: "loop0", address: "127.0.0.1", isLoopback: true)]
        #expect(MDNSScope.of(.ipv4("127.0.0.1", port: 80), interfaces: renamed).interface == "loop0")
        #expect(MDNSScope.of(.ipv4("127.0.0.1", port: 80), interfaces: []).interface == "lo", "lo when none is listed")
    }

    @Test func aSpecificAddressIsAnnouncedOnTheInterfaceThatHoldsIt() {
        #expect(MDNSScope.of(.ipv4("198.51.100.7", port: 80), interfaces: interfaces) == MDNSScope(interface: "wlan0", ipProtocol: .ipv4))
        #expect(MDNSScope.of(.ipv6("2001:db8:0::10", port: 80), interfaces: interfaces) == MDNSScope(interface: "eth0", ipProtocol: .ipv6))
        #expect(MDNSScope.of(.ipv4("203.0.113.1", port: 80), interfaces: interfaces) == MDNSScope(interface: nil, ipProtocol: .ipv4),
                "an address no interface holds (IP_FREEBIND): everywhere, its protocol")
    }

    @Test func aWildcardAddressIsAnnouncedEverywhere() {
        #expect(MDNSScope.of(.ipv4("0.0.0.0", port: 80), interfaces: interfaces) == MDNSScope(interface: nil, ipProtocol: .ipv4))
        #expect(MDNSScope.of(.ipv6("::", port: 80), interfaces: interfaces) == .everywhere, "dual-stack: both protocols")
        #expect(MDNSScope.of(.unix("/run/x.sock"), interfaces: interfaces) == .everywhere)
    }

    @Test func theMachinesInterfacesIncludeTheLoopbackOne() {
        #expect(MDNSScope.machineInterfaces().contains { $0.isLoopback && $0.address == "127.0.0.1" })
    }
}
