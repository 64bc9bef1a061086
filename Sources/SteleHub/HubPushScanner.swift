/// Reads a push body of the usual shape (`{"mutations": [{...}, ...]}` with
/// only the known fields, each once, of its type or `null`) in one pass over
/// the bytes, which decoding with `JSONDecoder` costs several times over.
///
/// It reads exactly what `JSONDecoder` would make of such a body, and gives up
/// (nil) on anything else: another key, a repeated one, a wrong type, a number
/// that is not a plain integer, text that is not valid UTF-8, a lone surrogate,
/// malformed JSON. The caller then decodes the body with `JSONDecoder`, whose
/// errors name the field, so every refusal stays as it was.
struct HubPushScanner {
    typealias Item = HubService.PushBody.Item

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// The body's items, or nil when it is not of the usual shape.
    static func items(_ body: [UInt8]) -> [Item]? {
        body.withUnsafeBufferPointer { buffer in
            var scanner = HubPushScanner(buffer)
            return scanner.body()
        }
    }

    private mutating func body() -> [Item]? {
        guard take(UInt8(ascii: "{")), let key = string(), key == "mutations", take(UInt8(ascii: ":")), take(UInt8(ascii: "[")) else { return nil }
        var items: [Item] = []
        if !take(UInt8(ascii: "]")) {
            while true {
                guard let item = item() else { return nil }
                items.append(item)
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "]")) else { return nil }
                break
            }
        }
        guard take(UInt8(ascii: "}")) else { return nil }
        skipSpace()
        return index == bytes.count ? items : nil
    }

    /// The fields of an item, by the order of ``Field``.
    private enum Field: Int {
        case mutation, kind, id, op, payload, group, set, member, modifiedAt
    }

    private mutating func item() -> Item? {
        guard take(UInt8(ascii: "{")) else { return nil }
        var texts = [String?](repeating: nil, count: 8)
        var modifiedAt: Int64?
        var seen: UInt16 = 0
        if !take(UInt8(ascii: "}")) {
            while true {
                guard let field = field(), seen & (1 << field.rawValue) == 0, take(UInt8(ascii: ":")) else { return nil }
                seen |= 1 << field.rawValue
                if takeNull() {
                    // null is an absent optional, as decodeIfPresent reads it.
                } else if field == .modifiedAt {
                    guard let value = integer() else { return nil }
                    modifiedAt = value
                } else {
                    guard let value = string() else { return nil }
                    texts[field.rawValue] = value
                }
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
        }
        return Item(
            mutation: texts[0], kind: texts[1], id: texts[2], op: texts[3], payload: texts[4], group: texts[5], set: texts[6], member: texts[7],
            modifiedAt: modifiedAt.map { HubService.PushBody.WholeNumber(value: $0) })
    }

    // MARK: - Tokens

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Takes `byte` after any whitespace.
    private mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func takeNull() -> Bool {
        skipSpace()
        guard index + 4 <= bytes.count, bytes[index] == UInt8(ascii: "n"), bytes[index + 1] == UInt8(ascii: "u"), bytes[index + 2] == UInt8(ascii: "l"),
            bytes[index + 3] == UInt8(ascii: "l")
        else { return false }
        index += 4
        return true
    }

    /// A JSON integer (`-?(0|[1-9][0-9]*)`, no fraction or exponent) that fits in 64 bits.
    private mutating func integer() -> Int64? {
        skipSpace()
        let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let start = index
        var magnitude: UInt64 = 0
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
            let (times, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
            guard !overflow, !carry else { return nil }
            magnitude = sum
            index += 1
        }
        let digits = index - start
        guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// A JSON string, unescaped; nil when malformed or not valid UTF-8.
    private mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        var all: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = Self.text(UnsafeBufferPointer(rebasing: bytes[start..<index]), ascii: all < 0x80)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { return escapedString(from: start) }
            if byte < 0x20 { return nil }
            all |= byte
            index += 1
        }
        return nil
    }

    /// The key of an item's field, read without making a string; nil for any
    /// other key, or one written with escapes.
    private mutating func field() -> Field? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let name = UnsafeBufferPointer(rebasing: bytes[start..<index])
        index += 1
        for (position, known) in Self.fieldNames.enumerated() where known.elementsEqual(name) { return Field(rawValue: position) }
        return nil
    }

    private static let fieldNames: [[UInt8]] = ["mutation", "kind", "id", "op", "payload", "group", "set", "member", "modifiedAt"].map { Array($0.utf8) }

    /// `bytes` as a string when they are valid UTF-8 (when the raw bytes were all
    /// ASCII, and escapes add only valid UTF-8, there is nothing to check).
    private static func text(_ bytes: UnsafeBufferPointer<UInt8>, ascii: Bool) -> String? {
        ascii ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
    }

    /// The rest of a string that holds escapes, from `start` (just past its opening quote).
    private mutating func escapedString(from start: Int) -> String? {
        var text: [UInt8] = []
        text.reserveCapacity(index - start + 256)
        text.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
        var all: UInt8 = 0
        for byte in text { all |= byte }
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return text.withUnsafeBufferPointer { Self.text($0, ascii: all < 0x80) }
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
                case UInt8(ascii: "b"): text.append(0x08)
                case UInt8(ascii: "f"): text.append(0x0C)
                case UInt8(ascii: "n"): text.append(0x0A)
                case UInt8(ascii: "r"): text.append(0x0D)
                case UInt8(ascii: "t"): text.append(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(scalar) {
                        // A high surrogate must be followed by an escaped low one.
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
                        index += 2
                        guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        return nil
                    }
                    // Escapes add valid UTF-8 only: whether to check the text depends on its raw bytes.
                    guard let unicode = Unicode.Scalar(scalar), let encoded = UTF8.encode(unicode) else { return nil }
                    text.append(contentsOf: encoded)
                default:
                    return nil
                }
            case 0..<0x20:
                return nil
            default:
                // The run up to the next quote, escape or control character, at once.
                let run = index - 1
                all |= byte
                while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                    all |= bytes[index]
                    index += 1
                }
                text.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index]))
            }
        }
        return nil
    }

    /// Four hex digits of a `\u` escape.
    private mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}
