// Reading and writing the members of protocol objects by a typed key, so that each key is spelled once
// (in its type's `Key` enum) for both directions, and a member of the wrong type is reported as such:
// `"app" must be a string`, not "needs app".

/// Reads the members of one JSON object; every failure is a `bad-request` error naming the member.
public struct JSONFields<Key: RawRepresentable> where Key.RawValue == String {
    let object: JSONObject

    /// Fails unless `json` is an object; `what` names it in the message.
    public init(_ json: JSON, what: String = "a request") throws(ControlError) {
        guard case .object(let object) = json else {
            throw ControlError(.badRequest, "\(what) must be a JSON object")
        }
        self.object = object
    }

    private func missing(_ key: Key) -> ControlError {
        ControlError(.badRequest, "this command needs \"\(key.rawValue)\"")
    }

    private func wrong(_ key: Key, _ type: String) -> ControlError {
        ControlError(.badRequest, "\"\(key.rawValue)\" must be \(type)")
    }

    /// The member, absent or `null` as nil.
    public func value(_ key: Key) -> JSON? {
        guard let value = object[key.rawValue], value != .null else { return nil }
        return value
    }

    public func string(_ key: Key) throws(ControlError) -> String {
        guard let text = try optionalString(key) else { throw missing(key) }
        return text
    }

    public func optionalString(_ key: Key) throws(ControlError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else { throw wrong(key, "a string") }
        return text
    }

    /// A boolean; `fallback` when absent. A string such as "yes" is an error, never false.
    public func bool(_ key: Key, default fallback: Bool) throws(ControlError) -> Bool {
        guard let value = value(key) else { return fallback }
        guard case .bool(let flag) = value else { throw wrong(key, "true or false") }
        return flag
    }

    public func optionalBool(_ key: Key) throws(ControlError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw wrong(key, "true or false") }
        return flag
    }

    public func number(_ key: Key) throws(ControlError) -> Double {
        guard let number = try optionalNumber(key) else { throw missing(key) }
        return number
    }

    public func optionalNumber(_ key: Key) throws(ControlError) -> Double? {
        guard let value = value(key) else { return nil }
        guard case .number(let number) = value else { throw wrong(key, "a number") }
        return number
    }

    /// A whole number from 0 to 2^53.
    public func count(_ key: Key) throws(ControlError) -> UInt64 {
        let number = try number(key)
        guard ControlProtocol.isCount(number) else { throw wrong(key, "a whole number") }
        return UInt64(number)
    }

    public func array(_ key: Key) throws(ControlError) -> [JSON] {
        guard let value = value(key) else { return [] }
        guard case .array(let items) = value else { throw wrong(key, "an array") }
        return items
    }

    /// An array of values each read by `read`.
    public func array<Item>(_ key: Key, _ read: (JSON) throws(ControlError) -> Item) throws(ControlError) -> [Item] {
        var items: [Item] = []
        for item in try array(key) { items.append(try read(item)) }
        return items
    }

    public func counts(_ key: Key) throws(ControlError) -> [Int] {
        try array(key) { item throws(ControlError) in
            guard case .number(let number) = item, ControlProtocol.isCount(number), number < 0x1p63 else {
                throw wrong(key, "an array of whole numbers")
            }
            return Int(number)
        }
    }

    public func strings(_ key: Key) throws(ControlError) -> [String] {
        try array(key) { item throws(ControlError) in
            guard case .string(let text) = item else { throw wrong(key, "an array of strings") }
            return text
        }
    }
}

/// Writes the members of one JSON object in order.
public struct JSONMembers<Key: RawRepresentable> where Key.RawValue == String {
    public private(set) var object = JSONObject()

    public init() {}

    /// Starts a successful reply: `"ok": true` first.
    public static func reply() -> JSONMembers {
        var members = JSONMembers()
        members.object.append("ok", true)
        return members
    }

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
