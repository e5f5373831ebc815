// What a kernel pressure file (PSI: a cgroup's `memory.pressure`, or /proc/pressure/memory) said at one moment,
// as `status` and `watch` report it with an app that memory pressure ended: the share of time in which some
// task (`some`), or every task (`full`), stalled on memory, averaged over the last 10 and 60 seconds (percent),
// and the stall's total since boot (microseconds). The file's lines read
// `some avg10=5.79 avg60=1.04 avg300=0.21 total=659348`.

import NetLifeJSON

/// One line of a pressure file.
public struct PressureFigures: Equatable, Sendable, JSONRecord {
    /// The share of the last 10 seconds in which tasks stalled, in percent.
    public var avg10: Double
    /// The same over the last 60 seconds.
    public var avg60: Double
    /// The stall time in all, in microseconds.
    public var total: UInt64

    public init(avg10: Double, avg60: Double, total: UInt64) {
        self.avg10 = avg10
        self.avg60 = avg60
        self.total = total
    }

    public static let schema = JSONSchema<PressureFigures>("pressure figures", blank: PressureFigures(avg10: 0, avg60: 0, total: 0), [
        .number("avg10", \.avg10, default: 0), .number("avg60", \.avg60, default: 0), .count("total", \.total, default: 0),
    ])

    /// `avg10=5.79 avg60=1.04 total=659348`, as the file writes them.
    public var text: String { "avg10=\(Self.percent(avg10)) avg60=\(Self.percent(avg60)) total=\(total)" }

    /// A percentage with two decimals, as the kernel writes it.
    static func percent(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}

/// A pressure file's figures at one moment.
public struct PressureStall: Equatable, Sendable, JSONRecord {
    /// The file they were read from.
    public var file: String
    /// Some task stalled.
    public var some: PressureFigures
    /// Every task stalled at once (nil where the file has no `full` line).
    public var full: PressureFigures?

    public init(file: String, some: PressureFigures, full: PressureFigures? = nil) {
        self.file = file
        self.some = some
        self.full = full
    }

    public static let schema = JSONSchema<PressureStall>("pressure", blank: PressureStall(file: "", some: PressureFigures(avg10: 0, avg60: 0, total: 0)), [
        .string("file", \.file),
        .stored("some", \.some, encode: { $0.json }, decode: { fields, key throws(JSONRecordError) in
            guard let json = fields.value(key) else { throw JSONRecordError("pressure needs \"some\"") }
            return try PressureFigures(json: json)
        }),
        .record("full", \.full),
    ])

    /// The figures of a pressure file's text (its `some` line, and its `full` line when there is one); nil when
    /// it has no `some` line with avg10, avg60 and total. Linear in the text; fields it does not know
    /// (avg300, or later ones) are skipped.
    public init?(fileText text: String, file: String) {
        var some: PressureFigures?
        var full: PressureFigures?
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard let kind = words.first, kind == "some" || kind == "full" else { continue }
            var avg10: Double?, avg60: Double?, total: UInt64?
            for word in words.dropFirst() {
                guard let equals = word.firstIndex(of: "=") else { continue }
                let value = word[word.index(after: equals)...]
                switch word[..<equals] {
                case "avg10": avg10 = Double(value)
                case "avg60": avg60 = Double(value)
                case "total": total = UInt64(value)
                default: break
                }
            }
            guard let avg10, let avg60, let total, avg10.isFinite, avg60.isFinite else { continue }
            let figures = PressureFigures(avg10: avg10, avg60: avg60, total: total)
            if kind == "some" { some = figures } else { full = figures }
        }
        guard let some else { return nil }
        self.init(file: file, some: some, full: full)
    }

    /// `some avg10=5.79 avg60=1.04 total=659348, full avg10=4.12 avg60=0.80 total=512000`.
    public var text: String {
        "some \(some.text)" + (full.map { ", full \($0.text)" } ?? "")
    }
}
