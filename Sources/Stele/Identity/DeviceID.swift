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
        words = BigEndianWords.withRawBytes(bytes) { raw in
            (BigEndianWords.word(raw, at: 0), BigEndianWords.word(raw, at: 8), BigEndianWords.word(raw, at: 16), BigEndianWords.word(raw, at: 24))
        }
    }

    /// Parses 64 hexadecimal digits.
    public init?(hex: String) {
        guard let bytes = Hex.decode(hex), let id = try? DeviceID(bytes: bytes) else { return nil }
        self = id
    }

    /// The 32 bytes of the public key.
    public var bytes: [UInt8] {
        let bigEndian = (words.0.bigEndian, words.1.bigEndian, words.2.bigEndian, words.3.bigEndian)
        return withUnsafeBytes(of: bigEndian) { Array($0) }
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
