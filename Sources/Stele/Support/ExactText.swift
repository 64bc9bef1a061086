/// Text compared byte for byte. Swift's `String` compares by Unicode canonical
/// equivalence ("é" and "e" followed by U+0301 are equal, and hash alike), but
/// the stores, the hub's database and the wire hold names as UTF-8 byte strings:
/// two spellings are two records, two groups, two members, two messages. A key
/// of a dictionary or a set that holds such names is an `ExactText`.
package struct ExactText: Hashable, Comparable, Sendable {
    package let text: String

    package init(_ text: String) { self.text = text }

    package static func == (lhs: ExactText, rhs: ExactText) -> Bool { lhs.text.utf8.elementsEqual(rhs.text.utf8) }

    /// The order of the UTF-8 bytes: SQLite's `BINARY` collation, and the wire's.
    package static func < (lhs: ExactText, rhs: ExactText) -> Bool { lhs.text.utf8.lexicographicallyPrecedes(rhs.text.utf8) }

    package func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
