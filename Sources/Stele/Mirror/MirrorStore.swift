import Foundation
import SteleSQL

/// A mirror client's store (DESIGN §8.2, seeds 003 and 004): the device's copy
/// of a hub's server-authoritative records, and the local intent not yet
/// echoed by the hub.
///
/// - The canonical tables hold what the hub said; only the pull applier writes them.
/// - Every write of the app (``put(kind:id:payload:group:)``, ``delete(kind:id:)``,
///   ``add(kind:id:set:member:)``, …) is one row in the mutation queue and
///   nothing else, in one transaction with the rollups it changes: the effect is
///   instant and server truth stays pristine (003 "The design").
/// - Every read composes the two through ``MirrorOverlay``.
///
/// ``MirrorSync`` flushes the queue and pulls the hub's changes; it does no I/O
/// of its own, so the simulator runs the same code an app ships.
///
/// One instance is used from one thread at a time. Two instances (two processes,
/// or an app and `stele`) may share a file: the queue's claims carry an owner and
/// a lease, and a mutation sent twice is applied once by its id.
public final class MirrorStore {
    public struct Configuration: Sendable {
        /// Attempts a mutation gets before it stays `failed` (SCENARIOS: 5).
        public var maximumAttempts: Int = 5
        /// How long a flusher's claim on pending mutations lasts before another may take them.
        public var claimLeaseMilliseconds: Int64 = 30_000
        /// The first retry's pause after a failed push; each further one doubles, up to ``maximumBackoffMilliseconds``.
        public var initialBackoffMilliseconds: Int64 = 1_000
        public var maximumBackoffMilliseconds: Int64 = 60_000
        /// Mutations per push (HUB-API: at most 1,000).
        public var mutationsPerPush: Int = 1_000
        /// Payload bytes one push carries at most (one larger mutation goes alone): base64 grows
        /// them by a third, and the hub refuses a body over 8 MiB whole, every mutation in it.
        public var maximumPushBytes: Int = 4 << 20
        /// The largest payload a put may carry: the hub's limit for a record (HUB-API, 1 MiB by
        /// default). A larger one is refused at once: sent, it would fail its whole push.
        public var maximumPayloadBytes: Int = 1 << 20
        /// The clock that stamps `modifiedAt` and times retries.
        public var clock: any WallClock = SystemWallClock()
        /// This instance's name in the queue's claims; random by default.
        public var owner: String = MirrorStore.randomName()

        public init() {}
    }

    public let path: String
    public let configuration: Configuration
    /// The most mutations the hub takes in one push, once it has said so (a
    /// `400` carrying `maximumMutations`, from `stele-hub serve
    /// --max-mutations-per-push`): pushes carry no more from then on.
    public internal(set) var hubMutationsPerPush: Int?
    let connection: Connection
    /// The client's name in its mutation ids, stored with the file.
    public let clientID: String

    static let applicationID: Int64 = 0x5374_4D69

    /// Opens the store at `path`, creating it when the file is missing or empty.
    /// - Throws: ``MirrorError`` `notAMirrorStore` when the file is another database,
    ///   `newerFormat` when a newer Stele wrote it; the file is then left untouched.
    public init(path: String, configuration: Configuration = Configuration()) throws {
        self.path = path
        self.configuration = configuration
        let connection = try Self.connect(path, mode: .readWriteCreate, configuration: .standard)
        do {
            let application = try connection.scalarInt("PRAGMA application_id") ?? 0
            let version = try Migrator.version(of: connection)
            if application == 0 && version == 0 {
                let tables = try connection.scalarInt("SELECT count(*) FROM sqlite_master") ?? 0
                guard tables == 0 else { throw MirrorError(.notAMirrorStore, "\(path) is a database of another program; choose another path") }
            } else if application != Self.applicationID {
                throw MirrorError(.notAMirrorStore, "\(path) is not a Stele mirror store; choose another path")
            }
            try connection.transaction {
                try MirrorSchema.migrator.migrate(connection)
                try connection.executeScript("PRAGMA application_id = \(Self.applicationID)")
                try connection.execute("INSERT INTO mirror_meta (name, value) VALUES ('client', ?) ON CONFLICT (name) DO NOTHING", [.text(Self.randomName())])
            }
            clientID = try connection.scalarText("SELECT value FROM mirror_meta WHERE name = 'client'") ?? ""
        } catch let error as MigrationError {
            throw MirrorError(.newerFormat, "\(path): \(error.message)")
        } catch let error as SQLiteError where error.code.primary == .notADatabase {
            throw Self.failure(error, path, doing: "read")
        }
        self.connection = connection
    }

    /// Opens the store at `path` to read it, writing nothing (not even SQLite's
    /// change counter, nor a `-wal` or `-shm` file where there was none): what
    /// `stele pending` lists. Writes through it fail.
    /// - Throws: ``MirrorError`` `notAMirrorStore` for a missing file or another
    ///   database, `newerFormat` when a newer Stele wrote it, `storage` for a
    ///   store of an older format (opening it read-write once upgrades it).
    public init(readingAt path: String) throws {
        self.path = path
        configuration = Configuration()
        let connection = try Self.connect(path, mode: .readOnly, configuration: nil)
        do {
            guard try connection.scalarInt("PRAGMA application_id") == Self.applicationID else {
                throw MirrorError(.notAMirrorStore, "\(path) is not a Stele mirror store; choose another path")
            }
            let version = try Migrator.version(of: connection)
            let latest = MirrorSchema.migrator.latestVersion
            guard version <= latest else {
                throw MirrorError(.newerFormat, "\(path) has format \(version), newer than this build's \(latest); update Stele")
            }
            guard version == latest else {
                throw MirrorError(.storage, "\(path) has the older format \(version); open it once read-write (the app, or a sync) to upgrade it to \(latest)")
            }
            clientID = try connection.scalarText("SELECT value FROM mirror_meta WHERE name = 'client'") ?? ""
        } catch let error as SQLiteError {
            throw Self.failure(error, path, doing: "read")
        }
        self.connection = connection
    }

    /// Opens `path` through SQLite; a failure is said in the mirror's words (``failure(_:_:doing:)``).
    private static func connect(_ path: String, mode: Connection.OpenMode, configuration: Connection.Configuration?) throws -> Connection {
        do {
            return try Connection(path: path, mode: mode, configuration: configuration)
        } catch let error as SQLiteError {
            throw failure(error, path, doing: "open")
        }
    }

    /// SQLite's failure to open or read `path`: no database at all (`notAMirrorStore`), or any other (`storage`).
    private static func failure(_ error: SQLiteError, _ path: String, doing verb: String) -> MirrorError {
        error.code.primary == .notADatabase
            ? MirrorError(.notAMirrorStore, "\(path) is not an SQLite database; choose another path")
            : MirrorError(.storage, "cannot \(verb) \(path): \(error.message)")
    }

    /// Twelve random hex digits.
    public static func randomName() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(generator.next() & 0xFFFF_FFFF_FFFF, radix: 16)
    }

    // MARK: - Meta

    func meta(_ name: String) throws -> SQLValue {
        try connection.queryFirst("SELECT value FROM mirror_meta WHERE name = ?", [.text(name)]) { $0.value(0) } ?? .null
    }

    func setMeta(_ name: String, _ value: SQLValue) throws {
        try connection.execute("INSERT INTO mirror_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value", [.text(name), value])
    }

    /// The next number for this client's mutation ids and intent order.
    func nextNumber() throws -> Int64 {
        // One statement: read, count up and write back.
        let next = try connection.queryFirst(
            "INSERT INTO mirror_meta (name, value) VALUES ('counter', 1) ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value"
        ) { $0.int64(0) }
        guard let next else { throw MirrorError(.storage, "\(path): the mutation counter did not count") }
        return next
    }

    func newMutationID() throws -> (id: String, ordinal: Int64) {
        let number = try nextNumber()
        return ("\(clientID)-\(number)", number)
    }

    /// The client's clock, corrected by what a hub said of its own (a `clock_skew` refusal).
    var now: Int64 { configuration.clock.nowMilliseconds() }

    func stampNow() throws -> Int64 { now + (try meta("clock_offset").asInteger ?? 0) }

    /// The hub's clock, as an answer carried it. A device whose clock runs behind
    /// the hub's by more than a second stamps its writes by the hub's time from then
    /// on (its clock plus the difference): a write is never dated before the hub's
    /// time the client has seen, so a slow clock does not lose every last-writer-wins
    /// conflict. A clock ahead is corrected by the hub's `clock_skew` refusal instead.
    func noteHubTime(_ hubTime: Int64) throws {
        let offset = try meta("clock_offset").asInteger ?? 0
        guard hubTime > now &+ offset &+ 1_000 else { return }
        try setMeta("clock_offset", .integer(hubTime &- now))
    }

    /// Milliseconds this client adds to its clock to stamp its writes (the hub's
    /// time minus its own, as it last corrected it); 0 until the hub showed it off.
    public func clockCorrection() throws -> Int64 { try meta("clock_offset").asInteger ?? 0 }

    // MARK: - Cursor

    /// Where the pull has reached: the hub's epoch and history id.
    public struct Cursor: Sendable, Equatable {
        public var epoch: String?
        public var historyID: Int64
    }

    public func cursor() throws -> Cursor {
        // An empty epoch is none (a replay started before the first pull).
        Cursor(epoch: try meta("epoch").asText.flatMap { $0.isEmpty ? nil : $0 }, historyID: try meta("cursor").asInteger ?? 0)
    }

    // MARK: - Effective reads (all through MirrorOverlay)

    /// The record's effective payload; `nil` when it is absent or deleted.
    public func value(kind: String, id: String) throws -> [UInt8]? {
        try connection.queryFirst("SELECT \(MirrorOverlay.payload(kind: "?1", id: "?2"))", [.text(kind), .text(id)]) { $0.optionalBlob(0) } ?? nil
    }

    /// Whether the record's effective set `set` holds `member`.
    public func holds(kind: String, id: String, set: String, member: String) throws -> Bool {
        try connection.scalarInt(Self.holdsSQL, [.text(kind), .text(id), .text(set), .text(member)]) == 1
    }

    /// The statements the write path runs on every delta, built once: the overlay's
    /// fragments are long, and building and hashing their text on every call costs
    /// more than running the short ones.
    static let holdsSQL = "SELECT \(MirrorOverlay.holds(kind: "?1", id: "?2", set: "?3", member: "?4"))"
    static let groupSQL = "SELECT \(MirrorOverlay.group(kind: "?1", id: "?2"))"

    /// The record's effective members of `set`, sorted.
    public func members(kind: String, id: String, set: String) throws -> [String] {
        try connection.query("\(MirrorOverlay.members(kind: "?1", id: "?2", set: "?3")) ORDER BY member", [.text(kind), .text(id), .text(set)]) { $0.text(0) }
    }

    /// The names of the record's sets that hold or may hold a member (canonical, or queued).
    public func setNames(kind: String, id: String) throws -> [String] {
        try connection.query(
            "SELECT set_name FROM mirror_members WHERE kind = ?1 AND id = ?2 UNION SELECT set_name FROM mirror_queue WHERE kind = ?1 AND id = ?2 AND set_name <> '' ORDER BY 1",
            [.text(kind), .text(id)]
        ) { $0.text(0) }
    }

    /// The record's effective group.
    public func group(kind: String, id: String) throws -> String? {
        try connection.queryFirst(Self.groupSQL, [.text(kind), .text(id)]) { $0.isNull(0) ? nil : $0.text(0) } ?? nil
    }

    /// Every effectively alive record of `kind` with its payload, by id.
    public func records(kind: String) throws -> [(id: String, payload: [UInt8])] {
        let candidates = "SELECT id FROM mirror_records WHERE kind = ?1 UNION SELECT id FROM mirror_queue WHERE kind = ?1 AND set_name = '' AND member = ''"
        return try connection.query(
            "SELECT c.id, \(MirrorOverlay.payload(kind: "?1", id: "c.id")) AS p FROM (\(candidates)) AS c WHERE p IS NOT NULL ORDER BY c.id", [.text(kind)]
        ) { ($0.text(0), $0.blob(1)) }
    }

    /// The kinds that have records, canonical or queued.
    public func kinds() throws -> [String] {
        try connection.query("SELECT kind FROM mirror_records UNION SELECT kind FROM mirror_queue ORDER BY kind") { $0.text(0) }
    }

    /// The effective records of group `group`: alive, in it by their effective group, by id.
    public func groupMembers(kind: String, group: String) throws -> [String] {
        try connection.query("SELECT id FROM (\(MirrorOverlay.groupRecords(kind: "?1", group: "?2"))) ORDER BY id", [.text(kind), .text(group)]) { $0.text(0) }
    }

    // MARK: - Rollups

    /// Keeps the rollup "some record of the group carries `member` in `set`" for
    /// every group of `kind` (003's `thread_rollup`), computed now for every group.
    public func declareRollup(kind: String, set: String, member: String) throws {
        try connection.transaction {
            try connection.execute(
                "INSERT INTO mirror_rollup_rules (kind, set_name, member) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", [.text(kind), .text(set), .text(member)])
            try recomputeAllRollups()
        }
    }

    /// The rollup of `group`, read from the rollup table alone; `nil` when the group has no live record or no such rollup is declared.
    public func rollup(kind: String, group: String, set: String, member: String) throws -> Bool? {
        try connection.queryFirst(
            "SELECT present FROM mirror_rollups WHERE rule = (\(Self.ruleSQL)) AND grp = ?4", [.text(kind), .text(set), .text(member), .text(group)]
        ) { $0.int64(0) == 1 }
    }

    /// The groups whose rollup is true, newest first (the inbox: "threads with a message in INBOX"), at most `limit`.
    public func groups(kind: String, set: String, member: String, limit: Int = 50) throws -> [String] {
        try connection.query(
            Self.groupsSQL,
            [.text(kind), .text(set), .text(member), .integer(Int64(limit))]
        ) { $0.text(0) }
    }

    private static let groupsSQL = "SELECT grp FROM mirror_rollups WHERE rule = (\(ruleSQL)) AND present = 1 ORDER BY latest DESC, grp LIMIT ?4"

    /// The number of the rule on kind `?1`, set `?2` and member `?3`, as a scalar subquery's SELECT.
    static let ruleSQL = "SELECT rule FROM mirror_rollup_rules WHERE kind = ?1 AND set_name = ?2 AND member = ?3"

    /// Groups whose rollups to recompute, by kind. A group is told by its name's
    /// UTF-8 bytes, as SQLite and the hub tell them: two names Swift's `String`
    /// holds equal (`é` as one character, and as `e` with a combining accent) are
    /// two groups, and a `Set<String>` kept one of them, whose rollup then went stale.
    /// Kinds are told by their bytes the same way.
    struct RollupGroups {
        private(set) var byKind: [ExactText: Set<ExactText>] = [:]

        mutating func insert(_ group: String, of kind: String) {
            byKind[ExactText(kind), default: []].insert(ExactText(group))
        }
    }

    /// Recomputes the rollups of `groups` (by kind) from the effective reads. Runs
    /// in the caller's transaction: every queue change, retirement and pull calls it.
    func recomputeRollups(_ groups: RollupGroups) throws {
        for (exactKind, named) in groups.byKind where !named.isEmpty {
            let kind = exactKind.text
            let names = named.sorted().map(\.text)
            let rules = try connection.query("SELECT rule, set_name, member FROM mirror_rollup_rules WHERE kind = ?", [.text(kind)]) {
                ($0.int64(0), $0.text(1), $0.text(2))
            }
            for (rule, set, member) in rules {
                for group in names { try recomputeRollup(rule: rule, kind: kind, group: group, set: set, member: member) }
            }
        }
    }

    private static let rollupSQL = """
        SELECT count(*), max(g.modified_at), coalesce(max(\(MirrorOverlay.holds(kind: "?1", id: "g.id", set: "?3", member: "?4"))), 0)
        FROM (\(MirrorOverlay.groupRecords(kind: "?1", group: "?2"))) AS g
        """

    private func recomputeRollup(rule: Int64, kind: String, group: String, set: String, member: String) throws {
        let row = try connection.cached(Self.rollupSQL)
        defer { row.reset() }
        try row.bind([.text(kind), .text(group), .text(set), .text(member)])
        guard try row.step() else { return }
        let count = row.int64(0)
        let latest = row.int64(1)
        let present = row.int64(2)
        if count == 0 {
            try connection.execute("DELETE FROM mirror_rollups WHERE rule = ? AND grp = ?", [.integer(rule), .text(group)])
        } else {
            try connection.execute(
                """
                INSERT INTO mirror_rollups (rule, grp, present, latest) VALUES (?, ?, ?, ?)
                ON CONFLICT (rule, grp) DO UPDATE SET present = excluded.present, latest = excluded.latest
                """, [.integer(rule), .text(group), .integer(present), .integer(latest)])
        }
    }

    /// The rollup rows that differ from a recomputation from scratch (an oracle's
    /// check: each must be kept in lockstep with the queue and the canonical
    /// tables). Changes nothing. Empty when every rollup is right.
    public func rollupMismatches() throws -> [String] {
        struct Recomputed: Error {
            let rows: [String]
        }
        let read = {
            try self.connection.query(
                "SELECT r.kind, o.grp, r.set_name, r.member, o.present, o.latest FROM mirror_rollups o JOIN mirror_rollup_rules r ON r.rule = o.rule ORDER BY 1, 2, 3, 4"
            ) { row in
                "\(row.text(0)) \(row.text(1)) \(row.text(2)) \(row.text(3)) present=\(row.int64(4)) latest=\(row.int64(5))"
            }
        }
        let kept = try read()
        var fresh: [String] = []
        do {
            try connection.transaction {
                try recomputeAllRollups()
                throw Recomputed(rows: try read())
            }
        } catch let recomputed as Recomputed {
            fresh = recomputed.rows
        }
        // Rows told apart by their bytes: a `Set<String>` holds a row of group `é` equal to one of `e` + U+0301.
        let keptSet = Set(kept.map(ExactText.init))
        let freshSet = Set(fresh.map(ExactText.init))
        func lines(_ rows: Set<ExactText>, _ label: String) -> [String] { rows.sorted().map { "\(label) \($0.text)" } }
        return lines(keptSet.subtracting(freshSet), "kept") + lines(freshSet.subtracting(keptSet), "recomputed")
    }

    /// The rollups a set delta on record `id` of `group` can change, brought up
    /// to date: the same result as ``recomputeRollups(_:)`` for the group, for a
    /// fraction of the work. A delta changes no record's life, group or time, so
    /// the group's count and latest stay as they are, and only the presence of a
    /// rule on that very set and member can change, in one direction: an add
    /// never makes a record stop holding the member (it inserts an add, flips a
    /// row to add, or cancels a pending remove, falling back to canonical truth),
    /// and a remove never makes one start. So after an add the presence can only
    /// rise, and it does exactly when the record now holds the member; after a
    /// remove it can only fall, and it does exactly when no record of the group
    /// holds it any more. The row is written only when it changes. Runs in the
    /// caller's transaction.
    func recomputePresence(afterDelta op: String, kind: String, id: String, group: String, set: String, member: String) throws {
        let statement = try connection.cached(op == "add" ? Self.presenceRisesSQL : Self.presenceFallsSQL)
        defer { statement.reset() }
        try statement.bind([.text(kind), .text(group), .text(set), .text(member)] + (op == "add" ? [.text(id)] : []))
        while try statement.step() {}
    }

    private static let presenceRisesSQL = """
        UPDATE mirror_rollups SET present = 1
        WHERE rule = (SELECT rule FROM mirror_rollup_rules WHERE kind = ?1 AND set_name = ?3 AND member = ?4) AND grp = ?2 AND present = 0
          AND \(MirrorOverlay.holds(kind: "?1", id: "?5", set: "?3", member: "?4"))
        """

    private static let presenceFallsSQL = """
        UPDATE mirror_rollups SET present = 0
        WHERE rule = (SELECT rule FROM mirror_rollup_rules WHERE kind = ?1 AND set_name = ?3 AND member = ?4) AND grp = ?2 AND present = 1
          AND NOT \(MirrorOverlay.groupHolds(kind: "?1", group: "?2", set: "?3", member: "?4"))
        """

    /// Every rollup from scratch (a new rule, a replay).
    func recomputeAllRollups() throws {
        try connection.execute("DELETE FROM mirror_rollups")
        var groups = RollupGroups()
        for (kind, group) in try connection.query(
            "SELECT kind, grp FROM mirror_records WHERE grp IS NOT NULL UNION SELECT kind, grp FROM mirror_queue WHERE grp IS NOT NULL", [], { ($0.text(0), $0.text(1)) })
        {
            groups.insert(group, of: kind)
        }
        try recomputeRollups(groups)
    }

    // MARK: - The queue, inspectable (003 "What this costs")

    /// A mutation in the queue, as `stele pending` lists it.
    public struct QueuedMutation: Sendable, Equatable {
        public enum State: String, Sendable { case pending, inFlight = "in_flight", failed }
        public let mutation: String
        public let kind: String
        public let id: String
        public let op: String
        public let set: String?
        public let member: String?
        public let payload: [UInt8]?
        public let group: String?
        public let modifiedAt: Int64
        public let state: State
        public let attempts: Int
        public let claimedBy: String?
        public let expectedHistoryID: Int64?
        public let lastError: String?
    }

    /// The queue in intent order.
    public func queue() throws -> [QueuedMutation] {
        try connection.query(
            """
            SELECT mutation, kind, id, op, set_name, member, payload, grp, modified_at, state, attempts, claim_owner, expected_history_id, last_error
            FROM mirror_queue ORDER BY ordinal
            """
        ) { row in
            QueuedMutation(
                mutation: row.text(0), kind: row.text(1), id: row.text(2), op: row.text(3), set: row.text(4).isEmpty ? nil : row.text(4),
                member: row.text(5).isEmpty ? nil : row.text(5), payload: row.optionalBlob(6), group: row.isNull(7) ? nil : row.text(7),
                modifiedAt: row.int64(8), state: QueuedMutation.State(rawValue: row.text(9)) ?? .pending, attempts: Int(row.int64(10)),
                claimedBy: row.isNull(11) ? nil : row.text(11), expectedHistoryID: row.optionalInt64(12), lastError: row.isNull(13) ? nil : row.text(13))
        }
    }

    /// Counts of the queue by state.
    public func queueCounts() throws -> (pending: Int, inFlight: Int, failed: Int) {
        var counts = (pending: 0, inFlight: 0, failed: 0)
        for (state, count) in try connection.query("SELECT state, count(*) FROM mirror_queue GROUP BY state", [], { ($0.text(0), Int($0.int64(1))) }) {
            switch state {
            case "pending": counts.pending = count
            case "in_flight": counts.inFlight = count
            default: counts.failed = count
            }
        }
        return counts
    }

    // MARK: - Conflict events

    /// A local mutation that lost: the hub kept a newer version, refused it, or a
    /// newer edit on the hub replaced a mutation that could not be sent.
    public struct Conflict: Sendable, Equatable {
        public let number: Int64
        public let kind: String
        public let id: String
        public let mutation: String
        public let op: String
        public let set: String?
        public let member: String?
        /// The value that lost (a put's payload; `nil` for a delete or a set delta).
        public let losingPayload: [UInt8]?
        public let losingModifiedAt: Int64
        /// `stale`, `refused: REASON`, or `superseded`.
        public let reason: String
    }

    /// Conflict events after `number`, oldest first.
    public func conflicts(after number: Int64 = 0) throws -> [Conflict] {
        try connection.query(
            "SELECT number, kind, id, mutation, op, set_name, member, losing_payload, losing_modified_at, reason FROM mirror_conflicts WHERE number > ? ORDER BY number",
            [.integer(number)]
        ) { row in
            Conflict(
                number: row.int64(0), kind: row.text(1), id: row.text(2), mutation: row.text(3), op: row.text(4), set: row.text(5).isEmpty ? nil : row.text(5),
                member: row.text(6).isEmpty ? nil : row.text(6), losingPayload: row.optionalBlob(7), losingModifiedAt: row.int64(8), reason: row.text(9))
        }
    }

    func recordConflict(qid: Int64, reason: String) throws {
        try connection.execute(
            """
            INSERT INTO mirror_conflicts (kind, id, mutation, op, set_name, member, losing_payload, losing_modified_at, reason, at)
            SELECT kind, id, mutation, op, set_name, member, payload, modified_at, ?2, ?3 FROM mirror_queue WHERE qid = ?1
            """, [.integer(qid), .text(reason), .integer(now)])
    }

    /// Drops a queued mutation that lost (the hub answered it, or would, `reason`), with
    /// its conflict event: it is never sent.
    func dropWithConflict(qid: Int64, reason: String) throws {
        try recordConflict(qid: qid, reason: reason)
        try connection.execute("DELETE FROM mirror_queue WHERE qid = ?", [.integer(qid)])
    }
}

/// Why a mirror store refused.
public struct MirrorError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Code: Sendable, Equatable {
        case storage, notAMirrorStore, newerFormat, invalidArgument
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

extension SQLValue {
    var asInteger: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    var asText: String? {
        if case .text(let value) = self { return value }
        return nil
    }
}
