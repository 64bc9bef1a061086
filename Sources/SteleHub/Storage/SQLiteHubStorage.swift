import Foundation
import SteleSQL
import Synchronization

/// The hub on one SQLite file (the default: `DIR/hub.sqlite`). One connection
/// behind a mutex: SQLite serializes writers anyway, and the hub's
/// transactions are a few short statements. WAL with `synchronous=NORMAL`: a
/// committed write survives the hub process being killed (a `202` frame is on
/// disk in the WAL); after a power loss the last commits before the checkpoint
/// may be lost, the trade WAL is designed for.
///
/// `@unchecked Sendable`: the connection is touched only under `lock`, by one
/// thread at a time, and never escapes a call (a `Mutex` cannot hand a
/// non-`Sendable` connection to the transaction's body).
public final class SQLiteHubStorage: HubStorage, @unchecked Sendable {  // safe: the connection is touched only under `lock`, one thread at a time (above)
    public let backend = HubBackend.sqlite
    /// The file's path.
    public let path: String

    private let lock = NSLock()
    private var connection: Connection?
    /// The shared dialect's statements as SQLite reads them, rewritten once per
    /// text (the service's statements are literals, so this stays small).
    /// Touched only under `lock`.
    private var rewritten: [String: String] = [:]
    private let listeners = Mutex<[@Sendable (String) -> Void]>([])

    /// Opens (creating if needed) the file and brings its schema up to date.
    /// - Throws: ``HubStorageError`` `newerSchema` when the file is from a newer
    ///   build (nothing is touched), `unavailable` when it cannot be opened.
    public init(path: String, migrations: [HubMigration] = HubSchema.migrations) throws {
        self.path = path
        let opened: Connection
        do {
            opened = try Connection(path: path)
        } catch {
            if let damage = Self.damage(path, error) { throw damage }
            throw HubStorageError(.unavailable, "cannot open the hub's database \(path): \(error); check the --data directory exists and is writable")
        }
        try Self.migrate(opened, path: path, migrations)
        do {
            // Pages a compaction frees go back to the file system (`reclaimSpace`). A file
            // made before this setting takes it with one VACUUM, once.
            if try opened.scalarInt("PRAGMA auto_vacuum") != 2 {
                try opened.executeScript("PRAGMA auto_vacuum = INCREMENTAL")
                try opened.executeScript("VACUUM")
            }
        } catch {
            throw HubStorageError(.unavailable, "cannot set up the hub's database \(path) to give freed pages back: \(error)")
        }
        connection = opened
    }

    /// Gives the pages the deletions freed back to the file system.
    public func reclaimSpace() {
        lock.lock()
        defer { lock.unlock() }
        try? connection?.executeScript("PRAGMA incremental_vacuum")
    }

    /// The schema version stored in the file at `path` (0 before the first migration).
    public static func version(_ connection: Connection) throws -> Int {
        try connection.executeScript(HubSchema.versionTable)
        return Int(try connection.scalarInt("SELECT max(version) FROM hub_schema") ?? 0)
    }

    private static func migrate(_ connection: Connection, path: String, _ migrations: [HubMigration]) throws {
        do {
            try connection.transaction {
                let found = try version(connection)
                guard found <= migrations.count else {
                    throw HubStorageError(.newerSchema, "the hub's database \(path) has schema version \(found), newer than the \(migrations.count) this build knows; run a newer stele-hub")
                }
                for migration in migrations where migration.version > found {
                    for statement in migration.sql(for: .sqlite) { try connection.executeScript(statement) }
                    try connection.execute("DELETE FROM hub_schema")
                    try connection.execute("INSERT INTO hub_schema (version) VALUES (?)", [.integer(Int64(migration.version))])
                }
            }
        } catch let error as HubStorageError {
            throw error
        } catch {
            if let damage = damage(path, error) { throw damage }
            throw HubStorageError(.unavailable, "cannot migrate the hub's database \(path): \(error)")
        }
    }

    /// A file that is damaged or no database at all, said as such: no directory
    /// or permission is at fault, and the way on is a backup.
    private static func damage(_ path: String, _ error: any Error) -> HubStorageError? {
        guard let error = error as? SQLiteError, error.code.primary == .corrupt || error.code.primary == .notADatabase else { return nil }
        return HubStorageError(
            .damaged,
            "the hub's database \(path) is damaged or is not a database (\(error)); put back a backup of it, then run stele-hub restored --data DIR")
    }

    public func transaction<T>(_ body: (any HubSQL) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        do {
            guard let connection else { throw HubStorageError(.unavailable, "the hub's storage is closed") }
            do {
                return try connection.transaction { try body(Statements(connection: connection, storage: self)) }
            } catch let error as SQLiteError {
                if error.code.primary == .constraint { throw HubStorageError(.conflict, "\(error)") }
                if error.code.primary == .corrupt || error.code.primary == .notADatabase {
                    throw HubStorageError(.damaged, "the hub's database \(path) is damaged: \(error)")
                }
                throw HubStorageError(.unavailable, "the hub's database \(path) failed: \(error)")
            }
        }
    }

    /// One process, one connection: an announcement goes straight to the listeners.
    public func announce(_ key: String) {
        for listener in listeners.withLock({ $0 }) { listener(key) }
    }

    public func listen(_ listener: @escaping @Sendable (String) -> Void) {
        listeners.withLock { $0.append(listener) }
    }

    public func close() {
        lock.lock()
        connection = nil
        lock.unlock()
    }

    /// The statements of one transaction on the connection.
    private struct Statements: HubSQL {
        let connection: Connection
        /// The storage whose lock this transaction holds (for its rewrite cache).
        unowned let storage: SQLiteHubStorage

        func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
            try connection.execute(storage.sqlite(sql), arguments)
            return connection.changes
        }

        func query(_ sql: String, _ arguments: [SQLValue]) throws -> [[SQLValue]] {
            try connection.query(storage.sqlite(sql), arguments) { row in
                (0..<row.columnCount).map { row.value($0) }
            }
        }

        /// SQLite's write transactions are serial (`BEGIN IMMEDIATE`): nothing to lock.
        func lockAccount(_ account: String) throws {}
    }

    /// `sql` in SQLite's numbering, from the cache. Called under `lock`.
    private func sqlite(_ sql: String) -> String {
        if let known = rewritten[sql] { return known }
        let text = Self.numbered(sql)
        rewritten[sql] = text
        return text
    }

    /// `$1` → `?1`: SQLite numbers `$name` parameters in order of appearance,
    /// `?N` by the number written, which is what the shared dialect means.
    static func numbered(_ sql: String) -> String {
        var bytes = Array(sql.utf8)
        for index in bytes.indices.dropLast() where bytes[index] == UInt8(ascii: "$") && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index + 1]) {
            bytes[index] = UInt8(ascii: "?")
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
