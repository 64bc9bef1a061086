import CZlib

/// zlib (deflate) for frame bodies that shrink enough to pay for it. The
/// decompressor is bounded: a frame that claims or inflates to more than the
/// limit is refused, so a small hostile frame cannot make a device allocate
/// without end.
enum Compression {
    /// Compresses `bytes` at the default level.
    /// - Returns: the compressed bytes, or `nil` if zlib failed (the caller sends them plain).
    static func deflate(_ bytes: [UInt8]) -> [UInt8]? {
        var stream = z_stream()
        guard stele_deflate_init(&stream, Z_DEFAULT_COMPRESSION) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))))
        let status: Int32 = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { buffer in
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = buffer.baseAddress
                stream.avail_out = uInt(buffer.count)
                return CZlib.deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.removeSubrange(Int(stream.total_out)...)
        return output
    }

    /// Inflates `bytes`, which must decompress to exactly `expectedCount` bytes.
    /// - Throws: ``CodecError`` for corrupt data, a size other than announced, or an
    ///   announced size above `limit`.
    static func inflate(_ bytes: ArraySlice<UInt8>, expectedCount: Int, limit: Int) throws -> [UInt8] {
        guard expectedCount <= limit else {
            throw CodecError(.countTooLarge, "a compressed frame claims \(expectedCount) bytes, above the limit of \(limit)")
        }
        var stream = z_stream()
        guard stele_inflate_init(&stream) == Z_OK else { throw CodecError(.valueOutOfRange, "zlib could not start inflating") }
        defer { inflateEnd(&stream) }
        // One byte of room beyond the announced size detects frames that inflate to more.
        var output = [UInt8](repeating: 0, count: expectedCount + 1)
        let status: Int32 = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { buffer in
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = buffer.baseAddress
                stream.avail_out = uInt(buffer.count)
                return CZlib.inflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END, Int(stream.total_out) == expectedCount, stream.avail_in == 0 else {
            throw CodecError(.notCanonical, "a compressed frame body is corrupt or does not inflate to its announced \(expectedCount) bytes")
        }
        output.removeLast()
        return output
    }
}
