import Foundation
import Stele
import SteleSQL

/// Server-authoritative records (DESIGN §8.1, HUB-API "Records"): pushes of
/// mutations merged last-writer-wins on the client's `modifiedAt` (a tie goes
/// to the tombstone; an append-only kind refuses tombstones, seed 002), member
/// sets with idempotent add and remove, and mutation ids answered as the first
/// time. Every change takes the account's next history position under the
/// account's row lock (``HubSQL/lockAccount(_:)``), so positions are handed out
/// in commit order: a pager reading `changes` never skips one that commits later.
extension HubService {
    /// The wakeup key of an account's change feed.
    static func recordsKey(_ account: String) -> String { "records:\(account)" }

    /// One mutation of a push, checked before anything is applied.
    struct Mutation {
        enum Op: String, CaseIterable {
            case put, delete, add, remove
        }

        let id: String
        let kind: String
        let record: String
        let op: Op
        let payload: [UInt8]?
        let group: String?
        let set: String?
        let member: String?
        let modifiedAt: Int64
    }

    /// A record as the hub holds it; encoded, HUB-API's record object.
    struct StoredRecord: Encodable {
        let kind: String
        let id: String
        let payload: [UInt8]?
        let modifiedAt: Int64
        let group: String?
        let seq: Int64
        var sets: [String: [String]] = [:]

        var isTombstone: Bool { payload == nil }

        enum CodingKeys: String, CodingKey {
            case kind, id, payload, modifiedAt, group, sets, seq
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(kind, forKey: .kind)
            try container.encode(id, forKey: .id)
            // Both nullable fields are always present: `null` is a tombstone's payload.
            try container.encode(payload.map { Data($0).base64EncodedString() }, forKey: .payload)
            try container.encode(modifiedAt, forKey: .modifiedAt)
            try container.encode(group, forKey: .group)
            try container.encode(sets.mapValues { $0.sorted() }, forKey: .sets)
            try container.encode(seq, forKey: .seq)
        }

        /// HUB-API's record object, for bodies built as dictionaries.
        var json: [String: Any] {
            [
                "kind": kind, "id": id, "payload": payload.map { Data($0).base64EncodedString() as Any } ?? NSNullValue.value,
                "modifiedAt": modifiedAt, "group": group.map { $0 as Any } ?? NSNullValue.value, "sets": sets.mapValues { $0.sorted() }, "seq": seq,
            ]
        }
    }

    /// A push's answer for one mutation.
    struct MutationResult: Codable {
        let mutation: String
        var status = ""
        var seq: Int64?
        var reason: String?
        var hubTime: Int64?
    }

    /// A 200 answer with `value` as its JSON body, encoded without bridging through Foundation's dictionaries.
    static func encoded(_ value: some Encodable) throws -> HubResponse {
        HubResponse(status: 200, headers: ["Content-Type": "application/json"], body: Array(try JSONEncoder().encode(value)))
    }

    // MARK: - Push

    /// `POST /v1/accounts/{a}/records/push`.
    func push(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        let mutations = try Self.mutations(request.body, configuration: configuration)
        let now = now()
        let (history, results, changed, epoch) = try transaction { sql in
            _ = try authenticate(request, account, sql)
            try sql.lockAccount(account.hex)
            var history = try historyID(account, sql)
            let before = history
            let appendOnly = Set(try sql.query("SELECT kind FROM record_kinds WHERE account = $1 AND append_only = 1", [.text(account.hex)]).compactMap { $0[column: 0].string })
            let decoder = JSONDecoder()
            let encoder = JSONEncoder()
            var results: [MutationResult] = []
            for mutation in mutations {
                if let seen = try sql.query("SELECT result FROM mutations WHERE account = $1 AND mutation = $2", [.text(account.hex), .text(mutation.id)]).first,
                    let text = seen[column: 0].string, let answer = try? decoder.decode(MutationResult.self, from: Data(text.utf8))
                {
                    results.append(answer)
                    continue
                }
                let result = try apply(mutation, account: account, appendOnly: appendOnly.contains(mutation.kind), history: &history, now: now, sql)
                try sql.execute(
                    "INSERT INTO mutations (account, mutation, result, created_ms) VALUES ($1, $2, $3, $4)",
                    [.text(account.hex), .text(mutation.id), .text(String(decoding: try encoder.encode(result), as: UTF8.self)), .integer(now)])
                results.append(result)
            }
            if history != before { try sql.execute("UPDATE accounts SET history = $2 WHERE id = $1", [.text(account.hex), .integer(history)]) }
            return (history, results, history != before, try self.epoch(sql))
        }
        if changed { announce(Self.recordsKey(account.hex)) }
        // The epoch beside the history id (HUB-API: every history id travels with it), so a
        // client knows which history its retirement gates belong to.
        struct Answer: Encodable {
            let historyId: Int64
            let epoch: String
            let results: [MutationResult]
        }
        return try Self.encoded(Answer(historyId: history, epoch: epoch, results: results))
    }

    /// The account's history id: its highest change position.
    func historyID(_ account: AccountID, _ sql: any HubSQL) throws -> Int64 {
        try sql.query("SELECT history FROM accounts WHERE id = $1", [.text(account.hex)]).first?[column: 0].int64 ?? 0
    }

    /// Applies one mutation; returns its result object. `history` moves by one for each change.
    private func apply(_ mutation: Mutation, account: AccountID, appendOnly: Bool, history: inout Int64, now: Int64, _ sql: any HubSQL) throws -> MutationResult {
        var result = MutationResult(mutation: mutation.id)
        func answer(_ status: String, reason: String? = nil, seq: Int64? = nil) -> MutationResult {
            result.status = status
            result.reason = reason
            result.seq = seq
            return result
        }
        let ahead = Int64(configuration.maximumClockAheadSeconds) * 1000
        if mutation.modifiedAt > now + ahead {
            result.hubTime = now
            return answer("refused", reason: "clock_skew")
        }
        let existing = try record(account, kind: mutation.kind, id: mutation.record, sql)
        switch mutation.op {
        case .put:
            guard let payload = mutation.payload else { preconditionFailure("a put without a payload passed the checks") }
            if let existing {
                // Last writer wins on modifiedAt; a tie goes to the tombstone, and between
                // two live versions to the larger payload (every hub decides alike).
                if existing.modifiedAt > mutation.modifiedAt { return answer("stale", reason: "a newer version won") }
                if existing.modifiedAt == mutation.modifiedAt {
                    guard let current = existing.payload else { return answer("stale", reason: "a tombstone of the same time won") }
                    if current == payload, existing.group == (mutation.group ?? existing.group) { return answer("applied", seq: existing.seq) }
                    if current.lexicographicallyPrecedes(payload) == false { return answer("stale", reason: "a version of the same time won") }
                }
            }
            history += 1
            try sql.execute(
                """
                INSERT INTO records (account, kind, id, payload, modified_ms, grp, seq) VALUES ($1, $2, $3, $4, $5, $6, $7)
                ON CONFLICT (account, kind, id) DO UPDATE SET payload = excluded.payload, modified_ms = excluded.modified_ms, grp = excluded.grp, seq = excluded.seq
                """,
                [.text(account.hex), .text(mutation.kind), .text(mutation.record), .blob(payload), .integer(mutation.modifiedAt),
                 (mutation.group ?? existing?.group).map(SQLValue.text) ?? .null, .integer(history)])
            return answer("applied", seq: history)
        case .delete:
            // 002: a tombstone never beats a live copy of an append-only kind.
            if appendOnly { return answer("refused", reason: "append_only") }
            guard let existing else {
                // Absent: the outcome the client wanted already holds (004: not found is success). The hub
                // still keeps the deletion and its time, so that an older copy pushed later (a client
                // that missed the delete re-pushing what a restored hub lacks) loses to it instead of
                // bringing the record back.
                history += 1
                try sql.execute(
                    "INSERT INTO records (account, kind, id, payload, modified_ms, grp, seq) VALUES ($1, $2, $3, NULL, $4, NULL, $5)",
                    [.text(account.hex), .text(mutation.kind), .text(mutation.record), .integer(mutation.modifiedAt), .integer(history)])
                return answer("not_found")
            }
            guard !existing.isTombstone else { return answer("not_found") }
            if existing.modifiedAt > mutation.modifiedAt { return answer("stale", reason: "a newer version won") }
            history += 1
            try tombstone(account, kind: mutation.kind, id: mutation.record, modifiedAt: mutation.modifiedAt, seq: history, sql)
            return answer("applied", seq: history)
        case .add, .remove:
            guard let existing, !existing.isTombstone else { return answer("not_found") }
            guard let set = mutation.set, let member = mutation.member else { preconditionFailure("a set op without set and member passed the checks") }
            let key: [SQLValue] = [.text(account.hex), .text(mutation.kind), .text(mutation.record), .text(set), .text(member)]
            let changed =
                mutation.op == .add
                ? try sql.execute("INSERT INTO record_members (account, kind, id, set_name, member) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING", key)
                : try sql.execute("DELETE FROM record_members WHERE account = $1 AND kind = $2 AND id = $3 AND set_name = $4 AND member = $5", key)
            // Idempotent: adding a member twice (or removing an absent one) changes nothing.
            guard changed > 0 else { return answer("applied", seq: existing.seq) }
            history += 1
            try sql.execute(
                "UPDATE records SET seq = $4 WHERE account = $1 AND kind = $2 AND id = $3",
                [.text(account.hex), .text(mutation.kind), .text(mutation.record), .integer(history)])
            return answer("applied", seq: history)
        }
    }

    /// Turns a record into its tombstone at `seq`: no payload, no members.
    func tombstone(_ account: AccountID, kind: String, id: String, modifiedAt: Int64, seq: Int64, _ sql: any HubSQL) throws {
        let key: [SQLValue] = [.text(account.hex), .text(kind), .text(id)]
        try sql.execute("UPDATE records SET payload = NULL, modified_ms = $4, seq = $5 WHERE account = $1 AND kind = $2 AND id = $3", key + [.integer(modifiedAt), .integer(seq)])
        try sql.execute("DELETE FROM record_members WHERE account = $1 AND kind = $2 AND id = $3", key)
    }

    /// The record `kind`/`id` with its sets, tombstone or live; `nil` when the hub never had it.
    func record(_ account: AccountID, kind: String, id: String, _ sql: any HubSQL) throws -> StoredRecord? {
        let key: [SQLValue] = [.text(account.hex), .text(kind), .text(id)]
        guard let row = try sql.query("SELECT payload, modified_ms, grp, seq FROM records WHERE account = $1 AND kind = $2 AND id = $3", key).first else {
            return nil
        }
        var record = StoredRecord(kind: kind, id: id, payload: row[column: 0].bytes, modifiedAt: row[column: 1].int64 ?? 0, group: row[column: 2].string, seq: row[column: 3].int64 ?? 0)
        for member in try sql.query("SELECT set_name, member FROM record_members WHERE account = $1 AND kind = $2 AND id = $3", key) {
            guard let set = member[column: 0].string, let name = member[column: 1].string else { continue }
            record.sets[set, default: []].append(name)
        }
        return record
    }

    // MARK: - Checking a mutation

    /// A push's body as it arrives: each field typed, so a wrong type is a
    /// decoding error that names it.
    private struct PushBody: Decodable {
        struct Item: Decodable {
            let mutation: String?
            let kind: String?
            let id: String?
            let op: String?
            let payload: String?
            let group: String?
            let set: String?
            let member: String?
            let modifiedAt: WholeNumber?
        }

        /// A JSON integer: a fraction or a number past 2^53 is refused naming its field
        /// (Foundation's decoder would call the whole body invalid).
        struct WholeNumber: Decodable {
            let value: Int64

            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let whole = try? container.decode(Int64.self) {
                    value = whole
                    return
                }
                let number = try container.decode(Double.self)
                guard number.rounded() == number, abs(number) <= 9_007_199_254_740_991 else {
                    throw DecodingError.dataCorruptedError(in: container, debugDescription: "must be an integer, not \(number)")
                }
                value = Int64(number)
            }
        }

        let mutations: [Item]?
    }

    /// The mutations of a push body, checked before anything is applied.
    /// - Throws: `400 bad_request` naming the mutation and the field.
    static func mutations(_ body: [UInt8], configuration: Configuration) throws(HubRefusal) -> [Mutation] {
        guard !body.isEmpty else { throw .badRequest("the body is empty; send {\"mutations\": [...]}") }
        let parsed: PushBody
        do {
            parsed = try JSONDecoder().decode(PushBody.self, from: Data(body))
        } catch let error as DecodingError {
            throw .badRequest(describe(error))
        } catch {
            throw .badRequest("the body is not valid JSON")
        }
        guard let items = parsed.mutations else { throw .badRequest("the field \"mutations\" is missing") }
        guard items.count <= configuration.maximumMutationsPerPush else {
            throw .badRequest("the field \"mutations\" holds \(items.count) mutations; at most \(configuration.maximumMutationsPerPush) per push")
        }
        return try items.enumerated().map { index, item throws(HubRefusal) in try mutation(item, at: index, configuration: configuration) }
    }

    /// A decoding error as a message naming the field (`mutations[3].modifiedAt`).
    private static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingPrefix(".").description
        }
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "the field \"\(path(context.codingPath))\" has the wrong type: \(context.debugDescription)"
        case .dataCorrupted(let context) where !context.codingPath.isEmpty:
            return "the field \"\(path(context.codingPath))\" is malformed: \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "the field \"\(path(context.codingPath + [key]))\" is missing"
        default:
            return "the body is not valid JSON"
        }
    }

    /// One item of `mutations`, or a `400` naming the field.
    private static func mutation(_ item: PushBody.Item, at index: Int, configuration: Configuration) throws(HubRefusal) -> Mutation {
        func refuse(_ message: String) -> HubRefusal { .badRequest("mutations[\(index)]: \(message)") }
        func required(_ value: String?, _ field: String) throws(HubRefusal) -> String {
            guard let value else { throw refuse("the field \"\(field)\" is missing") }
            return value
        }
        func checkedKey(_ value: String?, _ field: String) throws(HubRefusal) -> String {
            let text = try required(value, field)
            guard (1...1_024).contains(text.utf8.count) else { throw refuse("the field \"\(field)\" must be 1 to 1,024 UTF-8 bytes") }
            return text
        }
        let id = try required(item.mutation, "mutation")
        guard (1...200).contains(id.utf8.count) else { throw refuse("the field \"mutation\" must be 1 to 200 bytes") }
        let kind = try checkedKey(item.kind, "kind")
        let record = try checkedKey(item.id, "id")
        let opText = try required(item.op, "op")
        guard let op = Mutation.Op(rawValue: opText) else {
            throw refuse("the field \"op\" is \"\(opText.prefix(40))\"; it must be put, delete, add or remove")
        }
        guard let modifiedAt = item.modifiedAt?.value else { throw refuse("the field \"modifiedAt\" is missing") }
        let group = try item.group.map { text throws(HubRefusal) in try checkedKey(text, "group") }
        var payload: [UInt8]?
        var set: String?
        var member: String?
        switch op {
        case .put:
            guard let data = Data(base64Encoded: try required(item.payload, "payload")) else { throw refuse("the field \"payload\" must be standard padded base64") }
            guard data.count <= configuration.maximumRecordBytes else {
                throw refuse("the field \"payload\" is \(data.count) bytes, over the hub's \(configuration.maximumRecordBytes)-byte limit")
            }
            payload = [UInt8](data)
        case .delete:
            break
        case .add, .remove:
            set = try checkedKey(item.set, "set")
            member = try checkedKey(item.member, "member")
        }
        return Mutation(id: id, kind: kind, record: record, op: op, payload: payload, group: group, set: set, member: member, modifiedAt: modifiedAt)
    }

    /// A kind, record id, set or member: 1 to 1,024 UTF-8 bytes (the library's key rule).
    static func key(_ text: String, field: String) throws(HubRefusal) -> String {
        guard (1...1_024).contains(text.utf8.count) else { throw .badRequest("the field \"\(field)\" must be 1 to 1,024 UTF-8 bytes") }
        return text
    }
}
