// The control commands, one entry each (see ControlCommand.swift), in the order of netlifectl's help. The
// daemon keys a handler by each entry (NetLifeDaemon's ControlCommands.handlers).

extension ControlCommand {
    public static let status = ControlCommand("status", [appIfAny], access: .readOnly, summary: "Show the state of every app, or of APP.")
    public static let launch = ControlCommand("launch", [app, ControlArgument(.background, .flag("--background"))],
                                              summary: "Launch a not-running app (into the background with --background).")
    public static let foreground = ControlCommand("foreground", [app],
                                                  summary: "Bring a background or suspended app to the foreground; reopens its listeners.")
    public static let background = ControlCommand("background", [app], summary: "Send an active app to the background; closes its listeners.")
    public static let suspend = ControlCommand("suspend", [app], summary: "Suspend a background app (pending until it is suspend-eligible).")
    public static let reclaim = ControlCommand("reclaim", [app],
                                               summary: "Reclaim the sockets of a suspended app: its peers see a reset (VoIP sockets excepted).")
    public static let lock = ControlCommand("lock", access: .daemon, summary: "Lock the screen: the foreground apps go to the background, then every suspended app's sockets are reclaimed.")
    public static let terminate = ControlCommand("terminate", [app], summary: "Terminate an app (will-terminate runs, unless it is suspended).")
    /// An interruption of an active app begins (will-resign-active; it rests inactive) or ends.
    public static let interruptBegin = ControlCommand("interrupt-begin", [app],
                                                      summary: "Interrupt an active app (an incoming call, a system sheet): will-resign-active; it rests inactive, listeners open.")
    public static let interruptEnd = ControlCommand("interrupt-end", [app], summary: "End an app's interruption: did-become-active.")
    /// `free`: the bytes to free (suspended apps are ended largest first until they are); absent: end every
    /// suspended app. Plain bytes: the config's K/M/G suffixes are read by the daemon's parser, which
    /// netlifectl does not link.
    public static let memoryPressure = ControlCommand("memory-pressure", [
        with(ControlArgument(.free, required: false, .option("--free", metavar: "BYTES"))) { $0.meaning = "takes a whole number of bytes (no suffix)" },
    ], oneWord: true, access: .daemon, summary: "Terminate suspended apps without callbacks, largest first, until BYTES (a plain number of bytes) are freed, or all of them; VoIP apps last, and relaunched into the background.")
    public static let taskBegin = ControlCommand("task-begin", [
        app, with(ControlArgument(.name, required: false, .option("--name", metavar: "N"))) { $0.maxBytes = ControlProtocol.maxTaskNameBytes },
    ], summary: "Begin a background task; prints its id (refused: the reason on stderr, exit status 1).")
    public static let taskEnd = ControlCommand("task-end", [app, ControlArgument(.id, .positional("ID"))], summary: "End a background task.")
    public static let taskList = ControlCommand("task-list", [app], access: .readOnly, summary: "List an app's open background tasks.")
    public static let mode = ControlCommand("mode", [app, with(ControlArgument(.mode, .positional("MODE"))) { $0.values = ["idle", "continuous"] }],
                                            summary: "Set an app's background execution mode.")
    /// `output` absent: the daemon's state directory (downloads/APP/NAME). `outputDirectory`: the device and
    /// inode ("DEV:INO") of the directory `output` names as the client sees it, so that a daemon which sees
    /// another directory at that path (systemd's PrivateTmp=, ProtectHome=) refuses rather than write where
    /// the client will never look.
    public static let download = ControlCommand("download", [
        app, ControlArgument(.url, .positional("URL")),
        with(ControlArgument(.output, required: false, .option("--output", metavar: "PATH"))) { $0.isPath = true },
        ControlArgument(.outputDirectory, required: false, .directoryIdentity(of: .output)),
    ] + tlsArguments, localFlags: ["--no-wait"], summary: "Hand a resumable download (http, https, ftp, ftps) to an app (into the state directory's downloads/APP/ without --output); waits (with a progress bar on a terminal) until it finishes or pauses, unless --no-wait. TLS: the server's certificate is verified against the system's trust store, or --cacert FILE; --insecure verifies nothing; --ssl-reqd requires TLS (AUTH TLS) on ftp://.")
    public static let upload = ControlCommand("upload", [
        app, with(ControlArgument(.file, .positional("FILE"))) { $0.isPath = true }, ControlArgument(.url, .positional("URL")),
    ] + tlsArguments.prefix(2), localFlags: ["--no-wait"], summary: "Hand a resumable upload (http, https) to an app; waits (with a progress bar on a terminal) until it finishes or pauses, unless --no-wait. TLS as for download.")
    /// How a transfer checks its server over TLS, with curl's option names (`--ssl-reqd`, for ftp://, last).
    static let tlsArguments = [
        with(ControlArgument(.caFile, required: false, .option("--cacert", metavar: "FILE"))) { $0.isPath = true },
        ControlArgument(.insecure, required: false, .flag("--insecure")),
        ControlArgument(.sslRequired, required: false, .flag("--ssl-reqd")),
    ]
    public static let transfers = ControlCommand("transfers", [appIfAny], access: .readOnly, summary: "Show downloads and uploads.")
    /// Stops and forgets the transfers chosen by id, app or URL (at least one; all given must match).
    public static let transfersCancel = ControlCommand("transfers-cancel", [
        with(ControlArgument(.id, required: false, .positional("ID"))) {
            $0.minimum = 1
            $0.meaning = "must be a transfer's id (a whole number, see 'netlifectl transfers')"
        },
        ControlArgument(.app, required: false, .option("--app", metavar: "APP")),
        ControlArgument(.url, required: false, .option("--url", metavar: "URL")),
    ], resolvesApp: false, needsOne: true,
       summary: "Stop transfers and forget them: their part files and records are removed (a finished file stays).")
    public static let watch = ControlCommand("watch", [appIfAny], access: .readOnly, summary: "Print lifecycle events as they happen.")
    public static let reload = ControlCommand("reload", access: .daemon, summary: "Reload the config file (nothing changes if it has errors).")
    public static let version = ControlCommand("version", access: .readOnly, summary: "Print netlifectl's and netlifed's versions.")
    public static let debugStall = ControlCommand("debug-stall", [ControlArgument(.duration, .positional("DURATION"))], access: .daemon,
                                                  summary: "Block the event loop (needs [daemon] debug-commands = yes).")

    /// Every command, in the order of netlifectl's help.
    public static let all: [ControlCommand] = [
        status, launch, foreground, background, suspend, reclaim, lock, terminate, interruptBegin, interruptEnd,
        memoryPressure, taskBegin, taskEnd, taskList, mode, download, upload, transfers, transfersCancel, watch, reload,
        version, debugStall,
    ]

    private static let app = ControlArgument(.app, .positional("APP"))
    private static let appIfAny = ControlArgument(.app, required: false, .positional("APP"))

    private static func with(_ argument: ControlArgument, _ change: (inout ControlArgument) -> Void) -> ControlArgument {
        var argument = argument
        change(&argument)
        return argument
    }
}
