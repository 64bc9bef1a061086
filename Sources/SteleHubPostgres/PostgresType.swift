import SteleHub
import CPostgres
import SteleSQL

/// The type OIDs the hub reads and binds, and the text-format decoding of a
/// result value into ``SQLValue``.
enum PostgresType {
    static let bool: Oid = 16
    static let bytea: Oid = 17
    static let int8: Oid = 20
    static let int2: Oid = 21
    static let int4: Oid = 23
    static let oid: Oid = 26
    static let float4: Oid = 700
    static let float8: Oid = 701

    /// Decodes one non-null text-format value of type `type`: integers as
    /// `.integer`, floats as `.real`, `bytea` (hex output, `\x…`) as `.blob`,
    /// everything else as `.text`.
    static func value(text bytes: UnsafeRawBufferPointer, type: Oid) -> SQLValue {
        let text = { String(decoding: bytes, as: UTF8.self) }
        switch type {
        case int2, int4, int8, oid:
            if let value = Int64(text()) { return .integer(value) }
            return .text(text())
        case float4, float8:
            // Swift's parser takes PostgreSQL's `NaN`, `Infinity` and `-Infinity`.
            if let value = Double(text()) { return .real(value) }
            return .text(text())
        case bool:
            return .integer(bytes.first == UInt8(ascii: "t") ? 1 : 0)
        case bytea:
            if let decoded = decodeHex(bytes) { return .blob(decoded) }
            return .text(text())
        default:
            return .text(text())
        }
    }

    /// `\x0a1b…` → bytes, or nil when the text is not hex output (an `escape` `bytea_output`).
    static func decodeHex(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"), bytes.count % 2 == 0 else {
            return nil
        }
        var decoded: [UInt8] = []
        decoded.reserveCapacity((bytes.count - 2) / 2)
        var index = 2
        while index < bytes.count {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else { return nil }
            decoded.append(high << 4 | low)
            index += 2
        }
        return decoded
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
