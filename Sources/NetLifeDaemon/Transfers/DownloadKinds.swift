// Which shell downloads a URL, by its scheme.

import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeServices

/// The download for `url` (not started), or why there is none.
func makeDownload(url: URLParts, output: String, loop: EventLoop, logger: Logger, limits: TransferLimits) -> Result<any Transfer, ControlError> {
    switch url.scheme {
    case .http:
        return .success(Download(url: url, output: output, loop: loop, logger: logger, limits: limits))
    case .ftp:
        return .success(FTPDownload(url: url, output: output, loop: loop, logger: logger, limits: limits))
    }
}
