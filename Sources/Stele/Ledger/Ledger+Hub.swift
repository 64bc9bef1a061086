import SteleSQL

/// The ledger's side of talking to the hub: the outbox as pushes, the hub's
/// answers, and the hub's records applied to the app's store through the source.
extension Ledger {
    // MARK: - Pushing

    /// A change of the outbox, taken for one push.
    struct Outbound: Sendable, Equatable {
        let mutation: String
        let kind: String
        let id: String
        let op: String
        let payload: [UInt8]?
        let modifiedAt: Int64
    }

    /// The pending changes due now, in the order they were found, as many as one push carries.
    func due() throws -> [Outbound] {
        let connection = try database()
        var bytes = 0
        var taken: [Outbound] = []
        let rows = try connection.query(
            "SELECT mutation, kind, id, op, payload, modified_at FROM ledger_outbox WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY ordinal LIMIT ?",
            [.integer(now), .integer(Int64(min(configuration.mutationsPerPush, hubMutationsPerPush ?? .max)))]
        ) { Outbound(mutation: $0.text(0), kind: $0.text(1), id: $0.text(2), op: $0.text(3), payload: $0.optionalBlob(4), modifiedAt: $0.int64(5)) }
        for row in rows {
            let size = row.payload?.count ?? 0
            if !taken.isEmpty && bytes + size > configuration.maximumPushBytes { break }
            bytes += size
            taken.append(row)
        }
        return taken
    }

    /// When the next pending change may be sent, or `nil` when none is pending.
    func nextDueTime() throws -> Int64? {
        try database().queryFirst("SELECT min(next_attempt_at) FROM ledger_outbox WHERE state = 'pending'", []) { $0.optionalInt64(0) } ?? nil
    }

    /// What recording a push's answer did.
    struct Answered: Sendable, Equatable {
        var applied = 0
        var conflicts = 0
        var restamped = 0
    }

    /// Records the hub's answer to a push, in one transaction. `applied` and
    /// `not_found` take the change out of the outbox (the hub has it: its echo in
    /// the feed then changes nothing); `stale` and a refused tombstone of an
    /// append-only kind raise a conflict event and fetch the hub's version, which is
    /// what stands (002 "The Append-Only Exception": the live copy comes back into the
    /// store); `clock_skew` corrects the clock by the hub's time and sends the change
    /// again, dated anew; any other refusal leaves it `failed`. An answer for a change
    /// a later pass replaced changes nothing.
    ///
    /// A `seq` is a place in the history the push was answered in (`epoch`). A ledger
    /// that has pulled nothing yet takes that history for its cursor's (at 0), so a
    /// hub put back from a backup before its first pull is a rewind it sees, and what
    /// the hub lost is sent again. A `seq` of another history than the cursor's is not
    /// kept (0: none known). Kept, a record pushed before the hub was restored, and
    /// never pulled since, held a place in the history thrown away; a later rewind
    /// took it for one the restored hub still held, read it back, found it absent and
    /// pushed a tombstone nobody asked for (seed 388028 of `--devices 1 --clients 3
    /// --ledger-clients 3 --steps 2000 --faults hub,hub-restore,crash,skew,loss,dup`).
    func record(answers: [MirrorStore.Answer], epoch: String? = nil) throws -> Answered {
        let connection = try database()
        return try write(connection) {
            var answered = Answered()
            var keepsPlaces = true
            if let epoch {
                let cursor = try self.cursor(connection)
                if cursor.epoch == nil, cursor.historyID == 0, try meta("replay_mode", connection).asText == nil {
                    try setMeta("epoch", .text(epoch), connection)
                } else {
                    keepsPlaces = cursor.epoch == epoch
                }
            }
            for answer in answers {
                guard
                    let row = try connection.queryFirst(
                        "SELECT qid, kind, id, op, modified_at, attempts FROM ledger_outbox WHERE mutation = ? AND state = 'pending'", [.text(answer.mutation)],
                        { (qid: $0.int64(0), kind: $0.text(1), id: $0.text(2), op: $0.text(3), modified: $0.int64(4), attempts: $0.int64(5)) })
                else { continue }
                let remove = { try connection.execute("DELETE FROM ledger_outbox WHERE qid = ?", [.integer(row.qid)]) }
                let refetch = {
                    try connection.execute("INSERT INTO ledger_refetch (kind, id) VALUES (?, ?) ON CONFLICT DO NOTHING", [.text(row.kind), .text(row.id)])
                }
                switch (answer.status, answer.reason) {
                case ("applied", _), ("not_found", _):
                    try remove()
                    if let seq = answer.seq {
                        try connection.execute(
                            "UPDATE ledger_stamps SET seq = ?4 WHERE kind = ?1 AND id = ?2 AND modified_at = ?3",
                            [.text(row.kind), .text(row.id), .integer(row.modified), .integer(keepsPlaces ? seq : 0)])
                    }
                    answered.applied += 1
                case ("stale", _), ("refused", "append_only"):
                    try remove()
                    let reason = answer.status == "stale" ? "stale" : "refused: append_only"
                    try recordConflict(kind: row.kind, id: row.id, op: row.op, modifiedAt: row.modified, reason: reason, connection)
                    try refetch()
                    answered.conflicts += 1
                case ("refused", "clock_skew") where answer.hubTime != nil:
                    try setMeta("clock_offset", .integer((answer.hubTime ?? now) - now), connection)
                    let date = try stampNow(connection)
                    let number = try nextNumber(connection)
                    let client = try meta("client", connection).asText ?? "ledger"
                    let attempts = row.attempts + 1
                    try connection.execute(
                        """
                        UPDATE ledger_outbox SET mutation = ?2, modified_at = ?3, attempts = ?4, state = CASE WHEN ?4 >= ?5 THEN 'failed' ELSE 'pending' END,
                            last_error = 'the hub refused its time: clock_skew'
                        WHERE qid = ?1
                        """, [.integer(row.qid), .text("\(client)-\(number)"), .integer(date), .integer(attempts), .integer(Int64(configuration.maximumAttempts))])
                    try connection.execute(
                        "UPDATE ledger_stamps SET modified_at = ?4, seq = 0 WHERE kind = ?1 AND id = ?2 AND modified_at = ?3",
                        [.text(row.kind), .text(row.id), .integer(row.modified), .integer(date)])
                    answered.restamped += 1
                case ("refused", let reason):
                    try connection.execute(
                        "UPDATE ledger_outbox SET state = 'failed', last_error = ? WHERE qid = ?", [.text("the hub refused it: \(reason ?? "no reason given")"), .integer(row.qid)])
                    try recordConflict(kind: row.kind, id: row.id, op: row.op, modifiedAt: row.modified, reason: "refused: \(reason ?? "")", connection)
                    answered.conflicts += 1
                default:
                    continue
                }
            }
            return answered
        }
    }

    /// Counts a failed push against each change in it and schedules the retry with
    /// back-off; a hub that could not be reached costs nothing (SCENARIOS `C sync`).
    /// Returns how many changes exhausted their attempts.
    @discardableResult
    func recordFailure(_ failure: MirrorStore.PushFailure, mutations: [String]) throws -> Int {
        let connection = try database()
        let now = self.now
        return try write(connection) {
            var failed = 0
            for mutation in mutations {
                guard
                    let (qid, attempts) = try connection.queryFirst(
                        "SELECT qid, attempts FROM ledger_outbox WHERE mutation = ? AND state = 'pending'", [.text(mutation)], { ($0.int64(0), $0.int64(1)) })
                else { continue }
                switch failure {
                case .unreachable:
                    continue
                case .malformed(let message):
                    try connection.execute(
                        "UPDATE ledger_outbox SET next_attempt_at = ?2, last_error = ?3 WHERE qid = ?1",
                        [.integer(qid), .integer(now + configuration.initialBackoffMilliseconds), .text(message)])
                case .failed(let message):
                    let next = attempts + 1
                    let exhausted = next >= Int64(configuration.maximumAttempts)
                    if exhausted { failed += 1 }
                    let pause = MirrorStore.backoff(afterAttempts: next, initial: configuration.initialBackoffMilliseconds, maximum: configuration.maximumBackoffMilliseconds)
                    try connection.execute(
                        "UPDATE ledger_outbox SET attempts = ?2, state = ?3, next_attempt_at = ?4, last_error = ?5 WHERE qid = ?1",
                        [.integer(qid), .integer(next), .text(exhausted ? "failed" : "pending"), .integer(now + pause), .text(message)])
                }
            }
            return failed
        }
    }

    // MARK: - Applying the hub's records

    /// How the hub's records reached the ledger.
    enum Arrival: Sendable, Equatable {
        /// The change feed: each record's latest version, so one that differs from the stamp is newer.
        case feed
        /// The replay: every record's latest version, judged against the ledger by last writer
        /// wins (a newer local edit or tombstone stands, 002 "Replay and Recovery"), each
        /// stamp it names marked seen.
        case replay
        /// The hub's version of a record it would not take from this client.
        case refetch
    }

    /// What applying did.
    struct AppliedRemote: Sendable, Equatable {
        /// Records whose stamp changed.
        var changed = 0
        /// Changes written into the app's store.
        var written = 0
    }

    /// Last writer wins as the hub decides (HUB-API): the later time; at the same
    /// time the tombstone, then the larger payload. Positive when `a` wins.
    static func order(_ aTime: Int64, _ aPayload: [UInt8]?, _ bTime: Int64, _ bPayload: [UInt8]?) -> Int {
        if aTime != bTime { return aTime > bTime ? 1 : -1 }
        switch (aPayload, bPayload) {
        case (nil, nil): return 0
        case (nil, _): return 1
        case (_, nil): return -1
        case (let a?, let b?): return a == b ? 0 : (b.lexicographicallyPrecedes(a) ? 1 : -1)
        }
    }

    /// What becomes of one record of the hub.
    enum Action {
        /// The stamp is this version: only its position is noted.
        case sameVersion
        /// The outbox's change, come back from the hub: it leaves the outbox.
        case echo
        /// The outbox's change beats it: it goes to the hub as planned.
        case keepLocal
        /// The stamp beats it: the hub lacks the stamp's version, which the next pass sends again.
        case resend
        /// The hub's version becomes the stamp (and the store's, when the store holds `expected`).
        case take(expected: [UInt8]?, dropLocal: Bool, conflict: Bool)
    }

    struct Decision {
        let record: MirrorStore.PulledRecord
        var action: Action
        var write: LedgerChange?
        var conflictOp: String?
        var conflictTime: Int64 = 0
        var replaced = false
    }

    /// Last writer wins between the hub's version and the stamp's. Two live versions
    /// of one time: the larger payload wins; the stamp's payload is what the store
    /// holds, when the store agrees with the stamp, else the hub's stands.
    func judge(_ record: MirrorStore.PulledRecord, against stamp: (fingerprint: [UInt8]?, modified: Int64), held: () throws -> [UInt8]?) throws -> Int {
        if stamp.fingerprint != nil, stamp.modified == record.modifiedAt, record.payload != nil {
            if let mine = try held(), fingerprint(mine).bytes == stamp.fingerprint {
                return Self.order(record.modifiedAt, record.payload, stamp.modified, mine)
            }
            return 1
        }
        return Self.order(record.modifiedAt, record.payload, stamp.modified, stamp.fingerprint == nil ? nil : [])
    }

    /// A record of the first download after a reset. The stamps were kept and are
    /// judged again: the hub's version is written over whatever the store holds,
    /// unless the ledger holds a newer version the hub lost (a hub put back from a
    /// backup) that the store still has, or a newer tombstone: those are sent again.
    private func adopt(_ record: MirrorStore.PulledRecord, stamp: (fingerprint: [UInt8]?, modified: Int64)?, held: [UInt8]?, remotePrint: [UInt8]?) throws -> Decision {
        let heldPrint = held.map { fingerprint($0).bytes }
        var decision = Decision(record: record, action: .take(expected: heldPrint, dropLocal: false, conflict: false))
        if let stamp {
            let verdict = try judge(record, against: stamp, held: { held })
            if verdict < 0, stamp.fingerprint == nil {
                decision.action = .resend
                if held != nil { decision.write = .delete(kind: record.kind, id: record.id) }
                return decision
            }
            if verdict < 0, heldPrint == stamp.fingerprint {
                decision.action = .resend
                return decision
            }
            if verdict == 0 { decision.action = .sameVersion }
        }
        if heldPrint != remotePrint {
            decision.write = record.payload.map { .upsert(kind: record.kind, id: record.id, payload: $0) } ?? .delete(kind: record.kind, id: record.id)
            decision.replaced = held != nil
        }
        return decision
    }

    /// Applies the hub's records: the app's store first, through the source, in one
    /// of its transactions, then the stamps, the outbox and `finish` (the cursor) in
    /// one of the ledger's. A journal written before the store's transaction lets the
    /// next pass tell a crash between the two from a local edit.
    ///
    /// For each record, against the outbox's pending change (P) and the stamp (S):
    /// - with P: the hub's version wins only if it beats P (P is then dropped, and a
    ///   conflict event says so); the same version is P's echo;
    /// - without P: the feed's version is the hub's latest and is taken; the replay's is
    ///   taken only if it beats S, and when S beats it the hub lacks S, which is sent again.
    /// A taken version is written into the store only when the store holds what the
    /// ledger knows of it: a store that differs holds a local edit no pass has seen
    /// yet, and the next pass sends it, dated after the hub's. After a reset (adopting)
    /// the hub's version is written over whatever the store holds.
    func applyRemote(_ records: [MirrorStore.PulledRecord], arrival: Arrival, finish: (Connection) throws -> Void) throws -> AppliedRemote {
        let connection = try database()
        // Nothing is written into a store that was replaced since the ledger last looked.
        try checkIdentity(try fromSource("report its identity") { try source.storeIdentity() }, connection)
        let adopting = try meta("adopting", connection).asInteger == 1
        var decisions: [Decision] = []
        decisions.reserveCapacity(records.count)
        for record in records {
            let stamp = try connection.queryFirst(
                "SELECT fingerprint, modified_at, unsent FROM ledger_stamps WHERE kind = ? AND id = ?", [.text(record.kind), .text(record.id)]
            ) { (fingerprint: $0.optionalBlob(0), modified: $0.int64(1), unsent: $0.int64(2) == 1) }
            let local = try connection.queryFirst(
                "SELECT op, payload, modified_at FROM ledger_outbox WHERE kind = ? AND id = ?", [.text(record.kind), .text(record.id)]
            ) { (op: $0.text(0), payload: $0.optionalBlob(1), modified: $0.int64(2)) }
            let remotePrint = record.payload.map { fingerprint($0).bytes }
            // The store's copy, read once at most.
            var held: [UInt8]??
            let read = { () throws -> [UInt8]? in
                if let held { return held }
                let payload = try self.fromSource("read \(record.kind) \(record.id)") { try self.source.payload(kind: record.kind, id: record.id) }
                held = .some(payload)
                return payload
            }
            var decision: Decision
            if adopting {
                decisions.append(try adopt(record, stamp: stamp.map { ($0.fingerprint, $0.modified) }, held: read(), remotePrint: remotePrint))
                continue
            }
            if let local {
                let verdict = Self.order(record.modifiedAt, record.payload, local.modified, local.payload)
                if verdict > 0 {
                    decision = Decision(record: record, action: .take(expected: local.payload.map { fingerprint($0).bytes }, dropLocal: true, conflict: true))
                    decision.conflictOp = local.op
                    decision.conflictTime = local.modified
                } else if verdict == 0 {
                    decision = Decision(record: record, action: .echo)
                } else {
                    decision = Decision(record: record, action: .keepLocal)
                }
            } else if let stamp, stamp.modified == record.modifiedAt, stamp.fingerprint == remotePrint {
                decision = Decision(record: record, action: .sameVersion)
            } else if let stamp, arrival == .replay || stamp.unsent {
                // The feed's version is the hub's latest, and newer than what the ledger confirmed,
                // except where the hub is known to lack the stamp's version (it was rewound and the
                // version is not sent again yet): there, as in a replay, the later version wins.
                let verdict = try judge(record, against: (stamp.fingerprint, stamp.modified), held: read)
                decision =
                    verdict > 0
                    ? Decision(record: record, action: .take(expected: stamp.fingerprint, dropLocal: false, conflict: false))
                    : Decision(record: record, action: verdict == 0 ? .sameVersion : .resend)
            } else {
                decision = Decision(record: record, action: .take(expected: stamp?.fingerprint, dropLocal: false, conflict: false))
            }
            if case .take(let expected, _, _) = decision.action {
                let heldPrint = try read().map { fingerprint($0).bytes }
                if heldPrint != remotePrint, heldPrint == expected {
                    decision.write = record.payload.map { .upsert(kind: record.kind, id: record.id, payload: $0) } ?? .delete(kind: record.kind, id: record.id)
                }
            }
            decisions.append(decision)
        }

        let writes = decisions.compactMap(\.write)
        if !writes.isEmpty {
            try write(connection) {
                for decision in decisions where decision.write != nil {
                    // A version taken from the hub; a kept tombstone's delete changes no stamp.
                    guard case .take = decision.action else { continue }
                    let record = decision.record
                    try connection.execute(
                        "INSERT OR REPLACE INTO ledger_applying (kind, id, fingerprint, modified_at, seq) VALUES (?, ?, ?, ?, ?)",
                        [.text(record.kind), .text(record.id), record.payload.map { .blob(fingerprint($0).bytes) } ?? .null, .integer(record.modifiedAt), .integer(record.seq)])
                }
            }
            do {
                try fromSource("apply \(writes.count) changes from the hub") { try source.apply(writes) }
            } catch {
                try write(connection) { try connection.execute("DELETE FROM ledger_applying") }
                throw error
            }
        }

        return try write(connection) {
            var applied = AppliedRemote(changed: 0, written: writes.count)
            let seen: Int64 = arrival == .replay || adopting ? 1 : 0
            for decision in decisions {
                let record = decision.record
                let key: [SQLValue] = [.text(record.kind), .text(record.id)]
                switch decision.action {
                case .sameVersion:
                    try connection.execute("UPDATE ledger_stamps SET seq = ?3, unsent = 0, seen = max(seen, ?4) WHERE kind = ?1 AND id = ?2", key + [.integer(record.seq), .integer(seen)])
                case .echo:
                    try connection.execute("DELETE FROM ledger_outbox WHERE kind = ?1 AND id = ?2", key)
                    try connection.execute("UPDATE ledger_stamps SET seq = ?3, unsent = 0, seen = max(seen, ?4) WHERE kind = ?1 AND id = ?2", key + [.integer(record.seq), .integer(seen)])
                case .keepLocal:
                    try connection.execute("UPDATE ledger_stamps SET seen = max(seen, ?3) WHERE kind = ?1 AND id = ?2", key + [.integer(seen)])
                case .resend:
                    try connection.execute("UPDATE ledger_stamps SET unsent = 1, seen = max(seen, ?3) WHERE kind = ?1 AND id = ?2", key + [.integer(seen)])
                case .take(_, let dropLocal, let conflict):
                    if dropLocal { try connection.execute("DELETE FROM ledger_outbox WHERE kind = ?1 AND id = ?2", key) }
                    if conflict, let op = decision.conflictOp {
                        try recordConflict(kind: record.kind, id: record.id, op: op, modifiedAt: decision.conflictTime, reason: "superseded", connection)
                    }
                    if decision.replaced {
                        try recordConflict(kind: record.kind, id: record.id, op: "put", modifiedAt: 0, reason: "replaced after a reset", connection)
                    }
                    try connection.execute(
                        """
                        INSERT INTO ledger_stamps (kind, id, fingerprint, modified_at, seq, unsent, seen) VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6)
                        ON CONFLICT (kind, id) DO UPDATE SET fingerprint = excluded.fingerprint, modified_at = excluded.modified_at, seq = excluded.seq, unsent = 0,
                            seen = max(ledger_stamps.seen, excluded.seen)
                        """, key + [record.payload.map { .blob(fingerprint($0).bytes) } ?? .null, .integer(record.modifiedAt), .integer(record.seq), .integer(seen)])
                    applied.changed += 1
                }
            }
            try connection.execute("DELETE FROM ledger_applying")
            try finish(connection)
            return applied
        }
    }

    /// The first download after a reset has ended: what it did not mention, the hub
    /// lacks. A kept tombstone is sent again; a kept live stamp is sent again when
    /// the store still holds an entity (the pass then sends the store's version), and
    /// forgotten when the store does not (nothing is made a tombstone that was not
    /// seen deleted).
    func finishAdoption(_ connection: Connection) throws {
        let unseen = try connection.query("SELECT kind, id FROM ledger_stamps WHERE seen = 0 AND fingerprint IS NOT NULL") { ($0.text(0), $0.text(1)) }
        for (kind, id) in unseen {
            let held = try fromSource("read \(kind) \(id)") { try source.payload(kind: kind, id: id) }
            if held == nil {
                try connection.execute("DELETE FROM ledger_stamps WHERE kind = ? AND id = ?", [.text(kind), .text(id)])
            } else {
                try connection.execute("UPDATE ledger_stamps SET unsent = 1 WHERE kind = ? AND id = ?", [.text(kind), .text(id)])
            }
        }
        try connection.execute("UPDATE ledger_stamps SET unsent = 1 WHERE seen = 0 AND fingerprint IS NULL")
        try connection.execute("UPDATE ledger_stamps SET seen = 0 WHERE seen <> 0")
        try connection.execute("DELETE FROM ledger_meta WHERE name = 'adopting'")
    }
}
