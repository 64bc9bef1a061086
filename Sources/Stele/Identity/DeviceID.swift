/// A device's identity: its 32-byte X25519 public key.
///
/// Device ids order by their bytes (lexicographically), the total order every
/// device evaluates the same way: it picks the barrier's leader (001 §4) and
/// breaks ties between concurrent writes.
public struct DeviceID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The key as four big-endian words, so comparing words compares bytes.
    private let words: (UInt64, UInt64, UInt64, UInt64)

    /// The number of bytes in a device id.
    public static let byteCount = 32

    /// - Throws: ``CodecError`` unless `bytes` holds exactly 32 bytes.
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw CodecError(.valueOutOfRange, "a device id is \(Self.byteCount) bytes, got \(bytes.count)")
        }
        var words: [UInt64] = [0, 0, 0, 0]
        for (offset, byte) in bytes.enumerated() {
            words[offset / 8] = words[offset / 8] << 8 | UInt64(byte)
        }
        self.words = (words[0], words[1], words[2], words[3])
    }

    /// Parses 64 hexadecimal digits.
    public init?(hex: String) {
        guard let bytes = Hex.decode(hex), let id = try? DeviceID(bytes: bytes) else { return nil }
        self = id
    }

    /// The 32 bytes of the public key.
    public var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.byteCount)
        for word in [words.0, words.1, words.2, words.3] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return bytes
    }

    /// All 64 hexadecimal digits.
    public var hex: String { Hex.encode(bytes) }

    /// The first 8 hexadecimal digits: enough to tell a fleet's devices apart in logs.
    public var description: String { String(hex.prefix(8)) }

    public static func == (lhs: DeviceID, rhs: DeviceID) -> Bool {
        lhs.words == rhs.words
    }

    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool {
        lhs.words < rhs.words
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}
