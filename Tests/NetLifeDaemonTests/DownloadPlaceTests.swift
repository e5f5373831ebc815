// Where a download goes without --output (the URL's last path segment, as curl -O and wget name it), and
// the refusals of an --output netlifed cannot use: a directory it cannot see, one it sees as another than
// the client does, one it cannot write.

import Glibc
import NetLifeControl
@testable import NetLifeDaemon
import NetLifeTestSupport
import Testing

@Suite struct DownloadPlaceTests {
    @Test func theNameIsTheLastPathSegmentDecodedWhenThatStaysOneName() {
        #expect(DownloadPlace.fileName(urlPath: "/files/report.pdf") == "report.pdf")
        #expect(DownloadPlace.fileName(urlPath: "/a%20b.txt") == "a b.txt")
        #expect(DownloadPlace.fileName(urlPath: "/.hidden") == ".hidden")
        // Nothing to name it after: wget's index.html.
        #expect(DownloadPlace.fileName(urlPath: "/") == "index.html")
        #expect(DownloadPlace.fileName(urlPath: "/dir/") == "index.html")
        // A decoded name that would leave its directory or is not text: the segment as written.
        #expect(DownloadPlace.fileName(urlPath: "/x/..%2F..%2Fetc%2Fpasswd") == "..%2F..%2Fetc%2Fpasswd")
        #expect(DownloadPlace.fileName(urlPath: "/a%00b") == "a%00b")
        #expect(DownloadPlace.fileName(urlPath: "/%FF") == "%FF")
        #expect(DownloadPlace.fileName(urlPath: "/%2e%2e") == "%2e%2e")
        #expect(DownloadPlace.fileName(urlPath: "/bad%zz") == "bad%zz")
        #expect(DownloadPlace.fileName(urlPath: "/..") == "index.html")
        #expect(DownloadPlace.fileName(urlPath: "/" + String(repeating: "n", count: 300)) == "index.html")
    }

    @Test func anOutputIsRefusedWhenNetlifedCannotSeeItsDirectoryOrSeesAnother() throws {
        let scratch = TemporaryDirectory()
        defer { scratch.remove() }
        let directory = scratch.path
        let output = directory + "/f.bin"
        let identity = try #require(fileIdentity(directoryOf: output))
        #expect(DownloadPlace.refusal(for: output, clientSees: identity, app: "a", stateDirectory: "/var/lib/netlifed") == nil)
        #expect(DownloadPlace.refusal(for: output, clientSees: nil, app: "a", stateDirectory: nil) == nil)
        let other = DownloadPlace.refusal(for: output, clientSees: "1:2", app: "a", stateDirectory: "/var/lib/netlifed")
        #expect(other?.message.contains("netlifed sees another \(directory) than netlifectl does") == true, "\(String(describing: other))")
        #expect(other?.message.contains("without --output the file goes to /var/lib/netlifed/downloads/a/") == true)
        let missing = DownloadPlace.refusal(for: directory + "/none/f.bin", clientSees: nil, app: "a", stateDirectory: nil)
        #expect(missing?.message.contains("cannot see the directory \(directory)/none (No such file or directory)") == true, "\(String(describing: missing))")
        #expect(missing?.message.contains("ReadWritePaths=\(directory)/none") == true)
    }

    @Test func anOutputInAReadOnlyDirectoryIsRefusedWithTheRemedy() {
        // /proc/self is read-only for root too (EACCES or EROFS, never writable).
        let refusal = DownloadPlace.refusal(for: "/proc/self/f.bin", clientSees: nil, app: "a", stateDirectory: nil)
        #expect(refusal?.message.contains("netlifed cannot write in /proc/self") == true, "\(String(describing: refusal))")
    }
}
