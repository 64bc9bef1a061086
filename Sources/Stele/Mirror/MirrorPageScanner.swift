import Foundation

/// Reads a page of the hub's change feed or replay (HUB-API "Records") in one
/// pass over the bytes (``JSONTokens``, as the hub reads pushes), for pages of
/// the shape the hub writes: the page's known keys in any order, records with
/// only the record keys, plain integers. `JSONDecoder` costs several times as
/// much on a page of 1,000 records (`hub.pull`), and a first download is mostly
/// such pages.
///
/// It gives up (nil) on anything else: another key, a repeated one, a wrong
/// type, a number that is not a plain integer, malformed JSON, text that is not
/// UTF-8. The caller then decodes the page with `JSONDecoder`, so every page
/// reads exactly as before.
struct MirrorPageScanner {
    /// A page as the scanner read it: the records, and the page's cursor fields.
    struct Page {
        var records: [MirrorStore.PulledRecord] = []
        /// `next`: a history id (changes) or a token (replay).
        var nextNumber: Int64?
        var nextToken: String?
        var epoch: String?
        var more: Bool?
        /// The hub's tombstone horizon (changes only; HubService+Compaction).
        var horizon: Int64?
    }

    private var tokens: JSONTokens

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        tokens = JSONTokens(bytes)
    }

    /// The page in `body`, whose records are under `listKey` (`changes` or `records`); nil when it is not of the usual shape.
    static func page(_ body: [UInt8], listKey: String) -> Page? {
        body.withUnsafeBufferPointer { buffer in
            var scanner = MirrorPageScanner(buffer)
            return scanner.page(listKey: listKey)
        }
    }

    private mutating func page(listKey: String) -> Page? {
        var page = Page()
        var sawList = false
        guard take(UInt8(ascii: "{")) else { return nil }
        if !take(UInt8(ascii: "}")) {
            while true {
                guard let key = string(), take(UInt8(ascii: ":")) else { return nil }
                switch key {
                case listKey:
                    guard !sawList, let records = records() else { return nil }
                    page.records = records
                    sawList = true
                case "next":
                    guard page.nextNumber == nil, page.nextToken == nil else { return nil }
                    if let number = integer() {
                        page.nextNumber = number
                    } else if let token = string() {
                        page.nextToken = token
                    } else {
                        return nil
                    }
                case "epoch":
                    guard page.epoch == nil, let epoch = string() else { return nil }
                    page.epoch = epoch
                case "more":
                    guard page.more == nil, let more = boolean() else { return nil }
                    page.more = more
                case "horizon":
                    guard page.horizon == nil, let horizon = integer() else { return nil }
                    page.horizon = horizon
                default:
                    return nil
                }
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
        }
        guard tokens.atEnd(), sawList else { return nil }
        return page
    }

    private mutating func records() -> [MirrorStore.PulledRecord]? {
        guard take(UInt8(ascii: "[")) else { return nil }
        var records: [MirrorStore.PulledRecord] = []
        if take(UInt8(ascii: "]")) { return records }
        while true {
            guard let record = record() else { return nil }
            records.append(record)
            if take(UInt8(ascii: ",")) { continue }
            return take(UInt8(ascii: "]")) ? records : nil
        }
    }

    private mutating func record() -> MirrorStore.PulledRecord? {
        guard take(UInt8(ascii: "{")) else { return nil }
        var kind: String?
        var id: String?
        var payload: [UInt8]??
        var modifiedAt: Int64?
        var group: String??
        var sets: [MirrorStore.MemberSet]?
        var seq: Int64?
        if !take(UInt8(ascii: "}")) {
            while true {
                guard let key = string(), take(UInt8(ascii: ":")) else { return nil }
                switch key {
                case "kind":
                    guard kind == nil, let value = string() else { return nil }
                    kind = value
                case "id":
                    guard id == nil, let value = string() else { return nil }
                    id = value
                case "payload":
                    guard payload == nil, let text = stringOrNull() else { return nil }
                    guard let text else {
                        payload = .some(nil)
                        break
                    }
                    guard let data = Data(base64Encoded: text) else { return nil }
                    payload = .some([UInt8](data))
                case "modifiedAt":
                    guard modifiedAt == nil, let value = integer() else { return nil }
                    modifiedAt = value
                case "group":
                    guard group == nil, let value = stringOrNull() else { return nil }
                    group = .some(value)
                case "sets":
                    guard sets == nil else { return nil }
                    if takeNull() {
                        sets = []
                    } else {
                        guard let value = memberSets() else { return nil }
                        sets = value
                    }
                case "seq":
                    guard seq == nil, let value = integer() else { return nil }
                    seq = value
                default:
                    return nil
                }
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
        }
        // The fields JSONDecoder requires of a record; the optional ones default as it would.
        guard let kind, let id, let modifiedAt, let seq else { return nil }
        return MirrorStore.PulledRecord(
            kind: kind, id: id, payload: payload ?? nil, modifiedAt: modifiedAt, group: group ?? nil, sets: sets ?? [], seq: seq)
    }

    /// `{"set": ["member", ...], ...}`, in the body's order. Names are told apart
    /// by their bytes, as the hub tells them: `é` as one character and as `e` +
    /// U+0301 are two sets. A name written twice, byte for byte, is given up on.
    private mutating func memberSets() -> [MirrorStore.MemberSet]? {
        guard take(UInt8(ascii: "{")) else { return nil }
        var sets: [MirrorStore.MemberSet] = []
        var names = Set<ExactText>()
        if take(UInt8(ascii: "}")) { return sets }
        while true {
            guard let name = string(), names.insert(ExactText(name)).inserted, take(UInt8(ascii: ":")), take(UInt8(ascii: "[")) else { return nil }
            var members: [String] = []
            if !take(UInt8(ascii: "]")) {
                while true {
                    guard let member = string() else { return nil }
                    members.append(member)
                    if take(UInt8(ascii: ",")) { continue }
                    guard take(UInt8(ascii: "]")) else { return nil }
                    break
                }
            }
            sets.append(MirrorStore.MemberSet(name: name, members: members))
            if take(UInt8(ascii: ",")) { continue }
            return take(UInt8(ascii: "}")) ? sets : nil
        }
    }

    // MARK: - Tokens

    private mutating func take(_ byte: UInt8) -> Bool { tokens.take(byte) }
    private mutating func takeNull() -> Bool { tokens.takeNull() }
    private mutating func boolean() -> Bool? { tokens.boolean() }
    private mutating func integer() -> Int64? { tokens.integer() }
    private mutating func string() -> String? { tokens.string() }

    /// A string, or `null` (`.some(nil)`); nil when it is neither.
    private mutating func stringOrNull() -> String?? {
        if takeNull() { return .some(nil) }
        return string().map { .some($0) }
    }
}
