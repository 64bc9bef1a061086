import SteleSQL

/// What a recovery from a snapshot did (001 §7, DESIGN §6).
public struct RecoveryOutcome: Sendable, Equatable {
    /// Records taken from the snapshot.
    public let imported: Int
    /// Local records written after the restore, merged back on top.
    public let keptLocal: Int
    /// Local records dropped: the snapshot lacks them and they predate the restore.
    public let dropped: Int
}

extension Replica {
    /// Replaces this device's replicated content with a snapshot of the fleet's
    /// (the anchor's body, or one a sibling served), keeping what this device
    /// wrote after it was restored, then moves to the snapshot's generation.
    ///
    /// 001 §7, with DESIGN §6's additions: everything the snapshot lacks is
    /// dropped, except records newer than what the fleet had seen when it agreed
    /// (``Snapshot/knowledge``): what this device wrote after the restore, and
    /// what it or others wrote while cut off from the fleet. Those are merged on
    /// top with the kind's rule; the rows keep the snapshot's clocks
    /// (vectors and stamps come from it, never from local counters); and the
    /// generation moves only in the same transaction as the import, so a failed
    /// import leaves the device where it was.
    /// - Throws: ``ReplicaError`` `invalidRecord` when the snapshot is not ahead of
    ///   this device or carries a malformed record, `kindMismatch` when a namespace
    ///   has another kind here; nothing changes then.
    @discardableResult
    public func recover(from snapshot: Snapshot) throws -> RecoveryOutcome {
        guard snapshot.generation > generation else {
            throw ReplicaError(.invalidRecord, "a snapshot at generation \(snapshot.generation) cannot recover a device at generation \(generation)")
        }
        for namespace in snapshot.namespaces {
            if let declaration = declared[namespace.namespace], declaration.kind != namespace.kind {
                throw ReplicaError(
                    .kindMismatch, "the snapshot holds namespace \(namespace.namespace) as \(namespace.kind), declared here as \(declaration.kind)")
            }
        }
        var outcome = (imported: 0, kept: 0, dropped: 0)
        try write {
            for declaration in namespaces where declaration.kind.isReplicated {
                let sync = try NamespaceSync(replica: self, declaration: declaration)
                let local = try sync.records(keys: try allKeys(declaration))
                let imported = snapshot.namespaces.first { $0.namespace == declaration.name }?.records ?? []
                // What the fleet agreed of each causal key: a version it had seen is kept only if still there.
                var agreed: [String: CausalRecord] = [:]
                for case .causal(let record) in imported { agreed[record.key] = record }
                // Newer than what the fleet had seen when it agreed: written after a
                // restore, or while cut off from the anchor, by this device or another.
                let kept = local.compactMap { snapshot.knowledge.uncovered(of: $0, agreed: { agreed[$0] }) }
                outcome.kept += kept.count
                outcome.dropped += local.count - kept.count
                try connection.execute("DELETE FROM \(declaration.table)")
                if declaration.kind == .messages { try connection.execute("DELETE FROM \(declaration.table)_ops") }
                for record in imported { observe(record) }
                try sync.apply(imported)
                let collected = try dropCollectedTombstones(declaration, sync: sync, knowledge: snapshot.knowledge)
                try sync.apply(kept)
                outcome.imported += imported.count - collected
            }
            try connection.execute("UPDATE replica SET generation = ? WHERE id = 1", [.integer(Int64(snapshot.generation))])
            try recordCollectedKnowledge(snapshot.knowledge)
            // No tombstone is held that a round vouched for, and no round is remembered.
            try connection.execute(
                "UPDATE barrier SET acked_round = NULL, acked_digest = NULL, acked_generation = NULL, watermark = 0 WHERE id = 1")
        }
        // The wiped tables never went through the digest: rebuild it from what was
        // committed (a rolled-back import undid only the leaves it had added).
        try rebuildDigests()
        generation = snapshot.generation
        return RecoveryOutcome(imported: outcome.imported, keptLocal: outcome.kept, dropped: outcome.dropped)
    }

    /// Drops the tombstones just imported that a round collected: those the
    /// snapshot's knowledge covers (every member held them when it acked), which
    /// a commit would have dropped (``collectableFilter(_:)``). Inside the
    /// recovery's transaction, before the records kept from after the restore
    /// are merged, while the table holds the snapshot's records only.
    ///
    /// An anchor's snapshot is taken just before its round drops what it
    /// collects, so it still holds the `log` markers and deleted messages (they
    /// are leaves) that the fleet let go of at that generation. Kept, they were
    /// a collected tombstone back in the fleet: a marker buried a group started
    /// again under the same name after the collection, and a deleted message
    /// the repost of its id (docs/scenarios.md `D bury`: "Once the barrier has
    /// collected the tombstone, the same name starts a new group"; found by a
    /// scenario written from 001 §7). The state the fleet agreed at the
    /// snapshot's generation holds none of them, and what this device wrote
    /// after its restore merges on top of that state. A sibling's snapshot
    /// holds the tombstones it still keeps: those its rounds did not cover stay.
    /// - Returns: how many were dropped.
    private func dropCollectedTombstones(_ declaration: NamespaceDeclaration, sync: NamespaceSync, knowledge: Knowledge) throws -> Int {
        guard let filter = Self.collectableFilter(declaration) else { return 0 }
        let column = declaration.kind.keyColumn
        let keys = try connection.query("SELECT \(column) FROM \(declaration.table) WHERE \(filter) ORDER BY \(column)") { row in
            declaration.kind == .log ? row.blob(0) : Array(row.text(0).utf8)
        }
        guard !keys.isEmpty else { return 0 }
        var dropped = 0
        for record in try sync.records(keys: keys) where knowledge.covers(record) {
            let key: SQLValue = declaration.kind == .log ? .blob(record.sortKey) : .text(String(decoding: record.sortKey, as: UTF8.self))
            if declaration.kind == .messages { try connection.execute("DELETE FROM \(declaration.table)_ops WHERE message = ?", [key]) }
            try connection.execute("DELETE FROM \(declaration.table) WHERE \(column) = ? AND \(filter)", [key])
            dropped += connection.changes
        }
        if dropped > 0 { tombstonesChanged(declaration) }
        return dropped
    }

    /// The own counter and clock move above what the imported records carry.
    private func observe(_ record: WireRecord) {
        switch record {
        case .causal(let record):
            observe(record.vector)
            for version in record.versions { observe(version.timestamp) }
        case .lww(let record): observe(record.stamp.timestamp)
        case .event(let event): observe(event.stamp.timestamp)
        case .appendOnly(let record): observe(record.stamp.timestamp)
        case .message(let record): for op in record.ops { observe(HybridTimestamp(rawValue: UInt64(op.time))) }
        }
    }

    /// Every key (log: event id) of a namespace's table, tombstones included
    /// (messages: every message with an op stored, orphans included).
    private func allKeys(_ declaration: NamespaceDeclaration) throws -> [[UInt8]] {
        if declaration.kind == .messages {
            return try connection.query("SELECT DISTINCT message FROM \(declaration.table)_ops ORDER BY message") { Array($0.text(0).utf8) }
        }
        let column = declaration.kind.keyColumn
        return try connection.query("SELECT \(column) FROM \(declaration.table) ORDER BY \(column)") { row in
            declaration.kind == .log ? row.blob(0) : Array(row.text(0).utf8)
        }
    }
}
