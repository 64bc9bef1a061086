/// Big-endian 64-bit words read from bytes in place. Device ids, hashes and op
/// ids are parsed from every frame and every stored row (issue 22): reading
/// them through generic iteration into a scratch array cost several percent of
/// a simulated run.
enum BigEndianWords {
    /// The word at `offset` of `bytes`, which hold at least `offset + 8` bytes.
    static func word(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
        UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// Calls `body` with `bytes` as raw memory: in place when they are contiguous
    /// (an array, a slice of one), from a copy otherwise.
    static func withRawBytes<Result>(_ bytes: some Collection<UInt8>, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        if let result = bytes.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return result }
        return Array(bytes).withUnsafeBytes(body)
    }
}
