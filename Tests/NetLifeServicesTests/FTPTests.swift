// The FTP downloader's pure core (ResumableFTPDownload): when a part is resumed with REST and when it starts
// over, driven event by event as its libcurl shell drives it. The wire (SIZE, MDTM, EPSV, REST, RETR) is
// libcurl's; the real server is in the integration tests (FTPDownloadTests, with pyftpdlib).

@testable import NetLifeServices
import Testing

private typealias Action = ResumableFTPDownload.Action

private let ftpURL = try! URLParts(parsing: "ftp://127.0.0.1:2121/pub/f.bin")
/// 2026-11-29 10:00:00 UTC, and the HTTP-date the record keeps for it.
private let modified: Int64 = 1_795_946_400
private let validator = DownloadValidator.lastModified(HTTPRanges.httpDate(modified))

/// A download that an earlier run left at `offset` bytes of a 1000-byte file, started again.
private func resumed(at offset: Int, partSize: Int? = nil, total: Int? = 1000) -> (ResumableFTPDownload, [Action]) {
    let record = DownloadRecord(url: ftpURL, validator: validator, total: total, offset: offset)
    var download = ResumableFTPDownload(url: ftpURL, existing: record, partSize: partSize ?? offset)
    let actions = download.start()
    return (download, actions)
}

@Suite(.timeLimit(.minutes(1)))
struct FTPTests {
    @Test func theRecordKeepsTheModificationTimeAsAnHTTPDate() {
        #expect(validator == .lastModified("Sun, 29 Nov 2026 10:00:00 GMT"))
    }

    @Test func aFreshDownloadIsProbedRetrievedAndRenamed() {
        var download = ResumableFTPDownload(url: ftpURL, existing: nil, partSize: 0)
        #expect(download.start() == [.report(.running), .probe])
        let record = DownloadRecord(url: ftpURL, validator: validator, total: 1000)
        #expect(download.probed(size: 1000, modified: modified) == [.closeConnection, .truncatePart(to: 0), .writeRecord(record), .retrieve(from: 0)])
        #expect(download.bodyBytes(600) == [] && download.bodyBytes(400) == [])
        #expect(download.retrieved() == [.renameIntoPlace])
        #expect(download.state == .running, "done only once the part is in place")
        #expect(download.renamed() == [.removeRecord, .report(.done)])
        #expect(download.state == .done && download.bytesDone == 1000)
    }

    @Test func aPausedDownloadResumesWithRESTWhenSizeAndTimeMatch() {
        var (download, actions) = resumed(at: 400)
        #expect(actions == [.report(.running), .probe])
        #expect(download.probed(size: 1000, modified: modified) == [.retrieve(from: 400)])
        #expect(download.bodyBytes(600) == [])
        #expect(download.retrieved() == [.renameIntoPlace])
    }

    @Test func anotherSizeOrTimeOrNoneStartsOverFromZero() {
        let answers: [(Int?, Int64?)] = [(999, modified), (1000, modified + 1), (1000, nil), (nil, modified), (nil, nil)]
        for (size, time) in answers {
            var (download, _) = resumed(at: 400)
            let fresh = DownloadRecord(url: ftpURL, validator: time.map { .lastModified(HTTPRanges.httpDate($0)) }, total: size)
            #expect(download.probed(size: size, modified: time) == [.closeConnection, .truncatePart(to: 0), .writeRecord(fresh), .retrieve(from: 0)],
                    "\(String(describing: size)) \(String(describing: time))")
            #expect(download.bytesDone == 0)
        }
    }

    @Test func withoutSIZETheLengthIsWhatCame() {
        var download = ResumableFTPDownload(url: ftpURL, existing: nil, partSize: 0)
        _ = download.start()
        _ = download.probed(size: nil, modified: modified)
        _ = download.bodyBytes(321)
        #expect(download.retrieved() == [.renameIntoPlace])
        #expect(download.total == 321)
    }

    @Test func anEmptyFileIsCompleteWithoutRETR() {
        var download = ResumableFTPDownload(url: ftpURL, existing: nil, partSize: 0)
        _ = download.start()
        let record = DownloadRecord(url: ftpURL, validator: validator, total: 0)
        #expect(download.probed(size: 0, modified: modified) == [.closeConnection, .truncatePart(to: 0), .writeRecord(record), .renameIntoPlace])
        #expect(download.renamed() == [.removeRecord, .report(.done)])
    }

    @Test func aCompletePartIsRenamedWithoutRETR() {
        var (download, _) = resumed(at: 1000)
        #expect(download.probed(size: 1000, modified: modified) == [.renameIntoPlace])
        #expect(download.renamed() == [.removeRecord, .report(.done)])
    }

    @Test func aPartLongerThanItsRecordIsCutBack() {
        let (_, actions) = resumed(at: 400, partSize: 450)
        #expect(actions == [.report(.running), .truncatePart(to: 400), .probe])
    }

    @Test func restRefusedStartsOverFromZero() {
        var (download, _) = resumed(at: 400)
        _ = download.probed(size: 1000, modified: modified)
        let fresh = DownloadRecord(url: ftpURL, validator: validator, total: 1000)
        #expect(download.restRefused() == [.closeConnection, .truncatePart(to: 0), .writeRecord(fresh), .retrieve(from: 0)])
        #expect(download.restRefused() == [], "a retrieval from 0 needs no REST")
    }

    @Test func aLengthOtherThanSIZEIsNeverRenamed() {
        var (download, _) = resumed(at: 400)
        _ = download.probed(size: 1000, modified: modified)
        _ = download.bodyBytes(100)
        let short = download.retrieved()
        #expect(short.last == .report(.paused("the transfer ended after 500 of 1000 bytes")))
        #expect(!short.contains(.renameIntoPlace))

        (download, _) = resumed(at: 400)
        _ = download.probed(size: 1000, modified: modified)
        let long = download.bodyBytes(601)
        #expect(long.prefix(2) == [.closeConnection, .truncatePart(to: 1000)])
        #expect(long.last == .report(.failed("server sent more than the 1000 bytes of the file")))
    }

    @Test func recordsAreWrittenEveryIntervalAndAtThePause() {
        var download = ResumableFTPDownload(url: ftpURL, existing: nil, partSize: 0, recordInterval: 100)
        _ = download.start()
        _ = download.probed(size: 1000, modified: modified)
        #expect(download.bodyBytes(60) == [])
        guard case .writeRecord(let record) = download.bodyBytes(60).first else {
            Issue.record("no record after 120 bytes")
            return
        }
        #expect(record.offset == 120)
        let paused = download.pause("the app was suspended")
        #expect(paused == [.closeConnection, .writeRecord(DownloadRecord(url: ftpURL, validator: validator, total: 1000, offset: 120)),
                           .report(.paused("the app was suspended"))])
    }

    @Test func brokenConnectionsPauseAndRefusalsFail() {
        var (download, _) = resumed(at: 400)
        #expect(download.connectionFailed("Connection refused").last == .report(.paused("Connection refused")))
        (download, _) = resumed(at: 400)
        #expect(download.requestFailed("TLS: certificate verify failed").last == .report(.failed("TLS: certificate verify failed")))
        #expect(download.start() == [.report(.running), .probe], "a failed download can be started again")
    }

    @Test func eventsOutOfPlaceChangeNothing() {
        var download = ResumableFTPDownload(url: ftpURL, existing: nil, partSize: 0)
        #expect(download.probed(size: 1, modified: 1) == [] && download.bodyBytes(5) == [] && download.retrieved() == [])
        #expect(download.renamed() == [] && download.pause("x") == [] && download.restRefused() == [])
        _ = download.start()
        #expect(download.start() == [] && download.bodyBytes(5) == [] && download.retrieved() == [] && download.renamed() == [])
        var http = ResumableFTPDownload(url: try! URLParts(parsing: "https://h/f"), existing: nil, partSize: 0)
        #expect(http.start().last == .report(.failed("https is not an FTP URL")))
    }
}
