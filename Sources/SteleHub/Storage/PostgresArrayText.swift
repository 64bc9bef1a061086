import SteleSQL

/// PostgreSQL's text form of a one-dimensional array (`{"a","b",NULL}`): one
/// parameter carries a whole column of a multi-row statement (`unnest($2::text[])`,
/// `= ANY($2::text[])`), so a push of a thousand records is a few parameters to
/// bind and parse instead of thousands. Elements are quoted, with `"` and `\`
/// escaped; bytes are `bytea` hex input (`\x0a1b`).
struct PostgresArrayText {
    private var text: [UInt8] = [UInt8(ascii: "{")]

    init() {}

    init(_ elements: some Sequence<String>) {
        for element in elements { append(element) }
    }

    /// The array, as a text parameter the statement casts (`$2::text[]`).
    var value: SQLValue {
        .text(String(decoding: text + [UInt8(ascii: "}")], as: UTF8.self))
    }

    private mutating func separate() {
        if text.count > 1 { text.append(UInt8(ascii: ",")) }
    }

    mutating func append(_ element: String?) {
        separate()
        guard let element else { return text.append(contentsOf: "NULL".utf8) }
        text.append(UInt8(ascii: "\""))
        for byte in element.utf8 {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { text.append(UInt8(ascii: "\\")) }
            text.append(byte)
        }
        text.append(UInt8(ascii: "\""))
    }

    mutating func append(_ element: Int64) {
        separate()
        text.append(contentsOf: String(element).utf8)
    }

    /// A `bytea` element in hex input form, or NULL.
    mutating func append(bytes element: [UInt8]?) {
        separate()
        guard let element else { return text.append(contentsOf: "NULL".utf8) }
        // "\\x…": the element's backslash, escaped inside the quotes.
        text.append(contentsOf: #""\\x"#.utf8)
        text.reserveCapacity(text.count + element.count * 2 + 1)
        for byte in element {
            text.append(Self.hexDigits[Int(byte >> 4)])
            text.append(Self.hexDigits[Int(byte & 0x0F)])
        }
        text.append(UInt8(ascii: "\""))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
