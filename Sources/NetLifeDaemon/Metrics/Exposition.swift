// The Prometheus text exposition format 0.0.4 as bytes: `# HELP` and `# TYPE` once per family, then its
// samples, `name{label="value",...} number` one a line. Label values are escaped (backslash, double quote,
// line feed), help text too (backslash, line feed); numbers are written as Prometheus reads them (whole numbers
// without a fraction, `+Inf`, `-Inf`, `NaN`). A histogram is its cumulative buckets, the last with
// `le="+Inf"`, then `_sum` and `_count`. Pure: it appends to its own buffer, which the server sends.

/// Text in the exposition format, appended family by family.
struct Exposition {
    /// The content type of format 0.0.4, as a scrape's response names it.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The text so far.
    private(set) var bytes: [UInt8] = []

    init(reservingCapacity capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// Empties the text (keeping its capacity), for the next slice of a scrape.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
    }

    /// `# HELP` and `# TYPE` of `family`: written once, before its samples.
    mutating func header(_ family: MetricFamily) {
        append("# HELP ")
        append(family.name)
        bytes.append(0x20)
        appendEscaped(family.help, quotes: false)
        append("\n# TYPE ")
        append(family.name)
        bytes.append(0x20)
        append(family.kind.rawValue)
        bytes.append(0x0A)
    }

    /// One sample of a counter or a gauge: `first` and `second` are the values of the family's first two
    /// labels (the families have at most two).
    mutating func sample(_ family: MetricFamily, _ first: String? = nil, _ second: String? = nil, value: Double) {
        series(family.name, suffix: "", labels: family.labels, first, second, le: nil)
        appendNumber(value)
        bytes.append(0x0A)
    }

    /// One sample whose value is a count, written without a fraction.
    mutating func sample(_ family: MetricFamily, _ first: String? = nil, _ second: String? = nil, count: UInt64) {
        series(family.name, suffix: "", labels: family.labels, first, second, le: nil)
        appendCount(count)
        bytes.append(0x0A)
    }

    /// One series of a histogram: its buckets (cumulative, then `+Inf`), `_sum` and `_count`.
    mutating func histogram(_ family: MetricFamily, _ first: String? = nil, _ second: String? = nil, histogram: Histogram) {
        var running: UInt64 = 0
        for (index, bound) in histogram.boundTexts.enumerated() {
            running &+= histogram.bucketCounts[index]
            series(family.name, suffix: "_bucket", labels: family.labels, first, second, le: bound)
            appendCount(running)
            bytes.append(0x0A)
        }
        series(family.name, suffix: "_bucket", labels: family.labels, first, second, le: "+Inf")
        appendCount(histogram.count)
        bytes.append(0x0A)
        series(family.name, suffix: "_sum", labels: family.labels, first, second, le: nil)
        appendNumber(histogram.sum)
        bytes.append(0x0A)
        series(family.name, suffix: "_count", labels: family.labels, first, second, le: nil)
        appendCount(histogram.count)
        bytes.append(0x0A)
    }

    /// `name{label="value",...} ` (the braces left out without labels). Label names beyond the values given
    /// are left out; values beyond the names, too.
    private mutating func series(_ name: String, suffix: String, labels: [String], _ first: String?, _ second: String?,
                                 le: String?) {
        append(name)
        if !suffix.isEmpty { append(suffix) }
        let pairs = min(labels.count, second != nil ? 2 : first != nil ? 1 : 0)
        if pairs > 0 || le != nil {
            bytes.append(UInt8(ascii: "{"))
            for index in 0..<pairs {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                append(labels[index])
                append("=\"")
                appendEscaped((index == 0 ? first : second) ?? "", quotes: true)
                bytes.append(UInt8(ascii: "\""))
            }
            if let le {
                if pairs > 0 { bytes.append(UInt8(ascii: ",")) }
                append("le=\"")
                append(le)
                bytes.append(UInt8(ascii: "\""))
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(0x20)
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// `text` with `\` as `\\` and a line feed as `\n`, and with `quotes` (a label value) `"` as `\"`.
    private mutating func appendEscaped(_ text: String, quotes: Bool) {
        let utf8 = text.utf8
        guard utf8.contains(where: { $0 == 0x5C || $0 == 0x0A || (quotes && $0 == 0x22) }) else {
            return bytes.append(contentsOf: utf8)
        }
        for byte in utf8 {
            switch byte {
            case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x22 where quotes: bytes.append(contentsOf: [0x5C, 0x22])
            default: bytes.append(byte)
            }
        }
    }

    private mutating func appendCount(_ count: UInt64) {
        if count < 10 { return bytes.append(UInt8(ascii: "0") + UInt8(count)) }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var length = 0
        var rest = count
        withUnsafeMutableBytes(of: &digits) { buffer in
            while rest > 0 {
                buffer[19 - length] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                length += 1
            }
            bytes.append(contentsOf: buffer[(20 - length)...])
        }
    }

    private mutating func appendNumber(_ value: Double) {
        if value.isFinite, value.rounded() == value, value.magnitude < 1e15 {
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            return appendCount(UInt64(value.magnitude))
        }
        append(Self.text(value))
    }

    /// A number as the exposition writes it: `+Inf`, `-Inf`, `NaN`, a whole number without a fraction
    /// (`3`), otherwise Swift's shortest text that reads back as the same double (`0.005`, `1e-05`).
    static func text(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value.rounded() == value, value.magnitude < 1e15 { return String(Int64(value)) }
        return value.description
    }
}
