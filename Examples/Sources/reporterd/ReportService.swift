// The `report` service: a client sends `REPORT N`, and the app writes N lines, one every 50 ms: a long
// operation, run under a background task so that it goes on when the app is sent to the background, as
// an iOS app does with beginBackgroundTaskWithExpirationHandler. When the background time runs
// out, the expiration handler writes `TRUNCATED`, lets the connection flush in a restricted run loop, and
// ends the task.

import NetLife

final class ReportService: Service, ConnectionDelegate {
    static let descriptor = ServiceDescriptor(name: "report", optionKeys: ["interval"]) { options throws(ServiceOptionError) in
        var interval = Duration.milliseconds(50)
        if let text = options["interval"] {
            guard let ms = Int(text), ms > 0 else { throw ServiceOptionError(key: "interval", "interval must be milliseconds, like 50") }
            interval = .milliseconds(ms)
        }
        return ReportService(interval: interval)
    }

    private let interval: Duration
    private weak var app: App?
    private var reports: [ObjectIdentifier: Report] = [:]

    init(interval: Duration) { self.interval = interval }

    func didAttach(to app: App) { self.app = app }

    func serve(_ connection: Connection) {
        connection.delegate = self
        connection.output.append("READY\n")
        connection.flush()
    }

    func connectionDidRead(_ connection: Connection) {
        while case .line(let bytes) = connection.input.readLine(maxLength: 128) {
            let words = String(decoding: bytes, as: UTF8.self).split(separator: " ")
            guard words.count == 2, words[0] == "REPORT", let count = Int(words[1]), count > 0 else {
                connection.output.append("ERROR usage: REPORT N\n")
                connection.flush()
                continue
            }
            start(count: count, on: connection)
        }
    }

    func connectionDidClose(_ connection: Connection, error: SystemError?) {
        reports.removeValue(forKey: ObjectIdentifier(connection))?.finish()
    }

    private func start(count: Int, on connection: Connection) {
        guard let app, reports[ObjectIdentifier(connection)] == nil else { return }
        let report = Report(app: app, connection: connection, count: count, interval: interval)
        reports[ObjectIdentifier(connection)] = report
        report.begin()
    }
}

/// One report in progress: its background task and its timer.
final class Report {
    private unowned let app: App
    private let connection: Connection
    private let count: Int
    private let interval: Duration
    private var written = 0
    private var task = BackgroundTaskRegistry.invalid
    private var timer: AppTimer?

    init(app: App, connection: Connection, count: Int, interval: Duration) {
        self.app = app
        self.connection = connection
        self.count = count
        self.interval = interval
    }

    func begin() {
        // Ask for background time before the long operation, and give it back when done (or expired).
        task = app.beginBackgroundTask(name: "report") { [weak self] in self?.expire() }
        timer = app.schedule(after: interval) { [weak self] in self?.writeNextLine() }
    }

    private func writeNextLine() {
        written += 1
        connection.output.append("line \(written) of \(count)\n")
        connection.flush()
        if written == count {
            connection.output.append("DONE\n")
            connection.close(.afterFlush)
            finish()
        } else {
            timer = app.schedule(after: interval) { [weak self] in self?.writeNextLine() }
        }
    }

    /// The background time is nearly spent: say so, let the connection flush what it holds without letting
    /// anything else of the app run, and end the task.
    private func expire() {
        timer?.cancel()
        connection.output.append("TRUNCATED after \(written) of \(count)\n")
        connection.flush()
        let flushed = app.runLoop(serving: [connection], timeout: .milliseconds(500)) { connection.output.isEmpty }
        connection.close(flushed ? .afterFlush : .reset)
        finish()
    }

    func finish() {
        timer?.cancel()
        timer = nil
        if task != BackgroundTaskRegistry.invalid {
            app.endBackgroundTask(task)
            task = BackgroundTaskRegistry.invalid
        }
    }
}
