import SteleSQL

/// The pull applier: the only writer of the canonical tables.
extension MirrorStore {
    /// A record as the hub sent it (HUB-API's record object).
    package struct PulledRecord: Sendable, Equatable {
        package var kind: String
        package var id: String
        package var payload: [UInt8]?
        package var modifiedAt: Int64
        package var group: String?
        /// Its member sets, in the order the hub sent them. A list, not a dictionary:
        /// the hub keeps set names apart by their bytes, and a `[String: …]` holds `é`
        /// as one character and as `e` + U+0301 as one key, dropping a set.
        package var sets: [MemberSet]
        package var seq: Int64

        package init(kind: String, id: String, payload: [UInt8]?, modifiedAt: Int64, group: String?, sets: [MemberSet], seq: Int64) {
            self.kind = kind
            self.id = id
            self.payload = payload
            self.modifiedAt = modifiedAt
            self.group = group
            self.sets = sets
            self.seq = seq
        }

        /// Sets given as a dictionary (whose keys are distinct to Swift), put in the order of their names' bytes.
        package init(kind: String, id: String, payload: [UInt8]?, modifiedAt: Int64, group: String?, sets: [String: [String]], seq: Int64) {
            let ordered = sets.map { MemberSet(name: $0.key, members: $0.value) }.sorted { ExactText($0.name) < ExactText($1.name) }
            self.init(kind: kind, id: id, payload: payload, modifiedAt: modifiedAt, group: group, sets: ordered, seq: seq)
        }
    }

    /// One named member set of a pulled record.
    package struct MemberSet: Sendable, Equatable {
        package var name: String
        package var members: [String]

        package init(name: String, members: [String]) {
            self.name = name
            self.members = members
        }

        /// Names and members compared by their bytes, as the hub compares them.
        package static func == (lhs: MemberSet, rhs: MemberSet) -> Bool {
            ExactText(lhs.name) == ExactText(rhs.name) && lhs.members.map(ExactText.init) == rhs.members.map(ExactText.init)
        }
    }

    /// What applying a page did.
    struct Applied: Sendable, Equatable {
        var changed = 0
        var retired = 0
        var superseded = 0
    }

    /// Whether the canonical data is gone under a surviving cursor (the app wiped
    /// the store's tables, or a restore brought back an empty copy): every change
    /// of the hub leaves a canonical row (tombstones are kept), so a cursor past
    /// zero over no row means the data must be downloaded again.
    func canonicalDataLost() throws -> Bool {
        let cursor = try self.cursor().historyID
        guard cursor > 0 else { return false }
        return try connection.scalarInt("SELECT EXISTS (SELECT 1 FROM mirror_records)") == 0
    }

    /// Forgets what the pull brought (the canonical records and their members) and
    /// where it reached, keeping the queue of local intent and the epoch: the next
    /// pull downloads every change of the hub's history once, and a restore of the
    /// hub meanwhile is still noticed (SCENARIOS `C reset`). For a store whose
    /// canonical tables are suspect; the reads show the queue over nothing until then.
    public func resetSyncState() throws {
        try connection.transaction {
            try connection.execute("DELETE FROM mirror_members")
            try connection.execute("DELETE FROM mirror_records")
            try setMeta("cursor", .integer(0))
            try recomputeAllRollups()
        }
    }

    /// Starts the download over: the cursor goes back to the beginning of the epoch.
    func forgetCursor() throws {
        try connection.transaction { try setMeta("cursor", .integer(0)) }
    }

    /// Applies one page of the change feed and moves the cursor to `next`, in one
    /// transaction: canonical writes, the retirement of every in-flight mutation
    /// whose gate the cursor now reaches (003: "the overlay is removed at exactly
    /// the moment the canonical write replaces it"), failed mutations a genuinely
    /// newer edit replaced (004's second guard, the other way round: the newer
    /// edit wins and a conflict event says so), and the rollups of every group touched.
    func apply(page records: [PulledRecord], next: Int64, epoch: String) throws -> Applied {
        try connection.transaction {
            var applied = Applied()
            let current = try cursor()
            // A page of an older read (another process pulled further meanwhile) moves nothing back.
            var groups = RollupGroups()
            for record in records {
                if current.epoch == epoch,
                    let seq = try connection.scalarInt("SELECT seq FROM mirror_records WHERE kind = ? AND id = ?", [.text(record.kind), .text(record.id)]), seq >= record.seq
                {
                    continue
                }
                if let before = try group(kind: record.kind, id: record.id) { groups.insert(before, of: record.kind) }
                try writeCanonical(record)
                applied.changed += 1
                applied.superseded += try dropSupersededFailure(record)
                if let after = try group(kind: record.kind, id: record.id) { groups.insert(after, of: record.kind) }
            }
            let reached = current.epoch == epoch ? max(current.historyID, next) : next
            try setMeta("cursor", .integer(reached))
            try setMeta("epoch", .text(epoch))
            // Gates of another history mean nothing in this one (the hub was restored after
            // it acknowledged them): those mutations are sent again, harmless by their ids.
            try sendAgain("q.state = 'in_flight' AND q.expected_epoch IS NOT NULL AND q.expected_epoch <> ?", [.text(epoch)])
            applied.retired = try retireEchoed(upTo: reached, groups: &groups)
            try recomputeRollups(groups)
            return applied
        }
    }

    /// Applies a page of records the store has never held, as a first download
    /// brings them: for benchmarks and imports that fill a store with many
    /// records at once. It writes what ``apply(page:next:epoch:)`` writes for
    /// such records (canonical rows and members, a failed mutation a newer edit
    /// supersedes, the cursor, retirement of echoed mutations, and the rollups of
    /// every group touched, computed by the store as always) in one transaction,
    /// with plain inserts in place of that method's per-record checks, which
    /// only matter for a record already held.
    /// - Returns: the number of records written.
    /// - Throws: `SQLiteError` (a constraint failure) and writes nothing when the store already holds one of the records.
    @discardableResult
    package func applyNew(page records: [PulledRecord], next: Int64, epoch: String) throws -> Int {
        try connection.transaction {
            let current = try cursor()
            var groups = RollupGroups()
            let insertRecord = try connection.cached(
                "INSERT INTO mirror_records (kind, id, payload, modified_at, grp, seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            let insertMember = try connection.cached("INSERT INTO mirror_members (kind, id, set_name, member) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING")
            let failuresQueued = try connection.scalarInt(
                "SELECT EXISTS (SELECT 1 FROM mirror_queue WHERE set_name = '' AND (state = 'failed' OR (state = 'pending' AND op = 'put')))") == 1
            for record in records {
                insertRecord.reset()
                try insertRecord.bind([
                    .text(record.kind), .text(record.id), record.payload.map(SQLValue.blob) ?? .null, .integer(record.modifiedAt),
                    record.group.map(SQLValue.text) ?? .null, .integer(record.seq),
                ])
                _ = try insertRecord.step()
                for set in record.sets {
                    for member in set.members {
                        insertMember.reset()
                        try insertMember.bind([.text(record.kind), .text(record.id), .text(set.name), .text(member)])
                        _ = try insertMember.step()
                    }
                }
                if failuresQueued { _ = try dropSupersededFailure(record) }
                if let group = record.group { groups.insert(group, of: record.kind) }
            }
            insertRecord.reset()
            insertMember.reset()
            // A record held only by a queued put has its group there (before and after this page): recompute those too.
            let kinds = Set(records.map(\.kind))
            for (kind, group) in try connection.query("SELECT DISTINCT kind, grp FROM mirror_queue WHERE grp IS NOT NULL", [], { ($0.text(0), $0.text(1)) })
            where kinds.contains(kind) {
                groups.insert(group, of: kind)
            }
            let reached = current.epoch == epoch ? max(current.historyID, next) : next
            try setMeta("cursor", .integer(reached))
            try setMeta("epoch", .text(epoch))
            _ = try retireEchoed(upTo: reached, groups: &groups)
            try recomputeRollups(groups)
            return records.count
        }
    }

    /// Writes one record as the hub has it: payload, time, group, position and its whole member sets.
    private func writeCanonical(_ record: PulledRecord) throws {
        try connection.execute(
            """
            INSERT INTO mirror_records (kind, id, payload, modified_at, grp, seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            ON CONFLICT (kind, id) DO UPDATE SET payload = excluded.payload, modified_at = excluded.modified_at, grp = excluded.grp, seq = excluded.seq
            """,
            [.text(record.kind), .text(record.id), record.payload.map(SQLValue.blob) ?? .null, .integer(record.modifiedAt), record.group.map(SQLValue.text) ?? .null,
             .integer(record.seq)])
        try connection.execute("DELETE FROM mirror_members WHERE kind = ? AND id = ?", [.text(record.kind), .text(record.id)])
        for set in record.sets {
            for member in set.members {
                try connection.execute(
                    "INSERT INTO mirror_members (kind, id, set_name, member) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [.text(record.kind), .text(record.id), .text(set.name), .text(member)])
            }
        }
    }

    /// 004's failed-delete hole, closed: a failed payload mutation keeps its
    /// overlay until a retry succeeds or the hub shows a genuinely newer edit of
    /// the record; then the edit wins, the mutation is dropped, and a conflict event says so.
    ///
    /// A change that the pulled version beats (last writer wins as the hub decides it)
    /// is settled the same way while it waits, failed or pending, and not being pushed:
    /// the hub would answer it `stale`. It must not reach the hub later: once every
    /// device has pulled past a tombstone the hub collects it (HubService+Compaction),
    /// and a put would then meet no tombstone and bring the record back; and a hub
    /// restored from a backup that lacks the later version would take it (seed 1117).
    private func dropSupersededFailure(_ record: PulledRecord) throws -> Int {
        let key: [SQLValue] = [.text(record.kind), .text(record.id), .integer(record.modifiedAt)]
        var dropped = 0
        if let qid = try connection.scalarInt(
            "SELECT qid FROM mirror_queue WHERE kind = ? AND id = ? AND set_name = '' AND member = '' AND state = 'failed' AND modified_at < ?", key)
        {
            try dropWithConflict(qid: qid, reason: "superseded")
            dropped += 1
        }
        let waiting = try connection.query(
            """
            SELECT qid, modified_at, payload FROM mirror_queue WHERE kind = ? AND id = ? AND set_name = '' AND member = '' AND state IN ('pending', 'failed')
                AND (claim_owner IS NULL OR claim_until < ?)
            """, [.text(record.kind), .text(record.id), .integer(now)]
        ) { (qid: $0.int64(0), modifiedAt: $0.int64(1), payload: $0.optionalBlob(2)) }
        for queued in waiting where Self.wins((record.modifiedAt, record.payload), over: (queued.modifiedAt, queued.payload)) {
            try dropWithConflict(qid: queued.qid, reason: "stale")
            dropped += 1
        }
        return dropped
    }

    /// Last writer wins as the hub decides it: the later time; at the same time the
    /// tombstone, and between two live versions the larger payload.
    static func wins(_ a: (modifiedAt: Int64, payload: [UInt8]?), over b: (modifiedAt: Int64, payload: [UInt8]?)) -> Bool {
        if a.modifiedAt != b.modifiedAt { return a.modifiedAt > b.modifiedAt }
        if let ours = a.payload, let theirs = b.payload { return theirs.lexicographicallyPrecedes(ours) }
        return a.payload == nil && b.payload != nil
    }

    /// Retires every in-flight mutation whose gate `cursor` reaches.
    private func retireEchoed(upTo cursor: Int64, groups: inout RollupGroups) throws -> Int {
        let due = try connection.query(
            "SELECT qid, kind, id FROM mirror_queue WHERE state = 'in_flight' AND expected_history_id <= ?", [.integer(cursor)]
        ) { ($0.int64(0), $0.text(1), $0.text(2)) }
        for (qid, kind, id) in due {
            if let group = try group(kind: kind, id: id) { groups.insert(group, of: kind) }
            try connection.execute("DELETE FROM mirror_queue WHERE qid = ?", [.integer(qid)])
            if let group = try group(kind: kind, id: id) { groups.insert(group, of: kind) }
        }
        return due.count
    }

    /// Moves the in-flight mutations `condition` picks back to pending, to be sent
    /// again (by their ids: harmless where the hub still has them). They go after
    /// everything queued so far, so that a record a replay queued again reaches the
    /// hub before a member change of it that was in flight.
    ///
    /// A change of a record that the canonical copy beats is not sent again: it goes,
    /// with a conflict event, as ``dropSupersededFailure(_:)`` settles a waiting one. The
    /// hub showed a later version while it was in flight; sent to a hub restored from a
    /// backup that lacks that version, it would win there, and the later version, which
    /// this client then took for the hub's, would be gone (seed 252020).
    private func sendAgain(_ condition: String, _ arguments: [SQLValue]) throws {
        let rows = try connection.query(
            """
            SELECT q.qid, q.set_name = '' AND q.member = '' AND r.kind IS NOT NULL, q.modified_at, q.payload, r.modified_at, r.payload
            FROM mirror_queue q LEFT JOIN mirror_records r ON r.kind = q.kind AND r.id = q.id WHERE \(condition) ORDER BY q.ordinal
            """, arguments
        ) { row in
            (qid: row.int64(0), canonical: row.int64(1) == 1 ? (modifiedAt: row.int64(4), payload: row.optionalBlob(5)) : nil,
             queued: (modifiedAt: row.int64(2), payload: row.optionalBlob(3)))
        }
        for row in rows {
            if let canonical = row.canonical, Self.wins(canonical, over: row.queued) {
                try dropWithConflict(qid: row.qid, reason: "stale")
                continue
            }
            try connection.execute(
                """
                UPDATE mirror_queue SET state = 'pending', expected_history_id = NULL, expected_epoch = NULL, outcome = NULL, attempts = 0, next_attempt_at = 0,
                    claim_owner = NULL, claim_until = NULL, ordinal = ?2 WHERE qid = ?1
                """, [.integer(row.qid), .integer(try nextNumber())])
        }
    }

    // MARK: - Replay (the hub's history was rewound)

    /// Starts a replay after the hub said the cursor's history is gone (`409
    /// history_rewound`): the pull will page through every record's latest
    /// version, then continue from the hub's `historyID` in `epoch`.
    /// `common` is how much of the cursor's history the hub still holds (`commonHistoryId`):
    /// what this client saw past it is what the hub may have lost.
    func beginReplay(epoch: String, historyID: Int64, common: Int64) throws {
        try connection.transaction {
            try setMeta("replay_epoch", .text(epoch))
            try setMeta("replay_history", .integer(historyID))
            try setMeta("replay_common", .integer(common))
            try setMeta("replay_after", .text(""))
            try connection.execute("CREATE TABLE IF NOT EXISTS mirror_replay_seen (kind TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID")
            try connection.execute("DELETE FROM mirror_replay_seen")
        }
    }

    /// The replay under way: its target, the history the hub kept of the cursor's, and
    /// the token to continue after; `nil` when none is.
    func replayState() throws -> (epoch: String, historyID: Int64, common: Int64, after: String)? {
        guard let epoch = try meta("replay_epoch").asText, let history = try meta("replay_history").asInteger else { return nil }
        return (epoch, history, try meta("replay_common").asInteger ?? 0, try meta("replay_after").asText ?? "")
    }

    /// Applies one replay page. Before a record's canonical copy is replaced,
    /// what this client knows and the hub lost is queued again (the hub was
    /// restored from an older copy; DESIGN §8, HUB-API `409`): a newer payload
    /// or tombstone than the hub's, and member changes of a version the hub's
    /// history does not reach. With `more == false` the replay ends: records the
    /// hub no longer has leave the canonical tables (a live one is queued again
    /// first), in-flight mutations are sent again, and the cursor moves to the target.
    func apply(replay records: [PulledRecord], next: String, more: Bool) throws -> Applied {
        try connection.transaction {
            guard let target = try replayState() else { return Applied() }
            var applied = Applied()
            for record in records {
                try connection.execute("INSERT INTO mirror_replay_seen (kind, id) VALUES (?, ?) ON CONFLICT DO NOTHING", [.text(record.kind), .text(record.id)])
                try requeueLost(against: record, common: target.common)
                try writeCanonical(record)
                applied.changed += 1
                applied.superseded += try dropSupersededFailure(record)
                // A put the hub of the old history applied, that the replayed tombstone beats, is not
                // sent again below: it lost, and once the tombstone is collected it would bring the record back.
                if record.payload == nil {
                    try connection.execute(
                        """
                        DELETE FROM mirror_queue WHERE kind = ? AND id = ? AND set_name = '' AND member = '' AND op = 'put' AND state = 'in_flight' AND modified_at <= ?
                        """, [.text(record.kind), .text(record.id), .integer(record.modifiedAt)])
                }
            }
            try setMeta("replay_after", .text(next))
            guard !more else { return applied }
            // Records the hub no longer has at all. A copy within the history the hub still
            // holds (`common`) was deleted there and its tombstone collected once every device
            // had it (HUB-API `410 history_compacted`): a live copy leaves, a tombstone stays
            // (should the hub ever be put back from a backup older than the delete, this
            // client sends the delete again). A copy past it is one the hub lost: it goes back.
            let gone = try connection.query(
                "SELECT kind, id, seq, payload IS NULL FROM mirror_records r WHERE NOT EXISTS (SELECT 1 FROM mirror_replay_seen s WHERE s.kind = r.kind AND s.id = r.id)"
            ) { ($0.text(0), $0.text(1), $0.int64(2), $0.int64(3) == 1) }
            for (kind, id, seq, tombstone) in gone {
                if seq <= target.common {
                    if tombstone { continue }
                    try connection.execute("DELETE FROM mirror_members WHERE kind = ? AND id = ?", [.text(kind), .text(id)])
                    try connection.execute("DELETE FROM mirror_records WHERE kind = ? AND id = ?", [.text(kind), .text(id)])
                    continue
                }
                try requeueLost(against: nil, kind: kind, id: id, common: target.common)
                try connection.execute("DELETE FROM mirror_members WHERE kind = ? AND id = ?", [.text(kind), .text(id)])
                try connection.execute("DELETE FROM mirror_records WHERE kind = ? AND id = ?", [.text(kind), .text(id)])
            }
            // Gates of the old history mean nothing in the new one: send those mutations again (by their ids, harmless if applied).
            try sendAgain("q.state = 'in_flight'", [])
            try setMeta("cursor", .integer(target.historyID))
            try setMeta("epoch", .text(target.epoch))
            for name in ["replay_epoch", "replay_history", "replay_common", "replay_after"] { try connection.execute("DELETE FROM mirror_meta WHERE name = ?", [.text(name)]) }
            try connection.execute("DELETE FROM mirror_replay_seen")
            try recomputeAllRollups()
            return applied
        }
    }

    private func requeueLost(against record: PulledRecord, common: Int64) throws {
        try requeueLost(against: record, kind: record.kind, id: record.id, common: common)
    }

    /// Queues again what this client's canonical copy of a record holds and the
    /// hub's (`record`, or `nil` when the hub has none) lacks, unless local intent
    /// for it is already queued.
    private func requeueLost(against record: PulledRecord?, kind: String, id: String, common: Int64) throws {
        guard
            let mine = try connection.queryFirst(
                "SELECT payload, modified_at, grp, seq FROM mirror_records WHERE kind = ? AND id = ?", [.text(kind), .text(id)],
                { (payload: $0.optionalBlob(0), modifiedAt: $0.int64(1), group: $0.isNull(2) ? nil : $0.text(2), seq: $0.int64(3)) })
        else { return }
        // The hub has no trace of the record: a live copy goes back, and so does a
        // tombstone (the hub keeps it, so an older copy another client re-pushes loses to it).
        let newer = record.map { Self.wins((mine.modifiedAt, mine.payload), over: ($0.modifiedAt, $0.payload)) } ?? true
        if newer {
            // A change still waiting here that this copy beats lost already (the hub answered it, or
            // would, stale): it goes, with a conflict event, and this copy goes back in its place. Sent
            // instead, it would win on a hub that lost this copy, and the later version be gone (seed 1117).
            // So does one in flight (pushed by another handle while this one pulled the copy, seed
            // 252020): the restored hub may have taken it, and only this copy sent again undoes that.
            let beaten = try connection.query(
                """
                SELECT qid, modified_at, payload FROM mirror_queue WHERE kind = ? AND id = ? AND set_name = '' AND member = ''
                    AND state IN ('pending', 'failed', 'in_flight') AND (claim_owner IS NULL OR claim_until < ?)
                """, [.text(kind), .text(id), .integer(now)]
            ) { (qid: $0.int64(0), modifiedAt: $0.int64(1), payload: $0.optionalBlob(2)) }
            for queued in beaten where Self.wins((mine.modifiedAt, mine.payload), over: (queued.modifiedAt, queued.payload)) {
                try dropWithConflict(qid: queued.qid, reason: "stale")
            }
        }
        let queuedPayload = try connection.scalarInt(
            "SELECT 1 FROM mirror_queue WHERE kind = ? AND id = ? AND set_name = '' AND member = ''", [.text(kind), .text(id)]) != nil
        if !queuedPayload {
            if newer {
                let (mutation, ordinal) = try newMutationID()
                try connection.execute(
                    """
                    INSERT INTO mirror_queue (mutation, kind, id, op, payload, grp, modified_at, ordinal) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    [.text(mutation), .text(kind), .text(id), .text(mine.payload == nil ? "delete" : "put"), mine.payload.map(SQLValue.blob) ?? .null,
                     mine.group.map(SQLValue.text) ?? .null, .integer(mine.modifiedAt), .integer(ordinal)])
            }
        }
        // Member changes the restored hub lost. This copy is the hub's record as of a
        // position past what the hub still holds of that history (`common`): some change
        // of it is lost, and which members it touched is unknown (the feed carries only a
        // record's latest version, so a member may have come and gone and come back
        // between two versions this copy saw). Every member this copy holds unlike the
        // hub's goes back. A copy at or below `common` is what the hub held there, so a
        // difference is a change the hub took since, and it stands.
        guard mine.payload != nil, mine.seq > common else { return }
        // Pairs told apart by their bytes (a `Set<[String]>` holds `é` and `e` + U+0301 equal, and lost a member).
        struct Member: Hashable, Comparable {
            let set: ExactText
            let member: ExactText
            static func < (lhs: Member, rhs: Member) -> Bool { lhs.set == rhs.set ? lhs.member < rhs.member : lhs.set < rhs.set }
        }
        let ours = Set(try connection.query("SELECT set_name, member FROM mirror_members WHERE kind = ? AND id = ?", [.text(kind), .text(id)]) {
            Member(set: ExactText($0.text(0)), member: ExactText($0.text(1)))
        })
        let theirs = Set((record?.sets ?? []).flatMap { set in set.members.map { Member(set: ExactText(set.name), member: ExactText($0)) } })
        for pair in ours.subtracting(theirs).sorted() { try requeueMember(kind: kind, id: id, op: "add", set: pair.set.text, member: pair.member.text) }
        for pair in theirs.subtracting(ours).sorted() { try requeueMember(kind: kind, id: id, op: "remove", set: pair.set.text, member: pair.member.text) }
    }

    private func requeueMember(kind: String, id: String, op: String, set: String, member: String) throws {
        let queued = try connection.scalarInt(
            "SELECT 1 FROM mirror_queue WHERE kind = ? AND id = ? AND set_name = ? AND member = ?", [.text(kind), .text(id), .text(set), .text(member)]) != nil
        guard !queued else { return }
        let (mutation, ordinal) = try newMutationID()
        try connection.execute(
            "INSERT INTO mirror_queue (mutation, kind, id, op, set_name, member, modified_at, ordinal) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [.text(mutation), .text(kind), .text(id), .text(op), .text(set), .text(member), .integer(try stampNow()), .integer(ordinal)])
    }
}
