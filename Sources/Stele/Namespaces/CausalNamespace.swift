import SteleSQL

/// A namespace of rows merged by version vectors (000 §4-5, ``CausalMerge``).
///
/// A delete bumps this device's counter and then marks the row tombstoned; the
/// bookkeeping (key and vector) outlives the value, so a sibling's stale copy is
/// recognised as stale. Reads never return tombstones. Every write keeps the
/// namespace's digest in step (``DigestTree``).
public struct CausalNamespace: KeyValueNamespace {
    let replica: Replica
    public let declaration: NamespaceDeclaration
    let slots: StatementSlots

    init(replica: Replica, declaration: NamespaceDeclaration) {
        self.replica = replica
        self.declaration = declaration
        slots = replica.statementSlots(for: declaration, count: Slot.count)
    }

    public var name: String { declaration.name }
    var table: String { declaration.table }

    /// The namespace's cached statements, one slot each.
    enum Slot: Int, CaseIterable {
        case get, insertLive, updateLive, lookup, storeTombstone, upsert, record, tombstoneLookup

        static let count = allCases.count
    }

    /// Hot statements bind every parameter on each use (``StatementSlots``).
    func statement(_ slot: Slot, _ sql: @autoclosure () -> String) throws -> Statement {
        try slots.statement(slot.rawValue, sql())
    }

    // MARK: - Reads: the one place tombstones are filtered out for this kind

    private var live: String { "FROM \(table) WHERE tombstoned = 0" }

    /// The live value of `key`, or `nil` if it is absent or deleted.
    public func get(_ key: String) throws -> [UInt8]? {
        let statement = try statement(.get, "SELECT value \(live) AND key = ?1")
        try statement.bind(1, key)
        guard try statement.step() else { return nil }
        defer { statement.reset() }
        return statement.blob(0)
    }

    /// Every live row, ordered by key.
    public func entries() throws -> [(key: String, value: [UInt8])] {
        try replica.connection.query("SELECT key, value \(live) ORDER BY key") { ($0.text(0), $0.blob(1)) }
    }

    /// The number of live rows.
    public func count() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) \(live)") ?? 0)
    }

    /// The number of retained tombstones.
    public func tombstoneCount() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table) WHERE tombstoned = 1") ?? 0)
    }

    // MARK: - Local writes

    /// Writes `value` under `key` (an upsert). The new version supersedes every
    /// version this device has seen of the key.
    /// - Returns: the write's dot: this device and the own counter it used.
    /// - Throws: ``ReplicaError`` `limitExceeded` / `invalidName` for a bad key or value,
    ///   `readOnly`; nothing is written then.
    @discardableResult
    public func put(_ key: String, _ value: [UInt8]) throws -> Dot {
        try Limits.checkKey(key)
        try Limits.checkValue(value)
        return try replica.operation {
            let keyBytes = key.utf8
            let (counter, timestamp) = replica.nextStamp()
            let version = CausalVersion(dot: Dot(device: replica.device, counter: counter), timestamp: timestamp, value: value)
            // Optimistic insert: a new key needs no lookup, its vector is just this write.
            var vector = StoredVector()
            vector.raise(DeviceTable.ownIndex, to: counter)
            var freshLeaf: Leaf?
            if replica.maintainsDigests {
                replica.scratch.reset()
                LeafEncoding.freshCausal(key: key, device: replica.deviceBytes, counter: counter, timestamp: timestamp, value: value, into: &replica.scratch)
                freshLeaf = Leaf(digest: replica.scratch.bytes.withUnsafeBytes { replica.hasher.hash($0) })
            }
            let insert = try statement(
                .insertLive,
                """
                INSERT INTO \(table) (vv, value, ts, writer, dot, leaf, key, siblings, tombstoned)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, 0) ON CONFLICT (key) DO NOTHING
                """)
            try bindLiveRow(insert, vector: vector.bytes, version: version, leaf: freshLeaf, key: key)
            try insert.step()
            guard replica.connection.changes == 0, let existing = try storedState(key) else {
                if let freshLeaf { replica.recordLeaf(declaration, key: keyBytes, leaf: freshLeaf, added: true) }
                replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: .inserted, origin: .local))
                return version.dot
            }
            // The key exists: this write supersedes everything its vector has seen.
            vector = existing.vector
            vector.raise(DeviceTable.ownIndex, to: counter)
            let leaf = try leafHash { LeafEncoding.causal(CausalRecord(key: key, vector: try replica.loadVector(vector.bytes), versions: [version])) }
            let update = try statement(
                .updateLive,
                """
                UPDATE \(table) SET vv = ?1, value = ?2, ts = ?3, writer = ?4, dot = ?5, leaf = ?6, siblings = NULL, tombstoned = 0, seq = NULL, contexts = NULL
                WHERE key = ?7
                """)
            try bindLiveRow(update, vector: vector.bytes, version: version, leaf: leaf, key: key)
            try update.step()
            if let oldLeaf = existing.leaf { replica.recordLeaf(declaration, key: keyBytes, leaf: oldLeaf, added: false) }
            if existing.tombstoned { replica.tombstonesChanged(declaration) }
            if let leaf { replica.recordLeaf(declaration, key: keyBytes, leaf: leaf, added: true) }
            replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: existing.tombstoned ? .inserted : .updated, origin: .local))
            return version.dot
        }
    }

    private func bindLiveRow(_ statement: Statement, vector: [UInt8], version: CausalVersion, leaf: Leaf?, key: String) throws {
        try statement.bind(1, vector)
        try statement.bind(2, version.value)
        try statement.bind(3, Int64(bitPattern: version.timestamp.rawValue))
        try statement.bind(4, DeviceTable.ownIndex)
        try statement.bind(5, Int64(version.dot.counter))
        if let leaf { try leaf.withBytes { try statement.bind(6, rawBytes: $0) } } else { try statement.bindNull(6) }
        try statement.bind(7, key)
    }

    /// The leaf hash of a live row, or `nil` when the replica keeps no digests (a benchmark baseline).
    private func leafHash(_ encoding: () throws -> [UInt8]) rethrows -> Leaf? {
        guard replica.maintainsDigests else { return nil }
        return replica.hasher.leaf(try encoding())
    }

    /// Deletes `key`: bumps this device's counter, then sets the tombstone (000 §4),
    /// so the tombstone dominates every copy this device had seen.
    /// - Returns: the delete's dot, or `nil` if there was no live row to delete.
    @discardableResult
    public func delete(_ key: String) throws -> Dot? {
        try replica.operation {
            guard let existing = try storedState(key), !existing.tombstoned else { return nil }
            var vector = existing.vector
            let counter = replica.nextOwnCounter()
            vector.raise(DeviceTable.ownIndex, to: counter)
            try storeTombstone(key, vector.bytes)
            if let oldLeaf = existing.leaf { replica.recordLeaf(declaration, key: key.utf8, leaf: oldLeaf, added: false) }
            replica.tombstonesChanged(declaration)
            replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: .deleted, origin: .local))
            return Dot(device: replica.device, counter: counter)
        }
    }

    /// Replaces the row with its tombstone. REPLACE deletes the old cell before
    /// inserting the small one, which lets SQLite merge the emptied pages: an
    /// in-place UPDATE would leave each page a quarter full, and a retained
    /// tombstone would cost ~170 bytes instead of ~40 (`local.tombstone_bytes`).
    func storeTombstone(_ key: String, _ vector: [UInt8]) throws {
        let statement = try statement(.storeTombstone, "INSERT OR REPLACE INTO \(table) (key, vv, tombstoned, seq) VALUES (?1, ?2, 1, ?3)")
        try statement.bind(1, key)
        try statement.bind(2, vector)
        try statement.bind(3, replica.nextTombstoneSequence())
        try statement.step()
    }

    /// What a local write needs of the stored row: its vector (parsed in place,
    /// never copied out), whether it is a tombstone, and its digest leaf.
    private func storedState(_ key: String) throws -> (vector: StoredVector, tombstoned: Bool, leaf: Leaf?)? {
        let statement = try statement(.lookup, "SELECT vv, tombstoned, leaf FROM \(table) WHERE key = ?1")
        try statement.bind(1, key)
        guard try statement.step() else { return nil }
        defer { statement.reset() }
        let tombstoned = statement.int64(1) == 1
        let leaf = tombstoned || !replica.maintainsDigests ? nil : try replica.storedLeaf(statement.optionalBlob(2), "row \(key) of \(name)")
        return (try statement.withBlob(0) { try StoredVector(raw: $0) }, tombstoned, leaf)
    }

    // MARK: - Sync: bookkeeping in and out

    /// The full record of `key`, tombstone included: what sync ships.
    public func record(_ key: String) throws -> CausalRecord? {
        let statement = try statement(.record, "SELECT \(Self.columns) FROM \(table) WHERE key = ?1")
        try statement.bind(1, key)
        guard try statement.step() else { return nil }
        defer { statement.reset() }
        return try decodeRecord(statement).record
    }

    /// Every record, tombstones included, ordered by key.
    public func records() throws -> [CausalRecord] {
        try replica.connection.query("SELECT \(Self.columns) FROM \(table) ORDER BY key") { try decodeRecord($0).record }
    }

    /// Every tombstone, ordered by key (reconcile ships the whole set, 000 §4).
    public func tombstones() throws -> [CausalRecord] {
        try replica.connection.query("SELECT \(Self.columns) FROM \(table) WHERE tombstoned = 1 ORDER BY key") { try decodeRecord($0).record }
    }

    /// Applies a remote row or tombstone with the `causal` rule (``CausalMerge``):
    /// a tombstone deletes only what its history saw, and the merged vector is
    /// recorded either way.
    /// - Throws: ``ReplicaError`` `invalidRecord` for a malformed record (nothing changes).
    @discardableResult
    public func apply(_ remote: CausalRecord) throws -> MergeOutcome {
        try remote.validate()
        return try replica.operation {
            let local = try storedRecord(remote.key)
            let decision = CausalMerge.merge(local: local?.record, remote: remote)
            replica.observe(remote.vector)
            for version in remote.versions { replica.observe(version.timestamp) }
            if let record = decision.store { try store(record, replacing: local) }
            replica.emitOutcome(decision.outcome, namespace: name, subject: .row(key: remote.key))
            return decision.outcome
        }
    }

    // MARK: - Storage

    private static let columns = "key, vv, value, ts, writer, dot, siblings, leaf, contexts"

    private func storedRecord(_ key: String) throws -> (record: CausalRecord, leaf: Leaf?)? {
        let statement = try statement(.record, "SELECT \(Self.columns) FROM \(table) WHERE key = ?1")
        try statement.bind(1, key)
        guard try statement.step() else { return nil }
        defer { statement.reset() }
        return try decodeRecord(statement)
    }

    private func decodeRecord(_ row: Statement) throws -> (record: CausalRecord, leaf: Leaf?) {
        let key = row.text(0)
        let vector = try replica.loadVector(row.blob(1))
        guard let value = row.optionalBlob(2) else { return (.tombstone(key: key, vector: vector), nil) }
        guard !row.isNull(3), !row.isNull(5) else {
            throw ReplicaError(.corrupt, "the live row \(key) of \(name) has lost its timestamp or dot; the file is damaged")
        }
        let shown = CausalVersion(
            dot: Dot(device: try replica.deviceID(at: row.int64(4)), counter: UInt64(row.int64(5))),
            timestamp: HybridTimestamp(rawValue: UInt64(row.int64(3))), value: value)
        var versions = [shown] + (try row.optionalBlob(6).map { try replica.loadVersions($0) } ?? [])
        if let stored = row.optionalBlob(8) {
            let contexts = try replica.loadContexts(stored)
            versions = versions.map { version in
                CausalVersion(dot: version.dot, timestamp: version.timestamp, value: version.value, context: contexts[version.dot])
            }
        }
        let leaf = replica.maintainsDigests ? try replica.storedLeaf(row.optionalBlob(7), "row \(key) of \(name)") : nil
        return (CausalRecord(key: key, vector: vector, versions: versions), leaf)
    }

    /// Stores a merged record over `previous`, keeping the digest in step.
    private func store(_ record: CausalRecord, replacing previous: (record: CausalRecord, leaf: Leaf?)?) throws {
        let keyBytes = record.key.utf8
        let vector = try replica.storedVector(record.vector)
        if let leaf = previous?.leaf { replica.recordLeaf(declaration, key: keyBytes, leaf: leaf, added: false) }
        if previous?.record.isTombstone ?? false || record.isTombstone { replica.tombstonesChanged(declaration) }
        guard let shown = record.winner else {
            try storeTombstone(record.key, vector)
            return
        }
        let leaf = leafHash { LeafEncoding.causal(record) }
        let statement = try statement(
            .upsert,
            """
            INSERT INTO \(table) (key, vv, value, ts, writer, dot, siblings, leaf, tombstoned, contexts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9)
            ON CONFLICT (key) DO UPDATE SET
                vv = excluded.vv, value = excluded.value, ts = excluded.ts, writer = excluded.writer,
                dot = excluded.dot, siblings = excluded.siblings, leaf = excluded.leaf, tombstoned = 0, seq = NULL, contexts = excluded.contexts
            """)
        try statement.bind(1, record.key)
        try statement.bind(2, vector)
        try statement.bind(3, shown.value)
        try statement.bind(4, Int64(bitPattern: shown.timestamp.rawValue))
        try statement.bind(5, try replica.devices.intern(shown.dot.device, replica.connection))
        try statement.bind(6, Int64(shown.dot.counter))
        let others = record.versions.filter { $0.dot != shown.dot }
        if others.isEmpty { try statement.bindNull(7) } else { try statement.bind(7, try replica.storedVersions(others)) }
        if let leaf { try leaf.withBytes { try statement.bind(8, rawBytes: $0) } } else { try statement.bindNull(8) }
        if let contexts = try replica.storedContexts(record.versions) { try statement.bind(9, contexts) } else { try statement.bindNull(9) }
        try statement.step()
        if let leaf { replica.recordLeaf(declaration, key: keyBytes, leaf: leaf, added: true) }
    }

    // MARK: - Digest

    /// The fingerprint of the tombstone set: computed on demand and cached until a tombstone changes.
    func tombstoneFingerprint() throws -> SetFingerprint {
        guard let state = replica.digestState(declaration) else { return SetFingerprint() }
        if let cached = state.tombstones { return cached }
        var fingerprint = SetFingerprint()
        for record in try tombstones() { fingerprint.add(replica.hasher.hash(LeafEncoding.causal(record))) }
        state.tombstones = fingerprint
        return fingerprint
    }
}
