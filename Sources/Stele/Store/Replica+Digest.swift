import SteleSQL

/// A replicated namespace's digest state, kept in memory and in step with every
/// committed write (rolled back with the transaction that made it).
final class NamespaceDigest {
    var index = RangeIndex()
    /// The fingerprint of the tombstone set, or `nil` when a tombstone changed
    /// since it was computed. Tombstones are not leaves and only reconcile needs
    /// their fingerprint, so it is computed when asked for rather than kept up
    /// to date on every delete (which would cost the delete a hash).
    var tombstones: SetFingerprint?
}

/// One change to a digest, remembered until the transaction commits so a
/// rollback can undo it.
struct DigestChange {
    /// The key range of the leaf: ranges are only rebuilt between transactions,
    /// so it still names the same range when the change is undone.
    let range: Int
    let hash: Hash32
    let added: Bool
}

extension Replica {
    /// The root digest of a replicated namespace: SHA-256 over its leaf count and
    /// leaf sum (``RangeIndex``). Equal on two devices exactly when they hold the
    /// same live rows (with the same vectors and values).
    /// - Throws: ``ReplicaError`` `undeclaredNamespace`, or `invalidName` for a `local` namespace (it has no digest).
    public func digest(of name: String) throws -> Hash32 {
        // A write through another handle shows in the next digest asked for.
        try catchUpWithOtherWriters()
        let declaration = try self.declaration(of: name)
        guard let state = digests[declaration.id] else {
            throw ReplicaError(.invalidName, "namespace \(name) is local: it is never replicated and has no digest")
        }
        return root(of: state)
    }

    /// A namespace's root: SHA-256 over its leaf count and leaf sum.
    private func root(of state: NamespaceDigest) -> Hash32 {
        hasher.hash(LeafEncoding.root(count: state.index.totalCount, sum: state.index.totalSum))
    }

    /// The root digest of every replicated namespace, sorted by name (what an
    /// advertisement carries), after one look for other handles' writes rather
    /// than one per namespace.
    public func replicatedDigests() throws -> [(namespace: String, digest: Hash32)] {
        try catchUpWithOtherWriters()
        return try declared.values.filter { $0.kind.isReplicated }.sorted { $0.name < $1.name }.map { declaration in
            guard let state = digests[declaration.id] else {
                throw ReplicaError(.invalidName, "namespace \(declaration.name) keeps no digest on this handle; reopen the store to rebuild it")
            }
            return (declaration.name, root(of: state))
        }
    }

    func digestState(_ declaration: NamespaceDeclaration) -> NamespaceDigest? { digests[declaration.id] }

    func recordLeaf(_ declaration: NamespaceDeclaration, key: some Collection<UInt8>, leaf: Leaf, added: Bool) {
        guard let state = digests[declaration.id] else { return }
        let range = state.index.range(of: key)
        if added { state.index.add(leaf.term, toRange: range) } else { state.index.remove(leaf.term, fromRange: range) }
        digestUndo.append((declaration.id, DigestChange(range: range, hash: leaf.term, added: added)))
    }

    /// Notes that a tombstone of the namespace was written, replaced or dropped.
    func tombstonesChanged(_ declaration: NamespaceDeclaration) {
        digests[declaration.id]?.tombstones = nil
    }

    /// Undoes the digest changes made after `mark` (their transaction rolled back).
    func undoDigestChanges(after mark: Int) {
        guard digestUndo.count > mark else { return }
        while digestUndo.count > mark {
            let (namespace, change) = digestUndo.removeLast()
            guard let state = digests[namespace] else { continue }
            if change.added { state.index.remove(change.hash, fromRange: change.range) } else { state.index.add(change.hash, toRange: change.range) }
        }
        // Tombstones written by the undone work are gone too; recompute when asked.
        for state in digests.values { state.tombstones = nil }
    }

    /// Builds every replicated namespace's digest from its table (at open).
    /// Measured against persisting the tree: see `sync.digest_rebuild` in `stele bench`.
    func rebuildDigests() throws {
        digests = [:]
        for declaration in declared.values where declaration.kind.isReplicated {
            digests[declaration.id] = try rebuiltDigest(declaration)
        }
        digestUndo.removeAll()
    }

    func rebuiltDigest(_ declaration: NamespaceDeclaration) throws -> NamespaceDigest {
        let state = NamespaceDigest()
        guard maintainsDigests else { return state }
        state.index = RangeIndex.rebuilt(from: try storedLeaves(declaration).map { ($0.key, $0.leaf.term) })
        return state
    }

    /// Every live leaf of a namespace with its key bytes, in key order, optionally
    /// only those with keys in `lower ..< upper` (byte order, as the table is).
    func storedLeaves(_ declaration: NamespaceDeclaration, from lower: [UInt8]? = nil, below upper: [UInt8]? = nil) throws -> [(key: [UInt8], leaf: Leaf)] {
        let (keyColumn, live, keyIsText): (String, String, Bool) =
            switch declaration.kind {
            case .causal: ("key", "tombstoned = 0", true)
            case .lww: ("key", "deleted = 0", true)
            case .appendOnly: ("key", "1", true)
            case .log: ("id", "1", false)
            // Deleted messages are leaves too (identity and scope), like log markers.
            case .messages: ("key", "1", true)
            case .local: preconditionFailure("local namespaces have no digest")
            }
        var sql = "SELECT \(keyColumn), leaf FROM \(declaration.table) WHERE \(live)"
        if lower != nil { sql += " AND \(keyColumn) >= ?1" }
        if upper != nil { sql += " AND \(keyColumn) < ?2" }
        sql += " ORDER BY \(keyColumn)"
        let statement = try connection.cached(sql)
        // Keys are compared as bytes: SQLite's BINARY collation on text, memcmp on blobs.
        for (index, bound) in [(Int32(1), lower), (Int32(2), upper)] {
            guard let bound else { continue }
            if keyIsText { try statement.bind(index, textBytes: bound) } else { try statement.bind(index, bound) }
        }
        var leaves: [(key: [UInt8], leaf: Leaf)] = []
        while try statement.step() {
            leaves.append((statement.blob(0), try storedLeaf(statement.optionalBlob(1), "a row of \(declaration.name)")))
        }
        return leaves
    }

    /// Reads a stored leaf.
    /// - Throws: ``ReplicaError`` `corrupt` if it is missing or the wrong length.
    func storedLeaf(_ bytes: [UInt8]?, _ what: @autoclosure () -> String) throws -> Leaf {
        guard let bytes, let leaf = try? Leaf(bytes: bytes) else {
            throw ReplicaError(.corrupt, "\(what()) has lost its digest leaf; the file is damaged")
        }
        return leaf
    }
}
