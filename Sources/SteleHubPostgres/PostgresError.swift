/// An error reported by PostgreSQL or by libpq.
///
/// It carries the SQLSTATE (empty when libpq itself failed, e.g. a lost
/// connection), the server's message and the SQL text of the statement
/// involved. Bound values are never included: they may hold user content.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE (`23505`, `40001`, …), or empty when libpq
    /// produced the error itself without one.
    public let sqlState: String
    /// The server's (or libpq's) message, without bound values.
    public let message: String
    /// The SQL text of the statement, when one was involved.
    public let sql: String?
    /// True when the connection itself failed (it is no longer usable until reset).
    public let connectionLost: Bool

    /// Makes an error; `connectionLost` is also set for SQLSTATE class 08 and `57P01`–`57P03`.
    public init(sqlState: String, message: String, sql: String? = nil, connectionLost: Bool = false) {
        self.sqlState = sqlState
        self.message = message
        self.sql = sql
        self.connectionLost = connectionLost || PostgresError.isConnectionState(sqlState)
    }

    /// True for `unique_violation` (23505): a uniqueness rule refused the write.
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// True for `serialization_failure` (40001) and `deadlock_detected` (40P01):
    /// running the transaction again may succeed.
    public var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }

    public var description: String {
        var text = "PostgreSQL error"
        if !sqlState.isEmpty { text += " \(sqlState)" }
        text += ": \(message)"
        if let sql { text += " [SQL: \(sql)]" }
        return text
    }

    /// Connection exceptions (class 08) and the server shutting down or
    /// terminating the session (`57P01` admin_shutdown, `57P02` crash_shutdown,
    /// `57P03` cannot_connect_now).
    static func isConnectionState(_ sqlState: String) -> Bool {
        sqlState.hasPrefix("08") || sqlState == "57P01" || sqlState == "57P02" || sqlState == "57P03"
    }
}
