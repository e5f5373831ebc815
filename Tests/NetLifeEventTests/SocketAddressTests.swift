// Reading addresses the kernel fills in: IPv4 is formatted without inet_ntop, and must agree with it.

import Glibc
@testable import NetLifeEvent
import Testing

struct SocketAddressTests {
    @Test func dottedQuadsAgreeWithInetNtop() {
        var values: [UInt32] = [0, 0xFFFF_FFFF, 0x7F00_0001, 0x0A00_0001, 0x0114_64FF, 0xC0A8_0064, 0x0909_0909]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 { values.append(generator.next()) }
        for value in values {
            var address = in_addr(s_addr: value.bigEndian)
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            inet_ntop(AF_INET, &address, &text, socklen_t(text.count))
            let expected = String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            #expect(SocketAddress.dottedQuad(value.bigEndian) == expected)
        }
    }

    @Test func aKernelFilledIPv4AddressReadsBackWithItsPort() {
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = UInt16(8080).bigEndian
        sin.sin_addr.s_addr = inet_addr("192.168.10.200")
        let address = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) } }
        #expect(address == .ipv4("192.168.10.200", port: 8080))
    }
}
