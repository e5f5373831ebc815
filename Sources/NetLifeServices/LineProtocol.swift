// The built-in `line` protocol of data sockets: newline-delimited text. The peer's lines are counted and
// the last one is shown in `status`; quiet mode and keep-alives are lines of the config's choosing
// (`quiet-enter`, `quiet-exit`, `keepalive-message`). A line longer than 8 KiB breaks the connection: a
// peer cannot make netlifed hold more than that of an unfinished line.

import NetLife
import NetLifeEvent

/// A newline-delimited text protocol with configurable quiet-mode and keep-alive lines.
public final class LineProtocol: DataSocketHandler {
    /// The descriptor that registers the protocol as `protocol = line`.
    public static let descriptor = DataProtocolDescriptor(name: "line", optionKeys: ["quiet-enter", "quiet-exit", "keepalive-message"]) {
        configuration throws(ServiceOptionError) in
        let options = configuration.protocolOptions
        if configuration.policy == .quiet && options["quiet-enter"] == nil {
            throw ServiceOptionError("policy = quiet needs quiet-enter = LINE (the line that asks the peer for quiet mode)")
        }
        if configuration.keepalive != nil && options["keepalive-message"] == nil {
            throw ServiceOptionError(key: "keepalive", "keepalive needs keepalive-message = LINE (the line sent as the keep-alive)")
        }
        return LineProtocol(quietEnter: options["quiet-enter"], quietExit: options["quiet-exit"],
                            keepaliveMessage: options["keepalive-message"])
    }

    /// The longest line accepted from the peer.
    public static let maxLineLength = 8192
    /// How much of the last line `status` shows.
    static let shownLineLength = 200

    let quietEnter: String?
    let quietExit: String?
    let keepaliveMessage: String?
    /// Lines received, and the last one (its first 200 bytes).
    public private(set) var lines = 0
    public private(set) var lastLine: String?

    public init(quietEnter: String?, quietExit: String?, keepaliveMessage: String?) {
        self.quietEnter = quietEnter
        self.quietExit = quietExit
        self.keepaliveMessage = keepaliveMessage
    }

    public func dataSocketDidRead(_ socket: DataSocket) {
        guard let input = socket.input else { return }
        if !consume(input) { socket.fail("the peer sent a line over \(Self.maxLineLength) bytes") }
    }

    /// Takes every complete line out of `input`, counting them and keeping the last; what follows the last
    /// line ending stays for the next read. Returns false (with `input` emptied) when a line is longer than
    /// `maxLineLength`: the connection is then broken. An unfinished line is searched again when more bytes
    /// arrive, at most `maxLineLength` bytes each time.
    public func consume(_ input: EventBuffer) -> Bool {
        while true {
            switch input.readLine(maxLength: Self.maxLineLength) {
            case .line(let bytes):
                lines += 1
                lastLine = String(decoding: bytes.prefix(Self.shownLineLength), as: UTF8.self)
            case .incomplete:
                return true
            case .tooLong:
                input.removeAll()
                return false
            }
        }
    }

    public func dataSocketEnterQuiet(_ socket: DataSocket) -> QuietEntry {
        if let quietEnter { socket.send(quietEnter + "\n") }
        return .entered
    }

    public func dataSocketLeaveQuiet(_ socket: DataSocket) {
        if let quietExit { socket.send(quietExit + "\n") }
    }

    public func dataSocketKeepAlive(_ socket: DataSocket) {
        if let keepaliveMessage { socket.send(keepaliveMessage + "\n") }
    }

    public var protocolStatus: DataProtocolStatus {
        var details = [DataProtocolDetail("lines", .count(lines))]
        if let lastLine { details.append(DataProtocolDetail("lastLine", .text(lastLine))) }
        return DataProtocolStatus(details)
    }
}
