import Foundation
import SteleSQL

/// Sync bookkeeping for an app that owns its store (DESIGN §8.3, seed 002): a
/// ledger of stamps, kept in its own SQLite file beside the app's store and
/// never inside the app's tables.
///
/// - A **stamp** per entity the ledger has seen: its identity (kind and id), the
///   SHA-256 fingerprint of its encoded payload (none for a tombstone) and its
///   modification date.
/// - A **pass** (``pass(confirmingEmptyStore:)``) diffs the app's entities (read
///   through its ``LedgerSource``) against the stamps: a new or changed
///   fingerprint is an upsert with a fresh date; a stamp whose entity is gone is
///   a tombstone with the deletion time. Nothing else makes a tombstone (002:
///   "Never manually forge a tombstone"), and there is no call that makes one.
/// - **Wipes**: the ledger keeps the store's identity and its last entity count.
///   A pass that finds another identity, or an empty store under live stamps,
///   refuses (``LedgerError`` `storeReplaced`, `storeEmptied`) and pushes nothing
///   until ``reset()``: forgetting costs one full download; not forgetting
///   would cost the data (002 "State Wipes").
/// - **Corrupt bookkeeping halts** (002): a file that fails `PRAGMA quick_check`,
///   a stamp that does not parse, a schema from a newer Stele, or a cursor beyond
///   the hub's history stops sync with a typed error naming the file. The file is
///   left as it is; ``reset()`` moves it aside as evidence and starts a fresh ledger.
///
/// ``LedgerSync`` turns the outbox into pushes and the hub's pages into changes
/// for the app's store, without I/O of its own; ``LedgerDriver`` carries them.
///
/// One instance per file, used from one thread at a time.
public final class Ledger {
    public struct Configuration: Sendable {
        /// Attempts a push gets before it stays `failed` (SCENARIOS: 5).
        public var maximumAttempts: Int = 5
        /// The first retry's pause after a failed push; each further one doubles, up to ``maximumBackoffMilliseconds``.
        public var initialBackoffMilliseconds: Int64 = 1_000
        public var maximumBackoffMilliseconds: Int64 = 60_000
        /// Mutations per push (HUB-API: at most 1,000).
        public var mutationsPerPush: Int = 1_000
        /// Payload bytes one push carries at most (one larger mutation goes alone).
        public var maximumPushBytes: Int = 4 << 20
        /// The largest encoded entity: the hub's limit for a record (1 MiB by default).
        public var maximumPayloadBytes: Int = 1 << 20
        /// The clock that dates changes and times retries.
        public var clock: any WallClock = SystemWallClock()
        /// The guard against a wave of tombstones (002 "State Wipes"): a pass refuses
        /// (``LedgerError`` `massDeletion`) when it would delete at least
        /// ``massDeletionMinimum`` entities and more than this fraction of the live ones,
        /// beyond what the app confirmed. `nil` turns the guard off.
        public var massDeletionFraction: Double? = 0.5
        public var massDeletionMinimum: Int = 1

        public init() {}
    }

    public let path: String
    public let source: any LedgerSource
    public let configuration: Configuration
    /// The most mutations the hub takes in one push, once it has said so
    /// (``MirrorStore/hubMutationsPerPush``).
    public internal(set) var hubMutationsPerPush: Int?
    /// The account and hub this ledger syncs with, recorded in the file.
    public let account: String
    public let hub: String
    /// The open file; `nil` while sync is halted on a corrupt file.
    var connection: Connection?
    /// Why sync is halted on the file itself (it is corrupt, or newer): kept in a note beside it.
    var fileHalt: LedgerError?
    let hasher = SHA256()

    static let applicationID: Int64 = 0x5374_4C65
    /// The note beside the file that says sync is halted and why: written once, read at every open.
    public var haltNotePath: String { path + ".halted" }

    /// Opens the ledger at `path` for `source`, creating it when the file is missing or empty.
    ///
    /// A file that fails its integrity checks opens **halted**: ``halt`` says why, every
    /// sync call throws it, and ``reset()`` is the way on. The file is not written.
    /// - Throws: ``LedgerError`` `notALedger` for another program's database, `wrongAccount`
    ///   for a ledger of another account or hub, `storage` when the file cannot be opened.
    public convenience init(path: String, source: any LedgerSource, account: String, hub: String, configuration: Configuration = Configuration()) throws {
        try self.init(path: path, source: source, account: account, hub: hub, configuration: configuration, inspecting: false)
    }

    /// Only looked at (`stele ledger`): nothing is created, migrated or written, not even the halt note.
    let inspecting: Bool

    init(path: String, source: any LedgerSource, account: String, hub: String, configuration: Configuration, inspecting: Bool) throws {
        self.path = path
        self.source = source
        self.account = account
        self.hub = hub
        self.configuration = configuration
        self.inspecting = inspecting
        if let note = try Self.readHaltNote(haltNotePath) {
            fileHalt = note
            return
        }
        do {
            connection = try open()
        } catch let error as LedgerError where error.halts {
            try halt(error)
        }
    }

    /// Closes the file; every later call but ``halt`` and ``status()`` fails until the ledger is opened again.
    public func close() {
        connection = nil
    }

    // MARK: - Opening and checking

    /// Opens and checks the file before anything is written to it, then migrates it.
    private func open() throws -> Connection {
        let manager = FileManager.default
        let size = (try? manager.attributesOfItem(atPath: path))?[.size] as? Int
        let exists = (size ?? 0) > 0
        let connection: Connection
        do {
            connection = try Connection(path: path, mode: .readWriteCreate, configuration: nil)
        } catch let error as SQLiteError {
            throw LedgerError(.storage, "cannot open the ledger \(path): \(error.message)", file: path)
        }
        if exists { try check(connection) }
        if inspecting {
            guard exists else { throw LedgerError(.storage, "there is no ledger at \(path): the file is missing or empty", file: path) }
            return connection
        }
        do {
            try connection.configure(.standard)
            try connection.transaction {
                try LedgerSchema.migrator.migrate(connection)
                try connection.executeScript("PRAGMA application_id = \(Self.applicationID)")
                try connection.execute("INSERT INTO ledger_meta (name, value) VALUES ('client', ?) ON CONFLICT (name) DO NOTHING", [.text(MirrorStore.randomName())])
                try connection.execute("INSERT INTO ledger_meta (name, value) VALUES ('account', ?) ON CONFLICT (name) DO NOTHING", [.text(account)])
                try connection.execute("INSERT INTO ledger_meta (name, value) VALUES ('hub', ?) ON CONFLICT (name) DO NOTHING", [.text(hub)])
            }
        } catch let error as SQLiteError {
            throw LedgerError(.storage, "cannot prepare the ledger \(path): \(error.message)", file: path)
        }
        return connection
    }

    /// The checks of an existing file, which write nothing: whose file it is, its
    /// format, its pages, its stamps and its cursor.
    private func check(_ connection: Connection) throws {
        let corrupt = { (why: String) in LedgerError(.corrupt, "the ledger \(self.path) is corrupt (\(why)); sync is halted and the file kept as evidence: call reset() to start a fresh ledger beside it", file: self.path) }
        do {
            let application = try connection.scalarInt("PRAGMA application_id") ?? 0
            let version = try Migrator.version(of: connection)
            if application == 0 && version == 0 {
                let tables = try connection.scalarInt("SELECT count(*) FROM sqlite_master") ?? 0
                guard tables == 0 else { throw LedgerError(.notALedger, "\(path) is a database of another program, not a ledger; choose another path", file: path) }
                return
            }
            guard application == Self.applicationID else { throw LedgerError(.notALedger, "\(path) is not a Stele ledger; choose another path", file: path) }
            guard version <= LedgerSchema.migrator.latestVersion else {
                throw LedgerError(
                    .newerFormat, "the ledger \(path) was written by a newer Stele (format \(version)); sync is halted: use that version, or reset() to start a fresh ledger beside it",
                    file: path)
            }
            let verdict = try connection.query("PRAGMA quick_check") { $0.text(0) }
            guard verdict == ["ok"] else { throw corrupt("quick_check: \(verdict.prefix(3).joined(separator: "; "))") }
            guard version == LedgerSchema.migrator.latestVersion else { return }
            if let row = try connection.queryFirst(
                """
                SELECT kind, id FROM ledger_stamps
                WHERE typeof(kind) <> 'text' OR typeof(id) <> 'text' OR typeof(modified_at) <> 'integer' OR typeof(seq) <> 'integer'
                   OR (fingerprint IS NOT NULL AND (typeof(fingerprint) <> 'blob' OR length(fingerprint) <> 32))
                LIMIT 1
                """, [], { "\($0.value(0)) \($0.value(1))" })
            {
                throw corrupt("the stamp of \(row) does not parse")
            }
            for name in ["cursor", "counter", "entity_count"] {
                let value = try connection.queryFirst("SELECT value FROM ledger_meta WHERE name = ?", [.text(name)]) { $0.value(0) }
                if let value, value.asInteger == nil { throw corrupt("its \(name) is not a number") }
            }
            let owner = try connection.query("SELECT name, value FROM ledger_meta WHERE name IN ('account', 'hub')") { ($0.text(0), $0.value(1).asText ?? "") }
            for (name, value) in owner {
                let expected = name == "account" ? account : hub
                guard value == expected else {
                    throw LedgerError(
                        .wrongAccount, "the ledger \(path) belongs to \(name) \(value), not \(expected); open the ledger of this \(name), or choose another path", file: path)
                }
            }
        } catch let error as SQLiteError {
            switch error.code.primary {
            case .notADatabase, .corrupt: throw corrupt(error.message)
            default: throw LedgerError(.storage, "cannot read the ledger \(path): \(error.message)", file: path)
            }
        }
    }

    // MARK: - Halting

    /// Why sync is halted, if it is: a corrupt or newer file, or a refused wipe.
    public var halt: LedgerError? {
        if let fileHalt { return fileHalt }
        guard let connection, let code = try? meta("halt_code", connection).asText, let parsed = LedgerError.Code(rawValue: code) else { return nil }
        return LedgerError(parsed, (try? meta("halt_message", connection).asText) ?? code, file: path)
    }

    /// The open file, or the halt.
    func database() throws -> Connection {
        if let fileHalt { throw fileHalt }
        guard let connection else { throw LedgerError(.storage, "the ledger \(path) is not open", file: path) }
        if let halt { throw halt }
        return connection
    }

    /// Halts sync. A halt about the file itself goes in a note beside it (the file is
    /// not written: it is evidence); a refused wipe is kept in the file.
    func halt(_ error: LedgerError) throws {
        switch error.code {
        case .corrupt, .newerFormat:
            connection = nil
            fileHalt = error
            if inspecting { return }
            let note: [String: String] = ["code": error.code.rawValue, "message": error.message]
            do {
                try JSONSerialization.data(withJSONObject: note, options: [.sortedKeys]).write(to: URL(fileURLWithPath: haltNotePath), options: .atomic)
            } catch {
                throw LedgerError(.storage, "sync is halted (\(error)), and the note that says so could not be written beside \(path): \(error)", file: path)
            }
        default:
            guard let connection, !inspecting else { return }
            try connection.transaction {
                try setMeta("halt_code", .text(error.code.rawValue), connection)
                try setMeta("halt_message", .text(error.message), connection)
            }
        }
    }

    private static func readHaltNote(_ path: String) throws -> LedgerError? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path),
            let note = (try? JSONSerialization.jsonObject(with: data)) as? [String: String], let code = note["code"].flatMap(LedgerError.Code.init(rawValue:))
        else {
            return LedgerError(.corrupt, "sync is halted: the note \(path) says so and cannot be read; reset() starts a fresh ledger", file: path)
        }
        return LedgerError(code, note["message"] ?? code.rawValue, file: path)
    }

    // MARK: - Reset

    /// Forgets the cursor and the outbox and puts every stamp in doubt, so that the
    /// next sync downloads everything once: it adopts what the store already holds
    /// as the hub has it, writes the hub's version of everything else into the store,
    /// and pushes only what the hub lacks; it never makes a tombstone for what it did
    /// not see deleted. A stamp newer than the hub's copy (the hub was put back from a
    /// backup) is sent again when the store still holds that version, and a newer
    /// tombstone always is (the store's copy goes), so a reset never undoes a
    /// confirmed delete or a confirmed write the store still has.
    ///
    /// This is the way on after a refused wipe (the cost: one full download; not
    /// resetting would cost the data, 002). On a halted corrupt or newer file,
    /// the file (and its journal files) is moved aside as evidence, named in the
    /// returned path, and a fresh ledger is made at ``path``.
    /// - Returns: the evidence's path, when a file was moved aside.
    @discardableResult
    public func reset() throws -> String? {
        if fileHalt != nil {
            let evidence = "\(path).evidence-\(configuration.clock.nowMilliseconds())"
            let manager = FileManager.default
            do {
                for suffix in ["", "-wal", "-shm"] where manager.fileExists(atPath: path + suffix) {
                    try manager.moveItem(atPath: path + suffix, toPath: evidence + suffix)
                }
                if manager.fileExists(atPath: haltNotePath) { try manager.removeItem(atPath: haltNotePath) }
            } catch {
                throw LedgerError(.storage, "cannot move the ledger \(path) aside: \(error)", file: path)
            }
            fileHalt = nil
            let fresh = try open()
            connection = fresh
            try write(fresh) {
                try setMeta("adopting", .integer(1), fresh)
                if let identity = try? source.storeIdentity() { try setMeta("identity", .text(identity), fresh) }
            }
            return evidence
        }
        guard let connection else { throw LedgerError(.storage, "the ledger \(path) is not open", file: path) }
        try write(connection) {
            // The stamps stay, to be judged again by the download: a tombstone speaks of no
            // data in the store, only of a deletion, and a version the hub lost (put back from a
            // backup) is sent again if the store still holds it; a stamp the download does not
            // confirm and the store does not hold is forgotten, never made a tombstone.
            try connection.execute("UPDATE ledger_stamps SET seq = 0, unsent = 0, seen = 0")
            try connection.execute("DELETE FROM ledger_outbox")
            try connection.execute("DELETE FROM ledger_applying")
            try connection.execute("DELETE FROM ledger_refetch")
            try connection.execute("DELETE FROM ledger_meta WHERE name IN ('identity', 'entity_count', 'halt_code', 'halt_message', 'replay_mode', 'replay_after', 'replay_epoch', 'replay_history')")
            try setMeta("cursor", .integer(0), connection)
            try setMeta("adopting", .integer(1), connection)
            // The store the reset is for: a wipe after it, before any pass, is still told.
            if let identity = try? source.storeIdentity() { try setMeta("identity", .text(identity), connection) }
        }
        return nil
    }

    // MARK: - Meta

    func meta(_ name: String, _ connection: Connection) throws -> SQLValue {
        try connection.queryFirst("SELECT value FROM ledger_meta WHERE name = ?", [.text(name)]) { $0.value(0) } ?? .null
    }

    func setMeta(_ name: String, _ value: SQLValue, _ connection: Connection) throws {
        try connection.execute("INSERT INTO ledger_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value", [.text(name), value])
    }

    /// Runs `body` in one transaction, turning SQLite's errors into the ledger's.
    func write<T>(_ connection: Connection, _ body: () throws -> T) throws -> T {
        do {
            return try connection.transaction(.immediate, body)
        } catch let error as SQLiteError {
            throw LedgerError(.storage, "the ledger \(path) could not be written: \(error.message)", file: path)
        }
    }

    /// The next number for mutation ids.
    func nextNumber(_ connection: Connection) throws -> Int64 {
        guard
            let next = try connection.queryFirst(
                "INSERT INTO ledger_meta (name, value) VALUES ('counter', 1) ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value", [], { $0.int64(0) })
        else { throw LedgerError(.storage, "\(path): the mutation counter did not count", file: path) }
        return next
    }

    /// The client's clock, corrected by what a hub said of its own (a `clock_skew` refusal).
    func stampNow(_ connection: Connection) throws -> Int64 {
        configuration.clock.nowMilliseconds() + (try meta("clock_offset", connection).asInteger ?? 0)
    }

    var now: Int64 { configuration.clock.nowMilliseconds() }

    /// The hub's clock, as an answer carried it: a clock behind the hub's by more
    /// than a second stamps by the hub's time from then on (as the mirror client does).
    func noteHubTime(_ hubTime: Int64) throws {
        let connection = try database()
        let offset = try meta("clock_offset", connection).asInteger ?? 0
        guard hubTime > now &+ offset &+ 1_000, halt == nil else { return }
        try write(connection) { try setMeta("clock_offset", .integer(hubTime &- now), connection) }
    }

    func fingerprint(_ payload: [UInt8]) -> Hash32 { hasher.hash(payload) }

    // MARK: - Reading the bookkeeping

    /// One entity's stamp.
    public struct Stamp: Sendable, Equatable {
        public let kind: String
        public let id: String
        /// The SHA-256 of the encoded payload; `nil` for a tombstone.
        public let fingerprint: Hash32?
        public let modifiedAt: Int64
        /// The hub's position of this version, 0 while the hub has not answered for it.
        public let seq: Int64
        /// The hub is known to lack this version (it was rewound): the next pass sends it again.
        public let unsent: Bool
        public var isTombstone: Bool { fingerprint == nil }
    }

    /// Every stamp, by kind and id.
    public func stamps() throws -> [Stamp] {
        try database(reading: true).query("SELECT kind, id, fingerprint, modified_at, seq, unsent FROM ledger_stamps ORDER BY kind, id") { row in
            Stamp(
                kind: row.text(0), id: row.text(1), fingerprint: row.isNull(2) ? nil : try? Hash32(bytes: row.blob(2)), modifiedAt: row.int64(3), seq: row.int64(4),
                unsent: row.int64(5) == 1)
        }
    }

    /// One entity's stamp, if the ledger has one.
    public func stamp(kind: String, id: String) throws -> Stamp? {
        try database(reading: true).queryFirst("SELECT fingerprint, modified_at, seq, unsent FROM ledger_stamps WHERE kind = ? AND id = ?", [.text(kind), .text(id)]) { row in
            Stamp(kind: kind, id: id, fingerprint: row.isNull(0) ? nil : try? Hash32(bytes: row.blob(0)), modifiedAt: row.int64(1), seq: row.int64(2), unsent: row.int64(3) == 1)
        }
    }

    /// The open file for reading, halted or not (a refused wipe still shows its stamps).
    private func database(reading: Bool) throws -> Connection {
        if let fileHalt { throw fileHalt }
        guard let connection else { throw LedgerError(.storage, "the ledger \(path) is not open", file: path) }
        return connection
    }

    /// What `stele ledger` shows.
    public struct Status: Sendable, Equatable {
        public var path: String
        public var account: String
        public var hub: String
        /// The app store's identity as the last pass found it.
        public var storeIdentity: String?
        /// How many entities the last pass found.
        public var entityCount: Int?
        public var cursorEpoch: String?
        public var cursorHistoryID: Int64
        public var liveStamps: Int
        public var tombstones: Int
        public var pending: Int
        public var failed: Int
        /// After a reset, until the first full download ends.
        public var adopting: Bool
        /// A replay is running (`rewind` after the hub's history was rewound, or `explicit`).
        public var replaying: String?
        /// Why sync is halted, if it is.
        public var halt: LedgerError?
        /// Milliseconds the client adds to its clock to date its writes (the hub's time
        /// minus its own, as a `clock_skew` refusal or an answer's `Stele-Hub-Time` showed it).
        public var clockCorrection: Int64 = 0
    }

    public func status() throws -> Status {
        var status = Status(
            path: path, account: account, hub: hub, storeIdentity: nil, entityCount: nil, cursorEpoch: nil, cursorHistoryID: 0, liveStamps: 0, tombstones: 0, pending: 0,
            failed: 0, adopting: false, replaying: nil, halt: halt)
        guard fileHalt == nil, let connection else { return status }
        status.storeIdentity = try meta("identity", connection).asText
        status.entityCount = try meta("entity_count", connection).asInteger.map(Int.init)
        let cursor = try self.cursor(connection)
        status.cursorEpoch = cursor.epoch
        status.cursorHistoryID = cursor.historyID
        status.liveStamps = Int(try connection.scalarInt("SELECT count(*) FROM ledger_stamps WHERE fingerprint IS NOT NULL") ?? 0)
        status.tombstones = Int(try connection.scalarInt("SELECT count(*) FROM ledger_stamps WHERE fingerprint IS NULL") ?? 0)
        status.pending = Int(try connection.scalarInt("SELECT count(*) FROM ledger_outbox WHERE state = 'pending'") ?? 0)
        status.failed = Int(try connection.scalarInt("SELECT count(*) FROM ledger_outbox WHERE state = 'failed'") ?? 0)
        status.adopting = try meta("adopting", connection).asInteger == 1
        status.replaying = try meta("replay_mode", connection).asText
        status.clockCorrection = try meta("clock_offset", connection).asInteger ?? 0
        return status
    }

    /// Where the pull has reached.
    func cursor(_ connection: Connection) throws -> MirrorStore.Cursor {
        MirrorStore.Cursor(
            epoch: try meta("epoch", connection).asText.flatMap { $0.isEmpty ? nil : $0 }, historyID: try meta("cursor", connection).asInteger ?? 0)
    }

    /// A push the hub would not take, or a local change a newer one from the hub replaced.
    public struct Conflict: Sendable, Equatable {
        public let number: Int64
        public let kind: String
        public let id: String
        /// `put` or `delete`: what lost.
        public let op: String
        public let losingModifiedAt: Int64
        /// `stale`, `refused: REASON`, `superseded`, or `replaced after a reset`.
        public let reason: String
        public let at: Int64
    }

    public func conflicts(after number: Int64 = 0) throws -> [Conflict] {
        try database(reading: true).query(
            "SELECT number, kind, id, op, losing_modified_at, reason, at FROM ledger_conflicts WHERE number > ? ORDER BY number", [.integer(number)]
        ) { Conflict(number: $0.int64(0), kind: $0.text(1), id: $0.text(2), op: $0.text(3), losingModifiedAt: $0.int64(4), reason: $0.text(5), at: $0.int64(6)) }
    }

    func recordConflict(kind: String, id: String, op: String, modifiedAt: Int64, reason: String, _ connection: Connection) throws {
        try connection.execute(
            "INSERT INTO ledger_conflicts (kind, id, op, losing_modified_at, reason, at) VALUES (?, ?, ?, ?, ?, ?)",
            [.text(kind), .text(id), .text(op), .integer(modifiedAt), .text(reason), .integer(now)])
    }

    /// A change waiting for the hub.
    public struct Outgoing: Sendable, Equatable {
        public let mutation: String
        public let kind: String
        public let id: String
        /// `put` or `delete`.
        public let op: String
        public let modifiedAt: Int64
        /// `pending` or `failed`.
        public let state: String
        public let attempts: Int
        public let lastError: String?
    }

    /// The outbox, in the order its changes were found.
    public func outbox() throws -> [Outgoing] {
        try database(reading: true).query("SELECT mutation, kind, id, op, modified_at, state, attempts, last_error FROM ledger_outbox ORDER BY ordinal") {
            Outgoing(
                mutation: $0.text(0), kind: $0.text(1), id: $0.text(2), op: $0.text(3), modifiedAt: $0.int64(4), state: $0.text(5), attempts: Int($0.int64(6)),
                lastError: $0.isNull(7) ? nil : $0.text(7))
        }
    }

    /// Moves failed changes back to pending with fresh attempts.
    public func retryFailed() throws {
        let connection = try database()
        try write(connection) { try connection.execute("UPDATE ledger_outbox SET state = 'pending', attempts = 0, next_attempt_at = 0 WHERE state = 'failed'") }
    }

    /// Wraps the app store's errors.
    func fromSource<T>(_ what: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError(.source, "the app's store failed to \(what): \(error)")
        }
    }
}

extension Ledger {
    /// Opens an existing ledger to look at it (`stele ledger`): its account and hub
    /// are read from the file, and its source refuses every call, so nothing syncs.
    /// A halted ledger opens all the same, its ``halt`` saying why.
    /// - Throws: ``LedgerError`` `storage` when there is no file at `path`, `notALedger` for another file.
    public static func inspecting(path: String) throws -> Ledger {
        guard FileManager.default.fileExists(atPath: path) || FileManager.default.fileExists(atPath: path + ".halted") else {
            throw LedgerError(.storage, "there is no ledger at \(path)", file: path)
        }
        var account = ""
        var hub = ""
        if let reader = try? Connection(path: path, mode: .readOnly, configuration: nil),
            let rows = try? reader.query("SELECT name, value FROM ledger_meta WHERE name IN ('account', 'hub')", [], { ($0.text(0), $0.value(1).asText ?? "") })
        {
            for (name, value) in rows {
                if name == "account" { account = value } else { hub = value }
            }
        }
        return try Ledger(path: path, source: Unreachable(), account: account, hub: hub, configuration: Configuration(), inspecting: true)
    }

    /// The source of a ledger opened only to be looked at.
    private final class Unreachable: LedgerSource {
        private var refusal: LedgerError { LedgerError(.source, "this ledger was opened only to be looked at") }
        func storeIdentity() throws -> String { throw refusal }
        func forEachEntity(_ visit: (LedgerEntity) throws -> Void) throws { throw refusal }
        func payload(kind: String, id: String) throws -> [UInt8]? { throw refusal }
        func apply(_ changes: [LedgerChange]) throws { throw refusal }
    }
}
