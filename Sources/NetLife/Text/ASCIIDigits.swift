// Decimal numbers in protocol text (IMAP literal sizes and counts, HTTP lengths, ranges, ports): one
// parser that never traps, for every protocol of the package.

/// ASCII decimal digits.
package enum ASCIIDigits {
    /// Whether `byte` is `0`...`9`.
    package static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// The value of one or more decimal digits; nil if empty, anything else is in it, or it overflows `Int`.
    package static func value(_ digits: some Collection<UInt8>) -> Int? {
        guard !digits.isEmpty else { return nil }
        var value = 0
        for byte in digits {
            guard isDigit(byte) else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            guard !overflow1 && !overflow2 else { return nil }
            value = sum
        }
        return value
    }
}
