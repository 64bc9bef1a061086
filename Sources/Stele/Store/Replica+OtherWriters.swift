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
}
