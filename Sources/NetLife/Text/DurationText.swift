// Durations as configs write them (`250ms`, `5s`, `10m`, `1h`, or `0`): one parser for the daemon's own keys
// and for the options of services and protocols.

extension Duration {
    /// Parses `250ms`, `5s`, `10m`, `1h` or `0`; nil for anything else, or for a value too large to hold.
    public init?(configText text: String) {
        if text == "0" {
            self = .zero
            return
        }
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
        for (unit, milliseconds) in units where text.hasSuffix(unit) {
            let number = text.dropLast(unit.count)
            guard !number.isEmpty, number.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int64(number),
                  value <= Int64.max / milliseconds / 1_000_000 else { return nil }
            self = .milliseconds(value * milliseconds)
            return
        }
        return nil
    }

    /// The duration as a config writes it: the largest unit that divides it (`1h`, `90s`, `250ms`), or `0`.
    public var configText: String {
        let milliseconds = nanoseconds / 1_000_000
        if milliseconds == 0 { return "0" }
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)] where milliseconds % size == 0 {
            return "\(milliseconds / size)\(unit)"
        }
        return "\(milliseconds)ms"
    }
}

/// A duration for the log: milliseconds below 10 s, whole seconds above.
func format(_ duration: Duration) -> String {
    let ms = duration.milliseconds
    return ms < 10_000 ? "\(Int(ms.rounded()))ms" : "\(Int(duration.seconds.rounded()))s"
}
