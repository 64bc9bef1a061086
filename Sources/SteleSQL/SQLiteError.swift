/// An error reported by SQLite, or forced through the fault funnel.
///
/// It carries the result code, SQLite's message and the SQL text of the statement
/// involved. Bound values are never included: they may hold user content.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The result code, possibly extended; compare ``SQLiteResultCode/primary``.
    public let code: SQLiteResultCode
    /// SQLite's message (`sqlite3_errmsg`), or a description of what SteleSQL noticed.
    public let message: String
    /// The SQL text of the statement, without bound values, when one was involved.
    public let sql: String?
    /// The fallible call that failed.
    public let operation: SQLiteOperation

    public init(code: SQLiteResultCode, message: String, sql: String? = nil, operation: SQLiteOperation) {
        self.code = code
        self.message = message
        self.sql = sql
        self.operation = operation
    }

    /// True for `SQLITE_BUSY` and `SQLITE_LOCKED`: another connection holds the lock; retrying later may work.
    public var isBusy: Bool { code.primary == .busy || code.primary == .locked }

    public var description: String {
        var text = "SQLite \(operation.rawValue) failed with code \(code.rawValue) (\(code)): \(message)"
        if let sql { text += " [SQL: \(sql)]" }
        return text
    }
}
