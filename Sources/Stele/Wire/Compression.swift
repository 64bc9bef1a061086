import CZlib
import Synchronization

/// zlib (deflate) for frame bodies that shrink enough to pay for it. The
/// decompressor is bounded: a frame that claims or inflates to more than the
/// limit is refused, so a small hostile frame cannot make a device allocate
/// without end.
enum Compression {
    /// Deflate streams kept between frames: starting one allocates and clears
    /// about 270 KB of zlib's window and tables, more than compressing a frame
    /// costs. A reset stream deflates exactly as a new one.
    private static let pool = Mutex<[DeflateStream]>([])
    private static let pooled = 4

    /// Compresses `bytes` at the default level.
    /// - Returns: the compressed bytes, or `nil` if zlib failed (the caller sends them plain).
    static func deflate(_ bytes: [UInt8]) -> [UInt8]? {
        let held = pool.withLock { $0.popLast() } ?? DeflateStream()
        guard held.isReady else { return nil }
        defer {
            if deflateReset(held.stream) == Z_OK { pool.withLock { if $0.count < pooled { $0.append(held) } } }
        }
        let stream = held.stream
        var output = [UInt8](repeating: 0, count: Int(deflateBound(stream, uLong(bytes.count))))
        let status: Int32 = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { buffer in
                stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.pointee.avail_in = uInt(input.count)
                stream.pointee.next_out = buffer.baseAddress
                stream.pointee.avail_out = uInt(buffer.count)
                return CZlib.deflate(stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.removeSubrange(Int(stream.pointee.total_out)...)
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

/// A zlib deflate stream at a fixed address (zlib's state points back at it),
/// kept in ``Compression``'s pool between frames.
///
/// `@unchecked Sendable`: the pool hands a stream to one caller at a time (under
/// its lock), which alone uses it until it puts it back.
private final class DeflateStream: @unchecked Sendable {  // safe: the pool hands a stream to one caller at a time, which alone uses it until it puts it back (above)
    let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    let isReady: Bool

    init() {
        stream.initialize(to: z_stream())
        isReady = stele_deflate_init(stream, Z_DEFAULT_COMPRESSION) == Z_OK
    }

    deinit {
        if isReady { deflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }
}
