// Fuzz target: the `line` protocol of data sockets, which reads every byte its peer sends. The input is what
// a peer sends, fed in pieces (sizes from a hash of the input) as reads would bring it. No input may crash or
// hang the reader; it counts exactly the complete lines a plain reference splitter finds, shows the last
// one, keeps no more than one unfinished line within the limit, and breaks the connection exactly when a line
// passes the limit.

import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLine(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var random = SplitMix(hashing: input)
    let reader = LineProtocol(quietEnter: nil, quietExit: nil, keepaliveMessage: nil)
    let buffer = EventBuffer.allocate()
    defer { buffer.free() }
    var start = 0
    var broken = false
    while start < input.count && !broken {
        let end = min(input.count, start + 1 + Int(random.next() % 4096))
        input[start..<end].withUnsafeBytes { buffer.append($0) }
        start = end
        broken = !reader.consume(buffer)
        if broken, !buffer.isEmpty { fatalError("a broken connection's input must be dropped") }
        if !broken, buffer.count > LineProtocol.maxLineLength + 1 {
            fatalError("\(buffer.count) bytes of an unfinished line kept, over the limit")
        }
    }
    // The reference: lines end at LF (a CR before it is dropped); a line over the limit breaks the stream.
    var expected = 0
    var last: [UInt8]?
    var current: [UInt8] = []
    var referenceBroken = false
    for byte in input[..<start] {
        if byte == 10 {
            var line = current
            if line.last == 13 { line.removeLast() }
            if line.count > LineProtocol.maxLineLength { referenceBroken = true; break }
            expected += 1
            last = line
            current = []
        } else {
            current.append(byte)
        }
    }
    if !referenceBroken && current.count > LineProtocol.maxLineLength + 1 { referenceBroken = true }
    if !broken && !referenceBroken {
        guard reader.lines == expected else { fatalError("counted \(reader.lines) lines, the reference \(expected)") }
        let shown = last.map { String(decoding: $0.prefix(200), as: UTF8.self) }
        guard reader.lastLine == shown else { fatalError("last line \(String(describing: reader.lastLine)), expected \(String(describing: shown))") }
    }
    if broken && !referenceBroken && expected > 0 && reader.lines > expected {
        fatalError("counted lines past a broken one")
    }
    return 0
}
