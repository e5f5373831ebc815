// How many bytes a connection asks the kernel for on its next read, adapted to what the socket has been
// holding, as SwiftNIO's adaptive receive allocator does: a read that fills its space makes the next one four
// times larger at once; two reads in a row that would have fit in half the space make it half as large. A
// chatty connection (64-byte messages) settles at the smallest size, a bulk stream at the largest.
//
// Reads go straight into the connection's input evbuffer, whose blocks libevent sizes to the next power of
// two above the request plus a block header, so each size here is a power of two minus that header: a read
// fills exactly one block, with no second allocation of twice the size for a few header bytes.

/// The size of a connection's next read. A pure value: `record(_:)` takes what a read returned.
public struct ReadSizer: Equatable, Sendable {
    /// Room for libevent's block header (48 bytes in 2.1 on 64-bit), so that a read fills one block exactly.
    static let blockOverhead = 64
    /// log2 of the smallest block: 1 KiB, libevent's smallest.
    static let smallestShift: UInt8 = 10
    /// log2 of the largest block: 256 KiB. With 2 reads per readable event (`Connection.readsPerCallback`)
    /// one stream went 5.0 to 5.3 GB/s (medians) against 3.7 to 4.8 for 64 KiB x 4, 128 KiB x 2, 256 KiB x 4,
    /// 512 KiB x 1 and x 2, in alternating rounds with a load generator that was not itself the bottleneck
    /// (Benchmarks/README.md, "Read sizes, measured again").
    static let largestShift: UInt8 = 18
    /// log2 of the first read's block: the smallest. A new connection counts as chatty until a read fills
    /// its space, so a chatty peer's first message lands in the scratch area and makes no input buffer.
    static let initialShift: UInt8 = smallestShift

    // Two bytes of state (every connection holds a sizer); the size is computed from them.
    private var shift = ReadSizer.initialShift
    private var shrinkOnNextSmallRead = false

    public init() {}

    /// The bytes to ask for now.
    public var size: Int {
        @inline(__always) get { Self.size(shift: shift) }
    }

    /// Whether `size` is the smallest: the connection is chatty.
    public var isSmallest: Bool { shift == Self.smallestShift }

    /// The smallest and largest sizes `size` takes.
    public static let smallest = size(shift: smallestShift)
    public static let largest = size(shift: largestShift)

    @inline(__always)
    private static func size(shift: UInt8) -> Int { (1 &<< Int(shift)) &- blockOverhead }

    /// Takes what a read of `size` bytes returned (`got` > 0).
    @inline(__always)
    public mutating func record(_ got: Int) {
        if got >= size {
            resize(to: min(shift + 2, Self.largestShift))
        } else if shift > Self.smallestShift, got <= Self.size(shift: shift - 1) {
            if shrinkOnNextSmallRead {
                resize(to: shift - 1)
            } else {
                shrinkOnNextSmallRead = true
            }
        } else {
            shrinkOnNextSmallRead = false
        }
    }

    private mutating func resize(to newShift: UInt8) {
        shift = newShift
        shrinkOnNextSmallRead = false
    }
}
