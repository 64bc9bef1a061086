import SteleHub
import Foundation
import SteleSQL

extension PostgresShared {
    /// How many times a transaction runs when PostgreSQL keeps reporting a
    /// serialization failure or a deadlock.
    static let maximumAttempts = 5

    /// Runs `body` in a transaction on `connection`, retrying serialization
    /// failures and deadlocks; see ``PostgresHubStorage/transaction(_:)``.
    static func transaction<T>(on connection: PostgresConnection, _ body: (any HubSQL) throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try attemptTransaction(on: connection, body)
            } catch let error as PostgresError where error.isRetryable {
                guard attempt < maximumAttempts else {
                    throw HubStorageError(
                        .unavailable,
                        "PostgreSQL refused the transaction \(attempt) times (\(error.message)); too many writers are racing for the same rows, try again shortly"
                    )
                }
                // Back off a little, with jitter, so the racers do not meet again at once.
                let delayMicroseconds = UInt32(1000 << attempt) + UInt32.random(in: 0..<2000)
                usleep(delayMicroseconds)
                attempt += 1
            } catch let error as PostgresError {
                throw storageError(error)
            }
        }
    }

    /// One attempt: BEGIN, `body`, COMMIT; ROLLBACK when anything threw.
    /// - Throws: a ``PostgresError`` when the attempt may be retried (so the
    ///   caller can tell), otherwise what it should surface.
    private static func attemptTransaction<T>(on connection: PostgresConnection, _ body: (any HubSQL) throws -> T) throws -> T {
        try begin(connection)
        let statements = PostgresTransaction(connection)
        let value: T
        do {
            value = try body(statements)
        } catch {
            rollback(connection)
            // A retryable failure spoils the whole attempt, whatever the body made of it.
            if let first = statements.firstError, first.isRetryable { throw first }
            throw error
        }
        if let first = statements.firstError {
            // The body caught a failed statement and carried on; PostgreSQL aborted the transaction then.
            rollback(connection)
            throw first
        }
        let tag = try connection.command("COMMIT")
        guard tag == "COMMIT" else {
            throw PostgresError(sqlState: "40000", message: "PostgreSQL rolled the transaction back instead of committing it (\(tag))", sql: "COMMIT")
        }
        return value
    }

    /// BEGIN; when the connection turns out to have been lost since its last use
    /// (the server restarted, or terminated it), resets it once and tries again.
    private static func begin(_ connection: PostgresConnection) throws {
        do {
            try connection.command("BEGIN")
        } catch let error as PostgresError where error.connectionLost {
            guard connection.reset() else { throw unreachable(connection.lastMessage) }
            try connection.command("BEGIN")
        }
    }

    private static func rollback(_ connection: PostgresConnection) {
        // A lost connection has nothing to roll back; the next checkout resets it.
        guard connection.isConnected else { return }
        _ = try? connection.command("ROLLBACK")
    }
}

/// The statements of one PostgreSQL transaction (``HubSQL``), on the thread
/// that runs it. Remembers the first failure, which aborted the transaction.
final class PostgresTransaction: HubSQL {
    private let connection: PostgresConnection
    private(set) var firstError: PostgresError?

    init(_ connection: PostgresConnection) {
        self.connection = connection
    }

    @discardableResult
    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        try run(sql, arguments).changed
    }

    func query(_ sql: String, _ arguments: [SQLValue]) throws -> [[SQLValue]] {
        try run(sql, arguments).rows
    }

    func lockAccount(_ account: String) throws {
        _ = try run("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", [.text(account)])
    }

    /// Every statement is a round trip: as many rows as PostgreSQL's 65,535
    /// parameters allow (with room to spare for the statement's own), in one.
    func rowsPerStatement(remaining: Int, width: Int) -> Int {
        max(1, min(remaining, 60_000 / max(1, width)))
    }

    private func run(_ sql: String, _ arguments: [SQLValue]) throws -> (rows: [[SQLValue]], changed: Int) {
        if let firstError {
            // PostgreSQL would only answer 25P02 (in failed transaction); say what failed first.
            throw PostgresShared.storageError(firstError)
        }
        do {
            return try connection.run(sql, arguments)
        } catch let error as PostgresError {
            firstError = error
            // A retryable failure stays a PostgresError, so the transaction can tell and run again.
            throw error.isRetryable ? error : PostgresShared.storageError(error)
        }
    }
}
