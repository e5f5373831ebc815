// Where netlifectl's requests go: the control socket on this host (`--control`, $NETLIFE_CONTROL, or the
// default for this user), or the one on another host over ssh (`-H [USER@]HOST`, as `systemctl -H` and
// `docker -H ssh://`). For another host netlifectl runs `ssh HOST netlifectl --bridge`, whose standard input
// and output netlifectl there copies to and from its control socket: the protocol is the same line for line,
// so exit statuses, --json and watch behave as on this host, and the daemon there judges the request by the
// ssh user (its SO_PEERCRED is the bridge's). $NETLIFE_SSH names another ssh command (with its options), as
// $SYSTEMD_SSH does for systemctl.

@preconcurrency import Glibc
import NetLifeControl

/// Where the requests of one netlifectl run go.
final class ControlTarget {
    /// The control socket's path given with --control (on the far host with -H).
    let controlPath: String?
    /// The host given with -H, if any.
    let host: String?
    /// The far host's one connection: each ssh costs a login, so a run that asks several times (a download
    /// followed to its end) asks over the same bridge.
    private var remote: ControlClient?

    init(controlPath: String?, host: String?) {
        self.controlPath = controlPath
        self.host = host
    }

    /// Whether `text` can be an ssh destination: `HOST` or `USER@HOST`, never an option (a leading `-`) nor
    /// anything a shell or ssh would split.
    static func isHost(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 255, !text.hasPrefix("-") else { return false }
        return text.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "._-@:[]%".unicodeScalars.contains(scalar)
        }
    }

    /// A connection for one exchange: a new one to this host's socket, or the far host's bridge.
    func connect() throws(ControlClient.Failure) -> ControlClient {
        guard let host else { return try ControlTool.connect(controlPath) }
        if let remote { return remote }
        let client = try Self.bridge(to: host, controlPath: controlPath)
        remote = client
        return client
    }

    /// The ssh command line that runs the bridge on `host`.
    static func sshArguments(host: String, controlPath: String?, environment: [String: String]) -> [String] {
        let ssh = environment["NETLIFE_SSH"].map { $0.split(separator: " ").map(String.init) }.flatMap { $0.isEmpty ? nil : $0 } ?? ["ssh"]
        var command = "netlifectl --bridge"
        if let controlPath { command += " --control " + shellQuoted(controlPath) }
        return ssh + ["-T", "--", host, command]
    }

    /// `text` as one word of a POSIX shell: in single quotes, each `'` written `'\''`.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    /// Starts ssh with one end of a socket pair as its standard input and output; the other end is the
    /// connection. ssh's own messages (a host key, a refused login) go to netlifectl's standard error.
    private static func bridge(to host: String, controlPath: String?) throws(ControlClient.Failure) -> ControlClient {
        try ControlClient(spawning: sshArguments(host: host, controlPath: controlPath, environment: processEnvironment()),
                          to: host)
    }
}

extension ControlTool {
    /// `netlifectl --bridge`, what `-H` runs on the far host: copies standard input to the control socket and
    /// the socket to standard output until both ends are done, so that the netlifectl at the other end of ssh
    /// speaks to this host's daemon. A socket that cannot be reached is said on standard error (ssh carries it
    /// back) with exit status 3.
    static func bridge(controlPath: String?) -> Int32 {
        let client: ControlClient
        do throws(ControlClient.Failure) {
            client = try connect(controlPath)
        } catch {
            switch error {
            case .unreachable(let message), .broken(let message): printError("netlifectl: \(message)")
            }
            return Exit.unreachable
        }
        return client.relay(input: 0, output: 1) ? Exit.ok : Exit.unreachable
    }
}
