// Where an mDNS announcement is made follows the listener's address, since a peer can connect only where
// the listener listens: a loopback address is announced on the loopback interface only, a specific address
// on the interface that holds it, a wildcard address on every interface (`0.0.0.0` over IPv4, `::` over both). The choice is pure (`MDNSScope.of`);
// the publisher hands it the machine's interface addresses (getifaddrs) and turns the name into the index
// Avahi takes (if_nametoindex).

@preconcurrency import Glibc
import NetLifeEvent

/// The interface and IP protocol an announcement is made on.
struct MDNSScope: Equatable {
    /// The IP protocol of the announcement, as Avahi's `AvahiProtocol`.
    enum IPProtocol: CInt, Equatable {
        case both = 0, ipv4 = 4, ipv6 = 6
    }

    /// An address of one of the machine's interfaces.
    struct InterfaceAddress: Equatable {
        var name: String
        /// Numeric, as inet_ntop writes it.
        var address: String
        var isLoopback: Bool
    }

    /// The interface's name; nil for every interface.
    var interface: String?
    var ipProtocol: IPProtocol
    /// Whether the listener's address is a loopback one: only this host can connect, worth a warning.
    var loopback = false

    /// Every interface and protocol: what a wildcard address gets, and the fallback.
    static let everywhere = MDNSScope(interface: nil, ipProtocol: .both)

    /// The scope for a listener at `address`, given the machine's interface addresses.
    static func of(_ address: SocketAddress, interfaces: [InterfaceAddress]) -> MDNSScope {
        let host: String
        let ipProtocol: IPProtocol
        switch address {
        case .ipv4(let text, _): (host, ipProtocol) = (text, .ipv4)
        case .ipv6(let text, _): (host, ipProtocol) = (text, .ipv6)
        case .unix: return .everywhere   // never announced: it has no port
        }
        guard let bytes = numericBytes(host) else { return .everywhere }
        // `::` takes IPv4 connections too (unless IPV6_V6ONLY), so both protocols; `0.0.0.0` only IPv4's.
        if bytes.allSatisfy({ $0 == 0 }) { return MDNSScope(interface: nil, ipProtocol: ipProtocol == .ipv4 ? .ipv4 : .both) }
        let loopback = ipProtocol == .ipv4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
        if loopback {
            // 127.0.0.2 is nobody's listed address, yet it is the loopback interface's.
            let name = interfaces.first(where: \.isLoopback)?.name ?? "lo"
            return MDNSScope(interface: name, ipProtocol: ipProtocol, loopback: true)
        }
        guard let holder = interfaces.first(where: { numericBytes($0.address) == bytes }) else {
            // Bound with IP_FREEBIND or since gone: announced everywhere, as before this rule existed.
            return MDNSScope(interface: nil, ipProtocol: ipProtocol)
        }
        return MDNSScope(interface: holder.name, ipProtocol: ipProtocol)
    }

    /// The address's bytes (4 or 16), or nil when it is not numeric. The corresponding C function is
    /// `inet_pton`.
    static func numericBytes(_ text: String) -> [UInt8]? {
        // A scope suffix (`fe80::1%eth0`) names the interface, not the address.
        let bare = String(text.split(separator: "%", maxSplits: 1).first ?? "")
        var buffer = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, bare, &buffer) == 1 { return Array(buffer.prefix(4)) }
        if inet_pton(AF_INET6, bare, &buffer) == 1 { return buffer }
        return nil
    }

    /// The machine's interface addresses (IPv4 and IPv6); empty if they cannot be listed. The corresponding C
    /// function is `getifaddrs`.
    static func machineInterfaces() -> [InterfaceAddress] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var found: [InterfaceAddress] = []
        var cursor = list
        while let entry = cursor?.pointee {
            defer { cursor = entry.ifa_next }
            guard let socketAddress = entry.ifa_addr, let name = entry.ifa_name else { continue }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let family = CInt(socketAddress.pointee.sa_family)
            let written: UnsafePointer<CChar>? = switch family {
            case AF_INET:
                socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    var address = pointer.pointee.sin_addr
                    return inet_ntop(AF_INET, &address, &text, socklen_t(text.count))
                }
            case AF_INET6:
                socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    var address = pointer.pointee.sin6_addr
                    return inet_ntop(AF_INET6, &address, &text, socklen_t(text.count))
                }
            default: nil
            }
            guard written != nil else { continue }
            found.append(InterfaceAddress(name: String(cString: name), address: String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                                          isLoopback: entry.ifa_flags & UInt32(IFF_LOOPBACK) != 0))
        }
        return found
    }
}
