// Adapter, kept small on purpose: the data sockets report their protocol's figures generically
// (DataProtocolStatus, a name and a value each), while the control protocol's SocketInfo still has one member
// for each figure of the built-in protocols (line: lines, lastLine; imap: exists, existsUpdates, expunges,
// idle). These accessors read the figures by the names those protocols report them under, so that the reply
// fills SocketInfo as before and `status` shows the same. Once SocketInfo carries the details as they come,
// this file goes.

import NetLife

extension DataProtocolStatus {
    var lines: Int? { count("lines") }
    var lastLine: String? { if case .text(let text)? = self["lastLine"] { text } else { nil } }
    var exists: Int? { count("exists") }
    var existsUpdates: Int? { count("existsUpdates") }
    var expunges: Int? { count("expunges") }
    var idle: Bool? { if case .flag(let flag)? = self["idle"] { flag } else { nil } }

    private func count(_ name: String) -> Int? {
        if case .count(let count)? = self[name] { count } else { nil }
    }
}
