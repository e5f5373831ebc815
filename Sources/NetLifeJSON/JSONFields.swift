// Reading and writing the members of JSON objects by a typed key, so that each key is spelled once (in its
// type's `Key` enum, or a record's schema) for both directions, and a member of the wrong type is reported as
// such: `"app" must be a string`, not "needs app".

/// Why a JSON object is not the record it should be: a member missing or of the wrong type, named in `message`.
/// The control protocol answers it as `bad-request`; a journal or channel reader reports it with its file or peer.
public struct JSONRecordError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension JSON {
    /// Whether a JSON number is a count: a whole number from 0 to 2^64 - 1 (a UInt64 takes it without trapping).
    /// Past 2^53 a double holds only every other integer and fewer: a count that large is read as the nearest
    /// one, which for a size (`memory-pressure --free`) means "at least this much".
    public static func isCount(_ number: Double) -> Bool {
        number >= 0 && number.rounded() == number && number < 0x1p64
    }
}

/// Reads the members of one JSON object; every failure is an error naming the member.
public struct JSONFields<Key: RawRepresentable> where Key.RawValue == String {
    public let object: JSONObject
    /// What the object is, for errors: "a request", "an app".
    let what: String

    /// Fails unless `json` is an object; `what` names it in the message.
    public init(_ json: JSON, what: String = "a request") throws(JSONRecordError) {
        guard case .object(let object) = json else {
            throw JSONRecordError("\(what) must be a JSON object")
        }
        self.object = object
        self.what = what
    }

    private func missing(_ key: Key) -> JSONRecordError {
        JSONRecordError("\(what) needs \"\(key.rawValue)\"")
    }

    private func wrong(_ key: Key, _ type: String) -> JSONRecordError {
        JSONRecordError("\"\(key.rawValue)\" must be \(type)")
    }

    /// The member, absent or `null` as nil.
    public func value(_ key: Key) -> JSON? {
        guard let value = object[key.rawValue], value != .null else { return nil }
        return value
    }

    public func string(_ key: Key) throws(JSONRecordError) -> String {
        guard let text = try optionalString(key) else { throw missing(key) }
        return text
    }

    public func optionalString(_ key: Key) throws(JSONRecordError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else { throw wrong(key, "a string") }
        return text
    }

    /// A boolean; `fallback` when absent. A string such as "yes" is an error, never false.
    public func bool(_ key: Key, default fallback: Bool) throws(JSONRecordError) -> Bool {
        guard let value = value(key) else { return fallback }
        guard case .bool(let flag) = value else { throw wrong(key, "true or false") }
        return flag
    }

    public func optionalBool(_ key: Key) throws(JSONRecordError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw wrong(key, "true or false") }
        return flag
    }

    public func number(_ key: Key) throws(JSONRecordError) -> Double {
        guard let number = try optionalNumber(key) else { throw missing(key) }
        return number
    }

    public func optionalNumber(_ key: Key) throws(JSONRecordError) -> Double? {
        guard let value = value(key) else { return nil }
        guard case .number(let number) = value else { throw wrong(key, "a number") }
        return number
    }

    /// A whole number from 0 to 2^53.
    public func count(_ key: Key) throws(JSONRecordError) -> UInt64 {
        let number = try number(key)
        guard JSON.isCount(number) else { throw wrong(key, "a whole number") }
        return UInt64(number)
    }

    /// A name of a closed vocabulary (`Value`'s raw values).
    public func name<Value: RawRepresentable & CaseIterable>(_ key: Key, _: Value.Type) throws(JSONRecordError) -> Value
        where Value.RawValue == String {
        let text = try string(key)
        guard let value = Value(rawValue: text) else {
            throw wrong(key, "one of " + Value.allCases.map { $0.rawValue }.joined(separator: ", ") + ", not '\(text)'")
        }
        return value
    }

    public func array(_ key: Key) throws(JSONRecordError) -> [JSON] {
        guard let value = value(key) else { return [] }
        guard case .array(let items) = value else { throw wrong(key, "an array") }
        return items
    }

    /// An array of values each read by `read`.
    public func array<Item>(_ key: Key, _ read: (JSON) throws(JSONRecordError) -> Item) throws(JSONRecordError) -> [Item] {
        var items: [Item] = []
        for item in try array(key) { items.append(try read(item)) }
        return items
    }

    public func counts(_ key: Key) throws(JSONRecordError) -> [Int] {
        try array(key) { item throws(JSONRecordError) in
            guard case .number(let number) = item, JSON.isCount(number), number < 0x1p63 else {
                throw wrong(key, "an array of whole numbers")
            }
            return Int(number)
        }
    }

    public func strings(_ key: Key) throws(JSONRecordError) -> [String] {
        try array(key) { item throws(JSONRecordError) in
            guard case .string(let text) = item else { throw wrong(key, "an array of strings") }
            return text
        }
    }
}

/// Writes the members of one JSON object in order.
public struct JSONMembers<Key: RawRepresentable> where Key.RawValue == String {
    public var object = JSONObject()

    public init() {}

    public mutating func set(_ key: Key, _ value: JSON) {
        object.append(key.rawValue, value)
    }

    public mutating func set(_ key: Key, _ text: String?) {
        object.append(key.rawValue, text.map(JSON.string) ?? .null)
    }

    public mutating func set(_ key: Key, _ number: Double?) {
        object.append(key.rawValue, number.map(JSON.number) ?? .null)
    }

    public mutating func set(_ key: Key, _ flag: Bool) {
        object.append(key.rawValue, .bool(flag))
    }

    /// Adds a member only when it has a value.
    public mutating func setIfPresent(_ key: Key, _ value: JSON?) {
        if let value { object.append(key.rawValue, value) }
    }

    public var json: JSON { .object(object) }
}
