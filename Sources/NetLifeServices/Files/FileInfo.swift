// What netlife knows of a regular file from its `fstat`: what the http service answers a GET with, and what
// an upload checks that its file has not changed.

/// What the responder needs to know about a regular file (from `fstat` of the opened file).
public struct FileInfo: Equatable, Sendable {
    /// The size in bytes (`st_size`), not negative.
    public var size: Int
    /// The modification time (`st_mtim.tv_sec`): seconds since 1970.
    public var modifiedSeconds: Int64
    /// The nanoseconds of the modification time (`st_mtim.tv_nsec`), 0 to 999 999 999.
    public var modifiedNanoseconds: Int
    /// The inode number (`st_ino`): a file replaced by another (a rename over it) has another.
    public var inode: UInt64

    /// A file of this size, modification time and inode.
    public init(size: Int, modifiedSeconds: Int64, modifiedNanoseconds: Int = 0, inode: UInt64) {
        self.size = size
        self.modifiedSeconds = modifiedSeconds
        self.modifiedNanoseconds = modifiedNanoseconds
        self.inode = inode
    }
}
