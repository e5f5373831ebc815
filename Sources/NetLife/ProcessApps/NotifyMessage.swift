// One datagram of systemd's notify protocol (sd_notify(3)) as a process app's program sends it on the
// NOTIFY_SOCKET netlifed gives it: newline-separated `KEY=VALUE` assignments such as `READY=1` or
// `STATUS=Serving 12 clients`. The bytes are untrusted, so this is a pure parser in one pass over them
// (linear in their length), with nothing that can trap: a datagram with a NUL byte is refused whole, as
// systemd refuses it; a line without `=`, an unknown key and a known key with another value are counted and
// otherwise ignored, as systemd ignores them; the STATUS= text is cut to `maxStatusBytes` of UTF-8 with its
// control characters removed, so that what `status` shows is one bounded printable line.

/// What one notify datagram says.
public struct NotifyMessage: Equatable, Sendable {
    /// `READY=1`: the program has finished starting up.
    public var ready = false
    /// `RELOADING=1`: the program reloads its configuration.
    public var reloading = false
    /// `STOPPING=1`: the program is shutting down.
    public var stopping = false
    /// `STATUS=...`: the program's status line, bounded and printable (the last one wins).
    public var status: String?
    /// `WATCHDOG=1` (a ping) or `WATCHDOG=trigger` (kill me now).
    public var watchdog: WatchdogNotice?
    /// Lines that said nothing this parser acts on: no `=`, an unknown key, a known key with another value.
    public var ignored = 0

    /// A watchdog message.
    public enum WatchdogNotice: Equatable, Sendable {
        /// `WATCHDOG=1`: the program is alive.
        case ping
        /// `WATCHDOG=trigger`: the program asks to be handled as if its watchdog had run out.
        case trigger
    }

    /// Why a datagram was refused.
    public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        /// The datagram holds a NUL byte (systemd refuses these too).
        case embeddedNUL

        public var description: String {
            switch self {
            case .embeddedNUL: return "the datagram holds a NUL byte"
            }
        }
    }

    /// The largest datagram read (the receive buffer's size; a longer one is dropped whole, as systemd drops
    /// it): a few hundred bytes are all the protocol needs.
    public static let maxDatagramBytes = 4096
    /// The longest STATUS= text kept, in bytes of UTF-8.
    public static let maxStatusBytes = 256

    public init() {}

    /// Parses one datagram.
    public static func parse(_ bytes: some Collection<UInt8>) -> Result<NotifyMessage, Refusal> {
        if bytes.contains(0) { return .failure(.embeddedNUL) }
        var message = NotifyMessage()
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            message.apply(line)
        }
        return .success(message)
    }

    private mutating func apply(_ line: some Collection<UInt8>) {
        guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else {
            ignored += 1
            return
        }
        let key = line[line.startIndex..<equals]
        let value = line[line.index(after: equals)...]
        switch Key(key) {
        case .ready where value.elementsEqual("1".utf8): ready = true
        case .reloading where value.elementsEqual("1".utf8): reloading = true
        case .stopping where value.elementsEqual("1".utf8): stopping = true
        case .watchdog where value.elementsEqual("1".utf8): watchdog = watchdog ?? .ping
        case .watchdog where value.elementsEqual("trigger".utf8): watchdog = .trigger
        case .status: status = Self.printable(value)
        default: ignored += 1
        }
    }

    private enum Key {
        case ready, reloading, stopping, watchdog, status, other

        init(_ bytes: some Collection<UInt8>) {
            if bytes.elementsEqual("READY".utf8) { self = .ready }
            else if bytes.elementsEqual("RELOADING".utf8) { self = .reloading }
            else if bytes.elementsEqual("STOPPING".utf8) { self = .stopping }
            else if bytes.elementsEqual("WATCHDOG".utf8) { self = .watchdog }
            else if bytes.elementsEqual("STATUS".utf8) { self = .status }
            else { self = .other }
        }
    }

    /// `bytes` as text of at most `maxStatusBytes` bytes of UTF-8, without control characters (C0, DEL, C1);
    /// invalid UTF-8 becomes U+FFFD. Only the first `maxStatusBytes` bytes are read.
    static func printable(_ bytes: some Collection<UInt8>) -> String {
        let decoded = String(decoding: bytes.prefix(maxStatusBytes), as: UTF8.self)
        var text = String.UnicodeScalarView()
        var length = 0
        for scalar in decoded.unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) { continue }
            let size = UTF8.width(scalar)
            if length + size > maxStatusBytes { break }
            length += size
            text.append(scalar)
        }
        return String(text)
    }
}
