// Which shell downloads a URL, by its scheme.

import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeServices

/// The download for `url` (not started), or why there is none.
func makeDownload(url: URLParts, output: String, tls: TransferTLS, owner: FileCredentials?, curl: CurlMulti, loop: EventLoop, logger: Logger,
                  limits: TransferLimits) -> Result<any Transfer, ControlError> {
    if tls.required && url.scheme != .ftp {
        return .failure(ControlError(.badRequest, "--ssl-reqd is for ftp:// URLs (https and ftps are TLS already)"))
    }
    switch url.scheme {
    case .http, .https:
        return .success(Download(url: url, output: output, tls: tls, owner: owner, curl: curl, loop: loop, logger: logger, limits: limits))
    case .ftp, .ftps:
        return .success(FTPDownload(url: url, output: output, tls: tls, owner: owner, curl: curl, loop: loop, logger: logger, limits: limits))
    }
}
