import Foundation
import SteleSQL

/// A ``LedgerSource`` over a plain SQLite table, `entities (kind, id, payload)`,
/// with the store's identity in `store_meta`: an app store as simple as a store
/// gets, for tests, the simulator's ledger clients, the benchmark, and apps whose
/// data already fits one table.
///
/// The app writes with ``put(kind:id:payload:)`` and hard-deletes with
/// ``delete(kind:id:)`` (or with its own SQL on the same file); the ledger learns
/// of both at its next pass.
public final class SQLiteTableSource: LedgerSource {
    public let path: String
    let connection: Connection

    /// Opens the store at `path`, creating it (and its identity, a random UUID) when missing.
    public init(path: String) throws {
        self.path = path
        connection = try Connection(path: path, mode: .readWriteCreate, configuration: .standard)
        try connection.transaction {
            try connection.executeScript(
                """
                CREATE TABLE IF NOT EXISTS entities (kind TEXT NOT NULL, id TEXT NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS store_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                """)
            try connection.execute("INSERT INTO store_meta (name, value) VALUES ('identity', ?) ON CONFLICT (name) DO NOTHING", [.text(UUID().uuidString)])
        }
    }

    // MARK: - The app's writes

    public func put(kind: String, id: String, payload: [UInt8]) throws {
        try connection.execute(
            "INSERT INTO entities (kind, id, payload) VALUES (?, ?, ?) ON CONFLICT (kind, id) DO UPDATE SET payload = excluded.payload",
            [.text(kind), .text(id), .blob(payload)])
    }

    /// A hard delete: the row goes, and nothing says it was there (the ledger's stamp does).
    public func delete(kind: String, id: String) throws {
        try connection.execute("DELETE FROM entities WHERE kind = ? AND id = ?", [.text(kind), .text(id)])
    }

    /// Every entity, by kind and id.
    public func all() throws -> [LedgerEntity] {
        try connection.query("SELECT kind, id, payload FROM entities ORDER BY kind, id") { LedgerEntity(kind: $0.text(0), id: $0.text(1), payload: $0.blob(2)) }
    }

    /// Empties the store, as an app's reinstall or a user's "erase all data" does:
    /// with a new identity (a store made anew), or keeping the old one (an app
    /// that keeps its store's id somewhere the wipe did not reach).
    public func wipe(keepingIdentity: Bool = false) throws {
        try connection.transaction {
            try connection.execute("DELETE FROM entities")
            if !keepingIdentity { try connection.execute("UPDATE store_meta SET value = ? WHERE name = 'identity'", [.text(UUID().uuidString)]) }
        }
    }

    /// Runs `body` in one transaction of the store (a batch of the app's writes).
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try connection.transaction(.immediate, body)
    }

    // MARK: - LedgerSource

    public func storeIdentity() throws -> String {
        guard let identity = try connection.scalarText("SELECT value FROM store_meta WHERE name = 'identity'") else {
            throw LedgerError(.source, "the store \(path) has no identity")
        }
        return identity
    }

    public func forEachEntity(_ visit: (LedgerEntity) throws -> Void) throws {
        let statement = try connection.cached(literal: "SELECT kind, id, payload FROM entities")
        statement.reset()
        defer { statement.reset() }
        while try statement.step() {
            try visit(LedgerEntity(kind: statement.text(0), id: statement.text(1), payload: statement.blob(2)))
        }
    }

    public func payload(kind: String, id: String) throws -> [UInt8]? {
        try connection.queryFirst("SELECT payload FROM entities WHERE kind = ? AND id = ?", [.text(kind), .text(id)]) { $0.blob(0) }
    }

    public func apply(_ changes: [LedgerChange]) throws {
        try connection.transaction(.immediate) {
            for change in changes {
                switch change {
                case .upsert(let kind, let id, let payload): try put(kind: kind, id: id, payload: payload)
                case .delete(let kind, let id): try delete(kind: kind, id: id)
                }
            }
        }
    }
}
