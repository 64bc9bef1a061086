import Foundation
import Stele
import SteleSQL

/// Reading records (HUB-API "Records"): the change feed in history order with
/// no gap, replay of every record's latest version, single records, and kinds.
extension HubService {
    /// The account's epoch: an opaque string that changes when the hub's history
    /// is rewound (a restore, an import); a cursor is the pair (epoch, history id).
    func epoch(_ sql: any HubSQL) throws -> String {
        // Read first: the hub writes it when it starts, so a request (a push among them) pays one read.
        if let epoch = try sql.query("SELECT value FROM hub_meta WHERE name = 'epoch'", []).first?[column: 0].string { return epoch }
        try sql.execute("INSERT INTO hub_meta (name, value) VALUES ('epoch', $1) ON CONFLICT (name) DO NOTHING", [.text(Self.secret(bytes: 8))])
        return try sql.query("SELECT value FROM hub_meta WHERE name = 'epoch'", []).first?[column: 0].string ?? ""
    }

    /// Starts a new epoch of the history, after the hub's database was put back
    /// from a backup (or otherwise rewound): every cursor of an earlier epoch is
    /// then refused with `409 history_rewound`, and its client replays and pushes
    /// again what the hub lacks. The new epoch notes the one it follows and each
    /// account's history id at the fork. Run by `stele-hub restored` and the simulator's restore.
    /// - Parameter name: the new epoch; random by default (the simulator names its own, to replay bit for bit).
    /// - Returns: the epoch before and the new one.
    public static func startNewEpoch(now: Int64, name: String? = nil, _ sql: any HubSQL) throws -> (previous: String, current: String) {
        let previous = try sql.query("SELECT value FROM hub_meta WHERE name = 'epoch'", []).first?[column: 0].string ?? ""
        let current = name ?? secret(bytes: 8)
        try sql.execute("INSERT INTO hub_meta (name, value) VALUES ('epoch', $1) ON CONFLICT (name) DO UPDATE SET value = excluded.value", [.text(current)])
        try sql.execute("INSERT INTO history_epochs (epoch, parent, created_ms) VALUES ($1, $2, $3)", [.text(current), .text(previous), .integer(now)])
        try sql.execute("INSERT INTO history_forks (epoch, account, history) SELECT $1, id, history FROM accounts", [.text(current)])
        return (previous, current)
    }

    /// How much of epoch `older`'s history the current epoch `current` still holds
    /// for `account`: the lowest fork on the lineage from `current` back to `older`;
    /// 0 when `older` is not on it (nothing of it can be vouched for).
    func commonHistory(_ account: AccountID, from older: String, to current: String, _ sql: any HubSQL) throws -> Int64 {
        var epoch = current
        var common = Int64.max
        var steps = 0
        while epoch != older {
            steps += 1
            guard steps <= 10_000, let parent = try sql.query("SELECT parent FROM history_epochs WHERE epoch = $1", [.text(epoch)]).first?[column: 0].string else {
                return 0
            }
            let fork = try sql.query("SELECT history FROM history_forks WHERE epoch = $1 AND account = $2", [.text(epoch), .text(account.hex)]).first?[column: 0].int64 ?? 0
            common = min(common, fork)
            epoch = parent
        }
        return common == .max ? 0 : common
    }

    // MARK: - The change feed

    /// `GET /v1/accounts/{a}/records/changes?since=H&epoch=E&limit=N&wait=S`.
    func changes(_ account: AccountID, _ request: HubRequest) throws -> HubOutcome {
        let since = try Self.queryInteger(request, "since", default: 0, range: 0...Int64.max)
        if request.query["epoch"] == "" {
            throw HubRefusal.badRequest("the query parameter epoch is empty; send the epoch your cursor came with, or leave epoch out")
        }
        let limit = try pageLimit(request)
        let wait = request.query["wait"] == nil ? nil : try Self.queryInteger(request, "wait", default: 0, range: 0...Int64(configuration.maximumWaitSeconds))
        let page = try transaction(account) { sql in
            let caller = try authenticate(request, account, sql)
            return try changesPage(account, since: since, epoch: request.query["epoch"], limit: limit, device: caller.device, sql)
        }
        guard let wait, wait > 0, page.records.isEmpty else { return .respond(page.response) }
        return .wait(
            HubWait(
                key: Self.recordsKey(account.hex), waitSeconds: Double(wait),
                poll: { [self] in
                    do {
                        let again = try transaction(account) { sql in
                            let caller = try authenticate(request, account, sql)
                            return try changesPage(account, since: since, epoch: request.query["epoch"], limit: limit, device: caller.device, sql)
                        }
                        return again.records.isEmpty ? nil : again.response
                    } catch {
                        return Self.answer(for: error)
                    }
                },
                expire: { page.response }))
    }

    /// One page of changes after `since`.
    struct ChangesPage {
        let changes: [StoredRecord]
        let next: Int64
        let epoch: String
        let more: Bool
        /// Tombstones at or below it are collected: a client may drop its own.
        let horizon: Int64

        var records: [StoredRecord] { changes }

        /// `{"changes": [record...], "next": H2, "epoch": E, "more": BOOL}`.
        var response: HubResponse {
            var json = HubJSONWriter(capacity: HubService.estimatedBytes(changes) + 96)
            json.raw("{")
            json.key("changes")
            HubService.write(changes, to: &json)
            json.comma()
            json.key("next")
            json.integer(next)
            json.comma()
            json.key("epoch")
            json.string(epoch)
            json.comma()
            json.key("more")
            json.bool(more)
            json.comma()
            json.key("horizon")
            json.integer(horizon)
            json.raw("}")
            return HubResponse(status: 200, headers: ["Content-Type": "application/json"], body: json.bytes)
        }
    }

    /// `[record...]`.
    static func write(_ records: [StoredRecord], to json: inout HubJSONWriter) {
        json.raw("[")
        for (index, record) in records.enumerated() {
            if index > 0 { json.comma() }
            record.write(to: &json)
        }
        json.raw("]")
    }

    /// About how many bytes `records` take as JSON, to reserve them at once.
    static func estimatedBytes(_ records: [StoredRecord]) -> Int {
        records.reduce(0) { $0 + 112 + $1.kind.utf8.count + $1.id.utf8.count + ($1.payload?.count ?? 0) * 4 / 3 + ($1.group?.utf8.count ?? 0) }
    }

    /// The records changed after `since`, in history order. The history id is read
    /// before the rows: every position up to it is committed (positions are taken
    /// under the account's lock, in commit order), so a page that ends there is whole.
    /// A cursor in the current epoch is `device`'s acknowledgment of everything up to
    /// `since` (HubService+Compaction); one below the horizon is refused with `410`.
    func changesPage(_ account: AccountID, since: Int64, epoch requested: String?, limit: Int, device: String?, _ sql: any HubSQL) throws -> ChangesPage {
        let epoch = try epoch(sql)
        let history = try historyID(account, sql)
        if let requested, requested != epoch {
            let common = try commonHistory(account, from: requested, to: epoch, sql)
            throw HubRefusal(
                409, "history_rewound",
                "the cursor is of epoch \(requested.prefix(40)), the hub's history is epoch \(epoch) at \(history) and holds the cursor's epoch up to \(common): replay, then push again what the hub lacks",
                body: ["epoch": epoch, "historyId": history, "commonHistoryId": common])
        }
        if since > history {
            throw HubRefusal(409, "history_rewound", "the cursor \(since) is beyond the hub's history id \(history) (epoch \(epoch)): the hub lost changes; replay, then push again what it lacks",
                body: ["epoch": epoch, "historyId": history, "commonHistoryId": history])
        }
        let horizon = try self.horizon(account, sql)
        if since < horizon {
            throw HubRefusal(
                410, "history_compacted",
                "the cursor \(since) is below the hub's tombstone horizon \(horizon): deletes up to it were collected once every device had them; replay, then go on from the history id",
                body: ["epoch": epoch, "historyId": history, "commonHistoryId": history, "horizon": horizon])
        }
        if let device { try notePulled(account, device: device, since: since, sql) }
        let rows = try sql.query(
            "SELECT kind, id, payload, modified_ms, grp, seq FROM records WHERE account = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            [.text(account.hex), .integer(since), .integer(Int64(limit) + 1)])
        let more = rows.count > limit
        var records = rows.prefix(limit).compactMap(Self.storedRecord)
        if let first = records.first, let last = records.last {
            try attachSets(&records, account, "r.seq >= $2 AND r.seq <= $3", [.integer(first.seq), .integer(last.seq)], sql)
        }
        let next = more ? (records.last?.seq ?? since) : max(history, records.last?.seq ?? since)
        return ChangesPage(changes: records, next: next, epoch: epoch, more: more, horizon: horizon)
    }

    static func storedRecord(_ row: [SQLValue]) -> StoredRecord? {
        guard let kind = row[column: 0].string, let id = row[column: 1].string, let modified = row[column: 3].int64, let seq = row[column: 5].int64 else { return nil }
        return StoredRecord(kind: kind, id: id, payload: row[column: 2].bytes, modifiedAt: modified, group: row[column: 4].string, seq: seq)
    }

    /// Fills in the member sets of `records`, read with one query over the rows `range` picks.
    private func attachSets(_ records: inout [StoredRecord], _ account: AccountID, _ range: String, _ bounds: [SQLValue], _ sql: any HubSQL) throws {
        let members = try sql.query(
            """
            SELECT m.kind, m.id, m.set_name, m.member FROM record_members m
            JOIN records r ON r.account = m.account AND r.kind = m.kind AND r.id = m.id
            WHERE r.account = $1 AND \(range)
            """, [.text(account.hex)] + bounds)
        guard !members.isEmpty else { return }
        // Byte for byte (``ExactText``): two spellings of an id are two records.
        var index: [ExactText: Int] = [:]
        for (position, record) in records.enumerated() { index[ExactText(record.kind + "\u{0}" + record.id)] = position }
        for member in members {
            guard let kind = member[column: 0].string, let id = member[column: 1].string, let set = member[column: 2].string, let name = member[column: 3].string,
                let position = index[ExactText(kind + "\u{0}" + id)]
            else { continue }
            records[position].sets[ExactText(set), default: []].append(name)
        }
    }

    // MARK: - Replay

    /// `GET /v1/accounts/{a}/records/replay?after=TOKEN&limit=N`: every record's
    /// latest version (tombstones included) in (kind, id) order; touches no cursor.
    func replay(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        let limit = try pageLimit(request)
        return try transaction(account) { sql in
            _ = try authenticate(request, account, sql)
            let secret = try replaySecret(sql)
            var after: (kind: String, id: String)?
            if let token = request.query["after"], !token.isEmpty {
                guard let position = Self.replayPosition(token, secret: secret) else {
                    throw HubRefusal.badRequest("the query parameter \"after\" is not a replay token this hub issued; start from the beginning (no after)")
                }
                after = position
            }
            let bounds: [SQLValue] = after.map { [.text($0.kind), .text($0.id)] } ?? [.text(""), .text("")]
            let rows = try sql.query(
                "SELECT kind, id, payload, modified_ms, grp, seq FROM records WHERE account = $1 AND (kind > $2 OR (kind = $2 AND id > $3)) ORDER BY kind, id LIMIT $4",
                [.text(account.hex)] + bounds + [.integer(Int64(limit) + 1)])
            let more = rows.count > limit
            var records = rows.prefix(limit).compactMap(Self.storedRecord)
            if let last = records.last {
                try attachSets(
                    &records, account, "(r.kind > $2 OR (r.kind = $2 AND r.id > $3)) AND (r.kind < $4 OR (r.kind = $4 AND r.id <= $5))",
                    bounds + [.text(last.kind), .text(last.id)], sql)
            }
            let next = records.last.map { Self.replayToken(kind: $0.kind, id: $0.id, secret: secret) } ?? (request.query["after"] ?? "")
            // `{"records": [record...], "next": TOKEN, "more": BOOL}`.
            var json = HubJSONWriter(capacity: Self.estimatedBytes(records) + next.utf8.count + 64)
            json.raw("{")
            json.key("records")
            Self.write(records, to: &json)
            json.comma()
            json.key("next")
            json.string(next)
            json.comma()
            json.key("more")
            json.bool(more)
            json.raw("}")
            return HubResponse(status: 200, headers: ["Content-Type": "application/json"], body: json.bytes)
        }
    }

    /// The hub's secret for replay tokens, made on first use.
    private func replaySecret(_ sql: any HubSQL) throws -> String {
        try sql.execute("INSERT INTO hub_meta (name, value) VALUES ('replay_secret', $1) ON CONFLICT (name) DO NOTHING", [.text(Self.secret(bytes: 16))])
        return try sql.query("SELECT value FROM hub_meta WHERE name = 'replay_secret'", []).first?[column: 0].string ?? ""
    }

    /// A replay token: the position (kind, id), and a tag of the hub's secret over
    /// it, so a token the hub never issued is refused rather than read.
    static func replayToken(kind: String, id: String, secret: String) -> String {
        let position = Data((kind + "\u{0}" + id).utf8).base64EncodedString()
        return position + "." + tag(position, secret)
    }

    static func replayPosition(_ token: String, secret: String) -> (kind: String, id: String)? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, tag(String(parts[0]), secret) == parts[1], let data = Data(base64Encoded: String(parts[0])),
            let text = String(data: data, encoding: .utf8)
        else { return nil }
        let fields = text.split(separator: "\u{0}", maxSplits: 1, omittingEmptySubsequences: false)
        guard fields.count == 2 else { return nil }
        return (String(fields[0]), String(fields[1]))
    }

    private static func tag(_ position: String, _ secret: String) -> String {
        String(Hash32.sha256(of: Array("stele replay \(secret) \(position)".utf8)).hex.prefix(16))
    }

    // MARK: - Single records and kinds

    /// A single record's write dated further ahead of the hub's clock than
    /// `--max-clock-ahead` allows: `422 clock_skew`, with the hub's time.
    private func refuseClockAhead(_ modifiedAt: Int64, now: Int64) throws(HubRefusal) {
        guard modifiedAt <= now + Int64(configuration.maximumClockAheadSeconds) * 1000 else {
            throw HubRefusal(
                422, "clock_skew",
                "modifiedAt \(modifiedAt) is ahead of the hub's clock (\(now)) by more than \(configuration.maximumClockAheadSeconds) s; correct the device's clock",
                body: ["hubTime": now])
        }
    }

    /// `GET|PUT|DELETE /v1/accounts/{a}/records/{kind}/{id}`.
    func singleRecord(_ account: AccountID, kind kindSegment: String, id idSegment: String, _ request: HubRequest) throws -> HubResponse {
        let kind = try Self.key(try Self.decoded(kindSegment, "kind"), field: "kind")
        let id = try Self.key(try Self.decoded(idSegment, "id"), field: "id")
        let now = now()
        let (response, changed) = try transaction(account) { sql -> (HubResponse, Bool) in
            _ = try authenticate(request, account, sql)
            let missing = HubRefusal.notFound("record \(kind)/\(id.prefix(80)) is not on the hub (absent, or deleted)")
            switch request.method {
            case "GET":
                // The history's epoch rides along (`Stele-Hub-Epoch`): a 404 says "absent, or a
                // tombstone", and a client whose cursor is of another epoch (the hub was put back
                // from a backup since) must not take it for a delete (seed 174011).
                let epoch = try epoch(sql)
                guard let found = try record(account, kind: kind, id: id, sql), !found.isTombstone else {
                    var refusal = missing
                    refusal.headers["Stele-Hub-Epoch"] = epoch
                    throw refusal
                }
                var response = found.response
                response.headers["Stele-Hub-Epoch"] = epoch
                return (response, false)
            case "PUT":
                let body = try HubJSON.object(request.body)
                guard !body.isNull("payload") else {
                    throw HubRefusal.badRequest("the field \"payload\" is null; a PUT writes a value (standard padded base64): to delete the record, send DELETE")
                }
                let payload = try body.bytes("payload")
                guard payload.count <= configuration.maximumRecordBytes else {
                    throw HubRefusal.badRequest("the field \"payload\" is \(payload.count) bytes, over the hub's \(configuration.maximumRecordBytes)-byte limit")
                }
                let modifiedAt = try body.integer("modifiedAt")
                guard (0...Self.largestTime).contains(modifiedAt) else {
                    throw HubRefusal.badRequest("the field \"modifiedAt\" is \(modifiedAt); it must be a time in milliseconds since 1970, from 0 to 2^53 − 1")
                }
                var group = try body.optionalString("group")
                if let text = group { group = try Self.key(text, field: "group") }
                let sets = try Self.sets(body)
                try refuseClockAhead(modifiedAt, now: now)
                try sql.lockAccount(account.hex)
                let existing = try record(account, kind: kind, id: id, sql)
                if let existing, existing.modifiedAt > modifiedAt || (existing.modifiedAt == modifiedAt && existing.isTombstone) {
                    throw HubRefusal(409, "stale", "a newer version of \(kind)/\(id.prefix(80)) won (modifiedAt \(existing.modifiedAt)); read it and write again", body: ["record": existing.json])
                }
                let seq = try historyID(account, sql) + 1
                try sql.execute(
                    """
                    INSERT INTO records (account, kind, id, payload, modified_ms, grp, seq) VALUES ($1, $2, $3, $4, $5, $6, $7)
                    ON CONFLICT (account, kind, id) DO UPDATE SET payload = excluded.payload, modified_ms = excluded.modified_ms, grp = excluded.grp, seq = excluded.seq
                    """,
                    [.text(account.hex), .text(kind), .text(id), .blob(payload), .integer(modifiedAt), (group ?? existing?.group).map(SQLValue.text) ?? .null, .integer(seq)])
                if let sets {
                    try sql.execute("DELETE FROM record_members WHERE account = $1 AND kind = $2 AND id = $3", [.text(account.hex), .text(kind), .text(id)])
                    for (set, members) in sets {
                        // Byte for byte: two spellings of a member are two members (``ExactText``).
                        for member in Set(members.map(ExactText.init)).map(\.text) {
                            try sql.execute(
                                "INSERT INTO record_members (account, kind, id, set_name, member) VALUES ($1, $2, $3, $4, $5)",
                                [.text(account.hex), .text(kind), .text(id), .text(set), .text(member)])
                        }
                    }
                }
                try sql.execute("UPDATE accounts SET history = $2 WHERE id = $1", [.text(account.hex), .integer(seq)])
                return (try record(account, kind: kind, id: id, sql)?.response ?? HubJSON.response([:]), true)
            default:  // DELETE
                let modifiedAt = try Self.queryInteger(request, "modifiedAt", default: now, range: 0...Self.largestTime)
                // The same limit as a put's (`--max-clock-ahead`): a tombstone dated ahead would beat every write until then.
                try refuseClockAhead(modifiedAt, now: now)
                try sql.lockAccount(account.hex)
                if try sql.query("SELECT append_only FROM record_kinds WHERE account = $1 AND kind = $2", [.text(account.hex), .text(kind)]).first?[column: 0].int64 == 1 {
                    throw HubRefusal(409, "append_only", "records of kind \(kind) are append-only: a tombstone never beats a live copy (seed 002)")
                }
                let found = try record(account, kind: kind, id: id, sql)
                guard let existing = found, !existing.isTombstone else {
                    // 404 all the same; but the deletion is kept, as a push keeps it: an absent record
                    // gets a tombstone of this time, an older tombstone takes it, so a put older than
                    // this delete cannot bring the record back.
                    guard found == nil || modifiedAt > found?.modifiedAt ?? .max else { throw missing }
                    let seq = try historyID(account, sql) + 1
                    if found == nil {
                        try sql.execute(
                            "INSERT INTO records (account, kind, id, payload, modified_ms, grp, seq) VALUES ($1, $2, $3, NULL, $4, NULL, $5)",
                            [.text(account.hex), .text(kind), .text(id), .integer(modifiedAt), .integer(seq)])
                    } else {
                        try tombstone(account, kind: kind, id: id, modifiedAt: modifiedAt, seq: seq, sql)
                    }
                    try sql.execute("UPDATE accounts SET history = $2 WHERE id = $1", [.text(account.hex), .integer(seq)])
                    return (Self.answer(for: missing), true)
                }
                if existing.modifiedAt > modifiedAt {
                    throw HubRefusal(409, "stale", "a newer version of \(kind)/\(id.prefix(80)) won (modifiedAt \(existing.modifiedAt)); read it and decide again", body: ["record": existing.json])
                }
                let seq = try historyID(account, sql) + 1
                try tombstone(account, kind: kind, id: id, modifiedAt: modifiedAt, seq: seq, sql)
                try sql.execute("UPDATE accounts SET history = $2 WHERE id = $1", [.text(account.hex), .integer(seq)])
                return (HubJSON.response(["kind": kind, "id": id, "seq": seq]), true)
            }
        }
        if changed { announce(Self.recordsKey(account.hex)) }
        return response
    }

    /// `sets` of a PUT body: `{"labels": ["INBOX", ...]}`, or nil when absent.
    private static func sets(_ body: JSONBody) throws(HubRefusal) -> [String: [String]]? {
        guard let value = body.fields["sets"], !(value is NSNull) else { return nil }
        guard let object = value as? [String: Any] else { throw .badRequest("the field \"sets\" must be an object of lists of strings") }
        var sets: [String: [String]] = [:]
        for (name, members) in object {
            _ = try key(name, field: "sets (a set's name)")
            guard let list = members as? [String] else { throw .badRequest("the field \"sets\" must be an object of lists of strings") }
            // The member is named: which of a record's sets and members was refused.
            for (index, member) in list.enumerated() { _ = try key(member, field: "sets.\(name.prefix(80))[\(index)]") }
            sets[name] = list
        }
        return sets
    }

    /// `PUT /v1/accounts/{a}/kinds/{kind}`: `{"appendOnly": BOOL}`.
    func putKind(_ account: AccountID, kind kindSegment: String, _ request: HubRequest) throws -> HubResponse {
        let kind = try Self.key(try Self.decoded(kindSegment, "kind"), field: "kind")
        let body = try HubJSON.object(request.body)
        guard let flag = body.fields["appendOnly"] as? NSNumber, String(cString: flag.objCType) == "c" else {
            throw HubRefusal.badRequest("the field \"appendOnly\" must be true or false")
        }
        return try transaction(account) { sql in
            _ = try authenticate(request, account, sql)
            try sql.execute(
                "INSERT INTO record_kinds (account, kind, append_only) VALUES ($1, $2, $3) ON CONFLICT (account, kind) DO UPDATE SET append_only = excluded.append_only",
                [.text(account.hex), .text(kind), .integer(flag.boolValue ? 1 : 0)])
            return HubJSON.response(["kind": kind, "appendOnly": flag.boolValue])
        }
    }
}

extension HubService {
    /// A page's `limit`: 1 or more; above the hub's `--max-changes-per-page` it
    /// is that maximum (the page then says `more`), so a client asking for more
    /// than an operator allows still pages through everything.
    func pageLimit(_ request: HubRequest) throws(HubRefusal) -> Int {
        let asked = try Self.queryInteger(request, "limit", default: Int64(configuration.maximumChangesPerPage), range: 1...Int64.max)
        return Int(min(asked, Int64(configuration.maximumChangesPerPage)))
    }
}
