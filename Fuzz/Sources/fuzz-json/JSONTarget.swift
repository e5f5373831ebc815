// Fuzz target: the control protocol's JSON parser and request decoder, which read every request line a
// client sends, and the record decoders netlifectl reads the daemon's lines with (a status reply, a watch
// event). Any input may be rejected; none may crash, hang or take more than linear time. What is accepted
// must survive a round trip: a parsed value serializes to one line that parses to the same value, and a
// decoded request or record encodes to JSON that decodes to the same value.

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let value = try? JSON.parse(bytes) else { return 0 }
    let text = value.serialized
    guard !text.utf8.contains(UInt8(ascii: "\n")) else {
        fatalError("serialized JSON holds a newline, so it does not fit one protocol line: \(text)")
    }
    let again: JSON
    do {
        again = try JSON.parse(text)
    } catch {
        fatalError("serialized JSON does not parse again (\(error)): \(text)")
    }
    guard again == value else { fatalError("JSON round trip changed the value: \(value) became \(again)") }

    roundTrip(value, StatusReply.init(json:), \.json)
    roundTrip(value, WatchEvent.init(json:), \.json)
    guard let request = try? ControlRequest(json: value) else { return 0 }
    let decoded: ControlRequest
    do {
        decoded = try ControlRequest(json: JSON.parse(request.json.serialized))
    } catch {
        fatalError("request \(request) encodes to \(request.json.serialized), which does not decode: \(error)")
    }
    guard decoded == request else { fatalError("request round trip changed \(request) into \(decoded)") }
    return 0
}

/// `decode(value)`, when it accepts the value, encodes to JSON that decodes to the same record.
func roundTrip<Record: Equatable>(_ value: JSON, _ decode: (JSON) throws(JSONRecordError) -> Record, _ encode: (Record) -> JSON) {
    guard let record = try? decode(value) else { return }
    let line = encode(record).serialized
    do {
        let again = try decode(JSON.parse(line))
        guard again == record else { fatalError("\(Record.self) round trip changed \(record) into \(again)") }
    } catch {
        fatalError("\(Record.self) \(record) encodes to \(line), which does not decode: \(error)")
    }
}
