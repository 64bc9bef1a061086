import Foundation
import SteleSQL

/// The app's writes: each is one queue change and its rollups, in one
/// transaction (003 "Making it instant"), and never a canonical write.
extension MirrorStore {
    /// What a write did to the queue (003 "Collisions").
    public enum Enqueued: Sendable, Equatable {
        /// A new row.
        case inserted
        /// A pending row that no flusher ever claimed took the new value in place.
        case replaced
        /// Nothing to do: the same intent is already queued, or the effective state already is what was asked.
        case unchanged
        /// A pending row that was never sent met its opposite: both are gone, nothing is ever sent.
        case cancelled
        /// A row that may have reached the hub (in flight, failed, or claimed once) met a new
        /// intent: the row takes it with a new mutation id and waits to be sent again.
        case overlaidForward
    }

    /// An optimistic upsert of the record, optionally placing it in `group`.
    /// `modifiedAt` is the client's clock, or one past the version the user saw when that is later.
    @discardableResult
    public func put(kind: String, id: String, payload: [UInt8], group: String? = nil) throws -> Enqueued {
        try Self.checkKey(kind, "kind")
        try Self.checkKey(id, "id")
        if let group { try Self.checkKey(group, "group") }
        guard payload.count <= configuration.maximumPayloadBytes else {
            throw MirrorError(
                .invalidArgument, "the payload is \(payload.count) bytes, over the hub's \(configuration.maximumPayloadBytes)-byte limit for a record; store it elsewhere and keep a reference")
        }
        return try connection.transaction { try enqueuePayload(kind: kind, id: id, op: "put", payload: payload, group: group, remember: true) }
    }

    /// An optimistic delete: the record disappears from every read at once and
    /// the hub is asked to delete it (confirm-then-tombstone, 004).
    @discardableResult
    public func delete(kind: String, id: String) throws -> Enqueued {
        try Self.checkKey(kind, "kind")
        try Self.checkKey(id, "id")
        return try connection.transaction { try enqueuePayload(kind: kind, id: id, op: "delete", payload: nil, group: nil, remember: true) }
    }

    /// Adds `member` to the record's set `set` (a label).
    @discardableResult
    public func add(kind: String, id: String, set: String, member: String) throws -> Enqueued {
        try checkedSetOp(kind: kind, id: id, set: set, member: member)
        return try connection.transaction { try enqueueSet(kind: kind, id: id, op: "add", set: set, member: member, remember: true) }
    }

    /// Removes `member` from the record's set `set`.
    @discardableResult
    public func remove(kind: String, id: String, set: String, member: String) throws -> Enqueued {
        try checkedSetOp(kind: kind, id: id, set: set, member: member)
        return try connection.transaction { try enqueueSet(kind: kind, id: id, op: "remove", set: set, member: member, remember: true) }
    }

    /// Group-level triage (003 "Thread-level vs message-level"): removes `member`
    /// from every effective record of the group that carries it, so the group's
    /// rollup really turns false. Returns what each delta did to the queue, by record id.
    @discardableResult
    public func removeFromGroup(kind: String, group: String, set: String, member: String) throws -> [String: Enqueued] {
        try triage(kind: kind, group: group, set: set, member: member, op: "remove")
    }

    /// Adds `member` to every effective record of the group that lacks it.
    @discardableResult
    public func addToGroup(kind: String, group: String, set: String, member: String) throws -> [String: Enqueued] {
        try triage(kind: kind, group: group, set: set, member: member, op: "add")
    }

    private func triage(kind: String, group: String, set: String, member: String, op: String) throws -> [String: Enqueued] {
        try Self.checkKey(group, "group")
        try checkedSetOp(kind: kind, id: group, set: set, member: member)
        return try connection.transaction {
            let needing = try connection.query(
                """
                SELECT g.id FROM (\(MirrorOverlay.groupRecords(kind: "?1", group: "?2"))) AS g
                WHERE \(MirrorOverlay.holds(kind: "?1", id: "g.id", set: "?3", member: "?4")) = ?5 ORDER BY g.id
                """, [.text(kind), .text(group), .text(set), .text(member), .integer(op == "remove" ? 1 : 0)]
            ) { $0.text(0) }
            var results: [String: Enqueued] = [:]
            for id in needing { results[id] = try enqueueSet(kind: kind, id: id, op: op, set: set, member: member, remember: false) }
            if !needing.isEmpty {
                try rememberForUndo(UndoRecord(kind: kind, setChanges: needing.map { UndoRecord.SetChange(id: $0, op: op, set: set, member: member) }))
            }
            return results
        }
    }

    /// Enqueues the inverse of the last write (003 "Undo"): the collision rules
    /// do the rest (a pending original is cancelled and nothing is sent; one in
    /// flight is overlaid forward and the inverse is sent). A group triage is
    /// undone on exactly the records it changed. `false` when there is nothing to undo.
    @discardableResult
    public func undo() throws -> Bool {
        try connection.transaction {
            guard case .blob(let encoded) = try meta("undo"), let record = try? JSONDecoder().decode(UndoRecord.self, from: Data(encoded)) else { return false }
            try setMeta("undo", .null)
            for change in record.setChanges {
                _ = try enqueueSet(kind: record.kind, id: change.id, op: change.op == "add" ? "remove" : "add", set: change.set, member: change.member, remember: false)
            }
            if let before = record.before {
                if before.alive, let payload = before.payload {
                    _ = try enqueuePayload(kind: record.kind, id: before.id, op: "put", payload: payload, group: before.group, remember: false)
                } else {
                    _ = try enqueuePayload(kind: record.kind, id: before.id, op: "delete", payload: nil, group: nil, remember: false)
                }
            }
            return true
        }
    }

    /// What ``undo()`` reverses: the set deltas of the last write, or the record as it was before a put or delete.
    struct UndoRecord: Codable {
        struct SetChange: Codable {
            let id: String
            let op: String
            let set: String
            let member: String
        }

        struct Before: Codable {
            let id: String
            let alive: Bool
            let payload: [UInt8]?
            let group: String?
        }

        let kind: String
        var setChanges: [SetChange] = []
        var before: Before?

        /// The record as the JSON `JSONEncoder` writes for it (``undo()`` reads it
        /// back with `JSONDecoder`), written by hand: every delta remembers its
        /// undo, and Foundation's encoder cost more than the rest of a delta's Swift work.
        var json: [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(96 + (before?.payload?.count ?? 0) * 4)
            out += #"{"kind":"#.utf8
            Self.append(string: kind, to: &out)
            out += #","setChanges":["#.utf8
            for (index, change) in setChanges.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out += #"{"id":"#.utf8
                Self.append(string: change.id, to: &out)
                out += #","op":"#.utf8
                Self.append(string: change.op, to: &out)
                out += #","set":"#.utf8
                Self.append(string: change.set, to: &out)
                out += #","member":"#.utf8
                Self.append(string: change.member, to: &out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
            if let before {
                out += #","before":{"id":"#.utf8
                Self.append(string: before.id, to: &out)
                out += (before.alive ? #","alive":true"# : #","alive":false"#).utf8
                if let payload = before.payload {
                    out += #","payload":["#.utf8
                    for (index, byte) in payload.enumerated() {
                        if index > 0 { out.append(UInt8(ascii: ",")) }
                        out += String(byte).utf8
                    }
                    out.append(UInt8(ascii: "]"))
                }
                if let group = before.group {
                    out += #","group":"#.utf8
                    Self.append(string: group, to: &out)
                }
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "}"))
            return out
        }

        /// A JSON string: quote and backslash escaped, control characters as `\u00XX`, the rest as its UTF-8.
        private static func append(string: String, to out: inout [UInt8]) {
            func digit(_ value: UInt8) -> UInt8 { value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10 }
            out.append(UInt8(ascii: "\""))
            for byte in string.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), byte]
                case 0..<0x20: out += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), digit(byte >> 4), digit(byte & 0xF)]
                default: out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
    }

    /// Moves every failed mutation back to pending with fresh attempts (SCENARIOS `C retry`).
    /// Returns how many moved.
    @discardableResult
    public func retryFailed() throws -> Int {
        try connection.transaction {
            try connection.execute(
                "UPDATE mirror_queue SET state = 'pending', attempts = 0, next_attempt_at = 0, claim_owner = NULL, claim_until = NULL WHERE state = 'failed'")
            return Int(try connection.scalarInt("SELECT changes()") ?? 0)
        }
    }

    // MARK: - Enqueueing

    /// The effective state of a record before a write, for the undo record and the stamp.
    private func effective(kind: String, id: String) throws -> (alive: Bool, payload: [UInt8]?, group: String?, modifiedAt: Int64?) {
        let k = "?1"
        let i = "?2"
        return try connection.queryFirst(
            """
            SELECT \(MirrorOverlay.alive(kind: k, id: i)), \(MirrorOverlay.payload(kind: k, id: i)), \(MirrorOverlay.group(kind: k, id: i)),
                   \(MirrorOverlay.modifiedAt(kind: k, id: i))
            """, [.text(kind), .text(id)]
        ) { ($0.int64(0) == 1, $0.optionalBlob(1), $0.isNull(2) ? nil : $0.text(2), $0.optionalInt64(3)) } ?? (false, nil, nil, nil)
    }

    /// A write's `modifiedAt`: the (corrected) clock, but never at or before the
    /// version the user is replacing, so editing what one sees wins over it even
    /// on a clock that runs behind.
    private func stamp(after seen: Int64?) throws -> Int64 {
        max(try stampNow(), (seen ?? Int64.min) &+ 1)
    }

    private struct QueueRow {
        let qid: Int64
        let op: String
        let state: String
        let claims: Int64
    }

    private func queueRow(kind: String, id: String, set: String, member: String) throws -> QueueRow? {
        try connection.queryFirst(
            "SELECT qid, op, state, claims FROM mirror_queue WHERE kind = ? AND id = ? AND set_name = ? AND member = ?",
            [.text(kind), .text(id), .text(set), .text(member)]
        ) { QueueRow(qid: $0.int64(0), op: $0.text(1), state: $0.text(2), claims: $0.int64(3)) }
    }

    /// Whether a row may have reached the hub: sent (in flight), given up on (failed), or claimed by a flusher once.
    private func mayHaveBeenSent(_ row: QueueRow) -> Bool { row.state != "pending" || row.claims > 0 }

    /// A put row's outcome that leaves it standing: applied, or not known (its answer was lost).
    private static let mayStand = "(outcome IS NULL OR outcome = 'applied')"

    /// The live copy of a record the hub held when this client last pulled it.
    private typealias Copy = (payload: [UInt8], modifiedAt: Int64, group: String?)

    private func canonicalCopy(kind: String, id: String) throws -> Copy? {
        try connection.queryFirst(
            "SELECT payload, modified_at, grp FROM mirror_records WHERE kind = ? AND id = ? AND payload IS NOT NULL", [.text(kind), .text(id)]
        ) { (payload: $0.blob(0), modifiedAt: $0.int64(1), group: $0.isNull(2) ? nil : $0.text(2)) }
    }

    /// The arguments that set a row's `overlaid_*` to `copy` (or clear them).
    private static func overlaid(_ copy: Copy?) -> [SQLValue] {
        [copy.map { .blob($0.payload) } ?? .null, copy.map { .integer($0.modifiedAt) } ?? .null, copy?.group.map(SQLValue.text) ?? .null]
    }

    /// A row takes a new intent under a new mutation id and waits to be sent (003: "overlay forward").
    /// Its claim count stays: what the row carried before may have reached the hub, so a
    /// later opposite write overlays it forward again instead of cancelling it (a put
    /// over a delete that may have arrived, then a delete, must still send the delete:
    /// seed 120192, where the hub otherwise kept an older copy another client pushed).
    /// A delete keeps the live copy it deletes (`overlaid_*`): the put it overlays if that
    /// put may stand, else what an earlier delete kept, else the canonical copy. If the
    /// hub refuses the delete because the kind is append-only (002), that copy is what
    /// stands, and it is sent again (the hub, restored from an older copy, may lack it).
    private func overlayForward(_ qid: Int64, op: String, payload: [UInt8]?, group: String?, modifiedAt: Int64, canonical: Copy?) throws {
        let (mutation, ordinal) = try newMutationID()
        let kept = "CASE WHEN ?3 <> 'delete' THEN 0 WHEN op = 'put' AND \(Self.mayStand) THEN 1 WHEN op = 'delete' AND overlaid_payload IS NOT NULL THEN 2 ELSE 3 END"
        try connection.execute(
            """
            UPDATE mirror_queue SET
                overlaid_payload = CASE \(kept) WHEN 0 THEN NULL WHEN 1 THEN payload WHEN 2 THEN overlaid_payload ELSE ?8 END,
                overlaid_modified_at = CASE \(kept) WHEN 0 THEN NULL WHEN 1 THEN modified_at WHEN 2 THEN overlaid_modified_at ELSE ?9 END,
                overlaid_group = CASE \(kept) WHEN 0 THEN NULL WHEN 1 THEN grp WHEN 2 THEN overlaid_group ELSE ?10 END,
                mutation = ?2, op = ?3, payload = ?4, grp = ?5, modified_at = ?6, state = 'pending', attempts = 0,
                claim_owner = NULL, claim_until = NULL, next_attempt_at = 0, expected_history_id = NULL, expected_epoch = NULL, outcome = NULL, ordinal = ?7, last_error = NULL
            WHERE qid = ?1
            """,
            [.integer(qid), .text(mutation), .text(op), payload.map(SQLValue.blob) ?? .null, group.map(SQLValue.text) ?? .null, .integer(modifiedAt), .integer(ordinal)]
                + Self.overlaid(canonical))
    }

    private func insertRow(
        kind: String, id: String, op: String, set: String, member: String, payload: [UInt8]?, group: String?, modifiedAt: Int64, overlaid: Copy? = nil
    ) throws {
        let (mutation, ordinal) = try newMutationID()
        try connection.execute(
            """
            INSERT INTO mirror_queue (mutation, kind, id, op, set_name, member, payload, grp, modified_at, ordinal, overlaid_payload, overlaid_modified_at, overlaid_group)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [.text(mutation), .text(kind), .text(id), .text(op), .text(set), .text(member), payload.map(SQLValue.blob) ?? .null, group.map(SQLValue.text) ?? .null,
             .integer(modifiedAt), .integer(ordinal)] + Self.overlaid(overlaid))
    }

    /// A put or a delete, with 003's collision rules applied to the record's payload row.
    func enqueuePayload(kind: String, id: String, op: String, payload: [UInt8]?, group: String?, remember: Bool) throws -> Enqueued {
        let before = try effective(kind: kind, id: id)
        let modifiedAt = try stamp(after: before.modifiedAt)
        // A put keeps the record's group unless it names one.
        let newGroup = op == "put" ? (group ?? before.group) : nil
        let result: Enqueued
        // What a delete keeps of the record for an append-only kind's refusal (see overlayForward).
        let canonical = op == "delete" ? try canonicalCopy(kind: kind, id: id) : nil
        if let row = try queueRow(kind: kind, id: id, set: "", member: "") {
            if row.op == "delete" && op == "delete" {
                // 003, pending same: a no-op; a failed one is the user asking again: fresh attempts.
                // (A delete queued again by a replay met the user's own delete, was taken for an
                // unsent put and cancelled, and the delete was lost: seed 120244.)
                if row.state == "failed" {
                    try connection.execute("UPDATE mirror_queue SET state = 'pending', attempts = 0, next_attempt_at = 0 WHERE qid = ?", [.integer(row.qid)])
                }
                return .unchanged
            } else if mayHaveBeenSent(row) {
                try overlayForward(row.qid, op: op, payload: payload, group: newGroup, modifiedAt: modifiedAt, canonical: canonical)
                result = .overlaidForward
            } else if op == "delete", try canonicalAlive(kind: kind, id: id) == false {
                // A put that was never sent, of a record the hub does not have: nothing to send at all.
                try connection.execute("DELETE FROM mirror_queue WHERE qid = ?", [.integer(row.qid)])
                result = .cancelled
            } else {
                let ordinal = try nextNumber()
                try connection.execute(
                    """
                    UPDATE mirror_queue SET op = ?2, payload = ?3, grp = ?4, modified_at = ?5, ordinal = ?6,
                        overlaid_payload = ?7, overlaid_modified_at = ?8, overlaid_group = ?9
                    WHERE qid = ?1
                    """,
                    // A row never sent: the hub holds only the canonical copy, which a delete keeps.
                    [.integer(row.qid), .text(op), payload.map(SQLValue.blob) ?? .null, newGroup.map(SQLValue.text) ?? .null, .integer(modifiedAt), .integer(ordinal)]
                        + Self.overlaid(canonical))
                result = .replaced
            }
        } else if op == "delete" && !before.alive {
            return .unchanged
        } else {
            try insertRow(kind: kind, id: id, op: op, set: "", member: "", payload: payload, group: newGroup, modifiedAt: modifiedAt, overlaid: canonical)
            result = .inserted
        }
        if remember {
            try rememberForUndo(UndoRecord(kind: kind, before: UndoRecord.Before(id: id, alive: before.alive, payload: before.payload, group: before.group)))
        }
        let after = try self.group(kind: kind, id: id)
        var groups = RollupGroups()
        for group in [before.group, after].compactMap({ $0 }) { groups.insert(group, of: kind) }
        try recomputeRollups(groups)
        return result
    }

    /// An add or a remove, with 003's collision table.
    func enqueueSet(kind: String, id: String, op: String, set: String, member: String, remember: Bool) throws -> Enqueued {
        let result: Enqueued
        if let row = try queueRow(kind: kind, id: id, set: set, member: member) {
            if row.op == op {
                // Pending or in flight, same op: idempotent. A failed one is the user asking again: fresh attempts.
                if row.state == "failed" {
                    try connection.execute(
                        "UPDATE mirror_queue SET state = 'pending', attempts = 0, next_attempt_at = 0 WHERE qid = ?", [.integer(row.qid)])
                }
                result = .unchanged
            } else if mayHaveBeenSent(row) {
                // In flight (or possibly sent), opposite: flip and send again; deleting would lose the new intent.
                try overlayForward(row.qid, op: op, payload: nil, group: nil, modifiedAt: try stampNow(), canonical: nil)
                result = .overlaidForward
            } else {
                // Pending and never sent, opposite: a net no-op.
                try connection.execute("DELETE FROM mirror_queue WHERE qid = ?", [.integer(row.qid)])
                result = .cancelled
            }
        } else {
            let holds = try connection.scalarInt(Self.holdsSQL, [.text(kind), .text(id), .text(set), .text(member)]) == 1
            if holds == (op == "add") {
                result = .unchanged
            } else {
                try insertRow(kind: kind, id: id, op: op, set: set, member: member, payload: nil, group: nil, modifiedAt: try stampNow())
                result = .inserted
            }
        }
        if remember && result != .unchanged {
            try rememberForUndo(UndoRecord(kind: kind, setChanges: [UndoRecord.SetChange(id: id, op: op, set: set, member: member)]))
        }
        if result != .unchanged, let group = try self.group(kind: kind, id: id) {
            try recomputePresence(afterDelta: op, kind: kind, id: id, group: group, set: set, member: member)
        }
        return result
    }

    private func canonicalAlive(kind: String, id: String) throws -> Bool {
        try connection.scalarInt("SELECT payload IS NOT NULL FROM mirror_records WHERE kind = ? AND id = ?", [.text(kind), .text(id)]) == 1
    }

    // MARK: - Checks and encodings

    /// The hub's rule for names (docs/hub-api.md "Names are byte strings"): a name
    /// it would refuse never enters the queue, where it would stop every push.
    static func checkKey(_ text: String, _ field: String) throws {
        guard (1...1_024).contains(text.utf8.count) else { throw MirrorError(.invalidArgument, "\(field) must be 1 to 1,024 UTF-8 bytes") }
        guard !text.utf8.contains(0) else { throw MirrorError(.invalidArgument, "\(field) holds U+0000 (NUL), which the hub refuses in every name") }
    }

    private func checkedSetOp(kind: String, id: String, set: String, member: String) throws {
        try Self.checkKey(kind, "kind")
        try Self.checkKey(id, "id")
        try Self.checkKey(set, "set")
        try Self.checkKey(member, "member")
    }

    private func rememberForUndo(_ record: UndoRecord) throws {
        try setMeta("undo", .blob(record.json))
    }
}
