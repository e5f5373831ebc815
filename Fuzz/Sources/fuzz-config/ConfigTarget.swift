// Fuzz target: the config reader and checker (INI lines, durations, booleans, addresses, hook command
// lines, each key's range). A config comes from a file the operator controls, but `--check-config` and
// `reload` must report any text as errors, never crash, hang or run out of memory on it.

import FuzzSupport

private let services = ServiceRegistry.builtin

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let text = String(decoding: bytes, as: UTF8.self)
    do throws(ConfigErrors) {
        _ = try ConfigLoader.parse(text, file: "fuzz.conf", services: services)
    } catch {
        // Every error names a line of the text, or 0 for the file as a whole.
        let lines = bytes.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        for item in error.errors where item.line < 0 || item.line > lines {
            fatalError("config error on line \(item.line) of a \(lines)-line text: \(item)")
        }
        if error.errors.isEmpty { fatalError("ConfigLoader.parse threw ConfigErrors without any error") }
    }
    return 0
}
