/// A 256-bit value: a SHA-256 digest, or a sum of them.
///
/// Digest nodes are sums of their leaves' hashes modulo 2^256 (the additive
/// fingerprint of range-based set reconciliation): adding or removing one leaf
/// changes a node by one addition, so a write updates the few nodes above its
/// leaf without rehashing anything, and two sets with the same leaves have the
/// same sums whatever order the leaves arrived in.
public struct Hash32: Hashable, Sendable, CustomStringConvertible {
    /// Big-endian words: `words.0` holds bytes 0–7.
    var words: (UInt64, UInt64, UInt64, UInt64)

    public static let zero = Hash32(words: (0, 0, 0, 0))
    public static let byteCount = 32

    init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

    /// - Throws: ``CodecError`` unless `bytes` holds exactly 32 bytes.
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw CodecError(.valueOutOfRange, "a hash is 32 bytes, got \(bytes.count)")
        }
        self = BigEndianWords.withRawBytes(bytes) { Hash32(unsafeBytes: $0) }
    }

    init(unsafeBytes pointer: UnsafeRawBufferPointer) {
        precondition(pointer.count == Self.byteCount)
        words = (
            UInt64(bigEndian: pointer.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
            UInt64(bigEndian: pointer.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
            UInt64(bigEndian: pointer.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
            UInt64(bigEndian: pointer.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
        )
    }

    /// Calls `body` with the 32 bytes, big-endian, without allocating.
    func withBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        var bigEndian = (words.0.bigEndian, words.1.bigEndian, words.2.bigEndian, words.3.bigEndian)
        return try withUnsafeBytes(of: &bigEndian) { try body($0) }
    }

    public var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for word in [words.0, words.1, words.2, words.3] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return bytes
    }

    /// The low 64 bits: the short fingerprint sent for deep digest nodes.
    public var low64: UInt64 { words.3 }

    public static func == (lhs: Hash32, rhs: Hash32) -> Bool { lhs.words == rhs.words }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    /// Addition modulo 2^256.
    static func + (lhs: Hash32, rhs: Hash32) -> Hash32 {
        let (w3, c3) = lhs.words.3.addingReportingOverflow(rhs.words.3)
        var (w2, c2) = lhs.words.2.addingReportingOverflow(rhs.words.2)
        if c3 { let (value, carry) = w2.addingReportingOverflow(1); w2 = value; c2 = c2 || carry }
        var (w1, c1) = lhs.words.1.addingReportingOverflow(rhs.words.1)
        if c2 { let (value, carry) = w1.addingReportingOverflow(1); w1 = value; c1 = c1 || carry }
        var w0 = lhs.words.0 &+ rhs.words.0
        if c1 { w0 = w0 &+ 1 }
        return Hash32(words: (w0, w1, w2, w3))
    }

    /// Subtraction modulo 2^256: the inverse of `+`.
    static func - (lhs: Hash32, rhs: Hash32) -> Hash32 {
        lhs + rhs.negated
    }

    /// The additive inverse modulo 2^256 (two's complement).
    var negated: Hash32 {
        Hash32(words: (~words.0, ~words.1, ~words.2, ~words.3)) + Hash32(words: (0, 0, 0, 1))
    }

    public var description: String { Hex.encode(bytes.prefix(8)) }
    /// All 32 bytes in hex.
    public var hex: String { Hex.encode(bytes) }
}
