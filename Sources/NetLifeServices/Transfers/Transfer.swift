// What the daemon's transfer list (`transfers`, `netlifectl download` and `upload`) needs of one transfer,
// whatever its protocol: HTTP and HTTPS downloads (Download), FTP and FTPS downloads (FTPDownload),
// resumable HTTP and HTTPS uploads (Upload), all on libcurl. Each is a thin shell over a pure machine; this is only the face they show.

import NetLifeEvent
import NetLifeStatus

/// Where a transfer is, as `transfers` shows it.
public enum TransferState: Equatable, Sendable {
    /// Made, not started.
    case idle
    /// Connecting, sending, receiving or verifying.
    case running
    /// Stopped with what it has kept (part file and record, or the server's offset); `start()` resumes it.
    case paused(String)
    /// Finished: the file is in place (download) or the server has all of it (upload).
    case done
    /// Stopped for a reason a retry at once would not fix; `start()` tries again.
    case failed(String)
}

/// One resumable transfer run by an app on the event loop.
public protocol Transfer: AnyObject {
    /// The remote end.
    var url: URLParts { get }
    /// How the server is checked over TLS.
    var tls: TransferTLS { get }
    /// Whose rights the local files are used with: the requester's (nil: the daemon's own, for root's and
    /// the daemon's uid's requests).
    var owner: FileCredentials? { get }
    /// The local file: where a download goes, or what an upload sends.
    var output: String { get }
    var direction: TransferDirection { get }
    var state: TransferState { get }
    /// Bytes that are safe at the far end (upload) or on disk (download).
    var bytesDone: Int { get }
    /// The whole length, once known.
    var total: Int? { get }
    /// The files kept to resume from (a download's part and record, an upload's record), which cancelling
    /// the transfer removes once it is paused; never the finished file.
    var resumeFiles: [String] { get }
    /// Told after every change of state or progress worth showing.
    var onChange: ((any Transfer) -> Void)? { get set }
    /// Begins or resumes.
    func start()
    /// Stops, keeping what can be resumed from.
    func pause(_ reason: String)
    /// Resets the connections of the request running (RST), as a reclaim does; the transfer then pauses.
    func resetConnections()
}
