import SteleSQL

/// An `appendOnly` record as sync ships it. A `nil` value is a tombstone, which
/// this kind always ignores (002 "The Append-Only Exception").
public struct AppendOnlyRecord: Sendable, Equatable {
    public let key: String
    public let value: [UInt8]?
    public let stamp: WriteStamp

    public init(key: String, value: [UInt8]?, stamp: WriteStamp) {
        self.key = key
        self.value = value
        self.stamp = stamp
    }

    /// How errors name the record (built only when an error is).
    private var label: String { "appendOnly record \"\(key.prefix(64))\"" }

    func validate() throws {
        try Limits.validateKeyAndValue(key, value, label)
        try stamp.validate(label)
    }
}

/// Records that are written once and never edited or deleted: a finished workout,
/// a sealed note (002). The first live write is final, and a tombstone never
/// beats a live copy: "a wrong device clock cannot erase a workout".
///
/// If two devices write different first values for the same key concurrently,
/// the earlier write stamp stays final on every device and the other is reported
/// as a conflict.
public struct AppendOnlyNamespace: KeyValueNamespace {
    let replica: Replica
    public let declaration: NamespaceDeclaration

    public var name: String { declaration.name }
    private var table: String { declaration.table }

    // This kind keeps no tombstones, so every stored row is live.

    public func get(_ key: String) throws -> [UInt8]? {
        try replica.connection.queryFirst("SELECT value FROM \(table) WHERE key = ?", [.text(key)]) { $0.blob(0) }
    }

    public func entries() throws -> [(key: String, value: [UInt8])] {
        try replica.connection.query("SELECT key, value FROM \(table) ORDER BY key") { ($0.text(0), $0.blob(1)) }
    }

    public func count() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table)") ?? 0)
    }

    /// Writes the record's one and only value.
    /// - Throws: ``ReplicaError`` `appendOnlyIsFinal` if `key` already has a value
    ///   (it is left as it was); size errors.
    @discardableResult
    public func put(_ key: String, _ value: [UInt8]) throws -> WriteStamp {
        try Limits.checkKey(key)
        try Limits.checkValue(value)
        return try replica.operation {
            guard try storedRecord(key) == nil else {
                throw ReplicaError(.appendOnlyIsFinal, "\(key) in \(name) already has its value; appendOnly records are written once. Use a new key")
            }
            let stamp = WriteStamp(timestamp: replica.nextTimestamp(), writer: replica.device)
            try store(AppendOnlyRecord(key: key, value: value, stamp: stamp), replacing: nil)
            replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: .inserted, origin: .local))
            return stamp
        }
    }

    public func putBytes(_ key: String, _ value: [UInt8]) throws { try put(key, value) }

    /// Always refuses: an appendOnly record cannot be deleted.
    /// - Throws: ``ReplicaError`` `appendOnlyIsFinal`.
    public func delete(_ key: String) throws {
        throw ReplicaError(.appendOnlyIsFinal, "\(key) in \(name) cannot be deleted: appendOnly records are final. Declare a causal namespace for deletable rows")
    }

    public func record(_ key: String) throws -> AppendOnlyRecord? { try storedRecord(key) }

    public func records() throws -> [AppendOnlyRecord] {
        try replica.connection.query("SELECT key, value, ts, writer FROM \(table) ORDER BY key") { try decode($0) }
    }

    /// Applies a remote record: inserted if absent; a tombstone is discarded; of two
    /// different first writes the earlier stamp stays (a conflict either way).
    @discardableResult
    public func apply(_ remote: AppendOnlyRecord) throws -> MergeOutcome {
        try remote.validate()
        guard let remoteValue = remote.value else { return MergeOutcome(.discarded) }
        return try replica.operation {
            replica.observe(remote.stamp.timestamp)
            guard let local = try storedRecord(remote.key), let localValue = local.value else {
                try store(remote, replacing: nil)
                let outcome = MergeOutcome(.inserted)
                replica.emitOutcome(outcome, namespace: name, subject: .row(key: remote.key))
                return outcome
            }
            if local == remote { return .unchanged }
            let remoteIsFirst = remote.stamp != local.stamp ? remote.stamp < local.stamp : remoteValue.lexicographicallyPrecedes(localValue)
            let outcome: MergeOutcome
            if remoteIsFirst {
                try store(remote, replacing: local)
                outcome = MergeOutcome(.updated, conflict: Conflict(resolution: .laterFirstWriteLost, lostValue: localValue, losingDevice: local.stamp.writer))
            } else {
                outcome = MergeOutcome(.unchanged, conflict: Conflict(resolution: .laterFirstWriteLost, lostValue: remoteValue, losingDevice: remote.stamp.writer))
            }
            replica.emitOutcome(outcome, namespace: name, subject: .row(key: remote.key))
            return outcome
        }
    }

    private func storedRecord(_ key: String) throws -> AppendOnlyRecord? {
        try replica.connection.queryFirst("SELECT key, value, ts, writer FROM \(table) WHERE key = ?", [.text(key)]) {
            try decode($0)
        }
    }

    private func decode(_ row: Statement) throws -> AppendOnlyRecord {
        AppendOnlyRecord(
            key: row.text(0), value: row.blob(1),
            stamp: WriteStamp(timestamp: HybridTimestamp(rawValue: UInt64(row.int64(2))), writer: try replica.deviceID(at: row.int64(3))))
    }

    /// Stores `record` over `previous` (the later of two first writes), keeping the digest in step.
    private func store(_ record: AppendOnlyRecord, replacing previous: AppendOnlyRecord?) throws {
        let keyBytes = record.key.utf8
        if let previous, replica.maintainsDigests {
            replica.recordLeaf(declaration, key: keyBytes, leaf: replica.hasher.leaf(LeafEncoding.appendOnly(previous)), added: false)
        }
        let leaf = replica.hasher.leaf(LeafEncoding.appendOnly(record))
        try replica.connection.execute(
            """
            INSERT INTO \(table) (key, value, ts, writer, leaf) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (key) DO UPDATE SET value = excluded.value, ts = excluded.ts, writer = excluded.writer, leaf = excluded.leaf
            """,
            [
                .text(record.key), .blob(record.value ?? []),
                .integer(Int64(bitPattern: record.stamp.timestamp.rawValue)),
                .integer(try replica.devices.intern(record.stamp.writer, replica.connection)), .blob(leaf.bytes),
            ])
        if replica.maintainsDigests { replica.recordLeaf(declaration, key: keyBytes, leaf: leaf, added: true) }
    }
}
