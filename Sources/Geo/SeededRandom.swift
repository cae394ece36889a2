/// Random numbers that are the same on every run with the same seed (SplitMix64): for tests, and
/// anything else that must be repeatable, such as a backoff's jitter under test.
public struct SeededRandom: RandomNumberGenerator, Hashable, Sendable {
    private var state: UInt64

    /// - Parameter seed: the first state; two generators with one seed give one sequence.
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
