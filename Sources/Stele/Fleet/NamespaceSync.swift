import SteleSQL

/// What reconcile needs of one replicated namespace, read from and applied to
/// the replica: fingerprints of key ranges, leaves, records, tombstones.
///
/// Range fingerprints come from the in-memory ``RangeIndex``: whole ranges are
/// summed, and only the partial ranges at the two edges of a requested interval
/// are read from the table, so a fingerprint costs a few dozen rows whatever the
/// namespace's size.
struct NamespaceSync {
    let replica: Replica
    let declaration: NamespaceDeclaration
    private let state: NamespaceDigest

    /// Ranges of at most this many leaves travel as leaves rather than fingerprints.
    static let leafThreshold = 16
    /// Sub-ranges a differing range is split into.
    static let fanout = 16

    init(replica: Replica, declaration: NamespaceDeclaration) throws {
        // Fingerprints come from the digest state: it must include other handles' writes.
        try replica.catchUpWithOtherWriters()
        guard declaration.kind.isReplicated, let state = replica.digestState(declaration) else {
            throw ReplicaError(.invalidName, "namespace \(declaration.name) is local and is never reconciled")
        }
        self.replica = replica
        self.declaration = declaration
        self.state = state
    }

    var kind: NamespaceKind { declaration.kind }

    /// Rebuilds the range index if writes made it lopsided (never inside a transaction).
    func prepare() throws {
        guard state.index.isLopsided, !replica.connection.isInTransaction else { return }
        state.index = RangeIndex.rebuilt(from: try replica.storedLeaves(declaration).map { ($0.key, $0.leaf.term) })
    }

    // MARK: - Fingerprints and leaves

    /// The sum and count of the leaves with keys in `lower ..< upper` (`upper` nil: no bound).
    func sum(from lower: [UInt8], below upper: [UInt8]?) throws -> (sum: Hash32, count: Int) {
        let index = state.index
        let first = index.range(of: lower)
        let last = upper.map { index.range(of: $0) }
        if let last, first == last { return try scan(from: lower, below: upper) }
        var total: (sum: Hash32, count: Int)
        if lower == index.bounds[first] {
            total = (index.sums[first], index.counts[first])
        } else {
            total = try scan(from: lower, below: index.bounds(ofRange: first).upper)
        }
        let end = last ?? index.rangeCount
        if first + 1 < end {
            for range in (first + 1)..<end {
                total.sum = total.sum + index.sums[range]
                total.count += index.counts[range]
            }
        }
        if let last, let upper, upper != index.bounds[last] {
            let edge = try scan(from: index.bounds[last], below: upper)
            total.sum = total.sum + edge.sum
            total.count += edge.count
        }
        return total
    }

    func fingerprint(from lower: [UInt8], below upper: [UInt8]?) throws -> Fingerprint {
        let total = try sum(from: lower, below: upper)
        return Fingerprint(sum: total.sum, count: total.count)
    }

    private func scan(from lower: [UInt8], below upper: [UInt8]?) throws -> (sum: Hash32, count: Int) {
        try leaves(from: lower, below: upper).reduce((Hash32.zero, 0)) { ($0.0 + $1.leaf.term, $0.1 + 1) }
    }

    func leaves(from lower: [UInt8], below upper: [UInt8]?) throws -> [LeafEntry] {
        try replica.storedLeaves(declaration, from: lower, below: upper).map { LeafEntry(key: $0.key, leaf: $0.leaf) }
    }

    /// `lower ..< upper` cut into up to `parts` ranges of similar size, each with
    /// the fingerprint of its leaves, or its leaves when there are few.
    func split(from lower: [UInt8], below upper: [UInt8]?, parts: Int = NamespaceSync.fanout) throws -> [RangeItem] {
        let index = state.index
        let first = index.range(of: lower)
        let last = upper.map { index.range(of: $0) } ?? index.rangeCount - 1
        if last - first >= parts * 2 {
            // Many whole ranges inside: cut along this device's own range bounds.
            let step = (last - first) / parts
            var items: [RangeItem] = []
            var start = lower
            for cut in 1..<parts {
                let bound = index.bounds[first + cut * step]
                items.append(try rangeItem(from: start, below: bound))
                start = bound
            }
            items.append(try rangeItem(from: start, below: upper))
            return items
        }
        // Few rows: read them and cut by count.
        let leaves = try leaves(from: lower, below: upper)
        if leaves.count <= Self.leafThreshold { return [RangeItem(upperBound: upper, mode: .leaves(leaves))] }
        let size = (leaves.count + parts - 1) / parts
        var items: [RangeItem] = []
        var start = 0
        while start < leaves.count {
            let end = min(start + size, leaves.count)
            let group = Array(leaves[start..<end])
            let bound = end < leaves.count ? leaves[end].key : upper
            if group.count <= Self.leafThreshold / 2 {
                items.append(RangeItem(upperBound: bound, mode: .leaves(group)))
            } else {
                let sum = group.reduce(Hash32.zero) { $0 + $1.leaf.term }
                items.append(RangeItem(upperBound: bound, mode: .fingerprint(Fingerprint(sum: sum, count: group.count))))
            }
            start = end
        }
        return items
    }

    private func rangeItem(from lower: [UInt8], below upper: [UInt8]?) throws -> RangeItem {
        let total = try sum(from: lower, below: upper)
        if total.count <= Self.leafThreshold / 2 {
            return RangeItem(upperBound: upper, mode: .leaves(try leaves(from: lower, below: upper)))
        }
        return RangeItem(upperBound: upper, mode: .fingerprint(Fingerprint(sum: total.sum, count: total.count)))
    }

    // MARK: - Records

    /// The records of the given keys that this device holds (tombstones included).
    func records(keys: [[UInt8]]) throws -> [WireRecord] {
        var records: [WireRecord] = []
        for key in keys {
            switch kind {
            case .causal:
                if let string = String(validating: key, as: UTF8.self), let record = try replica.causal(declaration.name).record(string) {
                    records.append(.causal(record))
                }
            case .lww:
                if let string = String(validating: key, as: UTF8.self), let record = try replica.lww(declaration.name).record(string) {
                    records.append(.lww(record))
                }
            case .appendOnly:
                if let string = String(validating: key, as: UTF8.self), let record = try replica.appendOnly(declaration.name).record(string) {
                    records.append(.appendOnly(record))
                }
            case .log:
                if let id = try? EventID(bytes: key), let event = try replica.log(declaration.name).event(id) { records.append(.event(event)) }
            case .messages:
                // A differing message ships its ops (DESIGN §7), orphans included.
                if let string = String(validating: key, as: UTF8.self), let record = try replica.messages(declaration.name).record(string) {
                    records.append(.message(record))
                }
            case .local:
                break
            }
        }
        return records
    }

    /// The live records with keys in `lower ..< upper` (the leaves' rows).
    func records(from lower: [UInt8], below upper: [UInt8]?) throws -> [WireRecord] {
        try records(keys: try replica.storedLeaves(declaration, from: lower, below: upper).map(\.key))
    }

    /// Checks every record first, then applies them all in one transaction: a
    /// frame with one bad record changes nothing.
    /// - Returns: how many records changed something.
    @discardableResult
    func apply(_ records: [WireRecord]) throws -> Int {
        try applyCounting(records).changed
    }

    /// ``apply(_:)``, also counting the merges that chose between concurrent writes.
    func applyCounting(_ records: [WireRecord]) throws -> (changed: Int, conflicts: Int) {
        guard !records.isEmpty else { return (0, 0) }
        for record in records {
            switch (kind, record) {
            case (.causal, .causal(let record)): try record.validate()
            case (.lww, .lww(let record)): try record.validate()
            case (.log, .event(let event)): try event.validate()
            case (.appendOnly, .appendOnly(let record)): try record.validate()
            case (.messages, .message(let record)): try record.validate()
            default: throw ReplicaError(.invalidRecord, "a record of another kind arrived for \(kind) namespace \(declaration.name)")
            }
        }
        return try replica.write {
            var changed = 0
            var conflicts = 0
            for record in records {
                let outcome: MergeOutcome
                switch record {
                case .causal(let record): outcome = try replica.causal(declaration.name).apply(record)
                case .lww(let record): outcome = try replica.lww(declaration.name).apply(record)
                case .event(let event): outcome = try replica.log(declaration.name).apply(event)
                case .appendOnly(let record): outcome = try replica.appendOnly(declaration.name).apply(record)
                case .message(let record): outcome = try replica.messages(declaration.name).apply(record)
                }
                if outcome.effect != .unchanged { changed += 1 }
                if outcome.conflict != nil { conflicts += 1 }
            }
            return (changed, conflicts)
        }
    }

    // MARK: - Tombstones (000 §4: the whole set travels, unscoped)

    /// Applies a peer's tombstones (checked first, applied in one transaction).
    /// - Returns: how many rows changed, how many merges chose between concurrent
    ///   writes, and the tombstones this device holds differently afterwards
    ///   (merged vectors): what the peer lacks of them.
    func applyTombstones(_ records: [WireRecord]) throws -> (changed: Int, conflicts: Int, differing: [WireRecord]) {
        switch kind {
        case .causal:
            var tombstones: [CausalRecord] = []
            for record in records {
                guard case .causal(let tombstone) = record, tombstone.isTombstone else {
                    throw ReplicaError(.invalidRecord, "the tombstone set of \(declaration.name) holds a live row or a record of another kind")
                }
                try tombstone.validate()
                tombstones.append(tombstone)
            }
            let result = try replica.causal(declaration.name).applyTombstones(tombstones)
            return (result.changed, result.conflicts, result.differing.map { .causal($0) })
        default:
            for record in records {
                guard case .lww(let tombstone) = record, tombstone.isDeleted else {
                    throw ReplicaError(.invalidRecord, "the tombstone set of \(declaration.name) holds a live row or a record of another kind")
                }
            }
            let (changed, conflicts) = try applyCounting(records)
            let received = Set(records.map { "\($0)" })
            let mine = try self.records(keys: records.map(\.sortKey))
            let differing = mine.filter { record in
                guard case .lww(let held) = record, held.isDeleted else { return false }
                return !received.contains("\(record)")
            }
            return (changed, conflicts, differing)
        }
    }

    /// This device's tombstones whose keys are not among `keys`.
    func tombstones(notIn keys: Set<[UInt8]>) throws -> [WireRecord] {
        switch kind {
        case .causal:
            let missing = try replica.causal(declaration.name).tombstoneKeys().map { Array($0.utf8) }.filter { !keys.contains($0) }
            return try records(keys: missing)
        case .lww:
            return try tombstones().filter { !keys.contains($0.sortKey) }
        default:
            return []
        }
    }

    /// Whether this device's tombstone set differs from the one `theirs` fingerprints.
    /// Counts are compared first: a different count settles it without hashing the set.
    func tombstonesDiffer(from theirs: Fingerprint) throws -> Bool {
        let count: Int =
            switch kind {
            case .causal: try replica.causal(declaration.name).tombstoneCount()
            case .lww: try replica.lww(declaration.name).tombstoneCount()
            default: 0
            }
        if UInt64(count) != theirs.count { return true }
        return try tombstoneFingerprint() != theirs
    }


    func tombstoneFingerprint() throws -> Fingerprint? {
        switch kind {
        case .causal:
            let set = try replica.causal(declaration.name).tombstoneFingerprint()
            return Fingerprint(sum: set.sum, count: set.count)
        case .lww:
            let set = try replica.lww(declaration.name).tombstoneFingerprint()
            return Fingerprint(sum: set.sum, count: set.count)
        default:
            return nil
        }
    }

    func tombstones() throws -> [WireRecord] {
        switch kind {
        case .causal: try replica.causal(declaration.name).tombstones().map { .causal($0) }
        case .lww: try replica.lww(declaration.name).tombstones().map { .lww($0) }
        default: []
        }
    }
}
