import SteleHub
import Dispatch
import Foundation
import SteleSQL
import Synchronization

/// The hub's storage in PostgreSQL, for hubs that outgrow one machine: several
/// hub processes may share one database (DESIGN.md §8.4).
///
/// A small pool of libpq connections serves ``transaction(_:)``; one more
/// connection sends ``announce(_:)``'s notifications after the commits, and
/// one more (started by ``listen(_:)``) receives every process's. A connection
/// that failed is reset before its next use, so the hub recovers without a
/// restart once PostgreSQL is back (meanwhile it gets
/// ``HubStorageError/Code/unavailable``, and the hub answers 503).
///
/// A failed statement aborts its PostgreSQL transaction: catching its error
/// inside the body cannot save the transaction, which then throws that first
/// error instead of committing.
public final class PostgresHubStorage: HubStorage {
    /// Always ``HubBackend/postgresql``.
    public var backend: HubBackend { .postgresql }

    let shared: PostgresShared

    /// Connects `connections` times to `url` and brings the schema up to
    /// ``HubSchema/latestVersion`` (each migration in one transaction with its
    /// version row, under an advisory lock, so hub processes starting together
    /// do not race).
    /// - Parameters:
    ///   - url: a libpq connection string, e.g. `postgresql://hub@db.example/stele`.
    ///   - connections: how many transactions may run at once.
    ///   - checkoutTimeoutSeconds: how long a transaction waits for a free
    ///     connection before it fails with `unavailable`.
    /// - Throws: ``HubStorageError`` `unavailable` when the server cannot be
    ///   reached, `newerSchema` when the database was migrated by a newer build
    ///   (then nothing was changed); ``PostgresError`` when a migration failed.
    public init(url: String, connections: Int = 4, checkoutTimeoutSeconds: Double = 5, migrations: [HubMigration] = HubSchema.migrations) throws {
        precondition(connections > 0, "a pool needs at least one connection")
        var opened: [PostgresConnection] = []
        for _ in 0..<connections {
            do {
                opened.append(try PostgresConnection(url: url))
            } catch let error as PostgresError {
                throw PostgresShared.storageError(error)
            }
        }
        if let problem = try PostgresShared.engineProblem(opened[0]) {
            // The connections close as `opened` goes.
            throw HubStorageError(.unsupportedEngine, problem)
        }
        try PostgresShared.migrate(opened[0], migrations)
        shared = PostgresShared(url: url, connections: opened, checkoutTimeoutSeconds: checkoutTimeoutSeconds)
        shared.startNotifier()
    }

    deinit { shared.close() }

    /// Runs `body` in one READ COMMITTED transaction on a pooled connection and
    /// commits it; a throw rolls it back. Serialization failures and deadlocks
    /// run `body` again, up to ``PostgresShared/maximumAttempts`` times.
    /// - Throws: what `body` threw; ``HubStorageError`` `conflict` for a
    ///   unique violation, `unavailable` when PostgreSQL cannot be reached (or
    ///   kept refusing for conflicts, or every connection stayed busy);
    ///   ``PostgresError`` for any other database error.
    public func transaction<T>(_ body: (any HubSQL) throws -> T) throws -> T {
        let connection = try shared.checkout()
        defer { shared.checkin(connection) }
        return try PostgresShared.transaction(on: connection, body)
    }

    /// Queues a notification of `key` for every hub process on this database
    /// (this one included); a background thread sends the queued keys together,
    /// outside any transaction. Call it after the commit.
    public func announce(_ key: String) {
        shared.announce(key)
    }

    /// Delivers every announced key to `listener`, on the listener thread; after
    /// the channel was lost and is back, delivers `"*"`. When PostgreSQL is
    /// reachable, listening has begun when this returns.
    public func listen(_ listener: @escaping @Sendable (String) -> Void) {
        shared.listen(listener)
    }

    /// The cluster's system identifier and timeline (`pg_control_system()`,
    /// `pg_control_checkpoint()`); `nil` when the role may not read them.
    public func physicalIdentity() -> String? {
        try? transaction { sql -> String? in
            let rows = try sql.query(
                "SELECT CAST((SELECT system_identifier FROM pg_control_system()) AS TEXT), CAST((SELECT timeline_id FROM pg_control_checkpoint()) AS TEXT)", [])
            guard let row = rows.first, row.count == 2, case .text(let system) = row[0], case .text(let timeline) = row[1] else { return nil }
            return "postgresql-cluster \(system) timeline \(timeline)"
        } ?? nil
    }

    /// Stops the background threads (sending the notifications still queued)
    /// and closes every connection; later transactions throw `unavailable`.
    public func close() {
        shared.close()
    }
}
