// What the tests of the config reader share: the errors a config text gets, as --check-config prints them.

@testable import NetLifeDaemon
import NetLifeServices

/// The errors of `text` read as the file `t.conf` with the built-in services (none for a good config).
func configErrors(_ text: String) -> [String] {
    do {
        _ = try ConfigLoader.parse(text, file: "t.conf", services: .builtin)
        return []
    } catch {
        return error.errors.map(\.description)
    }
}
