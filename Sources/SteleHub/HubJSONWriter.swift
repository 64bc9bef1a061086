/// JSON written straight into bytes, for the record API's large bodies: a page
/// of the change feed or of replay carries up to 1,000 records, a push's answer
/// as many results. The output is what `JSONEncoder` would make of the same
/// values (its default settings), less the escaped slashes, which JSON does not need.
struct HubJSONWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// Text written as it is (punctuation and keys known to need no escaping).
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// `"name":` for a key that needs no escaping.
    mutating func key(_ name: StaticString) {
        bytes.append(UInt8(ascii: "\""))
        raw(name)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func comma() {
        bytes.append(UInt8(ascii: ","))
    }

    mutating func null() {
        raw("null")
    }

    mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    mutating func integer(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var first = 20
            repeat {
                first -= 1
                digits[first] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[first...]))
        }
    }

    /// A string literal: quotes, backslashes and control characters escaped, the rest as UTF-8.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            // Most strings need no escape: copied at once.
            if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    bytes.append(UInt8(ascii: "\\"))
                    bytes.append(byte)
                case 0x0A: raw("\\n")
                case 0x0D: raw("\\r")
                case 0x09: raw("\\t")
                case 0x08: raw("\\b")
                case 0x0C: raw("\\f")
                case 0..<0x20:
                    raw("\\u00")
                    bytes.append(Self.hexDigits[Int(byte >> 4)])
                    bytes.append(Self.hexDigits[Int(byte & 0x0F)])
                default:
                    bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func optionalString(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    /// `bytes` as a string of standard padded base64.
    mutating func base64(_ value: [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        let start = bytes.count
        // Filled with padding, then written over: whole groups of four, and the last one's first characters.
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "="), count: (value.count + 2) / 3 * 4))
        bytes.withUnsafeMutableBufferPointer { output in
            value.withUnsafeBufferPointer { input in
                Self.base64Alphabet.withUnsafeBufferPointer { alphabet in
                    var read = 0
                    var write = start
                    while read + 3 <= input.count {
                        let group = UInt32(input[read]) << 16 | UInt32(input[read + 1]) << 8 | UInt32(input[read + 2])
                        output[write] = alphabet[Int(group >> 18 & 0x3F)]
                        output[write + 1] = alphabet[Int(group >> 12 & 0x3F)]
                        output[write + 2] = alphabet[Int(group >> 6 & 0x3F)]
                        output[write + 3] = alphabet[Int(group & 0x3F)]
                        read += 3
                        write += 4
                    }
                    let left = input.count - read
                    guard left > 0 else { return }
                    let group = UInt32(input[read]) << 16 | (left == 2 ? UInt32(input[read + 1]) << 8 : 0)
                    output[write] = alphabet[Int(group >> 18 & 0x3F)]
                    output[write + 1] = alphabet[Int(group >> 12 & 0x3F)]
                    if left == 2 { output[write + 2] = alphabet[Int(group >> 6 & 0x3F)] }
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
    private static let base64Alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
}

extension HubService.StoredRecord {
    /// HUB-API's record object: both nullable fields always present (`null` is a
    /// tombstone's payload), set names and members in order.
    func write(to json: inout HubJSONWriter) {
        json.raw("{")
        json.key("kind")
        json.string(kind)
        json.comma()
        json.key("id")
        json.string(id)
        json.comma()
        json.key("payload")
        if let payload { json.base64(payload) } else { json.null() }
        json.comma()
        json.key("modifiedAt")
        json.integer(modifiedAt)
        json.comma()
        json.key("group")
        json.optionalString(group)
        json.comma()
        json.key("sets")
        json.raw("{")
        for (index, name) in (sets.isEmpty ? [] : setNames).enumerated() {
            if index > 0 { json.comma() }
            json.string(name.text)
            json.raw(":[")
            for (position, member) in (sets[name] ?? []).sorted().enumerated() {
                if position > 0 { json.comma() }
                json.string(member)
            }
            json.raw("]")
        }
        json.raw("}")
        json.comma()
        json.key("seq")
        json.integer(seq)
        json.raw("}")
    }
}

extension HubService.MutationResult {
    /// A result object: `seq`, `reason` and `hubTime` only when set.
    func write(to json: inout HubJSONWriter) {
        json.raw("{")
        json.key("mutation")
        json.string(mutation)
        json.comma()
        json.key("status")
        json.string(status)
        if let seq {
            json.comma()
            json.key("seq")
            json.integer(seq)
        }
        if let reason {
            json.comma()
            json.key("reason")
            json.string(reason)
        }
        if let hubTime {
            json.comma()
            json.key("hubTime")
            json.integer(hubTime)
        }
        json.raw("}")
    }
}
