import SteleSQL

/// An append-only `log` namespace (000 §1-3) with erasure (DESIGN §4, beyond the seed).
///
/// Events are inserted if absent, never edited. ``bury(_:)`` writes a tombstone
/// event for a group, and ``live(group:)`` (the only read) returns events minus
/// markers minus everything a marker buries, whatever order they arrived in.
/// Beyond the seed, buried events are also purged from disk, and an arriving
/// event of a buried group is never stored.
public struct EventLog {
    let replica: Replica
    public let declaration: NamespaceDeclaration

    public var name: String { declaration.name }
    private var table: String { declaration.table }

    // MARK: - Reads: live() is the only read (000 §2)

    /// Events not buried and not markers, in (timestamp, id) order.
    /// 000 §3: the buried set is computed from the whole log first, then filtered,
    /// so the result never depends on arrival order.
    private var liveSelect: String {
        """
        SELECT e.id, e.grp, e.body, e.ts, e.writer FROM \(table) e
        WHERE e.marker = 0 AND NOT EXISTS (SELECT 1 FROM \(table) m WHERE m.grp = e.grp AND m.marker = 1)
        """
    }

    /// The live events, of one group or of all, oldest first.
    public func live(group: String? = nil) throws -> [LogEvent] {
        if let group {
            return try replica.connection.query(liveSelect + " AND e.grp = ?1 ORDER BY e.ts, e.id", [.text(group)]) { try decodeLive($0) }
        }
        return try replica.connection.query(liveSelect + " ORDER BY e.ts, e.id") { try decodeLive($0) }
    }

    /// The number of live events.
    public func count() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM (\(liveSelect))") ?? 0)
    }

    /// Whether a tombstone marker buries `group`.
    public func isBuried(_ group: String) throws -> Bool {
        try replica.connection.queryFirst(
            "SELECT 1 FROM \(table) WHERE grp = ? AND marker = 1 LIMIT 1", [.text(group)]) { _ in true } ?? false
    }

    /// The number of tombstone markers retained.
    public func tombstoneCount() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table) WHERE marker = 1") ?? 0)
    }

    /// How many ordinary events of `group` are physically stored, buried or not
    /// (with erasure this is zero for a buried group).
    public func storedEventCount(group: String) throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table) WHERE grp = ? AND marker = 0", [.text(group)]) ?? 0)
    }

    // MARK: - Local writes

    /// Appends a new event to `group`.
    /// - Returns: the new event's id.
    /// - Throws: ``ReplicaError`` `groupBuried` if the group was buried (the event
    ///   would be erased at once, so it is refused instead); size errors.
    @discardableResult
    public func append(group: String, body: [UInt8]) throws -> EventID {
        try Limits.checkKey(group, "group")
        try Limits.checkValue(body)
        return try replica.operation {
            guard try !isBuried(group) else {
                throw ReplicaError(.groupBuried, "group \(group) of \(name) was deleted; its events are erased and new ones are refused. Use a new group")
            }
            let event = LogEvent(
                id: EventID.random(using: &replica.random), group: group, kind: .event(body: body),
                stamp: WriteStamp(timestamp: replica.nextTimestamp(), writer: replica.device))
            try insert(event)
            replica.emit(ChangeEvent(namespace: name, subject: .event(id: event.id, group: group), kind: .inserted, origin: .local))
            return event.id
        }
    }

    /// Deletes `group`: writes a tombstone marker first, then erases the group's
    /// events (000 §2: "the marker goes in before the rows come out").
    /// - Returns: the marker's id, or `nil` if the group was already buried.
    @discardableResult
    public func bury(_ group: String) throws -> EventID? {
        try Limits.checkKey(group, "group")
        return try replica.operation {
            guard try !isBuried(group) else { return nil }
            let marker = LogEvent(
                id: EventID.random(using: &replica.random), group: group, kind: .marker,
                stamp: WriteStamp(timestamp: replica.nextTimestamp(), writer: replica.device))
            try insert(marker)
            try purge(group)
            replica.emit(ChangeEvent(namespace: name, subject: .group(group), kind: .deleted, origin: .local))
            return marker.id
        }
    }

    // MARK: - Sync

    /// Every stored event and marker (what sync ships), in id order.
    public func events() throws -> [LogEvent] {
        try replica.connection.query("SELECT id, grp, marker, body, ts, writer FROM \(table) ORDER BY id") {
            try decodeStored($0)
        }
    }

    /// The stored event or marker with this id, if any.
    public func event(_ id: EventID) throws -> LogEvent? {
        try replica.connection.queryFirst("SELECT id, grp, marker, body, ts, writer FROM \(table) WHERE id = ?", [.blob(id.bytes)]) {
            try decodeStored($0)
        }
    }

    /// Applies a remote event insert-if-absent (000 §1), with erasure: an event
    /// of a buried group is not stored, and a marker purges what it buries.
    /// - Throws: ``ReplicaError`` `invalidRecord` for a malformed event (nothing changes).
    @discardableResult
    public func apply(_ remote: LogEvent) throws -> MergeOutcome {
        try remote.validate()
        return try replica.operation {
            replica.observe(remote.stamp.timestamp)
            let exists = try replica.connection.queryFirst(
                "SELECT 1 FROM \(table) WHERE id = ?", [.blob(remote.id.bytes)]) { _ in true } ?? false
            if exists { return .unchanged }
            let buried = try isBuried(remote.group)
            let outcome: MergeOutcome
            switch remote.kind {
            case .event:
                guard !buried else { return MergeOutcome(.discarded) }
                try insert(remote)
                outcome = MergeOutcome(.inserted)
                replica.emitOutcome(outcome, namespace: name, subject: .event(id: remote.id, group: remote.group))
            case .marker:
                try insert(remote)
                try purge(remote.group)
                outcome = MergeOutcome(buried ? .recorded : .deleted)
                replica.emitOutcome(outcome, namespace: name, subject: .group(remote.group))
            }
            return outcome
        }
    }

    // MARK: - Storage

    private func insert(_ event: LogEvent) throws {
        let leaf = replica.hasher.leaf(LeafEncoding.event(event))
        try replica.connection.execute(
            "INSERT INTO \(table) (id, grp, marker, body, ts, writer, leaf, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .blob(event.id.bytes), .text(event.group), .integer(event.isMarker ? 1 : 0), .blob(event.body),
                .integer(Int64(bitPattern: event.stamp.timestamp.rawValue)),
                .integer(try replica.devices.intern(event.stamp.writer, replica.connection)), .blob(leaf.bytes),
                event.isMarker ? .integer(replica.nextTombstoneSequence()) : .null,
            ])
        if replica.maintainsDigests { replica.recordLeaf(declaration, key: event.id.bytes, leaf: leaf, added: true) }
    }

    /// Erases the ordinary events of a buried group (beyond the seed: erasure, not
    /// only invisibility), taking their leaves out of the digest: the digest's
    /// leaves are live events and markers, never buried events.
    private func purge(_ group: String) throws {
        let purged = try replica.connection.query("SELECT id, leaf FROM \(table) WHERE grp = ? AND marker = 0", [.text(group)]) { row in
            (try decodeID(row.blob(0)), try replica.storedLeaf(row.blob(1), "an event of \(name)"))
        }
        guard !purged.isEmpty else { return }
        try replica.connection.execute("DELETE FROM \(table) WHERE grp = ? AND marker = 0", [.text(group)])
        if replica.maintainsDigests {
            for (id, leaf) in purged { replica.recordLeaf(declaration, key: id.bytes, leaf: leaf, added: false) }
        }
    }

    private func decodeLive(_ row: Statement) throws -> LogEvent {
        LogEvent(
            id: try decodeID(row.blob(0)), group: row.text(1), kind: .event(body: row.blob(2)),
            stamp: WriteStamp(timestamp: HybridTimestamp(rawValue: UInt64(row.int64(3))), writer: try replica.deviceID(at: row.int64(4))))
    }

    private func decodeStored(_ row: Statement) throws -> LogEvent {
        LogEvent(
            id: try decodeID(row.blob(0)), group: row.text(1), kind: row.int64(2) == 1 ? .marker : .event(body: row.blob(3)),
            stamp: WriteStamp(timestamp: HybridTimestamp(rawValue: UInt64(row.int64(4))), writer: try replica.deviceID(at: row.int64(5))))
    }

    private func decodeID(_ bytes: [UInt8]) throws -> EventID {
        do { return try EventID(bytes: bytes) } catch {
            throw ReplicaError(.corrupt, "a stored event id in \(name) is malformed; the file is damaged", cause: error)
        }
    }
}
