// The config key table and its one reader: every entry's bad values are refused with the message its entry
// words, the bounds of each range are accepted and what lies just outside them refused, and every key is
// reachable (read and stored in its section; its default, written out, reads as the section without it).

@testable import NetLifeDaemon
import NetLife
import NetLifeEvent
import NetLifeServices
import Testing


/// `a`, `a or b`, `a, b or c`.
private func either(_ words: [String]) -> String {
    words.count < 2 ? words.joined() : words.dropLast().joined(separator: ", ") + " or " + (words.last ?? "")
}

/// What [daemon] keepalive-min the contexts set: the lower bound of `keepalive`.
private let keepaliveMinimum: Duration = .seconds(30)

/// A config in which `key` is read (its section, and what it needs: `exec`, `mdns`, `voip`, a listener's
/// address and service, a socket's peer and protocol), with `line` as its last line.
private func context(_ key: ConfigKey, _ line: String) -> String {
    let exec = key.requires == ConfigKey.exec.name ? "exec = /bin/true\n" : ""
    switch key.section {
    case .daemon:
        return "[daemon]\n" + line + "\n"
    case .app:
        return "[app a]\n" + exec + line + "\n"
    case .listener:
        var text = "[app a]\n" + exec + "[listener a.l]\n"
        if key != .address { text += "address = 127.0.0.1:0\n" }
        if key != .service, exec.isEmpty { text += "service = echo\n" }
        if key.requires == ConfigKey.mdns.name { text += "mdns = _x._tcp\n" }
        return text + line + "\n"
    case .socket:
        var text = "[daemon]\nkeepalive-min = \(keepaliveMinimum.configText)\n[app a]\n[socket a.s]\n"
        if key != .connect { text += "connect = 127.0.0.1:9\n" }
        if key != .protocol { text += "protocol = line\n" }
        // The line protocol's keep-alive needs its message.
        if key.requires == ConfigKey.voip.name { text += "voip = yes\nkeepalive-message = ping\n" }
        return text + line + "\n"
    }
}

/// Values of `key`'s type that the reader refuses, each with the message the entry words; none for a name
/// (a service or protocol), which its section looks up.
private func badValues(_ key: ConfigKey) -> [(value: String, message: String)] {
    let name = key.name
    switch key.type {
    case .boolean:
        return [("maybe", "\(name) must be yes or no, got 'maybe'")]
    case .choice(let words):
        return [("nonesuch", "\(name) must be \(either(words)), got 'nonesuch'"), ("", "\(name) must be \(either(words)), got ''")]
    case .duration(let range, _, let floor):
        let low = floor == nil ? range.lowerBound : keepaliveMinimum
        let between = "between \(low.configText) and \(range.upperBound.configText)"
        let above = "\((range.upperBound + .milliseconds(1)).nanoseconds / 1_000_000)ms"
        var bad = [("soon", "\(name): 'soon' is not a duration (write e.g. 250ms, 5s, 10m or 1h)"),
                   (above, "\(name) must be \(between), got '\(above)'")]
        if low > .zero {
            let below = "\((low - .milliseconds(1)).nanoseconds / 1_000_000)ms"
            bad.append((below, "\(name) must be \(between), got '\(below)'"))
        }
        return bad
    case .wholeNumber(let range, let unit, let zero):
        let mustBe = range.lowerBound == 1 ? "a positive whole number"
            : "a whole number\(unit.map { " of " + $0 } ?? "") between \(range.lowerBound)\(zero.map { " (\($0))" } ?? "") and \(range.upperBound)"
        var bad = [("x", "\(name) must be \(mustBe), got 'x'"), ("\(range.lowerBound - 1)", "\(name) must be \(mustBe), got '\(range.lowerBound - 1)'")]
        let above = range.upperBound == Int.max ? "9223372036854775808" : "\(range.upperBound + 1)"
        bad.append((above, "\(name) must be \(mustBe), got '\(above)'"))
        return bad
    case .commandLine(let needsCommand):
        let bad = [("run 'open", "\(name): unterminated single quote")]
        return needsCommand ? bad + [("", "\(name) needs a command")] : bad
    case .absolutePath:
        return [("relative", "\(name) must be an absolute path, got 'relative'")]
    case .socketPath:
        return [("relative.sock", "\(name) must be an absolute path of at most 107 bytes, got 'relative.sock'")]
    case .address(let peer):
        var reason = ""
        do { _ = try SocketAddress(parsing: "nohost") } catch { reason = error.description }
        let example = peer ? " (a numeric address such as 127.0.0.1:1143, [::1]:1143 or unix:/path)" : ""
        let bad = [("nohost", "\(name): \(reason)\(example)")]
        return peer ? bad + [("127.0.0.1:0", "\(name) needs a port other than 0, got '127.0.0.1:0'")] : bad
    case .users:
        return [("", "\(name) needs at least one user name"), ("no-such-user-x", "\(name): no user named 'no-such-user-x'")]
    case .groups(let one):
        let bad = [("", "\(name) needs at least one group name"), ("no-such-group-x", "\(name): no group named 'no-such-group-x'")]
        return one ? bad + [("root root", "\(name) takes one group, got 'root root'")] : bad
    case .groupName:
        return [("no-such-group-x", "\(name): no group named 'no-such-group-x'")]
    case .programUser:
        return [("no-such-user-x", "\(name): no user named 'no-such-user-x'")]
    case .glob:
        return [("", "\(name) needs a file or a glob, such as /etc/netlifed/conf.d/*.conf")]
    case .serviceType:
        let mustBe = "a DNS-SD service type like _http._tcp (1 to 15 letters, digits or '-' after the '_')"
        return [("_http._udp", "\(name) must be \(mustBe), got '_http._udp'"), ("_-x._tcp", "\(name) must be \(mustBe), got '_-x._tcp'")]
    case .label(let maxBytes):
        let long = String(repeating: "n", count: maxBytes + 1)
        return [(long, "\(name) must be 1 to \(maxBytes) bytes without control characters, got '\(long)'")]
    case .name:
        return []
    case .pressureTrigger(let off):
        let mustBe = "some or full, a stall and a window, such as some 150ms 2s (or \(off))"
        return [("sometimes", "\(name) must be \(mustBe), got 'sometimes'"), ("some 150ms", "\(name) must be \(mustBe), got 'some 150ms'"),
                ("heavy 150ms 2s", "\(name) must be \(mustBe), got 'heavy 150ms 2s'"),
                ("some 150ms 2s 4s", "\(name) must be \(mustBe), got 'some 150ms 2s 4s'"),
                ("some 150 2000000", "\(name) must be \(mustBe), got 'some 150 2000000'"),
                ("some 100ms 499ms", "\(name): the window must be between 500ms and 10s, got 499ms in 'some 100ms 499ms'"),
                ("full 1s 10001ms", "\(name): the window must be between 500ms and 10s, got 10001ms in 'full 1s 10001ms'"),
                ("some 0 2s", "\(name): the stall must be more than 0 and at most the window (2s), got 0 in 'some 0 2s'"),
                ("some 2001ms 2s", "\(name): the stall must be more than 0 and at most the window (2s), got 2001ms in 'some 2001ms 2s'")]
    }
}

/// A value of `key`'s type that the reader accepts: its default, or one made for its type.
private func goodValue(_ key: ConfigKey) -> String? {
    if let value = key.defaultValue { return value }
    switch key.type {
    case .boolean: return "yes"
    case .choice(let words): return words.first
    case .duration(let range, _, let floor): return (floor == nil ? range.lowerBound : keepaliveMinimum).configText
    case .wholeNumber(let range, _, _): return "\(range.lowerBound)"
    case .commandLine: return key.name == ConfigKey.environment.name ? "A=1" : key.name == ConfigKey.mdnsTxt.name ? "a=b" : "/bin/true"
    case .absolutePath: return "/tmp"
    case .socketPath: return "/run/netlifed-test/control.sock"
    case .address(let peer): return peer ? "127.0.0.1:9" : "127.0.0.1:0"
    case .users, .groups, .groupName, .programUser: return "root"
    case .glob: return "/nonexistent/conf.d/*.conf"
    case .serviceType: return "_http._tcp"
    case .label: return "web"
    case .name: return key.section == .listener ? "echo" : "line"
    case .pressureTrigger: return "some 150ms 2s"
    }
}

@Suite struct ConfigKeyTests {
    @Test func eachKeyIsOnceInTheTableAndWhatItNeedsIsAKeyOfTheTable() {
        #expect(Set(ConfigKey.all).count == ConfigKey.all.count)
        #expect(ConfigKey.all.count >= 60)
        for key in ConfigKey.all {
            #expect(ConfigKey.named(key.name, in: key.section) == key)
            #expect(!key.help.isEmpty && !key.help.contains("\n"), "\(key)")
            if let needed = key.requires {
                #expect(ConfigKey.all.contains { $0.name == needed }, "\(key) needs \(needed), which is no key")
            }
        }
        #expect(ConfigKey.named("voip", in: .app) == nil && ConfigKey.named("user", in: .app) == .user)
    }

    @Test(arguments: ConfigKey.all)
    func theReaderRefusesABadValueWithTheMessageItsEntryWords(_ key: ConfigKey) {
        for (value, message) in badValues(key) {
            // The reader alone.
            #expect(throws: ConfigValueError(message), "\(key) = \(value)") {
                try key.value(value, floor: key == .keepalive ? keepaliveMinimum : nil)
            }
            // In a config, on the key's line; include's glob is also looked for.
            let text = context(key, "\(key.name) = \(value)")
            let line = text.split(separator: "\n", omittingEmptySubsequences: false).count - 1
            let found = configErrors(text)
            #expect(found.contains("t.conf:\(line): \(message)"), "\(key) = \(value): \(found)")
            #expect(found.allSatisfy { $0.hasPrefix("t.conf:\(line): ") }, "\(key) = \(value): \(found)")
        }
    }

    @Test(arguments: ConfigKey.all)
    func theReaderAcceptsTheBoundsOfEachRangeAndNothingOutside(_ key: ConfigKey) throws {
        switch key.type {
        case .duration(let range, let off, let floor):
            let low = floor == nil ? range.lowerBound : keepaliveMinimum
            let read = { (text: String) throws(ConfigValueError) in try key.value(text, floor: floor == nil ? nil : keepaliveMinimum) }
            #expect(try read(low.configText) == .duration(low))
            #expect(try read(range.upperBound.configText) == .duration(range.upperBound))
            #expect(throws: ConfigValueError.self) { try read("\((range.upperBound + .milliseconds(1)).nanoseconds / 1_000_000)ms") }
            if low > .zero {
                #expect(throws: ConfigValueError.self) { try read("\((low - .milliseconds(1)).nanoseconds / 1_000_000)ms") }
            }
            if let off { #expect(try read(off) == .duration(nil)) }
        case .wholeNumber(let range, _, _):
            #expect(try key.value("\(range.lowerBound)") == .number(range.lowerBound))
            #expect(try key.value("\(range.upperBound)") == .number(range.upperBound))
            #expect(throws: ConfigValueError.self) { try key.value("\(range.lowerBound - 1)") }
            if range.upperBound < Int.max { #expect(throws: ConfigValueError.self) { try key.value("\(range.upperBound + 1)") } }
        case .choice(let words):
            for word in words { #expect(try key.value(word) == .word(word)) }
        case .boolean:
            for (word, value) in [("yes", true), ("no", false), ("true", true), ("off", false), ("1", true), ("0", false)] {
                #expect(try key.value(word) == .boolean(value))
            }
        case .pressureTrigger(let off):
            // The kernel's bounds: a window of 500ms to 10s, a stall above 0 and at most the window.
            #expect(try key.value("some 1ms 500ms") == .pressureTrigger(PressureTrigger(kind: .some, stall: .milliseconds(1), window: .milliseconds(500))))
            #expect(try key.value("full  10s\t10s") == .pressureTrigger(PressureTrigger(kind: .full, stall: .seconds(10), window: .seconds(10))))
            #expect(try key.value(off) == .pressureTrigger(nil))
            for outside in ["some 1ms 499ms", "some 10s 10001ms", "some 0 500ms", "full 501ms 500ms", "Some 1ms 2s"] {
                #expect(throws: ConfigValueError.self, "\(outside)") { try key.value(outside) }
            }
        default:
            break
        }
    }

    @Test(arguments: ConfigKey.all)
    func everyKeyIsReadAndStoredInItsSectionAndItsDefaultIsTheSectionsOwn(_ key: ConfigKey) throws {
        let value = try #require(goodValue(key))
        let text = context(key, "\(key.name) = \(value)")
        #expect(configErrors(text) == [], "\(text)")
        guard key.defaultValue != nil else { return }
        let without = context(key, "")
        let written = try ConfigLoader.parse(text, file: "t.conf", services: .builtin)
        let omitted = try ConfigLoader.parse(without, file: "t.conf", services: .builtin)
        #expect(written == omitted, "\(key) = \(value) is not its section's default")
    }
}
