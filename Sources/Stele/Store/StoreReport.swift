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
        /// Bytes of keys, values and bookkeeping stored for the namespace.
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
}

extension Replica {
    /// Counts what the store holds. Reads only; works on a read-only store.
    public func report() throws -> StoreReport {
        var namespaces: [StoreReport.Namespace] = []
        for declaration in self.namespaces {
            let (live, tombstones, bytes) = try counts(declaration)
            namespaces.append(StoreReport.Namespace(name: declaration.name, kind: declaration.kind.rawValue, live: live, tombstones: tombstones, bytes: bytes))
        }
        let fileBytes = ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? NSNumber)?.intValue ?? 0)
        }
        return StoreReport(
            path: path, account: account.hex, device: device.hex, generation: generation,
            format: try Migrator.version(of: connection), fileBytes: fileBytes, namespaces: namespaces)
    }

    private func counts(_ declaration: NamespaceDeclaration) throws -> (Int, Int, Int) {
        let sql: String
        switch declaration.kind {
        case .causal:
            sql = """
                SELECT count(*) FILTER (WHERE tombstoned = 0), count(*) FILTER (WHERE tombstoned = 1),
                       coalesce(sum(length(CAST(key AS BLOB)) + coalesce(length(value), 0) + length(vv) + 8), 0)
                FROM causal_rows WHERE ns = ?
                """
        case .lww:
            sql = """
                SELECT count(*) FILTER (WHERE deleted = 0), count(*) FILTER (WHERE deleted = 1),
                       coalesce(sum(length(CAST(key AS BLOB)) + coalesce(length(value), 0) + 10), 0)
                FROM lww_rows WHERE ns = ?
                """
        case .log:
            // Live = events not buried; with erasure no buried event stays stored.
            sql = """
                SELECT count(*) FILTER (WHERE marker = 0 AND NOT EXISTS
                           (SELECT 1 FROM log_events m WHERE m.ns = e.ns AND m.grp = e.grp AND m.marker = 1)),
                       count(*) FILTER (WHERE marker = 1),
                       coalesce(sum(16 + length(CAST(grp AS BLOB)) + length(body) + 10), 0)
                FROM log_events e WHERE ns = ?
                """
        case .appendOnly:
            sql = "SELECT count(*), 0, coalesce(sum(length(CAST(key AS BLOB)) + length(value) + 10), 0) FROM append_only_rows WHERE ns = ?"
        case .local:
            sql = "SELECT count(*), 0, coalesce(sum(length(CAST(key AS BLOB)) + length(value)), 0) FROM local_rows WHERE ns = ?"
        }
        let row = try connection.queryFirst(sql, [.integer(declaration.id)]) { (Int($0.int64(0)), Int($0.int64(1)), Int($0.int64(2))) }
        return row ?? (0, 0, 0)
    }
}
