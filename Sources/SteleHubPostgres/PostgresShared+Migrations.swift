import SteleHub
import SteleSQL

extension PostgresShared {
    /// The `pg_advisory_xact_lock` key that serializes hub processes migrating one database ("STELEHUB").
    static let migrationLockKey: Int64 = 0x5354_454C_4548_5542

    /// Brings the schema up to the last of `migrations`: each migration runs
    /// in its own transaction together with its version row, under the
    /// advisory lock, so a second process starting at once waits, then finds
    /// the work done.
    /// - Throws: ``HubStorageError`` `newerSchema` (nothing changed) when the
    ///   database is newer than this build; the storage errors of ``transaction(on:_:)``.
    static func migrate(_ connection: PostgresConnection, _ migrations: [HubMigration]) throws {
        while true {
            let finished = try transaction(on: connection) { sql -> Bool in
                _ = try sql.query("SELECT pg_advisory_xact_lock($1)", [.integer(migrationLockKey)])
                try sql.execute(HubSchema.versionTable, [])
                let current = try schemaVersion(sql)
                guard current <= migrations.count else {
                    throw HubStorageError(
                        .newerSchema,
                        "The database's hub schema is version \(current), newer than this build knows (\(migrations.count)); "
                            + "run a newer stele-hub against it (nothing was changed)"
                    )
                }
                guard current < migrations.count else { return true }
                let migration = migrations[current]
                precondition(migration.version == current + 1, "HubSchema.migrations must be numbered 1, 2, … in order")
                for statement in migration.sql(for: .postgresql) {
                    try sql.execute(statement, [])
                }
                try sql.execute("DELETE FROM hub_schema", [])
                try sql.execute("INSERT INTO hub_schema (version) VALUES ($1)", [.integer(Int64(migration.version))])
                return false
            }
            if finished { return }
        }
    }

    /// The version recorded in `hub_schema`, 0 for a database never migrated.
    static func schemaVersion(_ sql: any HubSQL) throws -> Int {
        let rows = try sql.query("SELECT COALESCE(MAX(version), 0) FROM hub_schema", [])
        guard case .integer(let version)? = rows.first?.first else {
            throw PostgresError(sqlState: "", message: "hub_schema holds no readable version", sql: "SELECT COALESCE(MAX(version), 0) FROM hub_schema")
        }
        return Int(version)
    }
}
