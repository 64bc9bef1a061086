import Foundation
import Stele
import SteleSQL
import Synchronization

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

    /// A record as the hub holds it; as JSON (``write(to:)``), HUB-API's record object.
    struct StoredRecord {
        let kind: String
        let id: String
        let payload: [UInt8]?
        let modifiedAt: Int64
        let group: String?
        let seq: Int64
        /// Member sets by name, the names byte for byte (``ExactText``): two spellings are two sets.
        var sets: [ExactText: [String]] = [:]

        var isTombstone: Bool { payload == nil }

        /// The set names in byte order.
        var setNames: [ExactText] { sets.keys.sorted { Array($0.text.utf8).lexicographicallyPrecedes(Array($1.text.utf8)) } }

        /// HUB-API's record object, for bodies built as dictionaries (a `409 stale`'s
        /// `record`, where two set names that Swift takes for one would be merged; a
        /// read answers with ``response``, which keeps them apart).
        var json: [String: Any] {
            var merged: [String: [String]] = [:]
            for name in setNames { merged[name.text, default: []] += sets[name] ?? [] }
            return [
                "kind": kind, "id": id, "payload": payload.map { Data($0).base64EncodedString() as Any } ?? NSNullValue.value,
                "modifiedAt": modifiedAt, "group": group.map { $0 as Any } ?? NSNullValue.value, "sets": merged.mapValues { $0.sorted() }, "seq": seq,
            ]
        }

        /// The record object as a `200` answer, written byte for byte.
        var response: HubResponse {
            var json = HubJSONWriter()
            write(to: &json)
            return HubResponse(status: 200, headers: ["Content-Type": "application/json"], body: json.bytes)
        }
    }

    /// A push's answer for one mutation (written by ``write(to:)``, read back when its id comes again).
    struct MutationResult: Decodable {
        let mutation: String
        var status = ""
        var seq: Int64?
        var reason: String?
        var hubTime: Int64?
    }

    // MARK: - Push

    /// `POST /v1/accounts/{a}/records/push`.
    ///
    /// A push is judged in memory, mutation by mutation in order, against the
    /// records it touches as they stand after the mutations before it: one look
    /// for the mutation ids seen before, one per kind for the records (and the
    /// member sets the push adds to, removes from or deletes), then multi-row
    /// writes of each changed record's final version, of the member sets' changes
    /// and of the new mutation ids. The transaction makes that the same as
    /// writing each change as it is judged; a record changed twice keeps its
    /// last position, as it would.
    func push(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        let job = PushJob(request: request, mutations: try Self.mutations(request.body, configuration: configuration))
        // Pushes into one account queue for its row lock anyway: those that arrive while one
        // is being written go together in the next transaction (a group commit), each judged
        // after the ones before it, as if they had come one by one.
        if pushGroups.enqueue(job, account: account.hex) {
            while let group = pushGroups.next(account: account.hex, maximumMutations: configuration.maximumMutationsPerPush * 4) {
                write(group, account)
            }
        }
        job.done.wait()
        return try job.outcome.withLock { $0 ?? .failure(HubRefusal(500, "internal", "a push was left unanswered")) }.get()
    }

    /// Writes a group of pushes into `account` in one transaction and answers each.
    private func write(_ group: [PushJob], _ account: AccountID) {
        let now = now()
        do {
            let (history, answers, changed, epoch) = try transaction(account) { sql -> (Int64, [Result<[MutationResult], any Error>], Bool, String) in
                // Each push with its own session: one that is refused is answered so, and the others go on.
                var callers: [Caller?] = []
                var answers: [Result<[MutationResult], any Error>] = []
                for job in group {
                    do {
                        callers.append(try authenticate(job.request, account, sql))
                        answers.append(.success([]))
                    } catch {
                        callers.append(nil)
                        answers.append(.failure(error))
                    }
                }
                try sql.lockAccount(account.hex)
                var history = try historyID(account, sql)
                let before = history
                let appendOnly = Set(
                    try sql.query("SELECT kind FROM record_kinds WHERE account = $1 AND append_only = 1", [.text(account.hex)]).compactMap { $0[column: 0].string.map(ExactText.init) })
                // PostgreSQL takes each column of a multi-row statement as one array parameter.
                let arrays = storage.backend == .postgresql
                let mutations = zip(group, callers).flatMap { job, caller in caller == nil ? [] : job.mutations }
                // A mutation id seen before (in an earlier push, or earlier in this group) is answered as the first time.
                var answered = try seenResults(account, mutations, arrays: arrays, sql)
                var batch = try PushBatch.load(account, mutations.filter { answered[ExactText($0.id)] == nil }, arrays: arrays, sql)
                var fresh: [MutationResult] = []
                for (index, job) in group.enumerated() {
                    guard let caller = callers[index] else { continue }
                    var results: [MutationResult] = []
                    var own: [MutationResult] = []
                    results.reserveCapacity(job.mutations.count)
                    for mutation in job.mutations {
                        if let answer = answered[ExactText(mutation.id)] {
                            results.append(answer)
                            continue
                        }
                        let result = apply(mutation, appendOnly: appendOnly.contains(ExactText(mutation.kind)), history: &history, now: now, &batch)
                        answered[ExactText(mutation.id)] = result
                        own.append(result)
                        results.append(result)
                    }
                    fresh += own
                    answers[index] = .success(results)
                    try notePushProgress(account, caller, own, now: now, sql)
                }
                try batch.write(account, arrays: arrays, sql)
                try recordAnswers(account, fresh, now: now, arrays: arrays, sql)
                if history != before { try sql.execute("UPDATE accounts SET history = $2 WHERE id = $1", [.text(account.hex), .integer(history)]) }
                return (history, answers, history != before, try self.epoch(sql))
            }
            if changed { announce(Self.recordsKey(account.hex)) }
            for (job, answer) in zip(group, answers) {
                job.outcome.withLock { $0 = answer.map { Self.pushResponse(history: history, epoch: epoch, $0) } }
                job.done.signal()
            }
        } catch {
            for job in group {
                job.outcome.withLock { $0 = .failure(error) }
                job.done.signal()
            }
        }
    }

    /// Keeps each new answer by its mutation id, so a push retried is answered as the first time.
    private func recordAnswers(_ account: AccountID, _ fresh: [MutationResult], now: Int64, arrays: Bool, _ sql: any HubSQL) throws {
        let created: SQLValue = .integer(now)
        if arrays, !fresh.isEmpty {
            var ids = PostgresArrayText()
            var answers = PostgresArrayText()
            for result in fresh {
                var json = HubJSONWriter()
                result.write(to: &json)
                ids.append(result.mutation)
                answers.append(String(decoding: json.bytes, as: UTF8.self))
            }
            try sql.execute(
                "INSERT INTO mutations (account, mutation, result, created_ms) SELECT $1, m, r, $2 FROM unnest($3::text[], $4::text[]) AS v(m, r)",
                [.text(account.hex), created, ids.value, answers.value])
        }
        try sql.inPieces(arrays ? [] : fresh, width: 2) { piece in
            var arguments: [SQLValue] = [.text(account.hex), created]
            arguments.reserveCapacity(2 + piece.count * 2)
            for result in piece {
                var json = HubJSONWriter()
                result.write(to: &json)
                arguments += [.text(result.mutation), .text(String(decoding: json.bytes, as: UTF8.self))]
            }
            try sql.execute(
                Self.statement("insert mutations", rows: piece.count) {
                    "INSERT INTO mutations (account, mutation, result, created_ms) VALUES \(Self.parameterRows(piece.count, width: 2, from: 3, around: "$1, ", "$2"))"
                },
                arguments)
        }
    }

    /// `{"historyId": H, "epoch": E, "results": [...]}`: the epoch beside the history id
    /// (HUB-API: every history id travels with it), so a client knows which history its
    /// retirement gates belong to.
    static func pushResponse(history: Int64, epoch: String, _ results: [MutationResult]) -> HubResponse {
        var json = HubJSONWriter(capacity: results.count * 80 + 96)
        json.raw("{")
        json.key("historyId")
        json.integer(history)
        json.comma()
        json.key("epoch")
        json.string(epoch)
        json.comma()
        json.key("results")
        json.raw("[")
        for (index, result) in results.enumerated() {
            if index > 0 { json.comma() }
            result.write(to: &json)
        }
        json.raw("]}")
        return HubResponse(status: 200, headers: ["Content-Type": "application/json"], body: json.bytes)
    }

    /// Notes whether `device`'s push got anywhere, for the status's "cannot make
    /// progress" warning: a push whose every new answer was `refused` (a clock
    /// beyond the bound that never corrects, a tombstone an append-only kind keeps
    /// refusing) marks the device from when it began; one that applied, or found
    /// its change already there, clears the mark. Written only when it changes.
    private func notePushProgress(_ account: AccountID, _ caller: Caller, _ fresh: [MutationResult], now: Int64, _ sql: any HubSQL) throws {
        guard !fresh.isEmpty else { return }
        let key: [SQLValue] = [.text(account.hex), .text(caller.device)]
        if fresh.allSatisfy({ $0.status == "refused" }) {
            guard !caller.pushesRefused else { return }
            let reasons = Set(fresh.compactMap(\.reason)).sorted().joined(separator: ", ")
            try sql.execute("UPDATE devices SET push_refused_ms = $3, push_refusal = $4 WHERE account = $1 AND device = $2", key + [.integer(now), .text(reasons)])
        } else if caller.pushesRefused {
            try sql.execute("UPDATE devices SET push_refused_ms = NULL, push_refusal = NULL WHERE account = $1 AND device = $2", key)
        }
    }

    /// The account's history id: its highest change position.
    func historyID(_ account: AccountID, _ sql: any HubSQL) throws -> Int64 {
        try sql.query("SELECT history FROM accounts WHERE id = $1", [.text(account.hex)]).first?[column: 0].int64 ?? 0
    }

    /// The stored answers of the mutation ids of `mutations` seen before, by id.
    private func seenResults(_ account: AccountID, _ mutations: [Mutation], arrays: Bool, _ sql: any HubSQL) throws -> [ExactText: MutationResult] {
        var ids: [String] = []
        var distinct = Set<ExactText>()
        for mutation in mutations where distinct.insert(ExactText(mutation.id)).inserted { ids.append(mutation.id) }
        let decoder = JSONDecoder()
        var seen: [ExactText: MutationResult] = [:]
        try sql.inPieces(ids, width: 1) { piece in
            let rows =
                arrays
                ? try sql.query(
                    "SELECT mutation, result FROM mutations WHERE account = $1 AND mutation = ANY($2::text[])", [.text(account.hex), PostgresArrayText(piece).value])
                : try sql.query(
                    Self.statement("select mutations", rows: piece.count) {
                        "SELECT mutation, result FROM mutations WHERE account = $1 AND mutation IN (\(Self.parameterList(piece.count, from: 2)))"
                    },
                    [.text(account.hex)] + piece.map { .text($0) })
            for row in rows {
                // An answer that cannot be read is judged again (and its insert then refused, as before).
                guard let id = row[column: 0].string, let text = row[column: 1].string, let answer = try? decoder.decode(MutationResult.self, from: Data(text.utf8)) else {
                    continue
                }
                seen[ExactText(id)] = answer
            }
        }
        return seen
    }

    /// Judges one mutation against the records as they stand in `batch`, and
    /// changes them there; returns its result object. `history` moves by one for
    /// each change.
    private func apply(_ mutation: Mutation, appendOnly: Bool, history: inout Int64, now: Int64, _ batch: inout PushBatch) -> MutationResult {
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
        let key = PushBatch.Key(kind: mutation.kind, id: mutation.record)
        let existing = batch.records[key]
        switch mutation.op {
        case .put:
            guard let payload = mutation.payload else { preconditionFailure("a put without a payload passed the checks") }
            if let existing {
                // Last writer wins on modifiedAt; a tie goes to the tombstone, and between
                // two live versions to the larger payload (every hub decides alike).
                if existing.modifiedAt > mutation.modifiedAt { return answer("stale", reason: "a newer version won") }
                if existing.modifiedAt == mutation.modifiedAt {
                    guard let current = existing.payload else { return answer("stale", reason: "a tombstone of the same time won") }
                    if current == payload, existing.group.map(ExactText.init) == (mutation.group ?? existing.group).map(ExactText.init) { return answer("applied", seq: existing.seq) }
                    if current.lexicographicallyPrecedes(payload) == false { return answer("stale", reason: "a version of the same time won") }
                }
            }
            history += 1
            // A put leaves the member sets as they are.
            batch.change(key, to: PushBatch.Version(payload: payload, modifiedAt: mutation.modifiedAt, group: mutation.group ?? existing?.group, seq: history))
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
                batch.change(key, to: PushBatch.Version(payload: nil, modifiedAt: mutation.modifiedAt, group: nil, seq: history))
                batch.members[key] = []
                return answer("not_found", seq: history)
            }
            guard existing.payload != nil else {
                // Already a tombstone: not found all the same, but a later deletion moves the
                // tombstone's time forward, so that a put older than this delete (and newer than
                // the first) still loses to it, as last writer wins says. Without this a delete
                // that met a tombstone (two clients deleting, or one pushing again after a
                // restore) was forgotten, and such a put brought the record back.
                guard mutation.modifiedAt > existing.modifiedAt else { return answer("not_found") }
                history += 1
                batch.change(key, to: PushBatch.Version(payload: nil, modifiedAt: mutation.modifiedAt, group: existing.group, seq: history))
                return answer("not_found", seq: history)
            }
            if existing.modifiedAt > mutation.modifiedAt { return answer("stale", reason: "a newer version won") }
            history += 1
            // A tombstone: no payload, no members; its group stays.
            batch.change(key, to: PushBatch.Version(payload: nil, modifiedAt: mutation.modifiedAt, group: existing.group, seq: history))
            batch.members[key] = []
            return answer("applied", seq: history)
        case .add, .remove:
            guard var existing, existing.payload != nil else { return answer("not_found") }
            guard let set = mutation.set, let member = mutation.member else { preconditionFailure("a set op without set and member passed the checks") }
            guard var members = batch.members[key] else { preconditionFailure("the members of a record a set op touches were not loaded") }
            let pair = PushBatch.Member(set: set, member: member)
            let changed = mutation.op == .add ? members.insert(pair).inserted : members.remove(pair) != nil
            // Idempotent: adding a member twice (or removing an absent one) changes nothing.
            guard changed else { return answer("applied", seq: existing.seq) }
            history += 1
            batch.members[key] = members
            existing.seq = history
            batch.change(key, to: existing)
            return answer("applied", seq: history)
        }
    }

    /// The records one push touches, as they stand while it is judged, and
    /// what it changed in them.
    private struct PushBatch {
        /// A record, its kind and id compared byte for byte (``ExactText``).
        struct Key: Hashable {
            let kind: String
            let id: String

            static func == (lhs: Key, rhs: Key) -> Bool { ExactText(lhs.kind) == ExactText(rhs.kind) && ExactText(lhs.id) == ExactText(rhs.id) }

            func hash(into hasher: inout Hasher) {
                hasher.combine(ExactText(kind))
                hasher.combine(ExactText(id))
            }
        }

        /// A set's member, compared byte for byte (``ExactText``).
        struct Member: Hashable {
            let set: String
            let member: String

            static func == (lhs: Member, rhs: Member) -> Bool { ExactText(lhs.set) == ExactText(rhs.set) && ExactText(lhs.member) == ExactText(rhs.member) }

            func hash(into hasher: inout Hasher) {
                hasher.combine(ExactText(set))
                hasher.combine(ExactText(member))
            }
        }

        /// A record's columns; a tombstone has no payload.
        struct Version {
            var payload: [UInt8]?
            var modifiedAt: Int64
            var group: String?
            var seq: Int64
        }

        /// Every record the push names that the hub holds (tombstones included).
        var records: [Key: Version] = [:]
        /// The member sets of the records the push adds to, removes from or deletes.
        var members: [Key: Set<Member>] = [:]
        /// Those sets as they were before the push.
        private var membersBefore: [Key: Set<Member>] = [:]
        /// The records the push changed, in the order of their first change.
        private var changed: [Key] = []
        private var changedKeys = Set<Key>()

        mutating func change(_ key: Key, to version: Version) {
            records[key] = version
            if changedKeys.insert(key).inserted { changed.append(key) }
        }

        /// Reads the records `mutations` name, with one query per kind (and one per
        /// kind for the member sets of those a set op or a delete touches).
        static func load(_ account: AccountID, _ mutations: [Mutation], arrays: Bool, _ sql: any HubSQL) throws -> PushBatch {
            var batch = PushBatch()
            var ids: [ExactText: [String]] = [:]
            var memberIDs: [ExactText: [String]] = [:]
            var kinds: [String] = []
            var named = Set<Key>()
            var withMembers = Set<Key>()
            for mutation in mutations {
                let key = Key(kind: mutation.kind, id: mutation.record)
                let kind = ExactText(mutation.kind)
                if ids[kind] == nil { kinds.append(mutation.kind) }
                if named.insert(key).inserted { ids[kind, default: []].append(mutation.record) }
                if mutation.op != .put, withMembers.insert(key).inserted {
                    memberIDs[kind, default: []].append(mutation.record)
                    batch.membersBefore[key] = []
                }
            }
            for kind in kinds {
                try sql.inPieces(ids[ExactText(kind)] ?? [], width: 1) { piece in
                    let rows =
                        arrays
                        ? try sql.query(
                            "SELECT id, payload, modified_ms, grp, seq FROM records WHERE account = $1 AND kind = $2 AND id = ANY($3::text[])",
                            [.text(account.hex), .text(kind), PostgresArrayText(piece).value])
                        : try sql.query(
                            HubService.statement("select records", rows: piece.count) {
                                "SELECT id, payload, modified_ms, grp, seq FROM records WHERE account = $1 AND kind = $2 AND id IN (\(HubService.parameterList(piece.count, from: 3)))"
                            },
                            [.text(account.hex), .text(kind)] + piece.map { .text($0) })
                    for row in rows {
                        guard let id = row[column: 0].string else { continue }
                        batch.records[Key(kind: kind, id: id)] = Version(
                            payload: row[column: 1].bytes, modifiedAt: row[column: 2].int64 ?? 0, group: row[column: 3].string, seq: row[column: 4].int64 ?? 0)
                    }
                }
                try sql.inPieces(memberIDs[ExactText(kind)] ?? [], width: 1) { piece in
                    let rows = try sql.query(
                        HubService.statement("select members", rows: piece.count) {
                            "SELECT id, set_name, member FROM record_members WHERE account = $1 AND kind = $2 AND id IN (\(HubService.parameterList(piece.count, from: 3)))"
                        },
                        [.text(account.hex), .text(kind)] + piece.map { .text($0) })
                    for row in rows {
                        guard let id = row[column: 0].string, let set = row[column: 1].string, let member = row[column: 2].string else { continue }
                        batch.membersBefore[Key(kind: kind, id: id), default: []].insert(Member(set: set, member: member))
                    }
                }
            }
            batch.members = batch.membersBefore
            return batch
        }

        /// Writes each changed record's final version and the member sets' changes.
        func write(_ account: AccountID, arrays: Bool, _ sql: any HubSQL) throws {
            let account = SQLValue.text(account.hex)
            if arrays, !changed.isEmpty {
                var columns = (kinds: PostgresArrayText(), ids: PostgresArrayText(), payloads: PostgresArrayText(), times: PostgresArrayText(), groups: PostgresArrayText(), seqs: PostgresArrayText())
                for key in changed {
                    guard let version = records[key] else { continue }
                    columns.kinds.append(key.kind)
                    columns.ids.append(key.id)
                    columns.payloads.append(bytes: version.payload)
                    columns.times.append(version.modifiedAt)
                    columns.groups.append(version.group)
                    columns.seqs.append(version.seq)
                }
                try sql.execute(
                    """
                    INSERT INTO records (account, kind, id, payload, modified_ms, grp, seq)
                    SELECT $1, k, i, p, m, g, s FROM unnest($2::text[], $3::text[], $4::bytea[], $5::bigint[], $6::text[], $7::bigint[]) AS v(k, i, p, m, g, s)
                    ON CONFLICT (account, kind, id) DO UPDATE SET payload = excluded.payload, modified_ms = excluded.modified_ms, grp = excluded.grp, seq = excluded.seq
                    """,
                    [account, columns.kinds.value, columns.ids.value, columns.payloads.value, columns.times.value, columns.groups.value, columns.seqs.value])
            }
            try sql.inPieces(arrays ? [] : changed, width: 6) { piece in
                var arguments: [SQLValue] = [account]
                arguments.reserveCapacity(1 + piece.count * 6)
                for key in piece {
                    guard let version = records[key] else { continue }
                    arguments += [
                        .text(key.kind), .text(key.id), version.payload.map(SQLValue.blob) ?? .null, .integer(version.modifiedAt),
                        version.group.map(SQLValue.text) ?? .null, .integer(version.seq),
                    ]
                }
                let text = HubService.statement("upsert records", rows: piece.count) {
                    """
                    INSERT INTO records (account, kind, id, payload, modified_ms, grp, seq) VALUES \(HubService.parameterRows(piece.count, width: 6, from: 2, around: "$1, ", nil))
                    ON CONFLICT (account, kind, id) DO UPDATE SET payload = excluded.payload, modified_ms = excluded.modified_ms, grp = excluded.grp, seq = excluded.seq
                    """
                }
                try sql.execute(text, arguments)
            }
            var removed: [ExactText: [(id: String, pair: Member)]] = [:]
            var added: [(key: Key, pair: Member)] = []
            var kinds: [String] = []
            for (key, before) in membersBefore.sorted(by: { ($0.key.kind, $0.key.id) < ($1.key.kind, $1.key.id) }) {
                let after = members[key] ?? []
                for pair in before.subtracting(after).sorted(by: { ($0.set, $0.member) < ($1.set, $1.member) }) {
                    if removed[ExactText(key.kind)] == nil { kinds.append(key.kind) }
                    removed[ExactText(key.kind), default: []].append((key.id, pair))
                }
                for pair in after.subtracting(before).sorted(by: { ($0.set, $0.member) < ($1.set, $1.member) }) { added.append((key, pair)) }
            }
            for kind in kinds {
                try sql.inPieces(removed[ExactText(kind)] ?? [], width: 3) { piece in
                    // The ids again (the same parameters), so both backends find the rows through the key's index.
                    let ids = (0..<piece.count).map { "$\(3 + $0 * 3)" }.joined(separator: ", ")
                    try sql.execute(
                        """
                        DELETE FROM record_members WHERE account = $1 AND kind = $2 AND id IN (\(ids))
                        AND (id, set_name, member) IN (VALUES \(HubService.parameterRows(piece.count, width: 3, from: 3, around: nil, nil)))
                        """,
                        [account, .text(kind)] + piece.flatMap { [SQLValue.text($0.id), .text($0.pair.set), .text($0.pair.member)] })
                }
            }
            try sql.inPieces(added, width: 4) { piece in
                try sql.execute(
                    "INSERT INTO record_members (account, kind, id, set_name, member) VALUES \(HubService.parameterRows(piece.count, width: 4, from: 2, around: "$1, ", nil)) ON CONFLICT DO NOTHING",
                    [account] + piece.flatMap { [SQLValue.text($0.key.kind), .text($0.key.id), .text($0.pair.set), .text($0.pair.member)] })
            }
        }
    }

    /// The texts of the push's multi-row statements, by name and row count, made
    /// once each; only for counts that are powers of two (the sizes of SQLite's
    /// pieces), so the cache stays a few dozen texts.
    private static let statementTexts = Mutex<[String: String]>([:])

    /// The text `make` writes for `name` with `rows` rows, from the cache when it can be.
    static func statement(_ name: String, rows: Int, _ make: () -> String) -> String {
        guard rows > 0, rows & (rows - 1) == 0 else { return make() }
        let key = "\(name) \(rows)"
        if let known = statementTexts.withLock({ $0[key] }) { return known }
        let text = make()
        statementTexts.withLock { $0[key] = text }
        return text
    }

    /// `$first, $first+1, …`: `count` numbered parameters.
    static func parameterList(_ count: Int, from first: Int) -> String {
        (first..<first + count).map { "$\($0)" }.joined(separator: ", ")
    }

    /// `(prefix$first, …, $first+width-1suffix), (…)`: `rows` groups of `width`
    /// numbered parameters, each opened by `prefix` and closed by `, suffix` when given.
    static func parameterRows(_ rows: Int, width: Int, from first: Int, around prefix: String?, _ suffix: String?) -> String {
        var text = ""
        text.reserveCapacity(rows * (width * 7 + 12))
        for row in 0..<rows {
            if row > 0 { text += ", " }
            text += "(" + (prefix ?? "")
            for column in 0..<width {
                if column > 0 { text += ", " }
                text += "$\(first + row * width + column)"
            }
            if let suffix { text += ", " + suffix }
            text += ")"
        }
        return text
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
            record.sets[ExactText(set), default: []].append(name)
        }
        return record
    }

    // MARK: - Checking a mutation

    /// A push's body as it arrives: each field typed, so a wrong type is a
    /// decoding error that names it.
    struct PushBody: Decodable {
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

            init(value: Int64) {
                self.value = value
            }

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
        let items: [PushBody.Item]
        if let scanned = HubPushScanner.items(body) {
            items = scanned
        } else {
            // The scanner reads strict JSON only; Foundation's decoder lets a trailing comma by.
            try HubJSON.refuseTrailingComma(body)
            let parsed: PushBody
            do {
                parsed = try JSONDecoder().decode(PushBody.self, from: Data(body))
            } catch let error as DecodingError {
                throw .badRequest(describe(error))
            } catch {
                throw .badRequest("the body is not valid JSON")
            }
            guard let decoded = parsed.mutations else { throw .badRequest("the field \"mutations\" is missing") }
            items = decoded
        }
        guard items.count <= configuration.maximumMutationsPerPush else {
            // The limit rides in the body (added), so a client sends smaller pushes instead of failing.
            throw HubRefusal(
                400, "bad_request", "the field \"mutations\" holds \(items.count) mutations; at most \(configuration.maximumMutationsPerPush) per push",
                body: ["maximumMutations": configuration.maximumMutationsPerPush])
        }
        return try items.enumerated().map { index, item throws(HubRefusal) in try mutation(item, at: index, configuration: configuration) }
    }

    /// A decoding error as a message naming the field (`mutations[3].modifiedAt`).
    private static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingPrefix(".").description
        }
        // What a field must be, in the API's words (the decoder's own names Swift types).
        func wanted(_ type: Any.Type) -> String {
            switch type {
            case is String.Type: "a string"
            case is Int64.Type, is Double.Type, is PushBody.WholeNumber.Type: "a whole number"
            case is [PushBody.Item].Type, is [Any].Type: "a list"
            default: "a JSON object"
            }
        }
        switch error {
        case .typeMismatch(_, let context) where context.codingPath.isEmpty, .valueNotFound(_, let context) where context.codingPath.isEmpty:
            return "the body must be a JSON object: {\"mutations\": [...]}"
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            return "the field \"\(path(context.codingPath))\" must be \(wanted(type))"
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
            guard !text.utf8.contains(0) else { throw refuse(Self.nulMessage(field)) }
            return text
        }
        let id = try required(item.mutation, "mutation")
        guard (1...200).contains(id.utf8.count) else { throw refuse("the field \"mutation\" must be 1 to 200 bytes") }
        guard !id.utf8.contains(0) else { throw refuse(Self.nulMessage("mutation")) }
        let kind = try checkedKey(item.kind, "kind")
        let record = try checkedKey(item.id, "id")
        let opText = try required(item.op, "op")
        guard let op = Mutation.Op(rawValue: opText) else {
            throw refuse("the field \"op\" is \"\(opText.prefix(40))\"; it must be put, delete, add or remove")
        }
        guard let modifiedAt = item.modifiedAt?.value else { throw refuse("the field \"modifiedAt\" is missing") }
        guard (0...Self.largestTime).contains(modifiedAt) else {
            throw refuse("the field \"modifiedAt\" is \(modifiedAt); it must be a time in milliseconds since 1970, from 0 to 2^53 − 1")
        }
        let group = try item.group.map { text throws(HubRefusal) in try checkedKey(text, "group") }
        var payload: [UInt8]?
        var set: String?
        var member: String?
        switch op {
        case .put:
            guard let data = HubJSON.base64(try required(item.payload, "payload")) else { throw refuse("the field \"payload\" must be standard padded base64") }
            guard data.count <= configuration.maximumRecordBytes else {
                throw refuse("the field \"payload\" is \(data.count) bytes, over the hub's \(configuration.maximumRecordBytes)-byte limit")
            }
            payload = data
        case .delete:
            break
        case .add, .remove:
            set = try checkedKey(item.set, "set")
            member = try checkedKey(item.member, "member")
        }
        return Mutation(id: id, kind: kind, record: record, op: op, payload: payload, group: group, set: set, member: member, modifiedAt: modifiedAt)
    }

    /// A kind, record id, set or member: 1 to 1,024 UTF-8 bytes (the library's
    /// key rule), without U+0000.
    static func key(_ text: String, field: String) throws(HubRefusal) -> String {
        guard (1...1_024).contains(text.utf8.count) else { throw .badRequest("the field \"\(field)\" must be 1 to 1,024 UTF-8 bytes") }
        guard !text.utf8.contains(0) else { throw .badRequest(nulMessage(field)) }
        return text
    }

    /// A kind or id from the path, percent-decoded; a `%` that starts no escape
    /// of UTF-8 (`%ZZ`, half a character) is refused rather than taken literally.
    static func decoded(_ segment: String, _ field: String) throws(HubRefusal) -> String {
        guard segment.contains("%") else { return segment }
        guard let text = segment.removingPercentEncoding else {
            throw .badRequest("the \(field) in the path is not valid percent-encoding of UTF-8; write each byte as %XX (a / as %2F)")
        }
        return text
    }

    /// Why a name holding U+0000 is refused: PostgreSQL's text cannot store it, and
    /// a hub must answer alike on either database.
    static func nulMessage(_ field: String) -> String {
        "the field \"\(field)\" holds the character U+0000 (NUL), which no kind, id, group, set, member or mutation id may hold"
    }

    /// The largest time a record may carry: JSON's largest exact integer, 2^53 − 1 ms.
    static let largestTime: Int64 = 9_007_199_254_740_991
}

/// One push waiting for its account's next transaction (``HubService/push(_:_:)``).
final class PushJob: Sendable {
    let request: HubRequest
    let mutations: [HubService.Mutation]
    let outcome = Mutex<Result<HubResponse, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)

    init(request: HubRequest, mutations: [HubService.Mutation]) {
        self.request = request
        self.mutations = mutations
    }
}

/// The pushes waiting per account, and whether a thread is writing for it. The
/// thread whose push finds none writing becomes the writer: it takes every push
/// waiting (its own first), writes them in one transaction, and goes on while more
/// arrived; the others wait for their answers.
final class PushGroups: Sendable {
    private struct Account {
        var waiting: [PushJob] = []
        var writing = false
    }

    private let accounts = Mutex<[String: Account]>([:])

    /// Queues `job`; `true` when the caller is to write.
    func enqueue(_ job: PushJob, account: String) -> Bool {
        accounts.withLock { accounts in
            accounts[account, default: Account()].waiting.append(job)
            guard accounts[account]?.writing == false else { return false }
            accounts[account]?.writing = true
            return true
        }
    }

    /// The next group for the writer, in arrival order, up to about `maximumMutations`
    /// (at least one push); `nil`, and the writer stands down, when none waits.
    func next(account: String, maximumMutations: Int) -> [PushJob]? {
        accounts.withLock { accounts in
            guard var state = accounts[account], !state.waiting.isEmpty else {
                accounts[account] = nil
                return nil
            }
            var count = 0
            var taken = 0
            for job in state.waiting {
                if taken > 0, count + job.mutations.count > maximumMutations { break }
                count += job.mutations.count
                taken += 1
            }
            let group = Array(state.waiting.prefix(taken))
            state.waiting.removeFirst(taken)
            accounts[account] = state
            return group
        }
    }
}
