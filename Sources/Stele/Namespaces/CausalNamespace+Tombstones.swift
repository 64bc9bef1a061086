/// Applying a peer's tombstone set in bulk: the path reconcile takes when a
/// sibling ships its whole set (000 §4), which after a mass delete is tens of
/// thousands of tombstones (`sync.delete_batch`).
extension CausalNamespace {
    /// Applies remote tombstones with the `causal` rule, exactly as ``apply(_:)``
    /// would, but reading each local row's bookkeeping only and comparing vectors
    /// in the replica's own device indexes. Rows the fast path cannot decide (a
    /// live row the tombstone did not see, concurrent versions) take ``apply(_:)``.
    /// - Returns: how many rows changed, how many merges chose between concurrent
    ///   writes (a delete lost to an edit), and the tombstones this device now holds
    ///   differently from the ones received (merged vectors): what the peer lacks.
    /// - Precondition: every record is a tombstone; the caller validated them.
    func applyTombstones(_ tombstones: [CausalRecord]) throws -> (changed: Int, conflicts: Int, differing: [CausalRecord]) {
        var differing: [CausalRecord] = []
        var changed = 0
        var conflicts = 0
        var indexes: [DeviceID: Int64] = [:]
        try replica.write {
            // What the set has seen of this device, once for the whole set.
            let ownSeen = tombstones.map { $0.vector[replica.device] }.max() ?? 0
            if ownSeen > 0 { replica.observe(VersionVector([replica.device: ownSeen])) }
            defer { if changed > 0 { replica.tombstonesChanged(declaration) } }
            for tombstone in tombstones {
                precondition(tombstone.isTombstone, "applyTombstones takes tombstones only")
                var remote = StoredVector()
                for entry in tombstone.vector.entries {
                    let index: Int64
                    if let known = indexes[entry.device] {
                        index = known
                    } else {
                        index = try replica.devices.intern(entry.device, replica.connection)
                        indexes[entry.device] = index
                    }
                    remote.raise(index, to: entry.counter)
                }
                let lookup = try statement(.tombstoneLookup, "SELECT vv, tombstoned, leaf, writer, dot, siblings FROM \(table) WHERE key = ?1")
                try lookup.bind(1, tombstone.key)
                guard try lookup.step() else {
                    lookup.resetKeepingBindings()
                    try storeTombstone(tombstone.key, remote.bytes)
                    changed += 1
                    continue
                }
                let local = try lookup.withBlob(0) { try StoredVector(raw: $0) }
                let isTombstone = lookup.int64(1) == 1
                var leaf: Leaf?
                if !isTombstone && replica.maintainsDigests {
                    leaf = lookup.withBlob(2) { Leaf(raw: $0) }
                    guard leaf != nil else {
                        throw ReplicaError(.corrupt, "row \(tombstone.key) of \(name) has lost its digest leaf; the file is damaged")
                    }
                }
                let writer = lookup.optionalInt64(3)
                let dot = lookup.optionalInt64(4).map { UInt64($0) }
                let hasSiblings = !lookup.isNull(5)
                lookup.resetKeepingBindings()
                if !isTombstone {
                    guard !hasSiblings, let writer, let dot, remote[writer] >= dot else {
                        // The tombstone did not see this row's write (or there are
                        // concurrent versions): the general merge decides and reports.
                        let outcome = try apply(tombstone)
                        if outcome.effect != .unchanged { changed += 1 }
                        if outcome.conflict != nil { conflicts += 1 }
                        if let stored = try record(tombstone.key), stored != tombstone, stored.isTombstone { differing.append(stored) }
                        continue
                    }
                }
                let merged = local.merged(with: remote)
                if isTombstone && merged == local {
                    if !(local == remote) { differing.append(.tombstone(key: tombstone.key, vector: try replica.loadVector(local.bytes))) }
                    continue
                }
                try storeTombstone(tombstone.key, merged.bytes)
                changed += 1
                if let leaf { replica.recordLeaf(declaration, key: tombstone.key.utf8, leaf: leaf, added: false) }
                if !isTombstone { replica.emit(ChangeEvent(namespace: name, subject: .row(key: tombstone.key), kind: .deleted, origin: .remote)) }
                if !(merged == remote) { differing.append(.tombstone(key: tombstone.key, vector: try replica.loadVector(merged.bytes))) }
            }
        }
        return (changed, conflicts, differing)
    }

    /// The keys of every tombstone (cheaper than the records when only keys matter).
    func tombstoneKeys() throws -> [String] {
        try replica.connection.query("SELECT key FROM \(table) WHERE tombstoned = 1 ORDER BY key") { $0.text(0) }
    }
}
