import SteleHub
import Dispatch
import Foundation
import Synchronization

/// A connection on its way between threads through the pool or into a
/// background thread.
///
/// `@unchecked Sendable` is safe because a lease is only ever held by one
/// thread at a time: the pool's mutex hands each idle connection to exactly one
/// borrower, which alone touches it until it gives it back, and a connection
/// given to a background thread is not kept by the giver.
struct PostgresLease: @unchecked Sendable {  // safe: one thread holds a lease at a time (the pool's mutex hands it out; above)
    let connection: PostgresConnection
}

/// What ``PostgresHubStorage`` shares with its background threads: the pool of
/// connections, the queued announcements and the listeners. The threads hold
/// this object, not the storage, so releasing the storage closes everything.
final class PostgresShared: Sendable {
    struct State {
        var idle: [PostgresLease]
        var closed = false
        var pendingKeys: Set<String> = []
        var listeners: [@Sendable (String) -> Void] = []
        var listenerStarted = false
    }

    /// The notification channel every hub process listens on.
    static let channel = "stele_hub"

    let url: String
    let connectionCount: Int
    let checkoutTimeoutSeconds: Double
    let state: Mutex<State>
    /// Counts the idle connections in `state.idle`.
    private let idleCount: DispatchSemaphore
    /// Signalled when a key is queued or the storage closes.
    let notifierWake = DispatchSemaphore(value: 0)
    /// Signalled once by each background thread as it ends.
    let notifierFinished = DispatchSemaphore(value: 0)
    let listenerFinished = DispatchSemaphore(value: 0)

    init(url: String, connections: [PostgresConnection], checkoutTimeoutSeconds: Double) {
        self.url = url
        connectionCount = connections.count
        self.checkoutTimeoutSeconds = checkoutTimeoutSeconds
        state = Mutex(State(idle: connections.map { PostgresLease(connection: $0) }))
        idleCount = DispatchSemaphore(value: connections.count)
    }

    /// Takes an idle connection, waiting up to `checkoutTimeoutSeconds`; one
    /// that failed earlier is reset first.
    /// - Throws: ``HubStorageError`` `unavailable` when closed, when every
    ///   connection stayed busy, or when a reset could not reach the server.
    func checkout() throws -> PostgresConnection {
        guard !state.withLock({ $0.closed }) else { throw Self.closedError }
        guard idleCount.wait(timeout: .now() + checkoutTimeoutSeconds) == .success else {
            throw HubStorageError(
                .unavailable,
                "All \(connectionCount) PostgreSQL connections stayed busy for \(checkoutTimeoutSeconds) seconds; "
                    + "try again shortly, or give the hub more connections if this persists"
            )
        }
        let lease = state.withLock { state -> PostgresLease? in state.closed ? nil : state.idle.popLast() }
        guard let lease else {
            idleCount.signal()  // let the next waiter see the storage is closed
            throw Self.closedError
        }
        let connection = lease.connection
        if !connection.isConnected && !connection.reset() {
            let message = connection.lastMessage
            checkin(connection)
            throw Self.unreachable(message)
        }
        return connection
    }

    /// Gives a connection back (or finishes it when the storage closed meanwhile).
    func checkin(_ connection: PostgresConnection) {
        let lease = PostgresLease(connection: connection)
        let kept = state.withLock { state in
            guard !state.closed else { return false }
            state.idle.append(lease)
            return true
        }
        if kept { idleCount.signal() }
    }

    /// Marks the storage closed, lets the background threads end (the notifier
    /// sends what is still queued) and finishes the idle connections; busy ones
    /// are finished when given back.
    func close() {
        let (idle, listenerStarted, wasClosed) = state.withLock { state in
            let idle = state.idle
            let wasClosed = state.closed
            state.idle = []
            state.closed = true
            return (idle, state.listenerStarted, wasClosed)
        }
        guard !wasClosed else { return }
        notifierWake.signal()
        idleCount.signal()
        // The threads notice within about a second (their poll and wait timeouts).
        _ = notifierFinished.wait(timeout: .now() + 10)
        if listenerStarted { _ = listenerFinished.wait(timeout: .now() + 10) }
        _ = idle  // released here: each connection is finished by its deinit
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    static var closedError: HubStorageError {
        HubStorageError(.unavailable, "The hub's PostgreSQL storage is closed; the hub is shutting down")
    }

    static func unreachable(_ detail: String) -> HubStorageError {
        HubStorageError(
            .unavailable,
            "PostgreSQL is unreachable (\(detail.isEmpty ? "connection lost" : detail)); the hub answers 503 until it is back: "
                + "check that the server is running and accepts connections at the configured URL"
        )
    }

    /// The error a caller sees for a database error: `conflict` for a unique
    /// violation, `unavailable` for a lost connection, else the error itself.
    static func storageError(_ error: PostgresError) -> any Error {
        if error.connectionLost { return unreachable(error.message) }
        if error.isUniqueViolation {
            var message = "A uniqueness rule refused the write (\(error.message)); another writer got there first"
            if let sql = error.sql { message += " [SQL: \(sql)]" }
            return HubStorageError(.conflict, message)
        }
        // data_corrupted, index_corrupted: no retry helps.
        if error.sqlState == "XX001" || error.sqlState == "XX002" {
            return HubStorageError(.damaged, "the hub's PostgreSQL database is damaged: \(error.message)" + (error.sql.map { " [SQL: \($0)]" } ?? ""))
        }
        return error
    }
}
