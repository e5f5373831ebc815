// The services netlifed knows without any code from an app author.

import NetLife

extension ServiceRegistry {
    /// Every built-in service (`echo`, `http`) and data-socket protocol (`line`, `imap`).
    public static var builtin: ServiceRegistry {
        ServiceRegistry([EchoService.descriptor, HTTPService.descriptor], protocols: [LineProtocol.descriptor, IMAPProtocol.descriptor])
    }
}
