// A service's records (an access log sent to the journal) go through its app's logger, so that they carry
// the app's name and follow the daemon's log level.

extension App {
    /// The app's logger, labelled `app NAME`.
    public var serviceLogger: Logger { logger }
}
