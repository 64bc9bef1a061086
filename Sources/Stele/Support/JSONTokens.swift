/// The tokens of a JSON text read in place, for the one-pass readers of bodies
/// of a known shape (the hub's `HubPushScanner`, the mirror client's
/// `MirrorPageScanner`). Each reader gives up (nil) on anything it does not
/// read exactly as `JSONDecoder` would, and its caller then decodes with
/// `JSONDecoder`; these tokens follow RFC 8259: whitespace, `null`, `true`,
/// `false`, integers (`-?(0|[1-9][0-9]*)` within 64 bits, no fraction or
/// exponent) and strings with every escape, valid UTF-8 only.
///
/// Its methods are inlinable: the hub's push reads a thousand mutations of ten
/// tokens each on its hot path, from another module.
package struct JSONTokens {
    @usableFromInline let bytes: UnsafeBufferPointer<UInt8>
    /// The position of the next unread byte.
    package var index = 0

    @inlinable package init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// Whether only whitespace is left.
    @inlinable package mutating func atEnd() -> Bool {
        skipSpace()
        return index == bytes.count
    }

    @inlinable package mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Takes `byte` after any whitespace.
    @inlinable package mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// Takes `word` (a literal: `null`, `true`, `false`) after any whitespace.
    @inlinable package mutating func take(word: StaticString) -> Bool {
        skipSpace()
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        let matches = word.withUTF8Buffer { literal in
            (0..<count).allSatisfy { bytes[index + $0] == literal[$0] }
        }
        guard matches else { return false }
        index += count
        return true
    }

    @inlinable package mutating func takeNull() -> Bool { take(word: "null") }

    @inlinable package mutating func boolean() -> Bool? {
        if take(word: "true") { return true }
        if take(word: "false") { return false }
        return nil
    }

    /// A JSON integer (`-?(0|[1-9][0-9]*)`, no fraction or exponent) that fits in 64 bits.
    @inlinable package mutating func integer() -> Int64? {
        skipSpace()
        var position = index
        let negative = position < bytes.count && bytes[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        let start = position
        var magnitude: UInt64 = 0
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
            let (times, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times.addingReportingOverflow(UInt64(bytes[position] - UInt8(ascii: "0")))
            guard !overflow, !carry else { return nil }
            magnitude = sum
            position += 1
        }
        let digits = position - start
        guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        let value: Int64
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            value = magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        } else {
            guard magnitude <= UInt64(Int64.max) else { return nil }
            value = Int64(magnitude)
        }
        index = position
        return value
    }

    /// The bytes of a string written without escapes, not yet checked as UTF-8
    /// (a key to compare with known names, no `String` made); nil for anything else.
    @inlinable package mutating func rawString() -> UnsafeBufferPointer<UInt8>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
        index += 1
        return raw
    }

    /// A JSON string, unescaped; nil when malformed or not valid UTF-8.
    @inlinable package mutating func string() -> String? {
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

    /// `bytes` as a string when they are valid UTF-8 (when the raw bytes were all
    /// ASCII, and escapes add only valid UTF-8, there is nothing to check).
    @inlinable static func text(_ bytes: UnsafeBufferPointer<UInt8>, ascii: Bool) -> String? {
        ascii ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
    }

    /// The rest of a string that holds escapes, from `start` (just past its opening quote).
    @usableFromInline mutating func escapedString(from start: Int) -> String? {
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
    @usableFromInline mutating func hex4() -> UInt32? {
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
