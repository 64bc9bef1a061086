import Foundation
import SteleSQL

/// What `stele inspect` shows of a store: identity, generation and, per namespace,
/// live rows, retained tombstones and stored bytes.
public struct StoreReport: Sendable, Codable, Equatable {
    public struct Namespace: Sendable, Codable, Equatable {
        public let name: String
        public let kind: String
        /// Rows (or live events) a read returns.
        public let live: Int
        /// Retained tombstones: deleted rows' bookkeeping, `lww` deletes, `log` markers.
        public let tombstones: Int
        /// Bytes on disk of the pages holding the namespace's table.
        public let bytes: Int
    }

    public let path: String
    public let account: String
    public let device: String
    public let generation: UInt64
    public let format: Int
    /// The store's size on disk: the database file plus its write-ahead log.
    public let fileBytes: Int
    public let namespaces: [Namespace]
    /// When this device last collected tombstones (wall-clock ms), if ever.
    public let lastCollectionMilliseconds: Int64?
    /// How many it dropped then.
    public let lastCollectionCount: Int
    /// The barrier round this device acked last (its nonce, in hex), if any.
    public let ackedRound: String?
    /// The generation that round moves to.
    public let ackedGeneration: UInt64?
}

extension Replica {
    /// Counts what the store holds. Reads only; works on a read-only store.
    /// What SQLite's `quick_check` finds wrong with the file (at most 10 lines), or
    /// nothing when it is sound. It reads every page: for `stele inspect`, not for
    /// every open. A store can be damaged in pages no command of the moment reads.
    public func integrityProblems() throws -> [String] {
        let lines = try connection.query("PRAGMA quick_check(10)") { $0.text(0) }
        return lines == ["ok"] ? [] : lines
    }

    public func report() throws -> StoreReport {
        var namespaces: [StoreReport.Namespace] = []
        for declaration in self.namespaces {
            let (live, tombstones) = try counts(declaration)
            let bytes = try tableBytes(declaration.table)
            namespaces.append(StoreReport.Namespace(name: declaration.name, kind: declaration.kind.rawValue, live: live, tombstones: tombstones, bytes: bytes))
        }
        let fileBytes = ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? NSNumber)?.intValue ?? 0)
        }
        let collection = try lastCollection()
        let ack = try lastAck()
        return StoreReport(
            path: path, account: account.hex, device: device.hex, generation: generation,
            format: try Migrator.version(of: connection), fileBytes: fileBytes, namespaces: namespaces,
            lastCollectionMilliseconds: collection?.milliseconds, lastCollectionCount: collection?.count ?? 0,
            ackedRound: ack.map { Hex.encode($0.round.bytes) }, ackedGeneration: ack?.generation)
    }

    /// Retained tombstones across every namespace: the report's `tombstones`
    /// summed, without measuring pages or files (cheap enough to ask after every write).
    public func tombstoneCount() throws -> Int {
        try namespaces.reduce(0) { total, declaration in total + (try counts(declaration)).tombstones }
    }

    private func counts(_ declaration: NamespaceDeclaration) throws -> (live: Int, tombstones: Int) {
        let table = declaration.table
        let sql: String
        switch declaration.kind {
        case .causal:
            sql = "SELECT count(*) FILTER (WHERE tombstoned = 0), count(*) FILTER (WHERE tombstoned = 1) FROM \(table)"
        case .lww:
            sql = "SELECT count(*) FILTER (WHERE deleted = 0), count(*) FILTER (WHERE deleted = 1) FROM \(table)"
        case .log:
            // Live = events no marker buries; with erasure no buried event stays stored.
            sql = """
                SELECT count(*) FILTER (WHERE marker = 0 AND NOT EXISTS
                           (SELECT 1 FROM \(table) m WHERE m.grp = e.grp AND m.marker = 1)),
                       count(*) FILTER (WHERE marker = 1)
                FROM \(table) e
                """
        case .messages:
            sql = "SELECT count(*) FILTER (WHERE scope = 0), count(*) FILTER (WHERE scope > 0) FROM \(table)"
        case .appendOnly, .local:
            sql = "SELECT count(*), 0 FROM \(table)"
        }
        return try connection.queryFirst(sql) { (Int($0.int64(0)), Int($0.int64(1))) } ?? (0, 0)
    }

    /// Bytes of the pages holding a table and its indexes, from SQLite's `dbstat`
    /// (compiled into Debian's SQLite); 0 if this SQLite lacks it.
    private func tableBytes(_ table: String) throws -> Int {
        do {
            return Int(try connection.scalarInt("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN (?1, ?1 || '_by_group', ?1 || '_ops')", [.text(table)]) ?? 0)
        } catch let error as SQLiteError where error.code.primary == .error {
            return 0
        }
    }
}
