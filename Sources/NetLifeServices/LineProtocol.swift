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
    private(set) var lines = 0
    private(set) var lastLine: String?

    public init(quietEnter: String?, quietExit: String?, keepaliveMessage: String?) {
        self.quietEnter = quietEnter
        self.quietExit = quietExit
        self.keepaliveMessage = keepaliveMessage
    }

    public func dataSocketDidRead(_ socket: DataSocket) {
        guard let input = socket.input else { return }
        while true {
            switch input.readLine(maxLength: Self.maxLineLength) {
            case .line(let bytes):
                lines += 1
                lastLine = String(decoding: bytes.prefix(Self.shownLineLength), as: UTF8.self)
            case .incomplete:
                return
            case .tooLong:
                input.removeAll()
                return socket.fail("the peer sent a line over \(Self.maxLineLength) bytes")
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
        var status = DataProtocolStatus()
        status.lines = lines
        status.lastLine = lastLine
        return status
    }
}
