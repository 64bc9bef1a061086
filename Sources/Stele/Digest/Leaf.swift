/// A row's digest leaf: the first 16 bytes of SHA-256 over its canonical
/// encoding (``LeafEncoding``), stored with the row.
///
/// Sixteen bytes, not thirty-two: a leaf only has to tell rows apart inside
/// sums that are compared between honest devices, where 128 bits leave a
/// collision at odds of about 2^-64 even across billions of rows, and each live
/// row then carries 16 bytes of digest instead of 32 (`sync.digest_overhead`).
/// Sums are still taken modulo 2^256 and the root is a full SHA-256.
struct Leaf: Hashable, Sendable {
    let high: UInt64
    let low: UInt64

    static let byteCount = 16

    /// The leaf of a full SHA-256 digest.
    init(digest: Hash32) {
        high = digest.words.0
        low = digest.words.1
    }

    /// - Throws: ``CodecError`` unless `bytes` holds exactly 16 bytes.
    init(bytes: [UInt8]) throws {
        guard bytes.count == Self.byteCount else { throw CodecError(.valueOutOfRange, "a leaf is 16 bytes, got \(bytes.count)") }
        (high, low) = bytes.withUnsafeBytes {
            (UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 0, as: UInt64.self)), UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }

    /// A leaf read in place (`nil` unless exactly 16 bytes).
    init?(raw: UnsafeRawBufferPointer) {
        guard raw.count == Self.byteCount else { return nil }
        high = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        low = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
    }

    /// The leaf as a term of a digest sum.
    var term: Hash32 { Hash32(words: (0, 0, high, low)) }

    var bytes: [UInt8] { withBytes { Array($0) } }

    func withBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        var bigEndian = (high.bigEndian, low.bigEndian)
        return try withUnsafeBytes(of: &bigEndian) { try body($0) }
    }
}

extension SHA256 {
    /// The leaf of `bytes`.
    func leaf(_ bytes: [UInt8]) -> Leaf { Leaf(digest: hash(bytes)) }
}
