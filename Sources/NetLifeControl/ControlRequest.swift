// The requests of the control protocol, typed once for both ends by the command table: netlifectl builds one
// from its command line (`ControlCommand.request(arguments:)`) and sends its `json`; the daemon reads a line
// with `init(json:)`, which names exactly what is wrong with a request (an unknown command, a missing member,
// a member of the wrong type, a newer protocol). Members a command does not take are ignored.

/// A request to the daemon: a command and the values of its arguments, checked against its entry.
public struct ControlRequest: Equatable, Sendable {
    public let command: ControlCommand
    private let values: [ControlMember: JSON]

    /// The members every request may carry, besides its command's.
    enum Key: String { case cmd, `protocol` }

    /// A request of `command` with `values`, checked as the daemon checks a request line.
    public init(_ command: ControlCommand, _ values: [ControlMember: JSON] = [:]) throws(ControlError) {
        try self.init(command) { member throws(ControlError) in values[member] }
    }

    /// Reads each of `command`'s arguments with `value`, and checks what they must be.
    private init(_ command: ControlCommand, value: (ControlMember) throws(ControlError) -> JSON?) throws(ControlError) {
        self.command = command
        var values: [ControlMember: JSON] = [:]
        for argument in command.arguments {
            let member = argument.member
            guard let given = try value(member), given != .null else {
                if argument.required && member.kind != .bool { throw ControlError(.badRequest, "this command needs \"\(member.key)\"") }
                if member.kind == .bool { values[member] = .bool(false) }
                continue
            }
            values[member] = try argument.check(given)
        }
        if command.needsOne, values.isEmpty {
            let keys = command.arguments.map { "\"\($0.member.key)\"" }
            throw ControlError(.badRequest, "\(command.name) needs \(keys.dropLast().joined(separator: ", ")) or \(keys.last ?? "")")
        }
        self.values = values
    }

    /// The value of a member, nil when absent.
    public func value(_ member: ControlMember) -> JSON? { values[member] }

    /// A string member; nil when it was not given.
    public func optionalString(_ member: ControlMember) -> String? { values[member]?.stringValue }

    /// A string member the command requires.
    public func string(_ member: ControlMember) -> String {
        guard let text = optionalString(member) else { preconditionFailure("\(command.name) has no string \(member.key)") }
        return text
    }

    /// A count member; nil when it was not given.
    public func optionalCount(_ member: ControlMember) -> UInt64? {
        values[member]?.doubleValue.flatMap { JSON.isCount($0) ? UInt64($0) : nil }
    }

    /// A count member the command requires.
    public func count(_ member: ControlMember) -> UInt64 {
        guard let number = optionalCount(member) else { preconditionFailure("\(command.name) has no count \(member.key)") }
        return number
    }

    /// A boolean member (false when it was not given).
    public func flag(_ member: ControlMember) -> Bool { values[member]?.boolValue ?? false }

    /// The app the request is about, if the daemon resolves one.
    public var app: String? { command.resolvesApp ? optionalString(.app) : nil }

    /// The request line's value, with the protocol version this client speaks: `cmd`, `protocol`, then the
    /// arguments in the entry's order (an absent optional one left out).
    public var json: JSON {
        var members = JSONMembers<Key>()
        members.set(.cmd, .string(command.name))
        members.set(.protocol, .number(Double(ControlProtocol.version)))
        var object = members.object
        for argument in command.arguments {
            if let value = values[argument.member] { object.append(argument.member.key, value) }
        }
        return .object(object)
    }

    /// Reads a request line's value.
    public init(json: JSON) throws(ControlError) {
        let fields = try ControlError.reading { () throws(JSONRecordError) in try JSONFields<Key>(json, what: "a request") }
        if fields.value(.protocol) != nil {
            let number = try ControlError.reading { () throws(JSONRecordError) in try fields.number(.protocol) }
            guard number >= 1, number.rounded() == number, number < 1e9 else {
                throw ControlError(.badRequest, "\"protocol\" must be a positive whole number")
            }
            guard Int(number) <= ControlProtocol.version else {
                throw ControlError(.protocolVersion, "protocol \(Int(number)) is newer than this netlifed speaks (\(ControlProtocol.version)); upgrade netlifed")
            }
        }
        guard fields.value(.cmd) != nil else { throw ControlError(.badRequest, "the request has no \"cmd\"") }
        let name = try ControlError.reading { () throws(JSONRecordError) in try fields.string(.cmd) }
        guard let command = ControlCommand.named(name) else {
            throw ControlError(.unknownCommand, "unknown command '\(name.prefix(64))'")
        }
        try self.init(command) { member throws(ControlError) in fields.object[member.key] }
    }
}

extension ControlArgument {
    /// `value` if it has the member's type and is one the argument allows; else the error that says why not.
    func check(_ value: JSON) throws(ControlError) -> JSON {
        let key = member.key
        switch (member.kind, value) {
        case (.bool, .bool):
            return value
        case (.bool, _):
            throw ControlError(.badRequest, "\"\(key)\" must be true or false")
        case (.count, .number(let number)):
            guard JSON.isCount(number) else {
                throw ControlError(.badRequest, "\"\(key)\" must be a whole number")
            }
            return value
        case (.count, _):
            throw ControlError(.badRequest, "\"\(key)\" must be a number")
        case (.string, .string(let text)):
            if let maxBytes, text.utf8.count > maxBytes {
                throw ControlError(.badRequest, "\"\(key)\" is at most \(maxBytes) bytes long")
            }
            if let values, !values.contains(text) {
                throw ControlError(.badRequest, "\"\(key)\" must be " + values.map { "\"\($0)\"" }.joined(separator: " or "))
            }
            return value
        case (.string, _):
            throw ControlError(.badRequest, "\"\(key)\" must be a string")
        }
    }
}
