/// Appends the primitives of Stele's compact encodings: unsigned LEB128 varints,
/// fixed-width big-endian integers and raw bytes.
struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    /// Empties the writer, keeping its storage for the next value.
    mutating func reset() { bytes.removeAll(keepingCapacity: true) }

    mutating func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func appendBigEndian(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    mutating func appendBigEndian32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    mutating func append(_ other: some Sequence<UInt8>) { bytes.append(contentsOf: other) }

    // Raw bytes from an array, a slice or a string: not generic, so that a caller in
    // another file of a build without whole-module optimization (the one `scripts/test`
    // sweeps with) copies them at once rather than through `Sequence`'s witnesses,
    // byte by byte (issue 22: 2.8 % of a simulated run).
    mutating func append(_ other: [UInt8]) { bytes.append(contentsOf: other) }
    mutating func append(_ other: ArraySlice<UInt8>) { bytes.append(contentsOf: other) }
    mutating func append(_ other: String.UTF8View) { bytes.append(contentsOf: other) }

    mutating func append(_ byte: UInt8) { bytes.append(byte) }
}
