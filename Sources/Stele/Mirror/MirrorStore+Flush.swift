import SteleSQL

/// The queue's side of a flush (003 "Crash safety"): claims with an owner and a
/// lease, the hub's answers recorded as retirement gates, failures counted.
extension MirrorStore {
    /// A mutation claimed for one push.
    struct Claimed: Sendable, Equatable {
        let mutation: String
        let kind: String
        let id: String
        let op: String
        let set: String
        let member: String
        let payload: [UInt8]?
        let group: String?
        let modifiedAt: Int64
    }

    /// Claims up to ``Configuration/mutationsPerPush`` pending mutations due now (and
    /// ``Configuration/maximumPushBytes`` of payload), in intent order, for this instance: no other flusher takes them until the
    /// lease ends. A claim is counted on the row: from then on it may have reached the hub.
    func claim() throws -> [Claimed] {
        let now = self.now
        return try connection.transaction {
            let due = """
                SELECT qid, length(payload) FROM mirror_queue WHERE state = 'pending' AND next_attempt_at <= ?3
                  AND (claim_owner IS NULL OR claim_owner = ?1 OR claim_until <= ?3)
                ORDER BY ordinal LIMIT ?4
                """
            // As many as fit in one push's bytes (at least one), in intent order.
            let sizes = try connection.query(
                due, [.text(configuration.owner), .null, .integer(now), .integer(Int64(min(configuration.mutationsPerPush, hubMutationsPerPush ?? .max)))]
            ) { $0.optionalInt64(1) ?? 0 }
            var count = 0
            var bytes: Int64 = 0
            for size in sizes {
                if count > 0 && bytes + size > Int64(configuration.maximumPushBytes) { break }
                bytes += size
                count += 1
            }
            guard count > 0 else { return [] }
            let rows = try connection.query(
                """
                UPDATE mirror_queue SET claim_owner = ?1, claim_until = ?2, claims = claims + 1
                WHERE qid IN (
                    SELECT qid FROM mirror_queue WHERE state = 'pending' AND next_attempt_at <= ?3
                      AND (claim_owner IS NULL OR claim_owner = ?1 OR claim_until <= ?3)
                    ORDER BY ordinal LIMIT ?4)
                RETURNING mutation, kind, id, op, set_name, member, payload, grp, modified_at, ordinal
                """,
                [.text(configuration.owner), .integer(now + configuration.claimLeaseMilliseconds), .integer(now), .integer(Int64(count))]
            ) { row in
                (
                    Claimed(
                        mutation: row.text(0), kind: row.text(1), id: row.text(2), op: row.text(3), set: row.text(4), member: row.text(5),
                        payload: row.optionalBlob(6), group: row.isNull(7) ? nil : row.text(7), modifiedAt: row.int64(8)), row.int64(9)
                )
            }
            return rows.sorted { $0.1 < $1.1 }.map(\.0)
        }
    }

    /// When the next pending mutation may be sent (its back-off, or another
    /// flusher's lease), or `nil` when nothing is pending.
    func nextDueTime() throws -> Int64? {
        try connection.queryFirst(
            """
            SELECT min(CASE WHEN claim_owner IS NOT NULL AND claim_owner <> ?1 AND claim_until > next_attempt_at THEN claim_until ELSE next_attempt_at END)
            FROM mirror_queue WHERE state = 'pending'
            """, [.text(configuration.owner)]
        ) { $0.optionalInt64(0) } ?? nil
    }

    /// One mutation's answer from the hub.
    struct Answer: Sendable, Equatable {
        var mutation: String
        var status: String
        var seq: Int64?
        var reason: String?
        var hubTime: Int64?
    }

    /// What recording a push's answer did.
    struct Recorded: Sendable, Equatable {
        var gated = 0
        var retired = 0
        var conflicts = 0
        /// Mutations sent again with a corrected stamp after a `clock_skew` refusal.
        var restamped = 0
    }

    /// Records the hub's answer to a push of this instance's claim, in one transaction.
    ///
    /// Every answered mutation waits for its echo (003 "Retirement: on echo, not on
    /// 2xx"): its gate is its change's `seq` (or the history id when it made no
    /// change) and it retires once the pulled cursor reaches the gate, at once when
    /// it already has. `stale` and `refused` raise a conflict event with the losing
    /// value. A `clock_skew` refusal corrects the client's clock by the hub's time
    /// and sends the mutation again under a new id, stamped anew.
    /// An answer for a mutation this instance no longer holds (another intent
    /// overlaid it, another flusher took it over) changes nothing.
    func record(answers: [Answer], historyID: Int64, epoch: String?) throws -> Recorded {
        try connection.transaction {
            var recorded = Recorded()
            let current = try self.cursor()
            // The cursor vouches for a gate only in the history the gate belongs to.
            let cursor = epoch != nil && current.epoch == epoch ? current.historyID : -1
            var groups = RollupGroups()
            for answer in answers {
                guard
                    let (qid, kind, id, attempts) = try connection.queryFirst(
                        "SELECT qid, kind, id, attempts FROM mirror_queue WHERE mutation = ? AND claim_owner = ? AND state = 'pending'",
                        [.text(answer.mutation), .text(configuration.owner)], { ($0.int64(0), $0.text(1), $0.text(2), $0.int64(3)) })
                else { continue }
                if answer.status == "refused", answer.reason == "clock_skew", let hubTime = answer.hubTime {
                    try setMeta("clock_offset", .integer(hubTime - now))
                    let (mutation, _) = try newMutationID()
                    let next = attempts + 1
                    try connection.execute(
                        """
                        UPDATE mirror_queue SET mutation = ?2, modified_at = ?3, attempts = ?4, claims = 0, claim_owner = NULL, claim_until = NULL,
                            state = CASE WHEN ?4 >= ?5 THEN 'failed' ELSE 'pending' END, last_error = 'the hub refused its time: clock_skew'
                        WHERE qid = ?1
                        """, [.integer(qid), .text(mutation), .integer(try stampNow()), .integer(next), .integer(Int64(configuration.maximumAttempts))])
                    recorded.restamped += 1
                    continue
                }
                if answer.status == "refused", answer.reason == "append_only",
                    let overlaid = try connection.queryFirst(
                        "SELECT overlaid_payload, overlaid_modified_at, overlaid_group FROM mirror_queue WHERE qid = ? AND overlaid_payload IS NOT NULL", [.integer(qid)],
                        { (payload: $0.blob(0), modifiedAt: $0.int64(1), group: $0.isNull(2) ? nil : $0.text(2)) })
                {
                    // The delete lost (a conflict event says so) and the put it overlaid is what
                    // stands: it goes again, under a new id, as it was (the hub, restored from an
                    // older copy, may lack it, and no one else holds it).
                    try recordConflict(qid: qid, reason: "refused: append_only")
                    recorded.conflicts += 1
                    let (mutation, ordinal) = try newMutationID()
                    try connection.execute(
                        """
                        UPDATE mirror_queue SET mutation = ?2, op = 'put', payload = ?3, modified_at = ?4, grp = ?5, ordinal = ?6,
                            overlaid_payload = NULL, overlaid_modified_at = NULL, overlaid_group = NULL, state = 'pending', attempts = 0, claims = 1,
                            claim_owner = NULL, claim_until = NULL, next_attempt_at = 0, last_error = NULL
                        WHERE qid = ?1
                        """, [.integer(qid), .text(mutation), .blob(overlaid.payload), .integer(overlaid.modifiedAt), overlaid.group.map(SQLValue.text) ?? .null, .integer(ordinal)])
                    if let group = try self.group(kind: kind, id: id) { groups.insert(group, of: kind) }
                    continue
                }
                let gate: Int64
                switch answer.status {
                case "applied": gate = answer.seq ?? historyID
                case "not_found": gate = historyID
                case "stale", "refused":
                    try recordConflict(qid: qid, reason: answer.status == "stale" ? "stale" : "refused: \(answer.reason ?? "")")
                    recorded.conflicts += 1
                    gate = historyID
                default:
                    continue
                }
                if gate <= cursor {
                    if let group = try self.group(kind: kind, id: id) { groups.insert(group, of: kind) }
                    try connection.execute("DELETE FROM mirror_queue WHERE qid = ?", [.integer(qid)])
                    if let group = try self.group(kind: kind, id: id) { groups.insert(group, of: kind) }
                    recorded.retired += 1
                } else {
                    try connection.execute(
                        """
                        UPDATE mirror_queue SET state = 'in_flight', expected_history_id = ?2, expected_epoch = ?4, outcome = ?3, claim_owner = NULL, claim_until = NULL,
                            last_error = NULL
                        WHERE qid = ?1
                        """, [.integer(qid), .integer(gate), .text(answer.status), epoch.map(SQLValue.text) ?? .null])
                    recorded.gated += 1
                }
            }
            try recomputeRollups(groups)
            return recorded
        }
    }

    /// How a push failed.
    enum PushFailure: Sendable, Equatable {
        /// No hub could be reached: costs no attempt.
        case unreachable
        /// The hub answered an error, or the answer was lost after it was sent: one attempt each.
        case failed(String)
        /// The hub answered something that is not HUB-API's answer: the mutations stay pending, no attempt.
        case malformed(String)
    }

    /// Releases this instance's claim after a failed push, counting the attempt
    /// and scheduling the retry with back-off. Mutations that exhaust their
    /// attempts stay `failed`, their overlay still in force (004, #1366).
    /// Returns how many became failed.
    @discardableResult
    func recordFailure(_ failure: PushFailure, mutations: [String]) throws -> Int {
        let now = self.now
        return try connection.transaction {
            var failed = 0
            for mutation in mutations {
                guard
                    let (qid, attempts) = try connection.queryFirst(
                        "SELECT qid, attempts FROM mirror_queue WHERE mutation = ? AND claim_owner = ? AND state = 'pending'",
                        [.text(mutation), .text(configuration.owner)], { ($0.int64(0), $0.int64(1)) })
                else { continue }
                switch failure {
                case .unreachable:
                    try connection.execute("UPDATE mirror_queue SET claim_owner = NULL, claim_until = NULL WHERE qid = ?", [.integer(qid)])
                case .malformed(let message):
                    try connection.execute(
                        "UPDATE mirror_queue SET claim_owner = NULL, claim_until = NULL, next_attempt_at = ?2, last_error = ?3 WHERE qid = ?1",
                        [.integer(qid), .integer(now + configuration.initialBackoffMilliseconds), .text(message)])
                case .failed(let message):
                    let next = attempts + 1
                    let exhausted = next >= Int64(configuration.maximumAttempts)
                    if exhausted { failed += 1 }
                    try connection.execute(
                        """
                        UPDATE mirror_queue SET claim_owner = NULL, claim_until = NULL, attempts = ?2, state = ?3, next_attempt_at = ?4, last_error = ?5 WHERE qid = ?1
                        """, [.integer(qid), .integer(next), .text(exhausted ? "failed" : "pending"), .integer(now + backoff(afterAttempts: next)), .text(message)])
                }
            }
            return failed
        }
    }

    /// The pause after `attempts` failed attempts: doubling from the initial back-off, capped.
    func backoff(afterAttempts attempts: Int64) -> Int64 {
        Self.backoff(afterAttempts: attempts, initial: configuration.initialBackoffMilliseconds, maximum: configuration.maximumBackoffMilliseconds)
    }

    /// The pause after `attempts` failed attempts, doubling from `initial` up to `maximum`
    /// (the mirror client's and the ledger client's retries alike).
    static func backoff(afterAttempts attempts: Int64, initial: Int64, maximum: Int64) -> Int64 {
        min(initial << min(max(attempts - 1, 0), 20), maximum)
    }
}
