// A listener's own response header fields (`header = NAME: VALUE`, repeatable), as nginx's `add_header ...
// always`: Strict-Transport-Security on a TLS listener, a Content-Security-Policy, a Cache-Control. Each is
// checked when the config is read: a field name is an RFC 9110 token, a value visible characters and spaces,
// and the fields netlifed writes itself, which frame or route the message, may not be set.

import NetLife

/// The `header` key: parsing and adding.
enum ResponseHeaders {
    /// Fields netlifed sets itself and a config may not set: they frame the message or describe its body.
    static let reserved: Set<String> = [
        "content-length", "transfer-encoding", "connection", "content-range", "content-type", "date", "server",
        "etag", "last-modified", "accept-ranges", "keep-alive", "upgrade", "trailer", "location", "allow",
    ]

    /// One `header` value, `Name: value`.
    static func parse(_ text: String) -> Result<HTTPHeader, ServiceOptionError> {
        guard let colon = text.firstIndex(of: ":") else {
            return .failure(ServiceOptionError(key: "header", "header must be NAME: VALUE, got '\(text.prefix(200))'"))
        }
        let name = String(text[..<colon])
        let value = String(String(text[text.index(after: colon)...]).drop { $0 == " " || $0 == "\t" })
        guard !name.isEmpty, name.utf8.allSatisfy(HTTPSyntax.isTokenChar) else {
            return .failure(ServiceOptionError(key: "header", "header: '\(name.prefix(100))' is not a field name (letters, digits and !#$%&'*+-.^_`|~)"))
        }
        guard !value.isEmpty, value.utf8.count <= 4096, value.utf8.allSatisfy({ $0 == 0x20 || $0 == 0x09 || (0x21...0x7E).contains($0) }) else {
            return .failure(ServiceOptionError(key: "header", "header \(name): the value must be 1 to 4096 visible characters and spaces"))
        }
        guard !reserved.contains(HTTPSyntax.lowercased(name)) else {
            return .failure(ServiceOptionError(key: "header", "header \(name) is netlifed's own to set"))
        }
        return .success(HTTPHeader(name: name, value: value))
    }

    /// `head` (a response head ending in an empty line) with `headers` before its end.
    static func adding(_ headers: [HTTPHeader], to head: String) -> String {
        guard !headers.isEmpty, head.hasSuffix("\r\n\r\n") else { return head }
        // On the bytes: "\r\n" is one Character in a Swift String.
        return String(decoding: head.utf8.dropLast(2), as: UTF8.self) + headers.map { "\($0.name): \($0.value)\r\n" }.joined() + "\r\n"
    }
}
