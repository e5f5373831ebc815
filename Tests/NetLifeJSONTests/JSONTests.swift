// The JSON both protocols speak: strict parsing of untrusted input, and serialization in member order.

@testable import NetLifeJSON
import Testing

@Suite struct JSONTests {
    @Test func parsesEveryKindOfValue() throws {
        let value = try JSON.parse(#" {"cmd": "task-begin", "id": 42, "f": -1.5e2, "ok": true, "no": null, "list": [1, "two", false], "esc": "a\"b\\c\n\u00e9\ud83d\ude00"} "#)
        #expect(value["cmd"] == "task-begin")
        #expect(value["id"]?.intValue == 42)
        #expect(value["f"]?.doubleValue == -150)
        #expect(value["ok"]?.boolValue == true)
        #expect(value["no"]?.isNull == true)
        #expect(value["list"] == [1, "two", false])
        #expect(value["esc"]?.stringValue == "a\"b\\c\né😀")
    }

    @Test(arguments: ["", "{", "{\"a\":}", "[1,]", "01", "1.", "\"unterminated", "{\"a\":1,\"a\":2}", "tru", "\"\u{01}\"",
                      "{} {}", "\"\\ud800\"", "\"\\x\"", "nul"])
    func rejectsMalformedText(text: String) {
        #expect(throws: JSONParseError.self) { try JSON.parse(text) }
    }

    @Test func limitsNestingDepth() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSON.parse(deep) }
        let fine = String(repeating: "[", count: 10) + String(repeating: "]", count: 10)
        #expect((try? JSON.parse(fine)) != nil)
    }

    @Test func serializesCompactlyInMemberOrder() throws {
        let value: JSON = .object(["ok": true, "app": "echo", "n": 3, "ms": 0.25, "none": nil, "text": "line\n\"q\"\u{01}"])
        #expect(value.serialized == #"{"ok":true,"app":"echo","n":3,"ms":0.25,"none":null,"text":"line\n\"q\"\u0001"}"#)
        #expect(try JSON.parse(value.serialized) == value)
    }

    @Test func everyControlCharacterIsEscapedAndOtherTextIsCopiedAsIs() throws {
        let controls = String(String.UnicodeScalarView((0..<0x20).compactMap(Unicode.Scalar.init)))
        let text = "\"" + controls + "\\ é 😀 \u{7f}\"end"
        let line = JSON.string(text).serializedLine
        #expect(line.last == UInt8(ascii: "\n"))
        #expect(line.dropLast().allSatisfy { $0 >= 0x20 }, "one protocol line: no raw control byte")
        let written = String(decoding: line.dropLast(), as: UTF8.self)
        #expect(written.hasPrefix(#""\"\u0000\u0001"#))
        #expect(written.contains(#"\b"#) == false, "backspace is written as \\u0008, which every parser reads")
        #expect(written.contains(#"\u0008\t\n\u000b\u000c\r\u000e"#))
        #expect(written.hasSuffix(#"\u001f\\ é 😀 \#u{7f}\"end""#))
        #expect(try JSON.parse(Array(line.dropLast())) == .string(text))
    }

    @Test func serializesNumbersAndEmptyContainers() throws {
        let value: JSON = [-42, 0, 1e15, 123456789012345, -0.5, "", [], .object([:])]
        #expect(value.serialized == #"[-42,0,1000000000000000.0,123456789012345,-0.5,"",[],{}]"#)
        #expect(value.serializedBytes == Array(value.serialized.utf8))
        #expect(try JSON.parse(value.serialized) == value)
    }

    @Test func numbersBeyondADoubleAreRejected() throws {
        // Found by fuzz-json: `[1e999]` parsed as infinity, which serializes as null.
        #expect(throws: JSONParseError.self) { try JSON.parse([0x5b, 0x31, 0x65, 0x39, 0x39, 0x39, 0x5d]) }
        #expect(throws: JSONParseError.self) { try JSON.parse("-1e999") }
        #expect(try JSON.parse("1e308") == .number(1e308))
    }

    @Test func elementLimitsStopAHostileObjectEarly() throws {
        let wide = "{" + (0..<300).map { "\"k\($0)\":1" }.joined(separator: ",") + "}"
        #expect(throws: JSONParseError.self) { try JSON.parse(Array(wide.utf8), maxElements: 256) }
        #expect(throws: JSONParseError.self) { try JSON.parse(Array(("[" + String(repeating: "1,", count: 300) + "1]").utf8), maxElements: 256) }
        #expect(try JSON.parse(Array(wide.utf8))["k299"] == 1, "no limit unless asked")
    }
}
