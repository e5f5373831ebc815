// The daemon's downloads (`netlifectl download`, `transfers`): each runs for an app under a background task,
// as TN2277's "Beyond the basics" asks. When the task expires, the app suspends or stops, the download
// pauses (its part and record stay on disk); when the app comes back to the foreground it resumes with
// Range and If-Range. The transfer itself is NetLifeServices' Download.

import NetLife
import NetLifeControl
import NetLifeServices

/// Every download of every app.
final class Transfers {
    private final class Entry {
        let app: String
        let download: any Transfer
        weak var owner: App?
        var task: BackgroundTaskIdentifier = 0

        init(app: App, download: any Transfer) {
            self.app = app.name
            self.owner = app
            self.download = download
        }
    }

    private var entries: [Entry] = []
    private unowned let loop: EventLoop
    private let logger: Logger

    init(loop: EventLoop, logger: Logger) {
        self.loop = loop
        self.logger = logger
    }

    /// Starts (or resumes) downloading `url` to `output` for `app`.
    func start(app: App, url text: String, output: String) -> Result<TransferInfo, ControlError> {
        let url: URLParts
        do {
            url = try URLParts(parsing: text)
        } catch {
            return .failure(ControlError(.badRequest, "bad URL '\(text.prefix(256))': \(error.message)"))
        }
        guard output.hasPrefix("/"), !output.hasSuffix("/"), output.utf8.count < 4000 else {
            return .failure(ControlError(.badRequest, "--output must be an absolute path of a file, got '\(output.prefix(256))'"))
        }
        switch app.state {
        case .inactive, .active, .background: break
        case .suspended, .notRunning:
            return .failure(ControlError(.invalidTransition, "app \(app.name) is \(app.state): a download needs a running app (foreground it first)"))
        }
        if let running = entries.first(where: { $0.download.output == output && $0.download.state == .running }) {
            return .failure(ControlError(.badRequest, "\(output) is already being downloaded by app \(running.app)"))
        }
        let download: any Transfer
        switch makeDownload(url: url, output: output, loop: loop, logger: logger.labeled("app \(app.name)")) {
        case .success(let made): download = made
        case .failure(let error): return .failure(error)
        }
        entries.removeAll { $0.download.output == output }
        let entry = Entry(app: app, download: download)
        entry.download.onChange = { [weak self, weak entry] _ in
            guard let self, let entry else { return }
            changed(entry)
        }
        entries.append(entry)
        run(entry)
        return .success(info(entry))
    }

    /// What `transfers` shows, for one app or all.
    func list(app: String?) -> [TransferInfo] {
        entries.filter { app == nil || $0.app == app }.map(info)
    }

    /// Follows the apps: a download pauses when its app is suspended or stops, and resumes when the app
    /// comes back to the foreground.
    func appEvent(_ app: App, _ event: AppEvent) {
        let mine = entries.filter { $0.owner === app }
        guard !mine.isEmpty else { return }
        switch event {
        case .stateChanged(_, .suspended):
            for entry in mine { entry.download.pause("the app was suspended") }
        case .stateChanged(.background, .inactive), .stateChanged(.suspended, .inactive):
            for entry in mine {
                if case .paused = entry.download.state { run(entry) }
            }
        case .stopped:
            for entry in mine { entry.download.pause("the app stopped") }
        default:
            break
        }
    }

    private func run(_ entry: Entry) {
        guard let app = entry.owner else { return }
        if entry.task == 0 {
            entry.task = app.beginBackgroundTask(name: "download \(entry.download.output)") { [weak entry] in
                entry?.download.pause("the background time ran out")
            }
        }
        entry.download.start()
    }

    private func changed(_ entry: Entry) {
        guard entry.download.state != .running, entry.task != 0 else { return }
        let task = entry.task
        entry.task = 0
        _ = entry.owner?.endBackgroundTask(task)
    }

    private func info(_ entry: Entry) -> TransferInfo {
        let download = entry.download
        let (state, reason): (String, String?) = switch download.state {
        case .idle: ("paused", "not started")
        case .running: ("running", nil)
        case .paused(let why): ("paused", why)
        case .done: ("done", nil)
        case .failed(let why): ("failed", why)
        }
        return TransferInfo(app: entry.app, url: download.url.description, output: download.output,
                            bytes: download.bytesDone, total: download.total, state: state, reason: reason)
    }
}
