import CSQLite

extension Connection {
    /// Copies this database, page by page, into the file at `path` with SQLite's
    /// online-backup API. The destination is created or replaced; this connection
    /// stays usable throughout. A device backup in the simulator is exactly this.
    /// - Throws: ``SQLiteError`` if the destination cannot be opened or written.
    public func backup(to path: String) throws {
        let destination = try Connection(path: path, mode: .readWriteCreate, configuration: nil, faults: faults)
        try Connection.copy(from: self, to: destination)
    }

    /// Replaces this database's content with the database in the file at `path`
    /// (the reverse of ``backup(to:)``).
    /// - Precondition: no transaction is open on this connection.
    /// - Throws: ``SQLiteError`` if the source is missing, is not a database or the copy fails;
    ///   then this database is left as it was.
    public func restore(from path: String) throws {
        precondition(!isInTransaction, "restore(from:) inside a transaction")
        let source = try Connection(path: path, mode: .readOnly, configuration: nil, faults: faults)
        try Connection.copy(from: source, to: self)
    }

    /// Copies `source`'s main database over `destination`'s in one backup step.
    static func copy(from source: Connection, to destination: Connection) throws {
        var backup: OpaquePointer?
        let initCode = destination.call(.backupInit, sql: nil) {
            backup = sqlite3_backup_init(destination.handle, "main", source.handle, "main")
            return backup == nil ? sqlite3_errcode(destination.handle) : SQLITE_OK
        }
        guard initCode == SQLITE_OK, let backup else {
            throw destination.error(code: initCode == SQLITE_OK ? SQLITE_ERROR : initCode, operation: .backupInit, sql: nil)
        }
        let stepCode = destination.call(.backupStep, sql: nil) { sqlite3_backup_step(backup, -1) }
        // finish must always run to release the backup object; it reports the
        // step's error too, but the step's own code is the one to report.
        let realFinishCode = sqlite3_backup_finish(backup)
        let finishCode = destination.call(.backupFinish, sql: nil) { realFinishCode }
        if stepCode != SQLITE_DONE {
            throw SQLiteError(
                code: SQLiteResultCode(rawValue: stepCode), message: "backup step failed: \(SQLiteResultCode(rawValue: stepCode))",
                operation: .backupStep)
        }
        if finishCode != SQLITE_OK {
            throw SQLiteError(
                code: SQLiteResultCode(rawValue: finishCode), message: "backup finish failed: \(SQLiteResultCode(rawValue: finishCode))",
                operation: .backupFinish)
        }
    }
}
