import SteleSQL

/// Writes through another handle (a second `Replica` on the same file, in this
/// process or another): what this handle keeps in memory about the file — its
/// counters, the device and namespace tables, the digests — must follow them,
/// or those writes would never be advertised and this handle would issue
/// counters the other had used (issue 14). SQLite's `data_version` tells when
/// someone else committed; a handle then reloads what it keeps and rebuilds its
/// digests from the stored leaves (``Replica/rebuildDigests()``: O(rows), 50 ms
/// per 100,000 rows, once per foreign commit seen, `sync.other_writers_catch_up`
/// in `stele bench`). Checked at the start of every write transaction (with the
/// write lock held) and by the reads a sync step starts from (digests,
/// declarations, a reconcile's namespace state).
extension Replica {
    /// Takes in what other handles committed since this one last looked.
    /// - Throws: `SQLiteError`, or ``ReplicaError`` `corrupt` for a damaged identity row.
    func catchUpWithOtherWriters() throws {
        guard followsOtherWriters else { return }
        let version = try connection.dataVersion()
        guard version != seenDataVersion else { return }
        let row = try connection.queryFirst("SELECT generation, own_counter, clock, tombstone_seq FROM replica WHERE id = 1") { row in
            (row.int64(0), row.int64(1), row.int64(2), row.int64(3))
        }
        guard let row else {
            throw ReplicaError(.corrupt, "the store at \(path) has lost its identity row; the file is damaged. Keep it for diagnosis and restore from a backup")
        }
        // Never backwards: what this handle issued stays issued.
        generation = UInt64(row.0)
        if UInt64(row.1) > ownCounter { ownCounter = UInt64(row.1) }
        hybridClock.observe(HybridTimestamp(rawValue: UInt64(row.2)))
        if UInt64(row.3) > tombstoneSequence { tombstoneSequence = UInt64(row.3) }
        collectedThrough = UInt64(try connection.scalarInt("SELECT collected_through FROM barrier WHERE id = 1") ?? 0)
        devices = try DeviceTable.load(connection)
        declared = try Self.loadNamespaces(connection)
        try rebuildDigests()
        seenDataVersion = version
    }

    /// The device a stored index stands for, catching up first if another
    /// handle interned it since this one loaded its table.
    func deviceID(at index: Int64) throws -> DeviceID {
        if let id = try? devices.id(at: index) { return id }
        try catchUpWithOtherWriters()
        return try devices.id(at: index)
    }
}

extension Replica {
    /// Takes in what other handles (another process's `stele put`, a second
    /// handle in this app) committed since this one last looked, and says whether
    /// there was anything: a runtime polls this (SQLite's `data_version`, no lock
    /// taken when nothing changed) to tell its node about writes it did not make.
    /// - Throws: `SQLiteError`, or ``ReplicaError`` `corrupt` for a damaged identity row.
    public func takeInOtherWriters() throws -> Bool {
        guard followsOtherWriters, try connection.dataVersion() != seenDataVersion else { return false }
        try catchUpWithOtherWriters()
        return true
    }
}

extension Replica {
    /// Where a conversation's two tables stand, as far as this handle can tell
    /// without reading them: the rows changed in them through this connection
    /// (committed or rolled back; counted by its temporary triggers,
    /// ``SteleSQL/Connection/countChanges(of:as:)``) and SQLite's `data_version`
    /// (other connections' commits). Equal states read alike: a read outside a
    /// transaction at one state holds at the next equal one. Only a change made
    /// behind SQLite's back (the file replaced under an open handle) would escape
    /// it, and a replica is reopened after that.
    struct OutboxState: Equatable {
        let changes: Int64
        let dataVersion: Int64
    }

    /// Messages that owe a delivery, each with where it stands in the outbox's
    /// order (``CachedOutbox/precedes(_:_:)``): its posting time and its key's UTF-8 bytes (SQLite's `BINARY` order and equality; Swift's
    /// `String` holds `é` as one character and as `e` with an accent equal).
    struct OwedMessages {
        var order: [(posted: Int64, key: [UInt8])] = []
        var records: [MessageRecord] = []
    }

    /// A conversation's last outbox read, and the state of its tables it holds at.
    struct CachedOutbox {
        var state: OutboxState
        private(set) var order: [(posted: Int64, key: [UInt8])]
        private(set) var records: [MessageRecord]

        init(state: OutboxState, owed: OwedMessages) {
            self.state = state
            order = owed.order
            records = owed.records
        }

        /// The outbox's order, as its query sorts (`ORDER BY posted, key`): by
        /// posting time, then by key as SQLite compares text (byte by byte, in
        /// UTF-8; not as Swift compares strings).
        static func precedes(_ a: (posted: Int64, key: [UInt8]), _ b: (posted: Int64, key: [UInt8])) -> Bool {
            a.posted != b.posted ? a.posted < b.posted : a.key.lexicographicallyPrecedes(b.key)
        }

        /// Drops every message of `keys` and puts in `owed` (what those messages
        /// owe now, read again, in any order), each at its place in the order.
        mutating func replace(_ keys: Set<[UInt8]>, with owed: OwedMessages) {
            if !keys.isEmpty, order.contains(where: { keys.contains($0.key) }) {
                var keptOrder: [(posted: Int64, key: [UInt8])] = []
                var keptRecords: [MessageRecord] = []
                keptOrder.reserveCapacity(order.count)
                keptRecords.reserveCapacity(records.count)
                for index in order.indices where !keys.contains(order[index].key) {
                    keptOrder.append(order[index])
                    keptRecords.append(records[index])
                }
                order = keptOrder
                records = keptRecords
            }
            for (place, record) in zip(owed.order, owed.records) {
                let index = Self.insertionIndex(of: place, in: order)
                order.insert(place, at: index)
                records.insert(record, at: index)
            }
        }

        private static func insertionIndex(of place: (posted: Int64, key: [UInt8]), in order: [(posted: Int64, key: [UInt8])]) -> Int {
            var low = 0
            var high = order.count
            while low < high {
                let middle = (low + high) / 2
                if precedes(order[middle], place) { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }
}
