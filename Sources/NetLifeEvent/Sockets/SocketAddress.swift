// Socket addresses as Swift values: parsed from the config's text form, converted to and from sockaddr.

@preconcurrency import Glibc

/// An IPv4, IPv6 or Unix-domain stream socket address.
public enum SocketAddress: Hashable, Sendable, CustomStringConvertible {
    /// A numeric IPv4 address and port, for example `127.0.0.1:7070`.
    case ipv4(String, port: UInt16)
    /// A numeric IPv6 address and port, written `[::1]:7070`.
    case ipv6(String, port: UInt16)
    /// A filesystem path of a Unix stream socket.
    case unix(String)

    /// Why a text is not an address.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Parses `HOST:PORT` (numeric IPv4), `[IPv6]:PORT`, or an absolute path (optionally `unix:PATH`).
    /// `*:PORT` means every IPv4 address.
    public init(parsing text: String) throws(ParseError) {
        if text.hasPrefix("/") || text.hasPrefix("unix:") {
            let path = text.hasPrefix("unix:") ? String(text.dropFirst(5)) : text
            guard path.hasPrefix("/") else { throw ParseError(description: "a Unix socket path must be absolute: '\(text)'") }
            guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
                throw ParseError(description: "Unix socket path too long (at most 107 bytes): '\(path)'")
            }
            self = .unix(path)
            return
        }
        guard let colon = text.lastIndex(of: ":") else {
            throw ParseError(description: "expected HOST:PORT, [IPv6]:PORT or an absolute path, got '\(text)'")
        }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        guard let port = UInt16(portText) else {
            throw ParseError(description: "bad port '\(portText)' in '\(text)' (0 to 65535)")
        }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            var probe = in6_addr()
            guard inet_pton(AF_INET6, host, &probe) == 1 else {
                throw ParseError(description: "bad IPv6 address '\(host)' in '\(text)'")
            }
            self = .ipv6(host, port: port)
            return
        }
        if host == "*" { host = "0.0.0.0" }
        var probe = in_addr()
        guard inet_pton(AF_INET, host, &probe) == 1 else {
            throw ParseError(description: "'\(host)' is not a numeric IPv4 address (write [v6]:port for IPv6) in '\(text)'")
        }
        self = .ipv4(host, port: port)
    }

    /// The TCP port, or nil for a Unix socket.
    public var port: UInt16? {
        switch self {
        case .ipv4(_, let port), .ipv6(_, let port): return port
        case .unix: return nil
        }
    }

    /// The same address with another port (Unix addresses are returned unchanged).
    public func with(port: UInt16) -> SocketAddress {
        switch self {
        case .ipv4(let host, _): return .ipv4(host, port: port)
        case .ipv6(let host, _): return .ipv6(host, port: port)
        case .unix: return self
        }
    }

    public var description: String {
        switch self {
        case .ipv4(let host, let port): return "\(host):\(port)"
        case .ipv6(let host, let port): return "[\(host)]:\(port)"
        case .unix(let path): return path
        }
    }

    var family: CInt {
        switch self {
        case .ipv4: return AF_INET
        case .ipv6: return AF_INET6
        case .unix: return AF_UNIX
        }
    }

    /// Calls `body` with the address as a `sockaddr`.
    func withSockAddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(SystemError) -> Result) throws(SystemError) -> Result {
        var storage = sockaddr_storage()
        let length: socklen_t
        switch self {
        case .ipv4(let host, let port):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &sin.sin_addr)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin, as: sockaddr_in.self) }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        case .ipv6(let host, let port):
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            inet_pton(AF_INET6, host, &sin6.sin6_addr)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin6, as: sockaddr_in6.self) }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        case .unix(let path):
            var sun = sockaddr_un()
            sun.sun_family = sa_family_t(AF_UNIX)
            // A path that does not fit is an error, never silently shortened (the shortened path could lie
            // outside the directory that was meant to protect it).
            guard path.utf8.count < MemoryLayout.size(ofValue: sun.sun_path) else {
                throw SystemError("bind(\(path))", Errno(rawValue: ENAMETOOLONG))
            }
            withUnsafeMutableBytes(of: &sun.sun_path) { raw in
                raw.copyBytes(from: path.utf8)
            }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sun, as: sockaddr_un.self) }
            length = socklen_t(MemoryLayout<sockaddr_un>.size)
        }
        return try withUnsafePointer(to: &storage) { pointer throws(SystemError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address throws(SystemError) in
                try body(address, length)
            }
        }
    }

    /// Reads a `sockaddr` filled by the kernel (accept, getsockname). Nil for families netlife does not use.
    init?(_ address: UnsafePointer<sockaddr>) {
        switch CInt(address.pointee.sa_family) {
        case AF_INET:
            let sin = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
            self = .ipv4(Self.dottedQuad(sin.sin_addr.s_addr), port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
            var addr = sin6.sin6_addr
            self = .ipv6(Self.numericHost(AF_INET6, &addr, length: INET6_ADDRSTRLEN), port: UInt16(bigEndian: sin6.sin6_port))
        case AF_UNIX:
            var sun = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_un.self)
            let path = withUnsafeBytes(of: &sun.sun_path) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            self = .unix(path)
        default:
            return nil
        }
    }

    /// "a.b.c.d" for an IPv4 address in network byte order, written directly: inet_ntop formats with sprintf,
    /// which was a third of the instructions of reopening 1,000 listeners on `foreground`.
    static func dottedQuad(_ networkOrder: in_addr_t) -> String {
        let value = UInt32(bigEndian: networkOrder)
        return String(unsafeUninitializedCapacity: 15) { text in
            var count = 0
            for shift in stride(from: 24, through: 0, by: -8) {
                let octet = UInt8(truncatingIfNeeded: value >> UInt32(shift))
                if shift != 24 { text[count] = 0x2E; count += 1 }
                if octet >= 100 { text[count] = 0x30 + octet / 100; count += 1 }
                if octet >= 10 { text[count] = 0x30 + octet / 10 % 10; count += 1 }
                text[count] = 0x30 + octet % 10
                count += 1
            }
            return count
        }
    }

    private static func numericHost(_ family: CInt, _ address: UnsafeRawPointer, length: CInt) -> String {
        var text = [CChar](repeating: 0, count: Int(length))
        inet_ntop(family, address, &text, socklen_t(text.count))
        return String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
