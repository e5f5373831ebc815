// Records whose members are spelled once: a type lists its fields (the key, the property, and what
// an absent value means) in its `schema`, and both its `json` and its `init(json:)` are derived from that
// list. Reading reports a member of the wrong type as JSONFields does (`"connections" must be a whole number`).
//
// Measured against the hand-written pairs it replaced with Benchmarks/status-reply-cost.swift (a status reply of
// 10 apps, 14 KB): decoding costs a tenth more at most (parsing dominates), encoding about twice as much (some
// 0.13 ms more per reply: the fields are closures over key paths, called through generic code).

/// A member key, for reading with `JSONFields`.
public struct JSONKey: RawRepresentable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
}

/// One member of a record: its key, how the record's value is written (nil: left out) and how it is read back
/// into the record. A field made by `rest` stands for every member the other fields do not name instead.
public struct JSONField<Record>: Sendable {
    let key: JSONKey
    let write: @Sendable (Record) -> JSON?
    let read: @Sendable (JSONFields<JSONKey>, JSONKey, inout Record) throws(JSONRecordError) -> Void
    let rest: Rest?

    /// Writes its members after the record's others and reads back every member no other field names.
    struct Rest: Sendable {
        let write: @Sendable (Record) -> [(key: String, value: JSON)]
        let read: @Sendable ([(key: String, value: JSON)], inout Record) throws(JSONRecordError) -> Void
    }

    /// A member written and read by hand, for what the other fields cannot say.
    public init(_ key: String, write: @escaping @Sendable (Record) -> JSON?,
                read: @escaping @Sendable (JSONFields<JSONKey>, JSONKey, inout Record) throws(JSONRecordError) -> Void) {
        self.key = JSONKey(rawValue: key)
        self.write = write
        self.read = read
        self.rest = nil
    }

    private init(rest: Rest) {
        self.key = JSONKey(rawValue: "")
        self.write = { _ in nil }
        self.read = { _, _, _ throws(JSONRecordError) in }
        self.rest = rest
    }

    /// Members named by the record itself rather than by its schema (a protocol's own figures): `write` gives
    /// them in order, `read` takes back every member of the object that no other field of the schema names.
    public static func rest(write: @escaping @Sendable (Record) -> [(key: String, value: JSON)],
                            read: @escaping @Sendable ([(key: String, value: JSON)], inout Record) throws(JSONRecordError) -> Void) -> JSONField {
        JSONField(rest: Rest(write: write, read: read))
    }

    /// A member stored in the property at `path`: `encode` gives its JSON (nil: left out), `decode` reads it.
    public static func stored<Value>(_ key: String, _ path: WritableKeyPath<Record, Value> & Sendable,
                                     encode: @escaping @Sendable (Value) -> JSON?,
                                     decode: @escaping @Sendable (JSONFields<JSONKey>, JSONKey) throws(JSONRecordError) -> Value) -> JSONField {
        JSONField(key, write: { encode($0[keyPath: path]) },
                  read: { fields, key, record throws(JSONRecordError) in record[keyPath: path] = try decode(fields, key) })
    }
}

/// What an optional member says when it has no value.
public enum JSONAbsence: Sendable {
    /// `"key": null`.
    case null
    /// No member at all.
    case omitted

    func write(_ value: JSON?) -> JSON? {
        if let value { return value }
        switch self {
        case .null: return JSON.null
        case .omitted: return nil
        }
    }
}

extension JSONField {
    /// A member written from the record and not read back (`degraded`, said by `degradedReasons`).
    public static func derived(_ key: String, _ value: @escaping @Sendable (Record) -> JSON) -> JSONField {
        JSONField(key, write: value, read: { _, _, _ throws(JSONRecordError) in })
    }

    /// `read`, or `fallback` (when there is one) for an absent member.
    static func reading<Value: Sendable>(_ fallback: Value?, _ read: @escaping @Sendable (JSONFields<JSONKey>, JSONKey) throws(JSONRecordError) -> Value)
        -> @Sendable (JSONFields<JSONKey>, JSONKey) throws(JSONRecordError) -> Value {
        { fields, key throws(JSONRecordError) in
            if let fallback, fields.value(key) == nil { return fallback }
            return try read(fields, key)
        }
    }

    /// `field` (not a `rest` one), written only when `condition` holds of the record (read as always).
    public static func when(_ condition: @escaping @Sendable (Record) -> Bool, _ field: JSONField) -> JSONField {
        JSONField(field.key.rawValue, write: { condition($0) ? field.write($0) : nil }, read: field.read)
    }

    /// A required string, or with `fallback` an optional one that reads as `fallback` when absent.
    public static func string(_ key: String, _ path: WritableKeyPath<Record, String> & Sendable, default fallback: String? = nil) -> JSONField {
        stored(key, path, encode: { .string($0) }, decode: reading(fallback) { fields, key throws(JSONRecordError) in try fields.string(key) })
    }

    public static func string(_ key: String, _ path: WritableKeyPath<Record, String?> & Sendable, absent: JSONAbsence = .null) -> JSONField {
        stored(key, path, encode: { absent.write($0.map(JSON.string)) }) { fields, key throws(JSONRecordError) in try fields.optionalString(key) }
    }

    /// A boolean that reads as false when absent.
    public static func bool(_ key: String, _ path: WritableKeyPath<Record, Bool> & Sendable) -> JSONField {
        stored(key, path, encode: { .bool($0) }) { fields, key throws(JSONRecordError) in try fields.bool(key, default: false) }
    }

    public static func bool(_ key: String, _ path: WritableKeyPath<Record, Bool?> & Sendable, absent: JSONAbsence = .omitted) -> JSONField {
        stored(key, path, encode: { absent.write($0.map(JSON.bool)) }) { fields, key throws(JSONRecordError) in try fields.optionalBool(key) }
    }

    /// A required number, or with `fallback` an optional one.
    public static func number(_ key: String, _ path: WritableKeyPath<Record, Double> & Sendable, default fallback: Double? = nil) -> JSONField {
        stored(key, path, encode: { .number($0) }, decode: reading(fallback) { fields, key throws(JSONRecordError) in try fields.number(key) })
    }

    public static func number(_ key: String, _ path: WritableKeyPath<Record, Double?> & Sendable, absent: JSONAbsence = .null) -> JSONField {
        stored(key, path, encode: { absent.write($0.map(JSON.number)) }) { fields, key throws(JSONRecordError) in try fields.optionalNumber(key) }
    }

    /// A whole number from 0 to 2^53, required, or with `fallback` optional.
    public static func count(_ key: String, _ path: WritableKeyPath<Record, UInt64> & Sendable, default fallback: UInt64? = nil) -> JSONField {
        stored(key, path, encode: { .number(Double($0)) }, decode: reading(fallback) { fields, key throws(JSONRecordError) in try fields.count(key) })
    }

    /// A whole number, required, or with `fallback` optional.
    public static func count(_ key: String, _ path: WritableKeyPath<Record, Int> & Sendable, default fallback: Int? = nil) -> JSONField {
        stored(key, path, encode: { .number(Double($0)) }, decode: reading(fallback) { fields, key throws(JSONRecordError) in Int(try fields.count(key)) })
    }

    public static func count(_ key: String, _ path: WritableKeyPath<Record, Int?> & Sendable, absent: JSONAbsence = .null) -> JSONField {
        stored(key, path, encode: { absent.write($0.map { .number(Double($0)) }) }) { fields, key throws(JSONRecordError) in
            fields.value(key) == nil ? nil : Int(try fields.count(key))
        }
    }

    public static func strings(_ key: String, _ path: WritableKeyPath<Record, [String]> & Sendable) -> JSONField {
        stored(key, path, encode: { .array($0.map(JSON.string)) }) { fields, key throws(JSONRecordError) in try fields.strings(key) }
    }

    /// A value of a closed vocabulary (a state, a mode), written as its name; a name outside the vocabulary is an
    /// error that lists the names, or with `fallback` an absent member reads as `fallback`.
    public static func name<Value: RawRepresentable & CaseIterable & Sendable>(
        _ key: String, _ path: WritableKeyPath<Record, Value> & Sendable, default fallback: Value? = nil
    ) -> JSONField where Value.RawValue == String {
        stored(key, path, encode: { .string($0.rawValue) }, decode: reading(fallback) { fields, key throws(JSONRecordError) in
            try fields.name(key, Value.self)
        })
    }

    public static func name<Value: RawRepresentable & CaseIterable & Sendable>(
        _ key: String, _ path: WritableKeyPath<Record, Value?> & Sendable, absent: JSONAbsence = .null
    ) -> JSONField where Value.RawValue == String {
        stored(key, path, encode: { absent.write($0.map { .string($0.rawValue) }) }) { fields, key throws(JSONRecordError) in
            fields.value(key) == nil ? nil : try fields.name(key, Value.self)
        }
    }

    /// An array of whole numbers (empty when absent).
    public static func counts(_ key: String, _ path: WritableKeyPath<Record, [Int]> & Sendable) -> JSONField {
        stored(key, path, encode: { .array($0.map { .number(Double($0)) }) }) { fields, key throws(JSONRecordError) in try fields.counts(key) }
    }

    /// An array of records (empty when absent).
    public static func records<Item: JSONRecord>(_ key: String, _ path: WritableKeyPath<Record, [Item]> & Sendable) -> JSONField {
        // Not `map(\.json)`: a key path to a protocol extension's property looks up generic metadata for each
        // item, which made encoding a status reply a fifth slower.
        stored(key, path, encode: { .array($0.map { $0.json }) }) { fields, key throws(JSONRecordError) in try fields.array(key, Item.init(json:)) }
    }

    public static func record<Item: JSONRecord>(_ key: String, _ path: WritableKeyPath<Record, Item?> & Sendable,
                                                absent: JSONAbsence = .omitted) -> JSONField {
        stored(key, path, encode: { absent.write($0?.json) }) { fields, key throws(JSONRecordError) in
            try fields.value(key).map { json throws(JSONRecordError) in try Item(json: json) }
        }
    }
}

/// How a record is read and written: what it is called in errors, the value reading starts from, and its
/// fields in the order they are written.
public final class JSONSchema<Record: Sendable>: Sendable {
    let what: String
    let blank: Record
    let fields: [JSONField<Record>]
    /// The members the fields name (what a `rest` field does not take).
    let names: Set<String>

    public init(_ what: String, blank: Record, _ fields: [JSONField<Record>]) {
        self.what = what
        self.blank = blank
        self.fields = fields
        self.names = Set(fields.filter { $0.rest == nil }.map(\.key.rawValue))
    }
}

/// A record whose members are its schema's fields.
public protocol JSONRecord: Sendable {
    static var schema: JSONSchema<Self> { get }
}

extension JSONRecord {
    /// The object, its members in the schema's order (a `rest` field's members where it stands).
    public var json: JSON {
        var object = JSONObject()
        for field in Self.schema.fields {
            if let rest = field.rest {
                for member in rest.write(self) { object.append(member.key, member.value) }
            } else if let value = field.write(self) {
                object.append(field.key.rawValue, value)
            }
        }
        return .object(object)
    }

    /// Reads the object; a missing or mistyped member is an error that names it.
    public init(json: JSON) throws(JSONRecordError) {
        let schema = Self.schema
        let fields = try JSONFields<JSONKey>(json, what: schema.what)
        var record = schema.blank
        for field in schema.fields {
            if let rest = field.rest {
                try rest.read(fields.object.members.filter { !schema.names.contains($0.key) }, &record)
            } else {
                try field.read(fields, field.key, &record)
            }
        }
        self = record
    }
}
