// The few Structured Field values (RFC 9651) the resumable uploads' fields carry, for both sides: the http
// service's upload server and the upload client read `Upload-Offset`, `Upload-Complete` and `Upload-Length`
// alike.

import NetLife

/// The upload fields' values.
public enum UploadFields {
    /// The media type of a PATCH's content.
    public static let partialUploadType = "application/partial-upload"

    /// A non-negative Integer item (RFC 9651 section 3.3.1: at most 15 digits); nil when absent or anything
    /// else (the draft: other values make the field ignored).
    public static func integer(_ value: String?) -> Int? {
        guard let value, case .integer(let number)? = StructuredFieldItem(parsing: value), number >= 0 else { return nil }
        return number
    }

    /// A Boolean item (`?1`, `?0`); nil when absent or anything else.
    public static func boolean(_ value: String?) -> Bool? {
        guard let value, case .boolean(let flag)? = StructuredFieldItem(parsing: value) else { return nil }
        return flag
    }
}

/// One Structured Field Item (RFC 9651 section 3.3), parsed as section 4.2.3 says: a bare item and its
/// parameters (parsed and dropped). Only the types the upload fields use are kept; any other valid item is
/// `other`. Linear in the value's length.
public enum StructuredFieldItem: Equatable, Sendable {
    /// An Integer: at most 15 digits, optionally negative.
    case integer(Int)
    /// A Boolean: `?1` or `?0`.
    case boolean(Bool)
    /// A valid Item of another type: Decimal, String, Token, Byte Sequence, Date or Display String.
    case other

    /// Parses `text`; nil when it is no Item (the field is then ignored).
    public init?(parsing text: String) {
        var scanner = SFScanner(Array(text.utf8))
        scanner.skipSpaces()
        guard let item = scanner.bareItem(), scanner.parameters() else { return nil }
        scanner.skipSpaces()
        guard scanner.atEnd else { return nil }
        self = item
    }
}

/// The cursor of the Structured Field parser.
struct SFScanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index >= bytes.count }
    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipSpaces() {
        while current == HTTPSyntax.space { index += 1 }
    }

    static func isLowerAlpha(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") }
    static func isAlpha(_ byte: UInt8) -> Bool { isLowerAlpha(byte | 0x20) }

    mutating func bareItem() -> StructuredFieldItem? {
        guard let first = current else { return nil }
        switch first {
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return number()
        case UInt8(ascii: "\""):
            return string() ? .other : nil
        case UInt8(ascii: ":"):
            index += 1
            while let byte = current, byte != UInt8(ascii: ":") {
                guard Self.isAlpha(byte) || ASCIIDigits.isDigit(byte) || "+/=".utf8.contains(byte) else { return nil }
                index += 1
            }
            guard current == UInt8(ascii: ":") else { return nil }
            index += 1
            return .other
        case UInt8(ascii: "?"):
            index += 1
            guard let value = current, value == UInt8(ascii: "0") || value == UInt8(ascii: "1") else { return nil }
            index += 1
            return .boolean(value == UInt8(ascii: "1"))
        case UInt8(ascii: "@"):
            index += 1
            guard case .integer? = number() else { return nil }
            return .other
        case UInt8(ascii: "%"):
            return displayString() ? .other : nil
        default:
            // A Token: ALPHA or "*", then tchar, ":" and "/".
            guard Self.isAlpha(first) || first == UInt8(ascii: "*") else { return nil }
            index += 1
            while let byte = current, HTTPSyntax.isTokenChar(byte) || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "/") { index += 1 }
            return .other
        }
    }

    /// An Integer or a Decimal (RFC 9651 section 4.2.4).
    mutating func number() -> StructuredFieldItem? {
        var negative = false
        if current == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        var value = 0
        var digits = 0
        while let byte = current, ASCIIDigits.isDigit(byte) {
            digits += 1
            guard digits <= 15 else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            index += 1
        }
        guard digits > 0 else { return nil }
        guard current == UInt8(ascii: ".") else { return .integer(negative ? -value : value) }
        guard digits <= 12 else { return nil }
        index += 1
        var fraction = 0
        while let byte = current, ASCIIDigits.isDigit(byte) {
            fraction += 1
            guard fraction <= 3 else { return nil }
            index += 1
        }
        return fraction > 0 ? .other : nil
    }

    mutating func string() -> Bool {
        index += 1
        while let byte = current {
            index += 1
            if byte == UInt8(ascii: "\"") { return true }
            if byte == UInt8(ascii: "\\") {
                guard let next = current, next == UInt8(ascii: "\"") || next == UInt8(ascii: "\\") else { return false }
                index += 1
            } else if byte < 0x20 || byte > 0x7E {
                return false
            }
        }
        return false
    }

    mutating func displayString() -> Bool {
        index += 1
        guard current == UInt8(ascii: "\"") else { return false }
        index += 1
        var decoded: [UInt8] = []
        while let byte = current {
            index += 1
            if byte == UInt8(ascii: "\"") { return String(validating: decoded, as: UTF8.self) != nil }
            guard byte >= 0x20 && byte <= 0x7E else { return false }
            if byte == UInt8(ascii: "%") {
                guard index + 1 < bytes.count, let high = Self.lowerHex(bytes[index]), let low = Self.lowerHex(bytes[index + 1]) else { return false }
                decoded.append(high << 4 | low)
                index += 2
            } else {
                decoded.append(byte)
            }
        }
        return false
    }

    static func lowerHex(_ byte: UInt8) -> UInt8? {
        if ASCIIDigits.isDigit(byte) { return byte - UInt8(ascii: "0") }
        if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f") { return byte - UInt8(ascii: "a") + 10 }
        return nil
    }

    /// `*( ";" *SP key [ "=" bare-item ] )`; false on a syntax error.
    mutating func parameters() -> Bool {
        while current == UInt8(ascii: ";") {
            index += 1
            skipSpaces()
            guard let first = current, Self.isLowerAlpha(first) || first == UInt8(ascii: "*") else { return false }
            index += 1
            while let byte = current, Self.isLowerAlpha(byte) || ASCIIDigits.isDigit(byte) || "_-.*".utf8.contains(byte) { index += 1 }
            if current == UInt8(ascii: "=") {
                index += 1
                guard bareItem() != nil else { return false }
            }
        }
        return true
    }
}
