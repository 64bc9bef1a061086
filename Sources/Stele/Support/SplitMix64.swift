/// SplitMix64, the package's one seeded generator: the same seed gives the same
/// sequence on every machine, so a simulation, a property test or a benchmark
/// replays bit for bit. Never for keys, salts or nonces in an app: those come
/// from `SystemRandomNumberGenerator` (a salt drawn twice would seal two frames
/// under one key), which is why this is not public.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    /// The seed it started from.
    package let seed: UInt64

    package init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform percentage in 0..<100.
    package mutating func percent() -> Double { Double(next() >> 11) / Double(1 << 53) * 100 }

    /// A uniform value in `range`.
    package mutating func value(in range: ClosedRange<Int64>) -> Int64 {
        range.lowerBound + Int64(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    /// Whether an event with `percent` chance happens.
    package mutating func chance(_ percent: Double) -> Bool { self.percent() < percent }

    /// `count` random bytes.
    package mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
}
