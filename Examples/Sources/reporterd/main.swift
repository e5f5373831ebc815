// reporterd: netlifed plus one app written in Swift. The config names the app `reporter` and gives it a
// listener with `service = report`; this program supplies the service and the app's delegate.

import Glibc
import NetLife
import NetLifeDaemon

/// The app's delegate: it logs its transitions and its background time, as an iOS app logs backgroundTimeRemaining.
final class ReporterDelegate: AppDelegate {
    private let logger = Logger(label: "reporter delegate")

    func appDidFinishLaunching(_ app: App) {
        log(app, "launched; multitasking \(app.isMultitaskingSupported ? "supported" : "not supported")")
    }

    func appDidEnterBackground(_ app: App) {
        let remaining = app.backgroundTimeRemaining.map { "\(Int($0.milliseconds)) ms" } ?? "unlimited"
        log(app, "entered the background with \(remaining) of background time")
    }

    func appWillEnterForeground(_ app: App) {
        log(app, "coming back to the foreground")
    }

    private func log(_ app: App, _ message: String) {
        logger.info(message)
    }
}

var services = ServiceRegistry.builtin
services.register(ReportService.descriptor)
exit(Daemon.main(services: services, delegates: ["reporter": { ReporterDelegate() }]))
