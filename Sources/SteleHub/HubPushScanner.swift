import Stele

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

    private var tokens: JSONTokens

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        tokens = JSONTokens(bytes)
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
        return tokens.atEnd() ? items : nil
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

    // MARK: - Tokens (JSONTokens, shared with the mirror client's page reader)

    private mutating func take(_ byte: UInt8) -> Bool { tokens.take(byte) }
    private mutating func takeNull() -> Bool { tokens.takeNull() }
    private mutating func integer() -> Int64? { tokens.integer() }
    private mutating func string() -> String? { tokens.string() }

    /// The key of an item's field, read without making a string; nil for any
    /// other key, or one written with escapes.
    private mutating func field() -> Field? {
        guard let name = tokens.rawString() else { return nil }
        for (position, known) in Self.fieldNames.enumerated() where known.elementsEqual(name) { return Field(rawValue: position) }
        return nil
    }

    private static let fieldNames: [[UInt8]] = ["mutation", "kind", "id", "op", "payload", "group", "set", "member", "modifiedAt"].map { Array($0.utf8) }
}
