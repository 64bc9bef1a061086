import SteleSQL

/// A namespace of rows merged by version vectors (000 §4-5, ``CausalMerge``).
///
/// A delete bumps this device's counter and then marks the row tombstoned; the
/// bookkeeping (key and vector) outlives the value, so a sibling's stale copy is
/// recognised as stale. Reads never return tombstones.
public struct CausalNamespace: KeyValueNamespace {
    let replica: Replica
    public let declaration: NamespaceDeclaration

    public var name: String { declaration.name }
    private var id: SQLValue { .integer(declaration.id) }

    // MARK: - Reads: the one place tombstones are filtered out for this kind

    private static let live = "FROM causal_rows WHERE ns = ? AND tombstoned = 0"

    /// The live value of `key`, or `nil` if it is absent or deleted.
    public func get(_ key: String) throws -> [UInt8]? {
        try replica.connection.queryFirst("SELECT value \(Self.live) AND key = ?", [id, .text(key)]) { $0.blob(0) }
    }

    /// Every live row, ordered by key.
    public func entries() throws -> [(key: String, value: [UInt8])] {
        try replica.connection.query("SELECT key, value \(Self.live) ORDER BY key", [id]) { ($0.text(0), $0.blob(1)) }
    }

    /// The number of live rows.
    public func count() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) \(Self.live)", [id]) ?? 0)
    }

    /// The number of retained tombstones.
    public func tombstoneCount() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM causal_rows WHERE ns = ? AND tombstoned = 1", [id]) ?? 0)
    }

    // MARK: - Local writes

    /// Writes `value` under `key` (an upsert). The new version supersedes every
    /// version this device has seen of the key.
    /// - Returns: the row's new version vector, which carries this device's next counter.
    /// - Throws: ``ReplicaError`` `limitExceeded` / `invalidName` for a bad key or value,
    ///   `readOnly`; nothing is written then.
    @discardableResult
    public func put(_ key: String, _ value: [UInt8]) throws -> VersionVector {
        try Limits.checkKey(key)
        try Limits.checkValue(value)
        return try replica.write {
            let existing = try storedRecord(key)
            var vector = existing?.vector ?? VersionVector()
            let dot = Dot(device: replica.device, counter: replica.nextOwnCounter())
            vector.advance(dot.device, to: dot.counter)
            let version = CausalVersion(dot: dot, timestamp: replica.nextTimestamp(), value: value)
            try store(CausalRecord(key: key, vector: vector, versions: [version]))
            let wasLive = existing.map { !$0.isTombstone } ?? false
            replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: wasLive ? .updated : .inserted, origin: .local))
            return vector
        }
    }

    /// Deletes `key`: bumps this device's counter, then sets the tombstone (000 §4),
    /// so the tombstone dominates every copy this device had seen.
    /// - Returns: the tombstone's vector, or `nil` if there was no live row to delete.
    @discardableResult
    public func delete(_ key: String) throws -> VersionVector? {
        try replica.write {
            guard let existing = try storedRecord(key), !existing.isTombstone else { return nil }
            var vector = existing.vector
            vector.advance(replica.device, to: replica.nextOwnCounter())
            try store(.tombstone(key: key, vector: vector))
            replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: .deleted, origin: .local))
            return vector
        }
    }

    // MARK: - Sync: bookkeeping in and out

    /// The full record of `key`, tombstone included: what sync ships.
    public func record(_ key: String) throws -> CausalRecord? {
        try storedRecord(key)
    }

    /// Every record, tombstones included, ordered by key.
    public func records() throws -> [CausalRecord] {
        try replica.connection.query("SELECT \(Self.columns) FROM causal_rows WHERE ns = ? ORDER BY key", [id]) { try decodeRecord($0) }
    }

    /// Every tombstone, ordered by key (reconcile ships the whole set, 000 §4).
    public func tombstones() throws -> [CausalRecord] {
        try replica.connection.query(
            "SELECT \(Self.columns) FROM causal_rows WHERE ns = ? AND tombstoned = 1 ORDER BY key", [id]
        ) { try decodeRecord($0) }
    }

    /// Applies a remote row or tombstone with the `causal` rule (``CausalMerge``):
    /// a tombstone deletes only what its history saw, and the merged vector is
    /// recorded either way.
    /// - Throws: ``ReplicaError`` `invalidRecord` for a malformed record (nothing changes).
    @discardableResult
    public func apply(_ remote: CausalRecord) throws -> MergeOutcome {
        try remote.validate()
        return try replica.write {
            let decision = CausalMerge.merge(local: try storedRecord(remote.key), remote: remote)
            replica.observe(remote.vector)
            for version in remote.versions { replica.observe(version.timestamp) }
            if let record = decision.store { try store(record) }
            replica.emitOutcome(decision.outcome, namespace: name, subject: .row(key: remote.key))
            return decision.outcome
        }
    }

    // MARK: - Storage

    private static let columns = "key, vv, value, ts, writer, dot, siblings"

    private func storedRecord(_ key: String) throws -> CausalRecord? {
        try replica.connection.queryFirst("SELECT \(Self.columns) FROM causal_rows WHERE ns = ? AND key = ?", [id, .text(key)]) {
            try decodeRecord($0)
        }
    }

    private func decodeRecord(_ row: Statement) throws -> CausalRecord {
        let key = row.text(0)
        let vector = try replica.loadVector(row.blob(1))
        guard let value = row.optionalBlob(2) else { return .tombstone(key: key, vector: vector) }
        let shown = CausalVersion(
            dot: Dot(device: try replica.devices.id(at: row.int64(4)), counter: UInt64(row.int64(5))),
            timestamp: HybridTimestamp(rawValue: UInt64(row.int64(3))), value: value)
        let others = try row.optionalBlob(6).map { try replica.loadVersions($0) } ?? []
        return CausalRecord(key: key, vector: vector, versions: [shown] + others)
    }

    private func store(_ record: CausalRecord) throws {
        let statement = try replica.connection.cached(
            """
            INSERT INTO causal_rows (ns, key, vv, value, ts, writer, dot, siblings, tombstoned)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
            ON CONFLICT (ns, key) DO UPDATE SET
                vv = excluded.vv, value = excluded.value, ts = excluded.ts, writer = excluded.writer,
                dot = excluded.dot, siblings = excluded.siblings, tombstoned = excluded.tombstoned
            """)
        try statement.bind(1, declaration.id)
        try statement.bind(2, record.key)
        try statement.bind(3, try replica.storedVector(record.vector))
        if let shown = record.winner {
            try statement.bind(4, shown.value)
            try statement.bind(5, Int64(bitPattern: shown.timestamp.rawValue))
            try statement.bind(6, try replica.devices.intern(shown.dot.device, replica.connection))
            try statement.bind(7, Int64(shown.dot.counter))
            let others = record.versions.filter { $0.dot != shown.dot }
            if !others.isEmpty { try statement.bind(8, try replica.storedVersions(others)) }
            try statement.bind(9, Int64(0))
        } else {
            // Everything but key and vector stays NULL: a tombstone is only its history.
            try statement.bind(9, Int64(1))
        }
        try statement.step()
    }
}
