import Foundation
import SteleSQL

/// The sync pass (002 "Ledgers and the Transition to Absence"): the app's
/// entities against the stamps.
extension Ledger {
    /// What a pass found.
    public struct PassReport: Sendable, Equatable {
        /// Entities the store holds.
        public var entities = 0
        /// New or changed entities, queued as upserts.
        public var upserts = 0
        /// Stamped entities gone from the store, queued as tombstones.
        public var tombstones = 0
        /// Versions the hub is known to lack (it was rewound), queued again as they were.
        public var resent = 0
        /// Remote versions a crash left half-applied, found in the store and adopted.
        public var recovered = 0
        /// True while the ledger adopts after a reset: the pass only recorded the store's identity.
        public var adopting = false

        public init() {}
    }

    /// An entity's kind and id, equal only when their UTF-8 bytes are: the app's
    /// store, the stamps and the hub hold `é` and `e` + U+0301 as two entities,
    /// which Swift's `String` holds equal (and hashes alike).
    struct Key: Hashable {
        private let exactKind: ExactText
        private let exactID: ExactText

        init(kind: String, id: String) {
            exactKind = ExactText(kind)
            exactID = ExactText(id)
        }

        var kind: String { exactKind.text }
        var id: String { exactID.text }
    }

    /// Diffs the app's current entities against the stamps and queues what changed,
    /// in one transaction of the ledger (nothing is sent here):
    /// - a new entity or a changed fingerprint → an upsert dated now, and never
    ///   earlier than the version it changes (an edit made on top of a version comes after it);
    /// - a stamp whose entity is gone → a tombstone dated the same way;
    /// - nothing else.
    ///
    /// - Parameters:
    ///   - confirmingEmptyStore: the app says its store is empty because its user
    ///     deleted everything. Without it an empty store under live stamps is taken
    ///     for a wipe and refused.
    ///   - confirmingDeletions: how many entities the app knows its user deleted since
    ///     the last pass. A pass that would delete more than that, and most of the store
    ///     (``Configuration/massDeletionFraction``), is refused as a wipe followed by new writes.
    /// - Throws: ``LedgerError``: the halt, if sync is halted; `storeReplaced` or
    ///   `storeEmptied` (sync then halts until ``reset()``); `duplicateEntity`,
    ///   `invalidEntity`, `encoding`, `source` for the store's bad input, which change nothing.
    @discardableResult
    public func pass(confirmingEmptyStore: Bool = false, confirmingDeletions: Int = 0) throws -> PassReport {
        // A refused mass deletion is judged again by every pass: a confirmation lifts it.
        let connection: Connection
        if let halt, halt.code == .massDeletion, fileHalt == nil, let open = self.connection {
            connection = open
        } else {
            connection = try database()
        }
        var report = PassReport()
        let identity = try fromSource("report its identity") { try source.storeIdentity() }
        report.recovered = try recoverJournal(connection)
        try checkIdentity(identity, connection)
        if try meta("adopting", connection).asInteger == 1 {
            // After a reset the download comes first: nothing is compared or sent until it ends.
            try write(connection) { try setMeta("identity", .text(identity), connection) }
            report.adopting = true
            return report
        }

        // The store's entities against the stamps: merged in one ordered scan when the
        // source lists them in (kind, id) byte order, as an SQL table scan by its key does;
        // else through an index of every stamp.
        let diff = try diffMerging(connection) ?? diffIndexing(connection)
        var changes = diff.changes
        report.entities = diff.entities
        let live = diff.live
        if report.entities == 0 && live > 0 && !confirmingEmptyStore {
            let error = LedgerError(
                .storeEmptied,
                "the app's store is empty and the ledger \(path) stamps \(live) live entities: the store was wiped, so sync refuses to turn its absence into tombstones; call reset() to download everything again, or pass confirmingEmptyStore when the user deleted everything (002 \"State Wipes\")",
                file: path)
            try halt(error)
            throw error
        }
        let deletions = diff.deletions
        changes += diff.gone
        // An empty store the app confirms is every deletion confirmed.
        let confirmed = confirmingEmptyStore && report.entities == 0 ? deletions : confirmingDeletions
        if let fraction = configuration.massDeletionFraction, deletions > confirmed, deletions >= configuration.massDeletionMinimum,
            Double(deletions) > fraction * Double(live)
        {
            let error = LedgerError(
                .massDeletion,
                "a pass would delete \(deletions) of the \(live) entities the ledger \(path) stamps, and the app confirmed \(confirmed): the store looks wiped and written to again, so sync refuses to send that wave of tombstones; pass confirmingDeletions when the user deleted them, or call reset() to download everything again (002 \"State Wipes\")",
                file: path)
            try halt(error)
            throw error
        }
        if halt?.code == .massDeletion {
            try write(connection) { try connection.execute("DELETE FROM ledger_meta WHERE name IN ('halt_code', 'halt_message')") }
        }

        // What changed, stamped and queued in one transaction.
        try write(connection) {
            let now = try stampNow(connection)
            let client = try meta("client", connection).asText ?? "ledger"
            let stamp = try connection.cached(
                literal: """
                    INSERT INTO ledger_stamps (kind, id, fingerprint, modified_at, seq, unsent, seen) VALUES (?1, ?2, ?3, ?4, 0, 0, 0)
                    ON CONFLICT (kind, id) DO UPDATE SET fingerprint = excluded.fingerprint, modified_at = excluded.modified_at, seq = 0, unsent = 0
                    """)
            let queue = try connection.cached(
                literal: """
                    INSERT INTO ledger_outbox (mutation, kind, id, op, payload, modified_at, ordinal) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                    ON CONFLICT (kind, id) DO UPDATE SET mutation = excluded.mutation, op = excluded.op, payload = excluded.payload, modified_at = excluded.modified_at,
                        state = 'pending', attempts = 0, next_attempt_at = 0, ordinal = excluded.ordinal, last_error = NULL
                    """)
            for change in changes {
                let date = change.keepDate ?? max(now, (change.after ?? Int64.min) &+ 1)
                stamp.reset()
                try stamp.bind(1, change.key.kind)
                try stamp.bind(2, change.key.id)
                if let print = change.fingerprint { try print.withBytes { try stamp.bind(3, rawBytes: $0) } } else { try stamp.bindNull(3) }
                try stamp.bind(4, date)
                _ = try stamp.step()
                let number = try nextNumber(connection)
                queue.reset()
                try queue.bind(1, "\(client)-\(number)")
                try queue.bind(2, change.key.kind)
                try queue.bind(3, change.key.id)
                try queue.bind(4, change.payload == nil ? "delete" : "put")
                if let payload = change.payload { try queue.bind(5, payload) } else { try queue.bindNull(5) }
                try queue.bind(6, date)
                try queue.bind(7, number)
                _ = try queue.step()
                if change.keepDate != nil {
                    report.resent += 1
                } else if change.payload == nil {
                    report.tombstones += 1
                } else {
                    report.upserts += 1
                }
            }
            stamp.reset()
            queue.reset()
            try setMeta("identity", .text(identity), connection)
            try setMeta("entity_count", .integer(Int64(report.entities)), connection)
        }
        return report
    }

    /// A change a pass found.
    struct Change {
        let key: Key
        let payload: [UInt8]?
        let fingerprint: Hash32?
        /// The date the change keeps (a version the hub lacks, sent again); `nil`: now, and after ``after``.
        let keepDate: Int64?
        let after: Int64?
    }

    /// What the store's entities and the stamps differ by.
    struct Diff {
        var changes: [Change] = []
        /// Tombstones: stamped entities gone, and kept tombstones the hub lacks.
        var gone: [Change] = []
        var entities = 0
        var live = 0
        /// Live stamps whose entity is gone.
        var deletions = 0
    }

    /// The source did not list its entities in order: the pass indexes the stamps instead.
    private struct OutOfOrder: Error {}

    /// Checks one entity of the store; throws ``LedgerError`` `invalidEntity`.
    private func validate(_ entity: LedgerEntity) throws {
        guard (1...1024).contains(entity.kind.utf8.count), (1...1024).contains(entity.id.utf8.count) else {
            throw LedgerError(.invalidEntity, "an entity has kind \"\(entity.kind.prefix(40))\" and id \"\(entity.id.prefix(40))\": each must be 1 to 1,024 bytes; nothing was synced")
        }
        // The hub refuses U+0000 in every name (docs/hub-api.md): such an entity would
        // fail every push it rode in, the valid mutations beside it too.
        guard !entity.kind.utf8.contains(0), !entity.id.utf8.contains(0) else {
            throw LedgerError(.invalidEntity, "an entity's kind or id holds U+0000 (NUL), which the hub refuses in every name; nothing was synced")
        }
        let limit = configuration.maximumPayloadBytes
        guard entity.payload.count <= limit else {
            throw LedgerError(.invalidEntity, "\(entity.kind) \(entity.id) encodes to \(entity.payload.count) bytes, over the hub's limit of \(limit); nothing was synced")
        }
    }

    /// The order of SQLite's BINARY collation on (kind, id): their UTF-8 bytes.
    static func order(_ a: Key, _ b: Key) -> Int {
        var kind = a.kind
        let byKind = kind.withUTF8 { compare(UnsafeRawBufferPointer($0), b.kind) }
        if byKind != 0 { return byKind }
        var id = a.id
        return id.withUTF8 { compare(UnsafeRawBufferPointer($0), b.id) }
    }

    private static func fingerprint(_ statement: Statement, _ column: Int32) throws -> Hash32? {
        guard !statement.isNull(column) else { return nil }
        return try statement.withBlob(column) { bytes in
            guard bytes.count == Hash32.byteCount else { throw LedgerError(.corrupt, "a stamp's fingerprint does not parse") }
            return Hash32(unsafeBytes: bytes)
        }
    }

    /// Compares one entity with its stamp (or none) and notes the change, if any.
    private func compare(_ entity: LedgerEntity, _ key: Key, stamp: (fingerprint: Hash32?, modified: Int64, unsent: Bool)?, into diff: inout Diff) {
        let print = hasher.hash(entity.payload)
        guard let stamp else {
            diff.changes.append(Change(key: key, payload: entity.payload, fingerprint: print, keepDate: nil, after: nil))
            return
        }
        if stamp.fingerprint == print {
            if stamp.unsent { diff.changes.append(Change(key: key, payload: entity.payload, fingerprint: print, keepDate: stamp.modified, after: nil)) }
        } else {
            diff.changes.append(Change(key: key, payload: entity.payload, fingerprint: print, keepDate: nil, after: stamp.modified))
        }
    }

    /// A stamp no entity matched: a tombstone to make, or a kept one to send again.
    private func unmatched(_ key: Key, _ stamp: (fingerprint: Hash32?, modified: Int64, unsent: Bool), into diff: inout Diff) {
        if stamp.fingerprint != nil {
            diff.gone.append(Change(key: key, payload: nil, fingerprint: nil, keepDate: nil, after: stamp.modified))
            diff.deletions += 1
        } else if stamp.unsent {
            diff.gone.append(Change(key: key, payload: nil, fingerprint: nil, keepDate: stamp.modified, after: nil))
        }
    }

    /// The diff as one merge of two ordered scans (no index of the stamps is built,
    /// and a stamp's identity is compared in place, its bytes never copied, unless it
    /// has no entity); `nil` when the source turns out not to list its entities in order.
    private func diffMerging(_ connection: Connection) throws -> Diff? {
        var diff = Diff()
        let read = try connection.cached(literal: "SELECT kind, id, fingerprint, modified_at, unsent FROM ledger_stamps ORDER BY kind, id")
        read.reset()
        defer { read.reset() }
        // The stamp under the scan: its columns are read in place while the row is current.
        var onRow = try read.step()
        func stamp() throws -> (fingerprint: Hash32?, modified: Int64, unsent: Bool) {
            (try Self.fingerprint(read, 2), read.int64(3), read.int64(4) == 1)
        }
        func next() throws {
            if !read.isNull(2) { diff.live += 1 }
            onRow = try read.step()
        }
        /// The current stamp's identity against `key`, in SQLite's BINARY order.
        func order(_ key: Key) -> Int {
            read.withBlob(0) { kind in
                let byKind = Self.compare(kind, key.kind)
                return byKind != 0 ? byKind : read.withBlob(1) { id in Self.compare(id, key.id) }
            }
        }
        var previous: Key?
        do {
            try source.forEachEntity { entity in
                diff.entities += 1
                try validate(entity)
                let key = Key(kind: entity.kind, id: entity.id)
                if let previous {
                    let order = Self.order(previous, key)
                    if order == 0 { throw Self.duplicate(key) }
                    if order > 0 { throw OutOfOrder() }
                }
                previous = key
                var position = onRow ? order(key) : 1
                while position < 0 {
                    unmatched(Key(kind: read.text(0), id: read.text(1)), try stamp(), into: &diff)
                    try next()
                    position = onRow ? order(key) : 1
                }
                if position == 0 {
                    compare(entity, key, stamp: try stamp(), into: &diff)
                    try next()
                } else {
                    compare(entity, key, stamp: nil, into: &diff)
                }
            }
        } catch is OutOfOrder {
            return nil
        } catch let error as LedgerError {
            throw error
        } catch let error as SQLiteError {
            throw LedgerError(.storage, "the ledger \(path) could not be read: \(error.message)", file: path)
        } catch {
            throw LedgerError(.source, "the app's store failed to list its entities: \(error)")
        }
        while onRow {
            unmatched(Key(kind: read.text(0), id: read.text(1)), try stamp(), into: &diff)
            try next()
        }
        return diff
    }

    /// Bytes in place against a string's UTF-8, as memcmp orders them.
    static func compare(_ bytes: UnsafeRawBufferPointer, _ text: String) -> Int {
        var text = text
        return text.withUTF8 { utf8 in
            let common = min(bytes.count, utf8.count)
            if common > 0, let left = bytes.baseAddress, let right = utf8.baseAddress {
                let result = memcmp(left, right, common)
                if result != 0 { return result < 0 ? -1 : 1 }
            }
            return bytes.count == utf8.count ? 0 : (bytes.count < utf8.count ? -1 : 1)
        }
    }

    /// The diff through an index of every stamp, for a source in any order.
    private func diffIndexing(_ connection: Connection) throws -> Diff {
        var diff = Diff()
        var index: [Key: (fingerprint: Hash32?, modified: Int64, unsent: Bool)] = [:]
        index.reserveCapacity(Int(try connection.scalarInt("SELECT count(*) FROM ledger_stamps") ?? 0))
        let read = try connection.cached(literal: "SELECT kind, id, fingerprint, modified_at, unsent FROM ledger_stamps")
        read.reset()
        defer { read.reset() }
        while try read.step() {
            let fingerprint = try Self.fingerprint(read, 2)
            if fingerprint != nil { diff.live += 1 }
            index[Key(kind: read.text(0), id: read.text(1))] = (fingerprint, read.int64(3), read.int64(4) == 1)
        }
        var seen = Set<Key>()
        try fromSource("list its entities") {
            try source.forEachEntity { entity in
                diff.entities += 1
                try validate(entity)
                let key = Key(kind: entity.kind, id: entity.id)
                guard seen.insert(key).inserted else { throw Self.duplicate(key) }
                compare(entity, key, stamp: index[key], into: &diff)
            }
        }
        for (key, stamp) in index where !seen.contains(key) { unmatched(key, stamp, into: &diff) }
        return diff
    }

    /// Halts when the store reports another identity than the one the ledger knows.
    func checkIdentity(_ identity: String, _ connection: Connection) throws {
        guard let known = try meta("identity", connection).asText, known != identity else { return }
        let error = LedgerError(
            .storeReplaced,
            "the app's store reports identity \(identity), the ledger \(path) knows \(known): the store was wiped or replaced, so sync refuses to turn its absence into tombstones; call reset() to download everything again (002 \"State Wipes\")",
            file: path)
        try halt(error)
        throw error
    }

    private static func duplicate(_ key: Key) -> LedgerError {
        LedgerError(.duplicateEntity, "the app's store reported \(key.kind) \(key.id) twice in one pass; nothing was synced: each entity must be listed once")
    }

    /// Finishes what a crash interrupted between the app's transaction and the
    /// ledger's: a remote version the store now holds is adopted as its stamp, so
    /// the pass does not take it for a local edit; one the store does not hold was
    /// not applied, and the pull brings it again (its cursor did not move).
    func recoverJournal(_ connection: Connection) throws -> Int {
        let rows = try connection.query("SELECT kind, id, fingerprint, modified_at, seq FROM ledger_applying") {
            (kind: $0.text(0), id: $0.text(1), fingerprint: $0.isNull(2) ? nil : $0.blob(2), modified: $0.int64(3), seq: $0.int64(4))
        }
        guard !rows.isEmpty else { return 0 }
        var adopted = 0
        var matches: [Bool] = []
        for row in rows {
            let current = try fromSource("read \(row.kind) \(row.id)") { try source.payload(kind: row.kind, id: row.id) }
            let held = current.map { fingerprint($0).bytes }
            matches.append(held == row.fingerprint)
        }
        try write(connection) {
            for (row, matched) in zip(rows, matches) where matched {
                try connection.execute(
                    """
                    INSERT INTO ledger_stamps (kind, id, fingerprint, modified_at, seq) VALUES (?1, ?2, ?3, ?4, ?5)
                    ON CONFLICT (kind, id) DO UPDATE SET fingerprint = excluded.fingerprint, modified_at = excluded.modified_at, seq = excluded.seq, unsent = 0
                    """, [.text(row.kind), .text(row.id), row.fingerprint.map(SQLValue.blob) ?? .null, .integer(row.modified), .integer(row.seq)])
                adopted += 1
            }
            try connection.execute("DELETE FROM ledger_applying")
        }
        return adopted
    }

    /// A remote deletion reported by identity alone (a CloudKit hard delete gives
    /// only the record's name; 002 "Platforms like CloudKit…"), completed from the
    /// ledger's stamp into a proper tombstone: dated now, and never before the
    /// version the ledger knows. The entity leaves the app's store, the stamp
    /// becomes the tombstone, and the tombstone is queued for the hub, so every
    /// other device learns of it as of any delete.
    ///
    /// - Returns: the tombstone's date; `nil` when the ledger has no stamp for the
    ///   identity (it never saw the entity, so there is nothing to delete and
    ///   nothing to date: no tombstone is made).
    @discardableResult
    public func completeRemoteDeletion(kind: String, id: String) throws -> Int64? {
        let connection = try database()
        guard let stamp = try stamp(kind: kind, id: id) else { return nil }
        if stamp.isTombstone { return stamp.modifiedAt }
        let date = max(try stampNow(connection), stamp.modifiedAt &+ 1)
        try fromSource("delete \(kind) \(id)") { try source.apply([.delete(kind: kind, id: id)]) }
        try write(connection) {
            try connection.execute(
                "UPDATE ledger_stamps SET fingerprint = NULL, modified_at = ?3, seq = 0, unsent = 0 WHERE kind = ?1 AND id = ?2", [.text(kind), .text(id), .integer(date)])
            let number = try nextNumber(connection)
            let client = try meta("client", connection).asText ?? "ledger"
            try connection.execute(
                """
                INSERT INTO ledger_outbox (mutation, kind, id, op, payload, modified_at, ordinal) VALUES (?1, ?2, ?3, 'delete', NULL, ?4, ?5)
                ON CONFLICT (kind, id) DO UPDATE SET mutation = excluded.mutation, op = 'delete', payload = NULL, modified_at = excluded.modified_at,
                    state = 'pending', attempts = 0, next_attempt_at = 0, ordinal = excluded.ordinal, last_error = NULL
                """, [.text("\(client)-\(number)"), .text(kind), .text(id), .integer(date), .integer(number)])
        }
        return date
    }
}
