import Stele

/// The tests' seeded generator: the package's one SplitMix64, so a failing
/// property test replays from its seed.
package typealias SeededGenerator = SplitMix64
