import SteleSQL

/// What this device remembers of the barrier round it acked last (001 §4-5).
public struct BarrierAck: Sendable, Equatable {
    /// The round's nonce.
    public let round: RoundNonce
    /// The content digest this device reported in its ack.
    public let digest: Hash32
    /// The generation the round moves the fleet to.
    public let generation: UInt64
    /// The tombstone sequence number reached when the ack was sent: a commit
    /// drops only tombstones at or below it.
    public let watermark: UInt64
}

/// What a `gc_commit` (or the adoption of an anchor's generation) did here.
public enum CollectionOutcome: Sendable, Equatable {
    /// The commit names a round this device did not ack last: a stale or replayed
    /// commit, or a round this device never took part in. Nothing changed.
    case notAcked
    /// The commit would move the generation backwards or nowhere: nothing changed.
    case generationNotAhead
    /// The generation was adopted, but the content moved since the ack, so the
    /// `causal` and `lww` tombstones are kept for a later round (001 §4). The `log`
    /// markers and deleted messages the ack vouched for are dropped all the same
    /// (``Replica/commit(round:digest:generation:knowledge:)``).
    case adoptedKeepingTombstones
    /// The generation was adopted and this many tombstones dropped.
    case collected(Int)
}

extension Replica {
    /// The digest a barrier round agrees on: SHA-256 over every replicated
    /// namespace's name and root, in name order. Equal on two devices exactly
    /// when they hold the same live content (tombstones are not leaves; a `log`
    /// namespace's markers are).
    public func contentDigest() throws -> Hash32 {
        return hasher.hash(LeafEncoding.content(try replicatedDigests().map { ($0.namespace, $0.digest) }))
    }

    /// The round this device acked last, or `nil` if it has acked none (or
    /// was restored from a backup older than its first ack).
    public func lastAck() throws -> BarrierAck? {
        try connection.queryFirst("SELECT acked_round, acked_digest, acked_generation, watermark FROM barrier WHERE id = 1") { row in
            guard let round = row.optionalBlob(0), let digest = row.optionalBlob(1), let generation = row.optionalInt64(2) else { return nil }
            do {
                return BarrierAck(
                    round: try RoundNonce(bytes: round), digest: try Hash32(bytes: digest), generation: UInt64(generation),
                    watermark: UInt64(row.int64(3)))
            } catch {
                throw ReplicaError(.corrupt, "the store's barrier memory is damaged; the file is damaged", cause: error)
            }
        } ?? nil
    }

    /// Records an ack for `round`: the digest reported, the generation the round
    /// moves to, and the watermark of the tombstones held now. Replaces any earlier ack.
    /// - Returns: what was recorded.
    @discardableResult
    public func recordAck(round: RoundNonce, digest: Hash32, generation: UInt64) throws -> BarrierAck {
        guard generation > self.generation else {
            throw ReplicaError(.invalidRecord, "a barrier round to generation \(generation) cannot be acked at generation \(self.generation)")
        }
        let ack = BarrierAck(round: round, digest: digest, generation: generation, watermark: tombstoneSequence)
        try write {
            try connection.execute(
                "UPDATE barrier SET acked_round = ?, acked_digest = ?, acked_generation = ?, watermark = ? WHERE id = 1",
                [.blob(round.bytes), .blob(digest.bytes), .integer(Int64(generation)), .integer(Int64(ack.watermark))])
        }
        return ack
    }

    /// Forgets the ack of `round`, if it is the one recorded: a commit of it is then
    /// ignored (``commit(round:digest:generation:knowledge:)`` answers `notAcked`).
    public func withdrawAck(round: RoundNonce) throws {
        try write {
            try connection.execute(
                "UPDATE barrier SET acked_round = NULL, acked_digest = NULL, acked_generation = NULL, watermark = 0 WHERE id = 1 AND acked_round = ?",
                [.blob(round.bytes)])
        }
    }

    /// Carries out a commit of `round` to `generation` (DESIGN §6): only for the
    /// round acked last; the generation is adopted (never moved backwards); the
    /// tombstones the ack vouched for are dropped if the content digest is still
    /// the agreed `digest`. Freed pages go back to the file system.
    ///
    /// A device whose content moved since its ack keeps its `causal` and `lww`
    /// tombstones for a later round (001 §4), but drops the `log` markers and
    /// deleted messages its ack vouched for, as the devices that did not move
    /// do. Those are leaves: every member held them when it acked, so each is
    /// one the round collected. Kept, this device sent them on, the others took
    /// them back, and a marker buried the group a user had started again under
    /// its name since the collection (docs/scenarios.md `D bury`: "once the
    /// barrier has collected the tombstone, the same name starts a new group").
    /// - Parameter knowledge: what the fleet had seen when it agreed, kept for
    ///   recoveries this device may later serve or need (``Knowledge``).
    public func commit(round: RoundNonce, digest: Hash32, generation: UInt64, knowledge: Knowledge = Knowledge()) throws -> CollectionOutcome {
        guard let ack = try lastAck(), ack.round == round, ack.generation == generation else { return .notAcked }
        guard generation > self.generation else { return .generationNotAhead }
        let unmoved = try contentDigest() == digest
        let dropped = try write {
            let dropped = try dropTombstones(upTo: ack.watermark, leavesOnly: !unmoved)
            try connection.execute("UPDATE replica SET generation = ? WHERE id = 1", [.integer(Int64(generation))])
            try recordCollectedKnowledge(knowledge)
            if unmoved {
                try connection.execute(
                    "UPDATE barrier SET collected_ms = ?, collected_count = ?, collected_through = ? WHERE id = 1",
                    [.integer(clock.nowMilliseconds()), .integer(Int64(dropped)), .integer(Int64(ack.watermark))])
            }
            return dropped
        }
        self.generation = generation
        guard unmoved else { return .adoptedKeepingTombstones }
        collectedThrough = max(collectedThrough, ack.watermark)
        if dropped > 0 {
            // DESIGN §6: storage really returns. Freed pages go back at once; when
            // the collection removed more than is left, the file is rebuilt so the
            // half-empty pages the deletes left are packed too (a cost proportional
            // to what is left, paid once). Best effort: the tombstones are gone
            // either way, and a busy file gives its pages back at a later commit.
            let live = (try? liveRowCount()) ?? Int.max
            _ = try? connection.returnFreePages(rebuild: dropped > live)
            if path != ":memory:" { try? connection.checkpoint() }
        }
        return .collected(dropped)
    }

    /// Whether a tombstone may have been written since the last collection: what
    /// makes a barrier round worth opening. Two integers compared, no query; it can
    /// only err towards a round that finds nothing to drop (a tombstone since
    /// revived by an edit).
    public var mayHoldTombstones: Bool { tombstoneSequence > collectedThrough }

    /// Copies the write-ahead log into the file and truncates it: the file on
    /// disk is then all there is (a commit that collected does this itself).
    public func checkpoint() throws {
        try connection.checkpoint()
    }

    /// When this device last collected, and how many tombstones.
    public func lastCollection() throws -> (milliseconds: Int64, count: Int)? {
        try connection.queryFirst("SELECT collected_ms, collected_count FROM barrier WHERE id = 1") { row in
            row.optionalInt64(0).map { ($0, Int(row.int64(1))) }
        } ?? nil
    }

    /// Rows (and log events) held in every namespace, tombstones aside.
    private func liveRowCount() throws -> Int {
        var total = 0
        for declaration in namespaces {
            let filter = Self.tombstoneFilter(declaration.kind).map { "NOT (\($0))" } ?? "1"
            total += Int(try connection.scalarInt("SELECT count(*) FROM \(declaration.table) WHERE \(filter)") ?? 0)
        }
        return total
    }

    /// The number of tombstones retained, per replicated namespace that has any kind of tombstone.
    public func tombstoneCounts() throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for declaration in namespaces {
            guard let filter = Self.tombstoneFilter(declaration.kind) else { continue }
            counts[declaration.name] = Int(try connection.scalarInt("SELECT count(*) FROM \(declaration.table) WHERE \(filter)") ?? 0)
        }
        return counts
    }

    /// Drops every tombstone whose sequence number is at most `watermark`, in
    /// every replicated namespace (or, `leavesOnly`, in those whose tombstones are
    /// leaves: `log` and `messages`), keeping the digests in step (a `log` marker
    /// is a leaf). Inside the caller's transaction.
    private func dropTombstones(upTo watermark: UInt64, leavesOnly: Bool = false) throws -> Int {
        var dropped = 0
        for declaration in namespaces where !leavesOnly || declaration.kind.tombstonesAreLeaves {
            guard let filter = Self.collectableFilter(declaration) else { continue }
            let bound: [SQLValue] = [.integer(Int64(watermark))]
            if declaration.kind.tombstonesAreLeaves, maintainsDigests {
                let leaves = try connection.query("SELECT \(declaration.kind.keyColumn), leaf FROM \(declaration.table) WHERE \(filter) AND seq <= ?", bound) { row in
                    (row.blob(0), try storedLeaf(row.blob(1), "a tombstone of \(declaration.name)"))
                }
                for (id, leaf) in leaves { recordLeaf(declaration, key: id, leaf: leaf, added: false) }
            }
            if declaration.kind == .messages {
                // A collected message leaves nothing: its ops go with its row.
                try connection.execute(
                    "DELETE FROM \(declaration.table)_ops WHERE message IN (SELECT key FROM \(declaration.table) WHERE \(filter) AND seq <= ?)", bound)
            }
            try connection.execute("DELETE FROM \(declaration.table) WHERE \(filter) AND seq <= ?", bound)
            let count = connection.changes
            if count > 0 { tombstonesChanged(declaration) }
            dropped += count
        }
        return dropped
    }

    /// The SQL that picks the tombstones a commit may drop: every tombstone, but
    /// a deleted message whose recall is still owed to the contact (the delete
    /// for everyone is what the contact must yet receive) and a deleted message
    /// with a receipt the contact has not acknowledged: the contact delivers
    /// again until it hears a receipt, and a retry that found the row collected
    /// would bring the message back (``MessageFold/duty(of:for:)`` owes both).
    static func collectableFilter(_ declaration: NamespaceDeclaration) -> String? {
        guard let filter = tombstoneFilter(declaration.kind) else { return nil }
        return declaration.kind == .messages ? filter + " AND duty = 0" : filter
    }

    /// The SQL that picks a kind's tombstones, or `nil` for a kind that keeps none.
    static func tombstoneFilter(_ kind: NamespaceKind) -> String? {
        switch kind {
        case .causal: "tombstoned = 1"
        case .lww: "deleted = 1"
        case .log: "marker = 1"
        case .messages: "scope > 0"
        case .appendOnly, .local: nil
        }
    }
}
