/// Range-based reconcile of one namespace between two devices (DESIGN §5).
///
/// The device that starts sends its tombstone fingerprint and its namespace cut
/// into ranges with fingerprints. Each side then, range by range: skips what
/// matches, cuts what differs into smaller ranges, sends its leaves where a
/// range is small, and, given the other side's leaves, sends the rows the other
/// lacks and asks for the rows it lacks. Cost grows with the difference, not with
/// the namespace: matching ranges end at the first comparison.
///
/// Tombstones come first (000 §4: the whole set, unscoped): if the fingerprints
/// differ, the responder ships its whole set and asks for a restart; the starter
/// applies it, sends back only the tombstones the responder lacks, and cuts its
/// ranges afresh. Done once per session, and not at all when the sets match.
enum ReconcileEngine {
    /// Where one session stands.
    struct Progress {
        /// Tombstones have been compared (and shipped) in this session.
        var tombstonesExchanged = false
        /// Rows this device applied in the session that changed something.
        var changed = 0
        /// Merges here that chose between concurrent writes (each also a change event).
        var conflicts = 0
    }

    /// The starting message: the tombstone fingerprint and the whole key space cut into ranges.
    static func opening(session: UInt64, generation: UInt64, source: NamespaceSync) throws -> ReconcileMessage {
        try source.prepare()
        return ReconcileMessage(
            session: session, namespace: source.declaration.name, kind: source.kind, generation: generation,
            tombstoneFingerprint: try source.tombstoneFingerprint(),
            ranges: try source.split(from: [], below: nil, parts: openingParts))
    }

    /// Ranges in the opening message: wide enough that a small difference is
    /// found in few round trips, small enough to cost a few kilobytes.
    static let openingParts = 256

    /// Processes one incoming message and builds the reply, or `nil` when the
    /// session has nothing left to say.
    /// - Throws: ``ReplicaError`` (a malformed record: nothing of the message was
    ///   applied) or a storage error.
    static func respond(to message: ReconcileMessage, source: NamespaceSync, progress: inout Progress) throws -> ReconcileMessage? {
        var reply = ReconcileMessage(session: message.session, namespace: message.namespace, kind: source.kind, generation: message.generation)

        var differing: [WireRecord] = []
        // When the peer ships its whole set, what it lacks is this device's
        // tombstones for other keys (read before its set lands) and the merges.
        let unknownToPeer = message.restart ? try source.tombstones(notIn: Set((message.tombstones ?? []).map(\.sortKey))) : []
        if let tombstones = message.tombstones {
            let result = try source.applyTombstones(tombstones)
            progress.changed += result.changed
            progress.conflicts += result.conflicts
            differing = result.differing
        }
        let applied = try source.applyCounting(message.records)
        progress.changed += applied.changed
        progress.conflicts += applied.conflicts
        try source.prepare()

        if message.restart {
            // The peer sent its whole set: send back only what it lacks (tombstones it
            // has not got, and merged vectors), and start the ranges again.
            progress.tombstonesExchanged = true
            let delta = differing + unknownToPeer
            if !delta.isEmpty { reply.tombstones = delta }
            reply.ranges = try source.split(from: [], below: nil, parts: openingParts)
            reply.records = try source.records(keys: message.wants)
            return reply
        }

        if let theirs = message.tombstoneFingerprint, !progress.tombstonesExchanged {
            progress.tombstonesExchanged = true
            if try source.tombstonesDiffer(from: theirs) {
                reply.tombstones = try source.tombstones()
                reply.tombstonesComplete = true
                reply.restart = true
                reply.records = try source.records(keys: message.wants)
                return reply
            }
        }

        var ranges: [RangeItem] = []
        var records: [WireRecord] = []
        var wants: [[UInt8]] = []
        var lower: [UInt8] = []
        for item in message.ranges {
            switch item.mode {
            case .skip:
                ranges.append(RangeItem(upperBound: item.upperBound, mode: .skip))
            case .fingerprint(let theirs):
                let mine = try source.fingerprint(from: lower, below: item.upperBound)
                if mine == theirs {
                    ranges.append(RangeItem(upperBound: item.upperBound, mode: .skip))
                } else if theirs.count == 0 {
                    records += try source.records(from: lower, below: item.upperBound)
                    ranges.append(RangeItem(upperBound: item.upperBound, mode: .skip))
                } else if mine.count <= UInt64(NamespaceSync.leafThreshold) {
                    ranges.append(RangeItem(upperBound: item.upperBound, mode: .leaves(try source.leaves(from: lower, below: item.upperBound))))
                } else {
                    ranges += try source.split(from: lower, below: item.upperBound)
                }
            case .leaves(let theirs):
                let mine = try source.leaves(from: lower, below: item.upperBound)
                let theirLeaves = Dictionary(theirs.map { ($0.key, $0.leaf) }, uniquingKeysWith: { first, _ in first })
                let myLeaves = Dictionary(mine.map { ($0.key, $0.leaf) }, uniquingKeysWith: { first, _ in first })
                records += try source.records(keys: mine.filter { theirLeaves[$0.key] != $0.leaf }.map(\.key))
                wants += theirs.filter { myLeaves[$0.key] != $0.leaf }.map(\.key)
                ranges.append(RangeItem(upperBound: item.upperBound, mode: .skip))
            }
            lower = item.upperBound ?? lower
        }
        records += try source.records(keys: message.wants)

        reply.ranges = compacted(ranges)
        reply.records = deduplicated(records)
        reply.wants = Array(Set(wants)).sorted { $0.lexicographicallyPrecedes($1) }
        let saysSomething = !reply.ranges.isEmpty || !reply.records.isEmpty || !reply.wants.isEmpty
        return saysSomething ? reply : nil
    }

    /// Merges neighbouring skips; a message of only skips has no ranges at all.
    static func compacted(_ ranges: [RangeItem]) -> [RangeItem] {
        var result: [RangeItem] = []
        for range in ranges {
            if case .skip = range.mode, let last = result.last, case .skip = last.mode {
                result[result.count - 1] = range
            } else {
                result.append(range)
            }
        }
        if result.allSatisfy({ if case .skip = $0.mode { return true } else { return false } }) { return [] }
        return result
    }

    /// One record per key (a key may be both wanted and in a differing range).
    private static func deduplicated(_ records: [WireRecord]) -> [WireRecord] {
        var seen = Set<[UInt8]>()
        return records.filter { seen.insert($0.sortKey).inserted }
    }
}
