import SteleSQL

/// A namespace merged last-writer-wins on hybrid timestamps; an exact tie
/// between a write and a delete resolves delete-wins (000 §5). Suited to rows
/// with a single writer, where add-wins would only open a hole (000 §5 peerDevices).
///
/// A deleted row keeps its key and stamp (the tombstone); reads never return it.
public struct LWWNamespace: KeyValueNamespace {
    let replica: Replica
    public let declaration: NamespaceDeclaration

    public var name: String { declaration.name }
    private var table: String { declaration.table }

    // MARK: - Reads: the one place tombstones are filtered out for this kind

    private var live: String { "FROM \(table) WHERE deleted = 0" }

    public func get(_ key: String) throws -> [UInt8]? {
        try replica.connection.queryFirst("SELECT value \(live) AND key = ?", [.text(key)]) { $0.blob(0) }
    }

    /// Every live row, ordered by key.
    public func entries() throws -> [(key: String, value: [UInt8])] {
        try replica.connection.query("SELECT key, value \(live) ORDER BY key") { ($0.text(0), $0.blob(1)) }
    }

    public func count() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) \(live)") ?? 0)
    }

    public func tombstoneCount() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table) WHERE deleted = 1") ?? 0)
    }

    // MARK: - Local writes

    /// Writes `value` under `key` with a fresh hybrid timestamp.
    /// - Returns: the write's stamp.
    @discardableResult
    public func put(_ key: String, _ value: [UInt8]) throws -> WriteStamp {
        try Limits.checkKey(key)
        try Limits.checkValue(value)
        return try replica.operation {
            let existing = try storedRecord(key)
            let stamp = WriteStamp(timestamp: replica.nextTimestamp(), writer: replica.device)
            try store(LWWRecord(key: key, value: value, stamp: stamp), replacing: existing)
            let wasLive = existing.map { !$0.record.isDeleted } ?? false
            replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: wasLive ? .updated : .inserted, origin: .local))
            return stamp
        }
    }

    public func putBytes(_ key: String, _ value: [UInt8]) throws { try put(key, value) }

    /// Deletes `key` with a fresh hybrid timestamp.
    /// - Returns: the delete's stamp, or `nil` if there was no live row.
    @discardableResult
    public func delete(_ key: String) throws -> WriteStamp? {
        try replica.operation {
            guard let existing = try storedRecord(key), !existing.record.isDeleted else { return nil }
            let stamp = WriteStamp(timestamp: replica.nextTimestamp(), writer: replica.device)
            try store(LWWRecord(key: key, value: nil, stamp: stamp), replacing: existing)
            replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: .deleted, origin: .local))
            return stamp
        }
    }

    // MARK: - Sync

    public func record(_ key: String) throws -> LWWRecord? { try storedRecord(key)?.record }

    /// Every record, deletes included, ordered by key.
    public func records() throws -> [LWWRecord] {
        try replica.connection.query("SELECT key, value, ts, writer, leaf FROM \(table) ORDER BY key") { try decodeRecord($0).record }
    }

    /// Every delete (tombstone), ordered by key.
    public func tombstones() throws -> [LWWRecord] {
        try replica.connection.query(
            "SELECT key, value, ts, writer, leaf FROM \(table) WHERE deleted = 1 ORDER BY key"
        ) { try decodeRecord($0).record }
    }

    /// Applies a remote write or delete with the `lww` rule (``LWWMerge``).
    /// - Throws: ``ReplicaError`` `invalidRecord` for a malformed record (nothing changes).
    @discardableResult
    public func apply(_ remote: LWWRecord) throws -> MergeOutcome {
        try remote.validate()
        return try replica.operation {
            let local = try storedRecord(remote.key)
            let decision = LWWMerge.merge(local: local?.record, remote: remote)
            replica.observe(remote.stamp.timestamp)
            if let record = decision.store { try store(record, replacing: local) }
            replica.emitOutcome(decision.outcome, namespace: name, subject: .row(key: remote.key))
            return decision.outcome
        }
    }

    // MARK: - Storage

    private func storedRecord(_ key: String) throws -> (record: LWWRecord, leaf: Leaf?)? {
        try replica.connection.queryFirst(
            "SELECT key, value, ts, writer, leaf FROM \(table) WHERE key = ?", [.text(key)]
        ) { try decodeRecord($0) }
    }

    private func decodeRecord(_ row: Statement) throws -> (record: LWWRecord, leaf: Leaf?) {
        let record = LWWRecord(
            key: row.text(0), value: row.optionalBlob(1),
            stamp: WriteStamp(timestamp: HybridTimestamp(rawValue: UInt64(row.int64(2))), writer: try replica.deviceID(at: row.int64(3))))
        let leaf = record.isDeleted || !replica.maintainsDigests ? nil : try replica.storedLeaf(row.optionalBlob(4), "row \(record.key) of \(name)")
        return (record, leaf)
    }

    /// Stores `record` over `previous`, keeping the digest in step. A delete
    /// replaces the row (so SQLite can merge the emptied pages, as for `causal`).
    private func store(_ record: LWWRecord, replacing previous: (record: LWWRecord, leaf: Leaf?)?) throws {
        let keyBytes = record.key.utf8
        if let leaf = previous?.leaf { replica.recordLeaf(declaration, key: keyBytes, leaf: leaf, added: false) }
        if previous?.record.isDeleted ?? false || record.isDeleted { replica.tombstonesChanged(declaration) }
        let leaf = record.isDeleted || !replica.maintainsDigests ? nil : replica.hasher.leaf(LeafEncoding.lww(record))
        try replica.connection.execute(
            "INSERT OR REPLACE INTO \(table) (key, value, ts, writer, leaf, deleted, seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                .text(record.key), record.value.map { .blob($0) } ?? .null,
                .integer(Int64(bitPattern: record.stamp.timestamp.rawValue)),
                .integer(try replica.devices.intern(record.stamp.writer, replica.connection)),
                leaf.map { .blob($0.bytes) } ?? .null, .integer(record.isDeleted ? 1 : 0),
                record.isDeleted ? .integer(replica.nextTombstoneSequence()) : .null,
            ])
        if let leaf { replica.recordLeaf(declaration, key: keyBytes, leaf: leaf, added: true) }
    }

    // MARK: - Digest

    /// The fingerprint of the delete set: computed on demand and cached until a delete changes.
    func tombstoneFingerprint() throws -> SetFingerprint {
        guard let state = replica.digestState(declaration) else { return SetFingerprint() }
        if let cached = state.tombstones { return cached }
        var fingerprint = SetFingerprint()
        for record in try tombstones() { fingerprint.add(replica.hasher.hash(LeafEncoding.lww(record))) }
        state.tombstones = fingerprint
        return fingerprint
    }
}
