/// The id of a `log` event: 16 random bytes in the layout of a version-4 UUID.
/// Ids order by their bytes.
public struct EventID: Hashable, Comparable, Sendable, CustomStringConvertible {
    private let high: UInt64
    private let low: UInt64

    public static let byteCount = 16

    /// - Throws: ``CodecError`` unless `bytes` holds exactly 16 bytes.
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw CodecError(.valueOutOfRange, "an event id is \(Self.byteCount) bytes, got \(bytes.count)")
        }
        let words = bytes.reduce(into: (UInt64(0), UInt64(0), 0)) { state, byte in
            if state.2 < 8 { state.0 = state.0 << 8 | UInt64(byte) } else { state.1 = state.1 << 8 | UInt64(byte) }
            state.2 += 1
        }
        high = words.0
        low = words.1
    }

    /// A fresh random id (version 4, variant 1 bits set).
    public static func random<Generator: RandomNumberGenerator>(using generator: inout Generator) -> EventID {
        let high = (generator.next() & ~0xF000) | 0x4000
        let low = (generator.next() & ~(0xC000_0000_0000_0000 as UInt64)) | 0x8000_0000_0000_0000
        return EventID(high: high, low: low)
    }

    private init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    public var bytes: [UInt8] {
        (0..<16).map { index in
            let word = index < 8 ? high : low
            return UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * (index % 8)))
        }
    }

    public static func < (lhs: EventID, rhs: EventID) -> Bool { (lhs.high, lhs.low) < (rhs.high, rhs.low) }

    /// The UUID text form, lower case.
    public var description: String {
        let hex = Hex.encode(bytes)
        let characters = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
    }
}
