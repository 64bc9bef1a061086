/// Reads the primitives ``ByteWriter`` writes, checking every bound: it never
/// traps on malformed input and throws ``CodecError`` instead.
struct ByteReader {
    private let bytes: [UInt8]
    private(set) var offset: Int = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }
    var isAtEnd: Bool { offset == bytes.count }

    /// Reads a canonical unsigned LEB128 varint (no redundant trailing zero groups).
    mutating func readVarint(_ what: @autoclosure () -> String) throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < bytes.count else { throw CodecError(.truncated, "\(what()): input ends inside a varint") }
            let byte = bytes[offset]
            offset += 1
            if shift == 63 && byte > 1 { throw CodecError(.overlongVarint, "\(what()): varint exceeds 64 bits") }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                if byte == 0 && shift > 0 { throw CodecError(.overlongVarint, "\(what()): varint has a redundant zero group") }
                return result
            }
            shift += 7
            if shift > 63 { throw CodecError(.overlongVarint, "\(what()): varint longer than 10 bytes") }
        }
    }

    /// Reads a varint count and checks it against `maximum` before anything is allocated.
    mutating func readCount(_ what: @autoclosure () -> String, maximum: Int) throws -> Int {
        let count = try readVarint(what())
        guard count <= UInt64(maximum) else {
            throw CodecError(.countTooLarge, "\(what()): count \(count) exceeds the bound \(maximum)")
        }
        return Int(count)
    }

    mutating func readBigEndianUInt64(_ what: @autoclosure () -> String) throws -> UInt64 {
        let raw = try readBytes(8, what())
        return raw.reduce(0) { ($0 << 8) | UInt64($1) }
    }

    mutating func readBigEndianUInt32(_ what: @autoclosure () -> String) throws -> UInt32 {
        let raw = try readBytes(4, what())
        return raw.reduce(0) { ($0 << 8) | UInt32($1) }
    }

    mutating func readByte(_ what: @autoclosure () -> String) throws -> UInt8 {
        guard offset < bytes.count else { throw CodecError(.truncated, "\(what()): input ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func readBytes(_ count: Int, _ what: @autoclosure () -> String) throws -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else {
            throw CodecError(.truncated, "\(what()): needs \(count) bytes, \(remaining) left")
        }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }

    /// Throws unless every byte was consumed.
    func expectEnd(_ what: @autoclosure () -> String) throws {
        guard isAtEnd else { throw CodecError(.trailingBytes, "\(what()): \(remaining) unexpected bytes after the value") }
    }
}
