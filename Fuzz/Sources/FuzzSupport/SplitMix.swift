// The deterministic choices of the fuzz targets (piece sizes, app events, numbers): drawn from a hash of
// the input, so that the whole input stays what a peer sends and a crash reproduces from its file alone.

/// A small deterministic generator (SplitMix64).
public struct SplitMix {
    var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// Seeded with the FNV-1a hash of `input`.
    public init(hashing input: [UInt8]) {
        self.init(seed: input.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
