extension RandomNumberGenerator {
    /// `count` bytes drawn from the generator, eight at a time, most significant
    /// byte first (ids and nonces; the simulator's seeded generators make them replayable).
    mutating func bytes(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            let word = next()
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return Array(bytes.prefix(count))
    }
}
