/// One numbered schema change.
public struct Migration: Sendable {
    /// The schema version this migration produces: 1 for the first, then 2, 3, ...
    public let version: Int
    /// A short name for logs and errors.
    public let name: String
    let body: @Sendable (Connection) throws -> Void

    public init(version: Int, name: String, _ body: @escaping @Sendable (Connection) throws -> Void) {
        precondition(version >= 1, "migration versions start at 1")
        self.version = version
        self.name = name
        self.body = body
    }
}

/// The error a ``Migrator`` throws when a file cannot be brought to the current schema.
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    /// The schema version found in the file (`PRAGMA user_version`).
    public let foundVersion: Int
    /// The newest version this build knows.
    public let knownVersion: Int
    /// What went wrong and what to do.
    public let message: String

    public var description: String { message }
}

/// Applies numbered migrations in order, each in its own transaction together
/// with the version bump (`PRAGMA user_version`), so a failed migration leaves
/// the file at the previous version.
public struct Migrator: Sendable {
    /// The migrations, in version order.
    public let migrations: [Migration]

    /// - Precondition: versions are exactly 1, 2, 3, ... in order.
    public init(_ migrations: [Migration]) {
        for (offset, migration) in migrations.enumerated() {
            precondition(migration.version == offset + 1, "migration \(migration.name) is numbered \(migration.version), expected \(offset + 1)")
        }
        self.migrations = migrations
    }

    /// The newest schema version.
    public var latestVersion: Int { migrations.count }

    /// The schema version stored in the file.
    public static func version(of connection: Connection) throws -> Int {
        Int(try connection.scalarInt("PRAGMA user_version") ?? 0)
    }

    /// Brings the file up to `target` (the latest by default).
    /// - Returns: the version found before migrating.
    /// - Throws: ``MigrationError`` if the file is newer than this build knows (it is
    ///   not touched), or ``SQLiteError`` if a migration fails (that migration is rolled back).
    @discardableResult
    public func migrate(_ connection: Connection, upTo target: Int? = nil) throws -> Int {
        let target = target ?? latestVersion
        precondition((0...latestVersion).contains(target), "no migration \(target)")
        let found = try Self.version(of: connection)
        guard found <= latestVersion else {
            throw MigrationError(
                foundVersion: found, knownVersion: latestVersion,
                message: "the file's schema version is \(found), newer than the \(latestVersion) this build knows; open it with a newer Stele")
        }
        for migration in migrations where migration.version > found && migration.version <= target {
            try connection.transaction {
                try migration.body(connection)
                try connection.executeScript("PRAGMA user_version = \(migration.version)")
            }
        }
        return found
    }
}
