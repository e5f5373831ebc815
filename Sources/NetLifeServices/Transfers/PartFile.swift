// The files of one download, whatever its protocol (Download for HTTP and HTTPS, FTPDownload for FTP and FTPS): the partial
// file `OUTPUT.part`, opened for appending on first need, and its record `OUTPUT.part.meta`, replaced
// atomically after the part's bytes are on disk. The shells perform their machines' file actions here and
// turn an error into a pause.

@preconcurrency import Glibc
import NetLifeEvent

/// `OUTPUT.part` and `OUTPUT.part.meta`. Loop-confined, as its shell is; `close()` before letting it go.
final class PartFile {
    /// Where the finished file goes.
    let output: String
    /// The partial file.
    var path: String { output + ".part" }
    /// The record of what the partial file holds.
    var recordPath: String { output + ".part.meta" }
    private var fd: CInt = -1

    init(output: String) {
        self.output = output
    }

    /// What an earlier run left: the part's size (0 when there is none) and its record (nil when there is
    /// none or it does not decode).
    func leftOver() -> (size: Int, record: DownloadRecord?) {
        var info = stat()
        let size = stat(path, &info) == 0 ? Int(info.st_size) : 0
        return (size, readSmallFile(recordPath).flatMap(DownloadRecord.decode))
    }

    /// Opens the part for appending (creating it) unless it is open.
    private func open() -> SystemError? {
        if fd >= 0 { return nil }
        fd = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        return fd < 0 ? SystemError("open \(path)", Errno.current) : nil
    }

    /// Cuts the part to `length` bytes (creating it empty when it does not exist).
    func truncate(to length: Int) -> SystemError? {
        if let error = open() { return error }
        return ftruncate(fd, off_t(length)) == 0 ? nil : SystemError("ftruncate", Errno.current)
    }

    /// Writes `bytes` to the end of the part.
    func append(_ bytes: UnsafeRawBufferPointer) -> SystemError? {
        if let error = open() { return error }
        return writeAll(fd, bytes, to: path)
    }

    /// The record, atomically: the part's bytes reach the disk first, then the record replaces the old one.
    func writeRecord(_ record: DownloadRecord) -> SystemError? {
        if fd >= 0, let error = syncFile(fd, path) { return error }
        return writeFileAtomically(recordPath, Array(record.encoded().utf8))
    }

    /// Why the part may not go into place as the finished file: nil when it holds exactly `expectedLength`
    /// bytes, the entity's length. Whatever a machine believes, a file of another length (or of a length
    /// nobody knows, a machine's bug) is refused, so that a short or long file is never shown as finished.
    func lengthMismatch(expectedLength: Int?) -> String? {
        var info = stat()
        let size = stat(path, &info) == 0 ? Int(info.st_size) : 0
        guard let expectedLength else { return "the file's length is unknown; \(size) bytes not renamed into place" }
        return size == expectedLength ? nil : "the part holds \(size) bytes, not the \(expectedLength) of the file; not renamed into place"
    }

    /// fsyncs and closes the part, renames it to the output path and fsyncs the directory.
    func renameIntoPlace() -> SystemError? {
        if let error = open() { return error }
        let synced = syncFile(fd, path)
        close()
        return synced ?? renameFile(path, to: output) ?? syncDirectory(of: output)
    }

    /// Deletes the record.
    func removeRecord() -> SystemError? {
        removeFile(recordPath) ?? syncDirectory(of: recordPath)
    }

    /// Closes the part; the next write opens it again. Calling it again does nothing.
    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}

extension DownloadRecord {
    /// Where a download resumes from, for every protocol's machine: `existing` is the record read from the
    /// record file (nil when there is none or it did not decode), `partSize` the part's size on disk (0 when
    /// there is none). A record of another URL counts for nothing. When the record and the part disagree the
    /// smaller wins: a part shorter than the record lost bytes the record counted (its prefix is still
    /// good); bytes past the record's offset were written after the last record and are not vouched for,
    /// so the part must be cut back to it. Returns the record, its offset the bytes to keep, and whether the
    /// part must be cut to that offset.
    static func resumePoint(existing: DownloadRecord?, url: URLParts, partSize: Int) -> (record: DownloadRecord, cutPart: Bool) {
        let partSize = max(0, partSize)   // never negative from stat; clamped rather than trusted
        guard var record = existing, record.url == url else { return (DownloadRecord(url: url), partSize > 0) }
        record.offset = min(record.offset, partSize)
        return (record, partSize > record.offset)
    }
}
