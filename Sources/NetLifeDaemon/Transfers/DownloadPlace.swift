// Where a download's file goes. Without `--output`, into the state directory (systemd's StateDirectory=,
// /var/lib/netlifed under the unit, the one place the sandbox lets netlifed write without a drop-in):
// `downloads/APP/NAME`, NAME the last segment of the URL's path as curl -O and wget name it (index.html for a
// path that ends in `/`). With `--output`, the directory must be one netlifed can write, and the same one the
// client named: under the unit, PrivateTmp= gives netlifed a /tmp of its own and ProtectHome= an empty
// /home, so a path the client means can name another directory, or none, for the daemon. Each refusal says
// what to do (a ReadWritePaths= drop-in, or no --output).

@preconcurrency import Glibc
import NetLifeControl
import NetLifeEvent

enum DownloadPlace {
    /// The file name a download of a URL with this path (percent-encoded, as URLParts keeps it) gets.
    static func fileName(urlPath: String) -> String {
        let segment = String(urlPath.split(separator: "/", omittingEmptySubsequences: false).last ?? "")
        if let decoded = percentDecoded(segment), isPlainName(decoded) { return decoded }
        return isPlainName(segment) ? segment : "index.html"
    }

    /// A name that stays in its directory: not empty, `.` or `..`, no `/` or NUL, at most 200 bytes (room
    /// for the part file's suffix within NAME_MAX).
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && name.utf8.count <= 200 && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0)
    }

    /// `%XX` decoded; nil when an escape is malformed or the bytes are not UTF-8.
    static func percentDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Why netlifed will not write `output` (nil: it will). `clientSees` is the identity ("DEV:INO") of the
    /// directory as netlifectl saw it; nil when the client did not say. `stateDirectory` names the place a
    /// download without --output would go. Every look is taken with `owner`'s identity (nil: the daemon's),
    /// so a directory that user cannot reach or write is refused here, before anything is created; the
    /// kernel checks each file call again when it is made.
    static func refusal(for output: String, clientSees: String?, app: String, stateDirectory: String?,
                        owner: FileCredentials? = nil) -> ControlError? {
        do {
            return try FileCredentials.acting(as: owner) {
                refusalWithIdentity(for: output, clientSees: clientSees, app: app, stateDirectory: stateDirectory, owner: owner)
            }
        } catch {
            return ControlError(.permissionDenied, "netlifed cannot take the rights of \(owner.map(\.description) ?? "the requester"): \(error)")
        }
    }

    private static func refusalWithIdentity(for output: String, clientSees: String?, app: String, stateDirectory: String?,
                                            owner: FileCredentials?) -> ControlError? {
        let directory = directoryName(output)
        let who = owner.map { "uid \($0.uid)" } ?? "netlifed"
        let instead = owner == nil ? stateDirectory.map { "; without --output the file goes to \($0)/downloads/\(app)/" } ?? "" : ""
        let remedy = "under the systemd unit, a drop-in with ReadWritePaths=\(directory) lets netlifed write there\(instead)"
        let mine = fileIdentity(directoryOf: output)
        guard let mine else {
            let why = Errno.current
            return ControlError(.badRequest, "\(who) cannot see the directory \(directory) (\(why)): it may be hidden from netlifed (the unit's ProtectHome=, PrivateTmp=); \(remedy)")
        }
        if let clientSees, clientSees != mine {
            return ControlError(.badRequest, "netlifed sees another \(directory) than netlifectl does (the unit's PrivateTmp= gives it a /tmp of its own, ProtectHome= an empty /home): the file would be where you cannot find it; \(remedy)")
        }
        guard faccessat(AT_FDCWD, directory, W_OK | X_OK, AT_EACCESS) == 0 else {
            let why = Errno.current
            return ControlError(.badRequest, "\(who) cannot write in \(directory) (\(why))\(owner == nil ? "; \(remedy)" : "")")
        }
        var place = stat()
        guard stat(directory, &place) == 0 else { return ControlError(.badRequest, "\(who) cannot see \(directory) (\(Errno.current))") }
        var existing = stat()
        if lstat(output, &existing) == 0 {
            if existing.st_mode & S_IFMT == S_IFDIR { return ControlError(.badRequest, "\(output) is a directory: --output names the file to write") }
            // The finished file replaces what is at OUTPUT (a rename): a link there would be replaced, not
            // written through, which is not what whoever made it meant.
            if existing.st_mode & S_IFMT == S_IFLNK {
                return ControlError(.badRequest, "\(output) is a symbolic link: the download would replace the link, not write where it points; name the file itself")
            }
            // In a sticky directory (/tmp) only the file's owner or the directory's may replace it: the
            // kernel would refuse the final rename, after the whole download.
            if let owner, place.st_mode & S_ISVTX != 0, existing.st_uid != owner.uid, place.st_uid != owner.uid {
                return ControlError(.badRequest, "\(output) belongs to uid \(existing.st_uid) in the sticky directory \(directory): uid \(owner.uid) may not replace it")
            }
        }
        // The part, its record and the record's temporary file are created and written by name: a link or
        // anything but a regular file there (planted by anyone) is refused, never followed.
        for name in [output + ".part", output + ".part.meta", output + ".part.meta.tmp"] {
            var info = stat()
            guard lstat(name, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFLNK {
                return ControlError(.badRequest, "\(name) is a symbolic link: netlifed never follows one at a download's part or record; remove it")
            }
            if info.st_mode & S_IFMT != S_IFREG {
                return ControlError(.badRequest, "\(name) is \(RegularFile.kind(info.st_mode)), not a download's part or record; remove it")
            }
        }
        return nil
    }
}
