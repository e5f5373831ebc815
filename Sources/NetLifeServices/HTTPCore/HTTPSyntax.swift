// HTTP's syntax as both sides of netlife read and write it: a header field, and the bytes, byte classes and
// small grammars of RFC 9110 and 9112 that the request parser, the responses and the transfers' response heads
// share.

import NetLife

/// One header field of a request (name and value) or of a response.
public struct HTTPHeader: Equatable, Sendable {
    /// The field name: lowercased in a parsed request; as it is sent (`Content-Length`) in a response.
    public var name: String
    /// The field value without the optional whitespace around it.
    public var value: String

    /// A field with this name and value, taken as they are.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// Why the bytes of a connection are not an acceptable request head, and the status to answer it with. The
/// connection cannot go on after one: the shell answers and closes.
public struct HTTPParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// 400 (malformed), 411 (a chunked body, from `bodyLength()`), 414 (request line too long), 431 (head too
    /// large or too many fields), 501 (a transfer coding other than chunked) or 505 (not HTTP/1.x).
    public var status: Int
    /// What was wrong, for a log line.
    public var message: String

    /// An error answered with `status`.
    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }

    /// The status and the message.
    public var description: String { "\(status): \(message)" }
}

/// The bytes, byte classes and small grammars of HTTP's syntax.
enum HTTPSyntax {
    static let lf = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r"), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")

    static func isDigit(_ byte: UInt8) -> Bool { ASCIIDigits.isDigit(byte) }

    static func isWhitespace(_ byte: UInt8) -> Bool { byte == space || byte == tab }

    /// A `tchar` of RFC 9110 section 5.6.2.
    static func isTokenChar(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    static func string(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    /// ASCII letters lowercased, everything else as it is.
    static func lowercased(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else { return text }
        return String(decoding: text.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// The start of `bytes` for a message: printable ASCII as it is, anything else escaped, at most 60 bytes.
    static func shown(_ bytes: ArraySlice<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = ""
        for byte in bytes.prefix(60) {
            if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "\"") {
                text.unicodeScalars.append(UnicodeScalar(byte))
            } else {
                text += "\\x" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
            }
        }
        return bytes.count > 60 ? text + "..." : text
    }

    /// The non-empty elements of comma-separated list fields (RFC 9110 section 5.6.1), whitespace trimmed.
    static func listElements(_ values: [String]) -> [String] {
        values.flatMap { value in
            value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).compactMap { element -> String? in
                var element = element
                while let first = element.first, isWhitespace(first) { element = element.dropFirst() }
                while let last = element.last, isWhitespace(last) { element = element.dropLast() }
                return element.isEmpty ? nil : String(decoding: element, as: UTF8.self)
            }
        }
    }

    /// The length the Content-Length fields give: every element digits only, fitting an `Int`, all equal
    /// (RFC 9110 section 8.6 lets a recipient accept `42, 42`).
    static func contentLength(_ values: [String]) -> Result<Int, HTTPParseError> {
        var length: Int?
        for value in values {
            for element in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                var digits = element[...]
                while let first = digits.first, isWhitespace(first) { digits = digits.dropFirst() }
                while let last = digits.last, isWhitespace(last) { digits = digits.dropLast() }
                guard let number = decimal(digits) else {
                    return .failure(HTTPParseError(status: 400, message: "invalid Content-Length \"\(shown(ArraySlice(value.utf8)))\""))
                }
                if let length, length != number {
                    return .failure(HTTPParseError(status: 400, message: "Content-Length fields that differ"))
                }
                length = number
            }
        }
        guard let length else { return .failure(HTTPParseError(status: 400, message: "empty Content-Length")) }
        return .success(length)
    }

    /// The value of one or more decimal digits; nil if empty, anything else is in it, or it overflows `Int`.
    static func decimal(_ digits: some Collection<UInt8>) -> Int? { ASCIIDigits.value(digits) }

    /// See `HTTPRequestHead.path`.
    static func decodedPath(_ target: String) -> String? {
        let bytes = Array(target.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return nil }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "?") { break }
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) else {
                    return nil
                }
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(byte)
                index += 1
            }
        }
        guard !decoded.contains(0), let path = String(validating: decoded, as: UTF8.self) else { return nil }
        for segment in decoded.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            if segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8) { return nil }
        }
        return path
    }

    /// The authority and origin-form (path and query, `/` for an empty path) of an absolute-form target
    /// (RFC 9112 section 3.2.2); nil when `target` does not start with a scheme and `:` (origin-form starts
    /// with `/`, asterisk-form is `*`; authority-form `host:port`, whose "scheme" is followed by digits, is
    /// left to the method that uses it). A scheme other than `http` or `https` (any case), no `//`, an empty
    /// host, userinfo (RFC 9110 section 4.2.4 asks a recipient to treat it as an error), a host or port of
    /// other bytes than RFC 3986 allows, or a fragment is 400.
    static func absoluteForm(_ target: String) throws(HTTPParseError) -> (authority: String, originForm: String)? {
        let bytes = Array(target.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0, isLetter(bytes[0]),
              bytes[1..<colon].allSatisfy({ isLetter($0) || isDigit($0) || "+-.".utf8.contains($0) }) else { return nil }
        // `host:443` (CONNECT's authority-form) has a "scheme" followed by a port, not by `//`.
        if colon + 1 < bytes.count, isDigit(bytes[colon + 1]) { return nil }
        func refuse(_ why: String) -> HTTPParseError {
            HTTPParseError(status: 400, message: "absolute-form request-target \(why): \"\(shown(bytes[...]))\"")
        }
        let scheme = lowercased(string(bytes[..<colon]))
        guard scheme == "http" || scheme == "https" else { throw refuse("with a scheme other than http or https") }
        let afterScheme = bytes[(colon + 1)...]
        guard afterScheme.starts(with: "//".utf8) else { throw refuse("without an authority") }
        guard !bytes.contains(UInt8(ascii: "#")) else { throw refuse("with a fragment") }
        let rest = afterScheme.dropFirst(2)
        let authorityEnd = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.contains(UInt8(ascii: "@")) else { throw refuse("with userinfo") }
        var host = authority[...]
        var port = authority[authority.endIndex...]
        if host.first == UInt8(ascii: "[") {
            // An IP literal: `[` address `]`, then an optional port.
            guard let close = host.firstIndex(of: UInt8(ascii: "]")), close > host.startIndex + 1,
                  host[(host.startIndex + 1)..<close].allSatisfy({ hexValue($0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else {
                throw refuse("with an invalid IP literal")
            }
            port = host[(close + 1)...]
            host = host[...close]
            if !port.isEmpty {
                guard port.first == UInt8(ascii: ":") else { throw refuse("with an invalid port") }
                port = port.dropFirst()
            }
        } else if let portColon = host.firstIndex(of: UInt8(ascii: ":")) {
            port = host[(portColon + 1)...]
            host = host[..<portColon]
        }
        guard !host.isEmpty else { throw refuse("without a host") }
        guard host.allSatisfy(isRegisteredNameByte) || host.first == UInt8(ascii: "[") else { throw refuse("with an invalid host") }
        // RFC 3986 allows an empty port (`host:`); a present one is a number of at most 65535.
        guard port.isEmpty || (port.allSatisfy(isDigit) && (decimal(port) ?? .max) <= 65535) else { throw refuse("with an invalid port") }
        let pathAndQuery = rest[authorityEnd...]
        let originForm = pathAndQuery.first == UInt8(ascii: "/") ? string(pathAndQuery) : "/" + string(pathAndQuery)
        return (string(authority), originForm)
    }

    static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    /// A byte of a reg-name (RFC 3986 section 3.2.2): unreserved, sub-delims or part of a percent escape.
    static func isRegisteredNameByte(_ byte: UInt8) -> Bool {
        isLetter(byte) || isDigit(byte) || "-._~%!$&'()*+,;=".utf8.contains(byte)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
