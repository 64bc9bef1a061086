/// SplitMix64: the simulator's one source of randomness. The same seed gives the
/// same sequence on every machine, so a run replays bit for bit.
public struct SplitMix: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform percentage in 0..<100.
    public mutating func percent() -> Double { Double(next() >> 11) / Double(1 << 53) * 100 }

    /// A uniform value in `range`.
    public mutating func value(in range: ClosedRange<Int64>) -> Int64 {
        range.lowerBound + Int64(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    /// Whether an event with `percent` chance happens.
    public mutating func chance(_ percent: Double) -> Bool { self.percent() < percent }
}
