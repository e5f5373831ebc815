// The digests a server may announce for a download (`Repr-Digest: sha-256=:...:`, `Content-MD5`), computed
// incrementally over the file as it is read back in slices. Plain Swift: the toolchain on Linux has no
// hashing library of its own, and these two are small (FIPS 180-4, RFC 1321).

/// SHA-256, fed in pieces.
public struct SHA256Digest: Sendable {
    private var state: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
    private var blocks = DigestBlocks()

    public init() {}

    public mutating func update(_ bytes: some Sequence<UInt8>) {
        var blocks = self.blocks   // compress(_:) changes self: the blocks are taken out meanwhile
        blocks.feed(bytes) { compress($0) }
        self.blocks = blocks
    }

    /// The 32-byte digest; the value is not to be updated afterwards.
    public mutating func finish() -> [UInt8] {
        var blocks = self.blocks
        blocks.pad(bigEndian: true) { compress($0) }
        self.blocks = blocks
        return state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }
    }

    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    private mutating func compress(_ block: [UInt8]) {
        func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
        var w = [UInt32](repeating: 0, count: 64)
        for i in 0..<16 {
            for j in 0..<4 { w[i] = w[i] << 8 | UInt32(block[4 * i + j]) }
        }
        for i in 16..<64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7])
        for i in 0..<64 {
            let t1 = h &+ (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) &+ ((e & f) ^ (~e & g)) &+ Self.k[i] &+ w[i]
            let t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) &+ ((a & b) ^ (a & c) ^ (b & c))
            (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
        }
        for (index, value) in [a, b, c, d, e, f, g, h].enumerated() { state[index] &+= value }
    }
}

/// MD5, fed in pieces (only to check a server's `Content-MD5`).
public struct MD5Digest: Sendable {
    private var state: [UInt32] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476]
    private var blocks = DigestBlocks()

    public init() {}

    public mutating func update(_ bytes: some Sequence<UInt8>) {
        var blocks = self.blocks   // compress(_:) changes self: the blocks are taken out meanwhile
        blocks.feed(bytes) { compress($0) }
        self.blocks = blocks
    }

    /// The 16-byte digest; the value is not to be updated afterwards.
    public mutating func finish() -> [UInt8] {
        var blocks = self.blocks
        blocks.pad(bigEndian: false) { compress($0) }
        self.blocks = blocks
        return state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (8 * UInt32($0))) } }
    }

    private static let shifts: [UInt32] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21]
    /// floor(abs(sin(i + 1)) * 2^32), RFC 1321's table.
    private static let k: [UInt32] = [
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
        0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
        0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
        0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
        0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
        0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
        0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
    ]

    private mutating func compress(_ block: [UInt8]) {
        func rotl(_ x: UInt32, _ n: UInt32) -> UInt32 { (x << n) | (x >> (32 - n)) }
        var m = [UInt32](repeating: 0, count: 16)
        for i in 0..<16 {
            for j in 0..<4 { m[i] |= UInt32(block[4 * i + j]) << UInt32(8 * j) }
        }
        var (a, b, c, d) = (state[0], state[1], state[2], state[3])
        for i in 0..<64 {
            var f: UInt32
            let g: Int
            switch i {
            case 0..<16: f = (b & c) | (~b & d); g = i
            case 16..<32: f = (d & b) | (~d & c); g = (5 * i + 1) % 16
            case 32..<48: f = b ^ c ^ d; g = (3 * i + 5) % 16
            default: f = c ^ (b | ~d); g = (7 * i) % 16
            }
            f = f &+ a &+ Self.k[i] &+ m[g]
            a = d
            d = c
            c = b
            b = b &+ rotl(f, Self.shifts[(i / 16) * 4 + i % 4])
        }
        state[0] &+= a
        state[1] &+= b
        state[2] &+= c
        state[3] &+= d
    }
}

/// The 64-byte blocks both digests compress, and the padding both end with (a 1 bit, zeros, the length in
/// bits in the last 8 bytes, big-endian for SHA-256, little-endian for MD5).
private struct DigestBlocks {
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    mutating func feed(_ bytes: some Sequence<UInt8>, _ compress: ([UInt8]) -> Void) {
        for byte in bytes {
            pending.append(byte)
            length &+= 1
            if pending.count == 64 {
                compress(pending)
                pending.removeAll(keepingCapacity: true)
            }
        }
    }

    mutating func pad(bigEndian: Bool, _ compress: ([UInt8]) -> Void) {
        let bits = length &* 8
        feed([0x80], compress)
        while pending.count != 56 { feed([0], compress) }
        feed((0..<8).map { UInt8(truncatingIfNeeded: bits >> (bigEndian ? 56 - 8 * UInt64($0) : 8 * UInt64($0))) }, compress)
    }
}
