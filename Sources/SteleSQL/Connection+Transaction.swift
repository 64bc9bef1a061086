import CSQLite

extension Connection {
    /// How the outermost transaction takes its locks.
    public enum TransactionKind: String, Sendable {
        /// Takes the write lock at once, so a writer never fails half way with `SQLITE_BUSY`.
        case immediate = "IMMEDIATE"
        /// Takes locks as statements need them (for read-mostly work).
        case deferred = "DEFERRED"
    }

    /// Runs `body` in a transaction: the one way SteleSQL code writes.
    ///
    /// - Commits if `body` returns, rolls back if it throws.
    /// - The first error wins: if the rollback fails too, the caller still gets
    ///   the error that caused it.
    /// - Notices when SQLite rolled the transaction back on its own (after
    ///   `SQLITE_FULL` or an interrupt, say) even if `body` caught the error and
    ///   returned: that throws instead of reporting a commit that did not happen.
    /// - Nested calls become savepoints: an inner failure undoes only the inner work.
    @discardableResult
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        if transactionDepth > 0 { return try savepoint(body) }
        // Prepared once and kept, as the savepoints are: a transaction costs no parse.
        _ = try (kind == .immediate ? cached(literal: "BEGIN IMMEDIATE") : cached(literal: "BEGIN DEFERRED")).step(as: .begin)
        transactionDepth = 1
        defer { transactionDepth = 0 }
        let result: T
        do {
            result = try body()
        } catch {
            rollbackAfterFailure()
            throw error
        }
        if isAutocommit {
            throw SQLiteError(
                code: .abort, message: "SQLite rolled the transaction back on its own; nothing was committed",
                sql: "COMMIT", operation: .commit)
        }
        do {
            _ = try cached(literal: "COMMIT").step(as: .commit)
        } catch {
            rollbackAfterFailure()
            throw error
        }
        return result
    }

    /// Rolls back the open transaction unless SQLite already did; a failure here
    /// is swallowed because the error that led here is the one to report.
    private func rollbackAfterFailure() {
        guard !isAutocommit else { return }
        let code = call(.rollback, sql: "ROLLBACK") { sqlite3_exec(handle, "ROLLBACK", nil, nil, nil) }
        if code != SQLITE_OK && !isAutocommit {
            // The transaction is still open and could not be closed: keep the
            // connection usable by trying once more without the funnel.
            sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
        }
    }

    private func savepoint<T>(_ body: () throws -> T) throws -> T {
        let name = "stele_sp\(transactionDepth)"
        try runControl(.savepoint, "SAVEPOINT \(name)")
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        let result: T
        do {
            result = try body()
        } catch {
            if !isAutocommit {
                // ROLLBACK TO keeps the savepoint open; RELEASE closes it. Failures here
                // are swallowed: the error that led here is the one to report.
                try? runControl(.rollback, "ROLLBACK TO \(name)")
                try? runControl(.release, "RELEASE \(name)")
            }
            throw error
        }
        if isAutocommit {
            throw SQLiteError(
                code: .abort, message: "SQLite rolled the enclosing transaction back on its own",
                sql: "RELEASE \(name)", operation: .release)
        }
        try runControl(.release, "RELEASE \(name)")
        return result
    }

    /// Runs a transaction-control statement from the cache (savepoints are
    /// frequent: every write nested in a batch takes one).
    private func runControl(_ operation: SQLiteOperation, _ sql: String) throws {
        _ = try cached(sql).step(as: operation)
    }

    /// True while a ``transaction(_:_:)`` body is running.
    public var isInTransaction: Bool { transactionDepth > 0 }
}
