// Byte ranges and validators of HTTP (RFC 9110 sections 8.8, 13 and 14), as pure functions: the Range field
// resolved against a file's length, the strong ETag of a file, HTTP-dates both ways, and the comparisons
// If-Range, If-Match and If-None-Match make. Where RFC 9110 leaves the choice to the server, nginx's range
// filter is the model, and every departure from it is said below.

/// The bytes `first` through `last` of a representation, both included, resolved against its length.
public struct ByteRange: Equatable, Sendable {
    /// The offset of the first byte.
    public var first: Int
    /// The offset of the last byte (not past it).
    public var last: Int

    /// The bytes `first...last`.
    public init(first: Int, last: Int) {
        self.first = first
        self.last = last
    }

    /// How many bytes the range holds.
    public var count: Int { last - first + 1 }
}

/// What a Range field asks of a representation of a given length.
public enum RangeRequest: Equatable, Sendable {
    /// No usable Range: serve the whole representation (200).
    case whole
    /// The satisfiable ranges, in the order asked, resolved and within the length (206).
    case ranges([ByteRange])
    /// A valid Range of which no range is satisfiable (416).
    case unsatisfiable
}

/// The Range field, validators and dates.
public enum HTTPRanges {
    /// What `header` (a Range field value, `bytes=0-99, -10`) asks of a representation of `length` bytes.
    ///
    /// - `bytes=a-b` is bytes a through b, b clipped to the last byte; `bytes=a-` runs to the end; `bytes=-n` is
    ///   the last n bytes (the whole when n is larger). The unit is case-insensitive; spaces and tabs are allowed
    ///   around every number, `-` and `,` (as nginx allows spaces); empty list elements are skipped.
    /// - Another unit (`items=0-1`), a value without `=`, a list without any range, or anything that is not
    ///   this grammar gives `.whole`: RFC 9110 section 14.2 lets a server ignore a Range it cannot use, and a
    ///   client that sent garbage is better served by the whole file than by an error. (nginx answers 416.)
    /// - A reversed range (`5-3`) is invalid (RFC 9110 section 14.1.1) and makes the whole field invalid:
    ///   `.whole`, as Apache does. (nginx drops that one range and answers 416 if nothing else is left.)
    /// - A range whose first byte is at or past the length, and `-0`, are unsatisfiable and skipped; when none
    ///   is left the answer is `.unsatisfiable`. An empty representation (length 0) satisfies no range at all,
    ///   not even `-n`: RFC 9110 would select zero bytes, which Content-Range cannot express; 416 with
    ///   `bytes */0` tells the client the length.
    /// - A number too large for an `Int` makes the field `.unsatisfiable`, as nginx does: no file is that
    ///   long, and the client's idea of the representation is wrong. (RFC 9110 would clip a huge last byte.)
    ///   Digits are read to their end without overflow: no input traps.
    /// - More than `maxRanges` satisfiable ranges, or ranges whose sizes add up to more than the length
    ///   (overlapping ranges asking for some bytes many times), give `.whole`, as nginx's `max_ranges` and its
    ///   size check do: never more work than sending the file once.
    ///
    /// Linear in the length of `header`; at most `maxRanges` ranges are stored.
    public static func parse(_ header: String, length: Int, maxRanges: Int = .max) -> RangeRequest {
        var header = header
        return header.withUTF8 { parse(bytes: $0, length: max(0, length), maxRanges: maxRanges) }
    }

    private static func parse(bytes: UnsafeBufferPointer<UInt8>, length: Int, maxRanges: Int) -> RangeRequest {
        guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")),
              HTTPSyntax.lowercased(String(decoding: bytes[..<equals], as: UTF8.self)) == "bytes" else { return .whole }
        var index = equals + 1
        func skipWhitespace() {
            while index < bytes.count, HTTPSyntax.isWhitespace(bytes[index]) { index += 1 }
        }
        /// The number at `index` (nil without a digit there); past `Int.max` it stays `Int.max` and sets `overflow`.
        var overflow = false
        func number() -> Int? {
            guard index < bytes.count, HTTPSyntax.isDigit(bytes[index]) else { return nil }
            var value = 0
            while index < bytes.count, HTTPSyntax.isDigit(bytes[index]) {
                let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(Int(bytes[index] - UInt8(ascii: "0")))
                if overflow1 || overflow2 {
                    overflow = true
                    value = .max
                } else {
                    value = sum
                }
                index += 1
            }
            return value
        }

        var ranges: [ByteRange] = []
        var satisfiable = 0
        var total = 0
        var sawRange = false
        while true {
            skipWhitespace()
            guard index < bytes.count else { break }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            let first = number()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "-") else { return .whole }
            index += 1
            skipWhitespace()
            let last = number()
            skipWhitespace()
            guard first != nil || last != nil else { return .whole }
            guard index == bytes.count || bytes[index] == UInt8(ascii: ",") else { return .whole }
            if let first, let last, last < first { return .whole }
            sawRange = true
            guard !overflow, let range = resolve(first: first, last: last, length: length) else { continue }
            satisfiable += 1
            if satisfiable <= maxRanges { ranges.append(range) }
            total = total.addingReportingOverflow(range.count).overflow ? .max : total + range.count
        }
        guard sawRange else { return .whole }
        if overflow { return .unsatisfiable }
        if satisfiable > maxRanges { return .whole }
        if satisfiable == 0 { return .unsatisfiable }
        if total > length { return .whole }
        return .ranges(ranges)
    }

    /// One range-spec resolved against the length; nil when it is unsatisfiable.
    private static func resolve(first: Int?, last: Int?, length: Int) -> ByteRange? {
        guard length > 0 else { return nil }
        guard let first else {
            // A suffix: the last `last` bytes.
            guard let suffix = last, suffix > 0 else { return nil }
            return ByteRange(first: suffix >= length ? 0 : length - suffix, last: length - 1)
        }
        guard first < length else { return nil }
        return ByteRange(first: first, last: min(last ?? (length - 1), length - 1))
    }

    /// The ranges sorted, with overlapping and adjacent ones merged (RFC 9110 section 15.3.7.2 lets a server
    /// coalesce them): `0-4, 5-9, 3-6` is `0-9`.
    public static func coalesce(_ ranges: [ByteRange]) -> [ByteRange] {
        var merged: [ByteRange] = []
        for range in ranges.sorted(by: { $0.first < $1.first }) {
            // `last + 1` cannot overflow: a resolved range ends before a length that is an `Int`.
            if let previous = merged.last, range.first <= previous.last + 1 {
                merged[merged.count - 1].last = max(previous.last, range.last)
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    // MARK: Validators

    /// The strong ETag of a file: its inode, size and modification time (seconds and nanoseconds) in hex,
    /// quoted: `"1a2b-400-5f5e1000.1dcd6500"`. The same file gives the same tag in every process and after a
    /// restart; a change of content changes the size or the modification time, a replaced file the inode.
    public static func etag(inode: UInt64, size: Int, modifiedSeconds: Int64, modifiedNanoseconds: Int) -> String {
        func hex(_ value: Int64) -> String { String(UInt64(bitPattern: value), radix: 16) }
        return "\"\(String(inode, radix: 16))-\(hex(Int64(size)))-\(hex(modifiedSeconds)).\(hex(Int64(modifiedNanoseconds)))\""
    }

    /// Whether an If-Range value lets the Range apply (RFC 9110 section 13.1.5): an entity-tag that is strong
    /// and identical to `etag`, or an HTTP-date exactly equal to the Last-Modified date sent (`lastModified`).
    /// A weak tag (`W/"..."`) never matches; anything else (an invalid date, a list) does not either.
    public static func ifRangeMatches(_ value: String, etag: String, lastModified: Int64) -> Bool {
        if value.hasPrefix("\"") || value.hasPrefix("W/") { return value == etag && !etag.hasPrefix("W/") }
        return parseHTTPDate(value) == lastModified
    }

    /// Whether an If-Match or If-None-Match value (`*` or a list of entity-tags) names `etag` (RFC 9110
    /// section 8.8.3.2): `weak` comparison ignores the `W/` of both tags (If-None-Match); strong comparison
    /// needs both strong (If-Match). `*` matches any current representation. A malformed list matches nothing.
    public static func entityTagListMatches(_ list: String, etag: String, weak: Bool) -> Bool {
        let bytes = Array(list.utf8)
        var index = 0
        func skipWhitespace() {
            while index < bytes.count, HTTPSyntax.isWhitespace(bytes[index]) { index += 1 }
        }
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "*") {
            index += 1
            skipWhitespace()
            return index == bytes.count
        }
        let ours = Array(etag.utf8)
        let oursIsWeak = ours.starts(with: "W/".utf8)
        let oursOpaque = oursIsWeak ? ours[2...] : ours[...]
        var matched = false
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: ",") || HTTPSyntax.isWhitespace(bytes[index]) {
                index += 1
                continue
            }
            var isWeak = false
            if bytes[index] == UInt8(ascii: "W"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "/") {
                isWeak = true
                index += 2
            }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
            let start = index
            index += 1
            // etagc: `!`, `#` through `~`, obs-text.
            while index < bytes.count, bytes[index] == 0x21 || (bytes[index] >= 0x23 && bytes[index] != 0x7F) { index += 1 }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
            index += 1
            let opaque = bytes[start..<index]
            if opaque.elementsEqual(oursOpaque) && (weak || (!isWeak && !oursIsWeak)) { matched = true }
            skipWhitespace()
            guard index == bytes.count || bytes[index] == UInt8(ascii: ",") else { return false }
        }
        return matched
    }

    // MARK: Dates

    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    /// The first and last second an IMF-fixdate can show (years 0001 to 9999).
    private static let earliestDate = daysFromCivil(year: 1, month: 1, day: 1) * 86_400
    private static let latestDate = daysFromCivil(year: 9999, month: 12, day: 31) * 86_400 + 86_399

    /// The IMF-fixdate of a time in seconds since 1970 (`Sun, 06 Nov 1994 08:49:37 GMT`). Times before the
    /// year 1 or after 9999 show as the nearest of those: the format has four digits for the year.
    public static func httpDate(_ secondsSinceEpoch: Int64) -> String {
        let seconds = min(max(secondsSinceEpoch, earliestDate), latestDate)
        let days = floorDivide(seconds, 86_400)
        let timeOfDay = seconds - days * 86_400
        let (year, month, day) = civilFromDays(days)
        let weekday = Int(floorModulo(days + 4, 7))   // 1970-01-01 was a Thursday.
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(dayNames[weekday]), \(pad(day, 2)) \(monthNames[Int(month) - 1]) \(pad(year, 4)) "
            + "\(pad(timeOfDay / 3600, 2)):\(pad(timeOfDay / 60 % 60, 2)):\(pad(timeOfDay % 60, 2)) GMT"
    }

    /// The time an HTTP-date names, in seconds since 1970; nil if `text` is not one. Reads the IMF-fixdate
    /// (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms RFC 9110 section 5.6.7 asks recipients to
    /// accept: RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`, a two-digit year 70 to 99 in the 1900s, 00 to 69
    /// in the 2000s) and asctime (`Sun Nov  6 08:49:37 1994`). The day name must be one, but is not checked
    /// against the date; a second of 60 (a leap second) is accepted.
    public static func parseHTTPDate(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        var reader = DateReader(bytes: bytes)
        if let comma = bytes.firstIndex(of: UInt8(ascii: ",")) {
            let name = String(decoding: bytes[..<comma], as: UTF8.self)
            reader.index = comma + 1
            if dayNames.contains(name) {
                // IMF-fixdate: `, DD Mon YYYY HH:MM:SS GMT`
                guard reader.expect(" "), let day = reader.digits(2), reader.expect(" "), let month = reader.month(),
                      reader.expect(" "), let year = reader.digits(4), reader.expect(" "), let time = reader.time(),
                      reader.expect(" GMT"), reader.atEnd else { return nil }
                return seconds(year: year, month: month, day: day, time: time)
            }
            if longDayNames.contains(name) {
                // RFC 850: `, DD-Mon-YY HH:MM:SS GMT`
                guard reader.expect(" "), let day = reader.digits(2), reader.expect("-"), let month = reader.month(),
                      reader.expect("-"), let shortYear = reader.digits(2), reader.expect(" "), let time = reader.time(),
                      reader.expect(" GMT"), reader.atEnd else { return nil }
                return seconds(year: shortYear < 70 ? 2000 + shortYear : 1900 + shortYear, month: month, day: day, time: time)
            }
            return nil
        }
        // asctime: `Sun Nov  6 08:49:37 1994` (the day is space-padded).
        guard bytes.count >= 3, dayNames.contains(String(decoding: bytes[..<3], as: UTF8.self)) else { return nil }
        reader.index = 3
        guard reader.expect(" "), let month = reader.month(), reader.expect(" ") else { return nil }
        let day: Int64
        if reader.expect(" ") {
            guard let digit = reader.digits(1) else { return nil }
            day = digit
        } else {
            guard let digits = reader.digits(2) else { return nil }
            day = digits
        }
        guard reader.expect(" "), let time = reader.time(), reader.expect(" "), let year = reader.digits(4), reader.atEnd else {
            return nil
        }
        return seconds(year: year, month: month, day: day, time: time)
    }

    /// The seconds since 1970 of a valid date and time; nil for a day the month does not have, or a bad time.
    private static func seconds(year: Int64, month: Int64, day: Int64, time: (hour: Int64, minute: Int64, second: Int64)) -> Int64? {
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays: [Int64] = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard year >= 1, day >= 1, day <= monthDays[Int(month) - 1],
              time.hour <= 23, time.minute <= 59, time.second <= 60 else { return nil }
        return daysFromCivil(year: year, month: month, day: day) * 86_400 + time.hour * 3600 + time.minute * 60 + time.second
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }
    private static func floorModulo(_ a: Int64, _ b: Int64) -> Int64 { a - floorDivide(a, b) * b }

    /// Reads the fixed fields of an HTTP-date.
    private struct DateReader {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index == bytes.count }

        mutating func expect(_ text: String) -> Bool {
            let expected = Array(text.utf8)
            guard bytes.count - index >= expected.count, bytes[index..<(index + expected.count)].elementsEqual(expected) else {
                return false
            }
            index += expected.count
            return true
        }

        mutating func digits(_ count: Int) -> Int64? {
            guard bytes.count - index >= count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<(index + count)] {
                guard HTTPSyntax.isDigit(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }

        /// The month (1 to 12) of a three-letter name.
        mutating func month() -> Int64? {
            guard bytes.count - index >= 3 else { return nil }
            let name = String(decoding: bytes[index..<(index + 3)], as: UTF8.self)
            guard let month = HTTPRanges.monthNames.firstIndex(of: name) else { return nil }
            index += 3
            return Int64(month + 1)
        }

        mutating func time() -> (hour: Int64, minute: Int64, second: Int64)? {
            guard let hour = digits(2), expect(":"), let minute = digits(2), expect(":"), let second = digits(2) else { return nil }
            return (hour, minute, second)
        }
    }
}
