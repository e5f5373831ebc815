// The daemon's transfers (`netlifectl download`, `transfers`): each runs for an app under a background task,
// as TN2277's "Beyond the basics" asks. When the task expires, the app suspends or stops, the transfer
// pauses (a download's part and record stay on disk); when the app comes back to the foreground it resumes
// (Range and If-Range). The transfers themselves are NetLifeServices' shells (Download, FTPDownload).
//
// The list of unfinished transfers is kept in `transfers.json` in the state directory (written atomically on
// every change), so that a daemon killed with `kill -9`, or restarted, resumes them: each is made again
// from its journal entry (a download's part and record say where it stopped) and runs as soon as its app
// does. Each transfer has an id, kept in the journal, that `transfers cancel` names; a cancel stops the
// transfer and removes it with its part and record, so a mistyped URL is not retried on every foreground.

@preconcurrency import Glibc
import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeServices

/// Every transfer of every app.
final class Transfers {
    private final class Entry {
        let id: UInt64
        /// The app's name: an App object can be replaced by a reload, its name stays.
        let app: String
        let transfer: any Transfer
        var task: BackgroundTaskIdentifier = 0
        /// The App whose background task `task` is.
        weak var taskOwner: App?
        /// Whether the app's lifecycle (not an error) paused it, since it last ran: netlifectl tells the two
        /// apart by exit status.
        var pausedByApp = false
        /// Its `bytesDone` when its bytes were last counted in `moved` (a restored transfer's bytes of an
        /// earlier run are not this daemon's).
        var counted: Int

        init(id: UInt64, app: String, transfer: any Transfer) {
            self.id = id
            self.app = app
            self.transfer = transfer
            counted = transfer.bytesDone
        }
    }

    /// Bytes each app's transfers moved (downloads written to disk, uploads taken by the server), by app and
    /// by direction (download, upload), for `/metrics`: counted from each transfer's progress; a transfer that
    /// starts over counts its bytes again as they come.
    private var moved: [String: [UInt64]] = [:]

    private var entries: [Entry] = []
    /// The id the next new transfer gets: above every id in the journal, so ids are never reused.
    private var nextID: UInt64 = 1
    private unowned let loop: EventLoop
    private let logger: Logger
    /// Where the unfinished transfers are listed; nil keeps no journal.
    private let journalPath: String?
    private var lastJournal: String?
    /// Finds an app by name (the supervisor's current one).
    var appNamed: (String) -> App? = { _ in nil }
    /// The idle and low-speed limits of the transfers made from now on.
    var limits: TransferLimits
    private var curl: CurlMulti?

    init(loop: EventLoop, logger: Logger, journalPath: String?, limits: TransferLimits = .defaults) {
        self.loop = loop
        self.logger = logger
        self.journalPath = journalPath
        self.limits = limits
    }

    /// The state directory: where the journal is, and downloads without --output go (`downloads/APP/`).
    private var stateDirectory: String? { journalPath.map(directoryName) }

    /// Starts (or resumes) downloading `url` to `output` for `app`; `output` nil: into the state directory,
    /// named after the URL (DownloadPlace). `clientSees`: the identity of output's directory as netlifectl saw it.
    /// `owner`: whose rights the files are used with (nil: the daemon's own, for root and the daemon's uid).
    func download(app: App, url text: String, output: String?, clientSees: String? = nil, tls: TransferTLS = .verified,
                  owner: FileCredentials? = nil) -> Result<TransferStatus, ControlError> {
        if let refusal = Self.cannotActFor(owner) { return .failure(refusal) }
        guard let output else {
            guard let stateDirectory else {
                return .failure(ControlError(.badRequest, "netlifed keeps no state directory: give --output PATH"))
            }
            if let owner {
                return .failure(ControlError(.badRequest, "give --output PATH in a directory you can write: without it the file would go to \(stateDirectory)/downloads/\(app.name)/, which belongs to netlifed, not to uid \(owner.uid)"))
            }
            let url: URLParts
            do {
                url = try URLParts(parsing: text)
            } catch {
                return .failure(ControlError(.badRequest, "bad URL '\(text.prefix(256))': \(error.message)"))
            }
            var directory = stateDirectory + "/downloads"
            for path in [directory, directory + "/" + app.name] {
                directory = path
                if let error = makeDirectory(path) {
                    return .failure(ControlError(.badRequest, "cannot make \(path) for the download: \(error)"))
                }
            }
            return start(.download, app: app, url: text, file: directory + "/" + DownloadPlace.fileName(urlPath: url.path), what: "--output", tls: tls, owner: nil)
        }
        if output.hasPrefix("/"), !output.hasSuffix("/"),
           let refusal = DownloadPlace.refusal(for: output, clientSees: clientSees, app: app.name, stateDirectory: stateDirectory, owner: owner) {
            return .failure(refusal)
        }
        return start(.download, app: app, url: text, file: output, what: "--output", tls: tls, owner: owner)
    }

    /// Starts (or resumes) uploading `file` to `url` for `app`; the file is read with `owner`'s rights.
    func upload(app: App, file: String, url text: String, tls: TransferTLS = .verified, owner: FileCredentials? = nil) -> Result<TransferStatus, ControlError> {
        if let refusal = Self.cannotActFor(owner) { return .failure(refusal) }
        guard file.hasPrefix("/") else {
            return .failure(ControlError(.badRequest, "FILE must be an existing regular file, got '\(file.prefix(256))'"))
        }
        do throws(RegularFile.Failure) {
            _ = try RegularFile.open(file, .readOnly, as: owner)
        } catch {
            let who = owner.map { " as uid \($0.uid)" } ?? ""
            return .failure(ControlError(.badRequest, "FILE must be an existing regular file you can read, got '\(file.prefix(256))': cannot read it\(who) (\(error.systemError(file)))"))
        }
        return start(.upload, app: app, url: text, file: file, what: "FILE", tls: tls, owner: owner)
    }

    /// Why a request whose files need `owner`'s rights cannot run here: this netlifed cannot take another
    /// user's identity for files (no CAP_SETUID and CAP_SETGID, or a system call filter that blocks setfsuid).
    private static func cannotActFor(_ owner: FileCredentials?) -> ControlError? {
        guard let owner, !FileCredentials.isAvailable else { return nil }
        return ControlError(.permissionDenied, "netlifed cannot open files with the rights of uid \(owner.uid) (it needs CAP_SETUID and CAP_SETGID and the setfsuid, setfsgid and setgroups system calls), so it runs transfers only for root and uid \(geteuid()); see \"Who may do what\" in docs/operations.md")
    }

    /// The TLS choices with the `--cacert` file's contents, read with `owner`'s rights (libcurl gets the bytes,
    /// never the path); an error naming the file when it cannot be read.
    private static func loadingCertificates(_ tls: TransferTLS, as owner: FileCredentials?) -> Result<TransferTLS, ControlError> {
        guard let caFile = tls.caFile else { return .success(tls) }
        let read = try? FileCredentials.acting(as: owner) { RegularFile.read(caFile, limit: maxCertificateBytes) }
        switch read {
        case .success(let bytes)?:
            var loaded = tls
            loaded.caCertificates = bytes
            return .success(loaded)
        case .failure(let failure)?:
            let who = owner.map { " as uid \($0.uid)" } ?? ""
            return .failure(ControlError(.badRequest, "--cacert \(caFile.prefix(256)): cannot read it\(who): \(failure)"))
        case nil:
            return .failure(ControlError(.permissionDenied, "--cacert \(caFile.prefix(256)): netlifed cannot take uid \(owner?.uid ?? 0)'s rights to read it"))
        }
    }

    /// The largest `--cacert` file read (Debian's whole trust store is about 200 KiB).
    static let maxCertificateBytes = 4 << 20

    /// The largest transfer list read back at the start.
    static let maxJournalBytes = 1 << 16

    private func start(_ direction: TransferDirection, app: App, url text: String, file: String, what: String, tls: TransferTLS,
                       owner: FileCredentials?) -> Result<TransferStatus, ControlError> {
        let url: URLParts
        do {
            url = try URLParts(parsing: text)
        } catch {
            return .failure(ControlError(.badRequest, "bad URL '\(text.prefix(256))': \(error.message)"))
        }
        guard file.hasPrefix("/"), !file.hasSuffix("/"), file.utf8.count < 4000 else {
            return .failure(ControlError(.badRequest, "\(what) must be an absolute path of a file, got '\(file.prefix(256))'"))
        }
        switch app.state {
        case .inactive, .active, .background: break
        case .suspended, .notRunning:
            return .failure(ControlError(.invalidTransition, "app \(app.name) is \(app.state): a transfer needs a running app (foreground it first)"))
        }
        if let running = entries.first(where: { $0.transfer.output == file && $0.transfer.direction == direction && $0.transfer.state == .running }) {
            return .failure(ControlError(.badRequest, "\(file) is already being \(direction == .download ? "downloaded" : "uploaded") by app \(running.app)"))
        }
        let transfer: any Transfer
        switch make(direction, app: app.name, url: url, file: file, tls: tls, owner: owner) {
        case .success(let made): transfer = made
        case .failure(let error): return .failure(error)
        }
        for replaced in entries where replaced.transfer.output == file && replaced.transfer.direction == direction { count(replaced) }
        entries.removeAll { $0.transfer.output == file && $0.transfer.direction == direction }
        let entry = add(id: nil, app: app.name, transfer)
        run(entry)
        return .success(info(entry))
    }

    /// The shell for one transfer, not started. An upload's record (the server's upload resource) lives in
    /// the state directory, named after the file and the URL.
    private func make(_ direction: TransferDirection, app: String, url: URLParts, file: String, tls tlsChoices: TransferTLS,
                      owner: FileCredentials?) -> Result<any Transfer, ControlError> {
        let tls: TransferTLS
        switch Self.loadingCertificates(tlsChoices, as: owner) {
        case .success(let loaded): tls = loaded
        case .failure(let error): return .failure(error)
        }
        let logger = logger.labeled("app \(app)").adding(field: "NETLIFE_APP", app)
        guard let curl = curlMulti() else { return .failure(ControlError(.unsupported, "libcurl cannot make a multi handle")) }
        switch direction {
        case .download:
            return makeDownload(url: url, output: file, tls: tls, owner: owner, curl: curl, loop: loop, logger: logger, limits: limits)
        case .upload:
            guard let journalPath else {
                return .failure(ControlError(.unsupported, "uploads need a state directory for their records"))
            }
            if tls.required { return .failure(ControlError(.badRequest, "--ssl-reqd is for ftp:// downloads")) }
            var digest = SHA256Digest()
            digest.update(Array((file + "\n" + url.description).utf8))
            let name = digest.finish().prefix(16).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
            let record = directoryName(journalPath) + "/upload-" + name + ".json"
            return .success(Upload(file: file, url: url, recordPath: record, tls: tls, owner: owner, curl: curl, loop: loop, logger: logger, limits: limits))
        }
    }

    /// Pauses what still runs and frees libcurl's handle (the daemon is ending).
    func close() {
        for entry in entries where entry.transfer.state == .running { entry.transfer.pause("netlifed is stopping") }
        curl?.close()
        curl = nil
    }

    /// The one libcurl multi handle of the daemon's transfers, made on first use.
    private func curlMulti() -> CurlMulti? {
        if let curl { return curl }
        curl = CurlMulti(loop: loop, logger: logger)
        return curl
    }

    /// What `transfers` shows, for one app or all.
    /// How many transfers of `app` run now.
    func runningCount(app: String) -> Int {
        entries.filter { $0.app == app && $0.transfer.state == .running }.count
    }

    func list(app: String?) -> [TransferStatus] {
        entries.filter { app == nil || $0.app == app }.map(info)
    }

    /// Follows the apps: a transfer pauses when its app is suspended or stops, and resumes when the app
    /// comes to the foreground or is launched.
    func appEvent(_ app: App, _ event: AppEvent) {
        // Only state changes concern transfers: the other events (a listener opening, 1,000 of them on one
        // `foreground`) return before any search.
        switch event {
        case .stateChanged, .stopped, .reclaimed: break
        default: return
        }
        let mine = entries.filter { $0.app == app.name }
        guard !mine.isEmpty else { return }
        switch event {
        case .stateChanged(_, .suspended):
            for entry in mine { pauseForApp(entry, "the app was suspended") }
        case .stateChanged(.background, .inactive), .stateChanged(.suspended, .inactive),
             .stateChanged(.notRunning, .inactive), .stateChanged(.notRunning, .background):
            for entry in mine where Self.waits(entry) { run(entry) }
        case .stopped:
            for entry in mine { pauseForApp(entry, "the app stopped") }
        case .reclaimed:
            // The connections a transfer holds are the app's too (a paused transfer holds none).
            for entry in mine { entry.transfer.resetConnections() }
        default:
            break
        }
    }

    /// Pauses a transfer for its app's lifecycle (not an error), remembering which it was.
    private func pauseForApp(_ entry: Entry, _ reason: String) {
        if entry.transfer.state == .running { entry.pausedByApp = true }
        entry.transfer.pause(reason)
    }

    /// Stops the transfers with `id`, of `app` and of `url` (each that is given must match), removes the
    /// files they kept to resume from and forgets them (the journal too). Replies with what was removed; an
    /// error when nothing matches. The files are removed after the disk work the transfers queued (a paused
    /// download's last record), off the loop, and `reply` is called then.
    /// `refusal` says why the requester may not cancel a transfer of an app (nil: it may); when it may not
    /// cancel one of those chosen, nothing is cancelled. The files are removed with the rights of whoever
    /// asked for each transfer.
    func cancel(id: UInt64?, app: String?, url: String?, refusal: (String) -> ControlError? = { _ in nil },
                reply: @escaping (Result<TransfersCancelReply, ControlError>) -> Void) {
        // A URL matches as given or as the transfer list spells it (`transfers` shows the parsed form).
        let spellings = url.map { [$0] + [(try? URLParts(parsing: $0))?.description].compactMap { $0 } }
        let chosen = entries.filter { entry in
            (id == nil || entry.id == id) && (app == nil || entry.app == app)
                && (spellings == nil || spellings?.contains(entry.transfer.url.description) == true)
        }
        guard !chosen.isEmpty else {
            let what = [id.map { "id \($0)" }, app.map { "app \($0.prefix(256))" }, url.map { "URL \($0.prefix(256))" }]
                .compactMap { $0 }.joined(separator: " and ")
            return reply(.failure(ControlError(.unknownTransfer, "no transfer with \(what) (see netlifectl transfers)")))
        }
        for entry in chosen { if let refused = refusal(entry.app) { return reply(.failure(refused)) } }
        var cancelled: [TransferStatus] = []
        var doomed: [(path: String, owner: FileCredentials?)] = []
        for entry in chosen {
            // The pause closes its connections and files and, through changed(), ends its background task.
            if entry.transfer.state == .running { entry.transfer.pause("cancelled") }
            count(entry)
            entry.transfer.onChange = nil
            endTask(entry)
            var info = info(entry)
            info.state = .cancelled
            cancelled.append(info)
            switch entry.transfer.state {
            case .done: break   // a finished download's part became the file; an upload's record is gone
            case .idle, .running, .paused, .failed:
                // An upload's record is in the state directory: the daemon's own.
                let owner = entry.transfer.direction == .download ? entry.transfer.owner : nil
                doomed += entry.transfer.resumeFiles.map { ($0, owner) }
            }
            logger.info("app \(entry.app): \(entry.transfer.direction.rawValue) \(entry.id) of \(entry.transfer.url) cancelled")
        }
        entries.removeAll { entry in chosen.contains { $0 === entry } }
        saveJournal()
        let answer = { (removed: [String]) in reply(.success(TransfersCancelReply(cancelled: cancelled, removed: removed))) }
        let remove = { @Sendable (files: [(path: String, owner: FileCredentials?)]) -> [String] in
            files.filter { file in
                (try? FileCredentials.acting(as: file.owner) { () throws(SystemError) in try FileCalls.remove(file.path) }) == true
            }.map(\.path)
        }
        guard let disk = curl?.disk else { return answer(remove(doomed)) }
        let removed = RemovedFiles()
        let files = doomed
        disk.run({ removed.paths = remove(files) }, done: { _ in answer(removed.paths) })
    }

    // MARK: The journal

    /// Makes again the transfers an earlier run left unfinished, paused; each runs once its app runs
    /// (`resumeRestored()` for the apps launched at start, `appEvent` for the others).
    func restore() {
        guard let journalPath else { return }
        if let error = makeDirectory(directoryName(journalPath)) {
            logger.error("state-directory \(directoryName(journalPath)): \(error); unfinished transfers will not survive a restart")
            return
        }
        let text: String
        switch RegularFile.read(journalPath, limit: Self.maxJournalBytes) {
        case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
        case .failure(.system(let error)) where error.errno.rawValue == ENOENT: return
        case .failure(let failure):
            logger.warning("\(journalPath): cannot read it (\(failure)); starting without it")
            return
        }
        let list: [JSON]
        do {
            list = try TransferJournal(json: JSON.parse(text)).entries
        } catch {
            logger.warning("\(journalPath): not a transfer list (\(error)); starting without it")
            return
        }
        for item in list.prefix(1024) {
            let entry: JournalEntry
            do {
                entry = try JournalEntry(json: item)
            } catch {
                logger.warning("\(journalPath): skipping an entry that does not read: \(error)")
                continue
            }
            let (app, direction, urlText, output) = (entry.app, entry.direction, entry.url, entry.output)
            let tls = entry.tls?.tls ?? .verified
            guard let url = try? URLParts(parsing: urlText),
                  !entries.contains(where: { $0.transfer.output == output && $0.transfer.direction == direction }) else { continue }
            guard appNamed(app) != nil else {
                logger.warning("\(journalPath): app \(app) is no longer configured; not resuming \(urlText.prefix(256))")
                continue
            }
            // An entry without an id (an older journal) or with one already taken gets a new one.
            let recorded = entry.id >= 1 && entry.id < 9_000_000_000_000_000 ? entry.id : nil
            let id = recorded.flatMap { id in entries.contains { $0.id == id } ? nil : id }
            let owner: FileCredentials?
            switch Self.owner(entry.owner) {
            case .success(let found): owner = found
            case .failure(let reason):
                logger.warning("app \(app): not resuming \(urlText.prefix(256)) (\(output)): \(reason.message)")
                continue
            }
            switch make(direction, app: app, url: url, file: output, tls: tls, owner: owner) {
            case .success(let transfer):
                _ = add(id: id, app: app, transfer)
                logger.info("app \(app): \(direction.rawValue) of \(url) (\(output)) will resume at \(transfer.bytesDone) bytes")
            case .failure(let error):
                logger.warning("app \(app): not resuming \(url): \(error.message)")
            }
        }
        saveJournal()
    }

    /// Runs the restored transfers whose app is running (after the apps were launched).
    func resumeRestored() {
        for entry in entries {
            guard Self.waits(entry), let app = appNamed(entry.app) else { continue }
            switch app.state {
            case .inactive, .active, .background: run(entry)
            case .suspended, .notRunning: break
            }
        }
    }

    /// Whether the transfer waits to be run: paused, or restored and not started yet.
    private static func waits(_ entry: Entry) -> Bool {
        switch entry.transfer.state {
        case .idle, .paused: return true
        case .running, .done, .failed: return false
        }
    }

    /// Writes the unfinished transfers (running, paused or not started), if the list changed.
    private func saveJournal() {
        guard let journalPath else { return }
        let unfinished = entries.filter {
            switch $0.transfer.state {
            case .idle, .running, .paused: return true
            case .done, .failed: return false
            }
        }
        let items: [JSON] = unfinished.map { entry in
            JournalEntry(id: entry.id, app: entry.app, direction: entry.transfer.direction, url: entry.transfer.url.text,
                         output: entry.transfer.output, tls: JournalEntry.TLSChoices(entry.transfer.tls),
                         owner: entry.transfer.owner.map { owner in
                             JournalEntry.Owner(uid: Int(owner.uid), gid: Int(owner.gid), groups: owner.groups.map(Int.init))
                         }).json
        }
        let text = TransferJournal(entries: items).json.serialized + "\n"
        guard text != lastJournal else { return }
        if let error = SystemError.catching({ () throws(SystemError) in try FileCalls.writeAtomically(journalPath, Array(text.utf8)) }) {
            logger.error("cannot write the transfer list \(journalPath): \(error)")
            return
        }
        lastJournal = text
    }

    /// The identity a journal entry's files are used with: nil (the daemon's own) when it has none; a
    /// failure when that user cannot be acted for any more (removed, or this netlifed cannot take another
    /// user's identity). Its groups are those it had when it asked, less any it has left since.
    static func owner(_ recorded: JournalEntry.Owner?) -> Result<FileCredentials?, ControlError> {
        guard let recorded else { return .success(nil) }
        // (uid_t)-1 and (gid_t)-1 mean "no change" to the kernel: never an identity.
        func id(_ value: Int) -> UInt32? { value >= 0 && value < 4294967295 ? UInt32(value) : nil }
        guard let uid = id(recorded.uid), let gid = id(recorded.gid) else {
            return .failure(ControlError(.badRequest, "its requester does not read back"))
        }
        let groups = recorded.groups.prefix(65536).compactMap(id)
        guard let user = getpwuid(uid) else {
            return .failure(ControlError(.permissionDenied, "it was asked for by uid \(uid), which no longer exists"))
        }
        guard FileCredentials.isAvailable else {
            return .failure(ControlError(.permissionDenied, "it was asked for by uid \(uid), and this netlifed cannot take that user's rights for files (it needs CAP_SETUID and CAP_SETGID)"))
        }
        let primary = user.pointee.pw_gid
        var count: Int32 = 256
        var current = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(user.pointee.pw_name, primary, &current, &count) < 0, count > 256, count <= 65536 {
            current = [gid_t](repeating: 0, count: Int(count))
            _ = getgrouplist(user.pointee.pw_name, primary, &current, &count)
        }
        let now = Set(current.prefix(Int(max(0, count))))
        return .success(FileCredentials(uid: uid, gid: gid == primary || now.contains(gid) ? gid : primary,
                                        groups: groups.filter { now.contains($0) }))
    }

    // MARK: Running

    /// Lists a transfer under `id` (a restored one's), or under a new id.
    private func add(id: UInt64?, app: String, _ transfer: any Transfer) -> Entry {
        let id = id ?? nextID
        nextID = max(nextID, id + 1)
        let entry = Entry(id: id, app: app, transfer: transfer)
        entry.transfer.onChange = { [weak self, weak entry] _ in
            guard let self, let entry else { return }
            changed(entry)
        }
        entries.append(entry)
        saveJournal()
        return entry
    }

    private func run(_ entry: Entry) {
        guard let app = appNamed(entry.app) else { return }
        entry.pausedByApp = false
        if entry.task == 0 || entry.taskOwner !== app {
            entry.taskOwner = app
            entry.task = app.beginBackgroundTask(name: "\(entry.transfer.direction.rawValue) \(entry.transfer.output)") { [weak self, weak entry] in
                guard let self, let entry else { return }
                pauseForApp(entry, "the background time ran out")
            }
        }
        entry.transfer.start()
    }

    /// Adds what `entry` moved since it was last counted.
    private func count(_ entry: Entry) {
        let done = entry.transfer.bytesDone
        defer { entry.counted = done }
        guard done > entry.counted else { return }
        let index = entry.transfer.direction == .download ? 0 : 1
        moved[entry.app, default: [0, 0]][index] &+= UInt64(done - entry.counted)
    }

    /// What each app's transfers moved so far, by direction (download, upload), the running ones' progress
    /// included.
    var movedBytes: [String: [UInt64]] {
        for entry in entries { count(entry) }
        return moved
    }

    private func changed(_ entry: Entry) {
        count(entry)
        saveJournal()
        guard entry.transfer.state != .running else { return }
        endTask(entry)
    }

    /// Ends the transfer's background task, if it holds one.
    private func endTask(_ entry: Entry) {
        guard entry.task != 0 else { return }
        let task = entry.task
        entry.task = 0
        _ = entry.taskOwner?.endBackgroundTask(task)
        entry.taskOwner = nil
    }

    private func info(_ entry: Entry) -> TransferStatus {
        let transfer = entry.transfer
        let (state, reason, error): (TransferStatus.State, String?, Bool) = switch transfer.state {
        case .idle: (.paused, "waiting for the app to run", false)
        case .running: (.running, nil, false)
        case .paused(let why): (.paused, why, !entry.pausedByApp)
        case .done: (.done, nil, false)
        case .failed(let why): (.failed, why, true)
        }
        return TransferStatus(id: entry.id, app: entry.app, direction: transfer.direction, url: transfer.url.description, output: transfer.output,
                            bytes: transfer.bytesDone, total: transfer.total, state: state, reason: reason, error: error)
    }
}

/// The directory part of `path` (`/` for a file at the root, `.` for a bare name).
func directoryName(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    let directory = String(path[..<slash])
    return directory.isEmpty ? "/" : directory
}

/// Creates `path` (mode 0700) unless it is already a directory; the error otherwise.
func makeDirectory(_ path: String) -> SystemError? {
    let previous = umask(0o077)
    defer { umask(previous) }
    do throws(SystemError) {
        try FileCalls.makeDirectory(path, permissions: 0o700)
        return nil
    } catch {
        var info = stat()
        if error.errno.rawValue == EEXIST, stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { return nil }
        return SystemError("mkdir", error.errno)
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// The files a cancel removed, filled in on the disk queue and read on the loop after it is done.
private final class RemovedFiles: @unchecked Sendable {
    var paths: [String] = []
}
