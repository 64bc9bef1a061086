import SteleHub
import CPostgres
import Foundation
import SteleSQL

/// One libpq connection (`PGconn`), finished when released.
///
/// Not `Sendable`: one thread uses it at a time (the pool hands it out whole,
/// the listener and notifier threads own theirs). Statements run through
/// ``run(_:_:)`` with numbered parameters; bytes travel as binary `bytea`
/// parameters and come back as hex text, so any bytes round-trip, NULs included.
package final class PostgresConnection {
    /// The `PGconn *`.
    private let handle: OpaquePointer

    /// Connects to `url` (a `postgresql://` URI or a `key=value` string); waits
    /// at most `connectTimeoutSeconds` unless the URL sets its own.
    /// - Throws: ``PostgresError`` with `connectionLost` set when the server cannot be reached.
    package init(url: String, connectTimeoutSeconds: Int = 5) throws {
        // Earlier keywords are defaults: the expanded URL (dbname) overrides them.
        let pairs: [(String, String)] = [
            ("connect_timeout", String(connectTimeoutSeconds)),
            ("application_name", "stele-hub"),
            // A silently dropped peer is noticed within about half a minute.
            ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
            ("dbname", url),
        ]
        let keywords = pairs.map { strdup($0.0) }
        let values = pairs.map { strdup($0.1) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keywordPointers = keywords.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        guard let connection = PQconnectdbParams(keywordPointers, valuePointers, 1) else {
            throw PostgresError(sqlState: "", message: "libpq could not allocate a connection", connectionLost: true)
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = PostgresConnection.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError(sqlState: "", message: message, connectionLost: true)
        }
        handle = connection
        PostgresConnection.silenceNotices(connection)
    }

    deinit { PQfinish(handle) }

    /// True while libpq considers the connection usable (a server that went away
    /// is only noticed at the next statement).
    var isConnected: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Closes and reopens the connection with the same parameters.
    /// - Returns: whether it is connected again.
    @discardableResult
    func reset() -> Bool {
        PQreset(handle)
        PostgresConnection.silenceNotices(handle)
        return isConnected
    }

    /// libpq's last message for this connection (why a connect or reset failed).
    var lastMessage: String { PostgresConnection.trimmed(PQerrorMessage(handle)) }

    /// The backend's process id (for `pg_terminate_backend` in tests and logs).
    var backendProcessID: Int32 { PQbackendPID(handle) }

    /// Runs one statement with parameters `$1`, `$2`, … bound to `arguments`.
    /// - Returns: every row (columns in select order) and the number of rows the
    ///   statement changed.
    /// - Throws: ``PostgresError``.
    package func run(_ sql: String, _ arguments: [SQLValue] = []) throws -> (rows: [[SQLValue]], changed: Int) {
        let count = arguments.count
        var types = [Oid](repeating: 0, count: count)
        var lengths = [Int32](repeating: 0, count: count)
        var formats = [Int32](repeating: 0, count: count)
        var buffers = [UnsafeMutableRawPointer?](repeating: nil, count: count)
        defer { buffers.forEach { $0?.deallocate() } }
        for (index, argument) in arguments.enumerated() {
            switch argument {
            case .null:
                break
            case .integer(let value):
                types[index] = PostgresType.int8
                buffers[index] = Self.cString(String(value))
            case .real(let value):
                types[index] = PostgresType.float8
                buffers[index] = Self.cString(String(value))
            case .text(let value):
                // Unknown type (0): the server infers it from the context, as it would for a literal.
                guard !value.utf8.contains(0) else {
                    throw PostgresError(sqlState: "22021", message: "parameter $\(index + 1) holds a NUL character, which PostgreSQL text cannot store", sql: sql)
                }
                buffers[index] = Self.cString(value)
            case .blob(let bytes):
                types[index] = PostgresType.bytea
                formats[index] = 1
                lengths[index] = Int32(bytes.count)
                // A binary parameter needs a non-null pointer even when empty (null means SQL NULL).
                let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
                bytes.withUnsafeBytes { raw in
                    if let base = raw.baseAddress { buffer.copyMemory(from: base, byteCount: raw.count) }
                }
                buffers[index] = buffer
            }
        }
        let values: [UnsafePointer<CChar>?] = buffers.map { $0.map { UnsafePointer($0.assumingMemoryBound(to: CChar.self)) } }
        guard let result = PQexecParams(handle, sql, Int32(count), types, values, lengths, formats, 0) else {
            throw error(nil, sql: sql)
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK:
            return ([], Self.changedRows(result))
        case PGRES_TUPLES_OK:
            return (Self.rows(result), Self.changedRows(result))
        default:
            throw error(result, sql: sql)
        }
    }

    /// Runs a command without parameters (`BEGIN`, `COMMIT`, `LISTEN …`).
    /// - Returns: the command tag (`COMMIT`, or `ROLLBACK` when a `COMMIT` found the transaction failed).
    /// - Throws: ``PostgresError``.
    @discardableResult
    func command(_ sql: String) throws -> String {
        guard let result = PQexec(handle, sql) else { throw error(nil, sql: sql) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw error(result, sql: sql) }
        return String(cString: PQcmdStatus(result))
    }

    // MARK: Notifications

    /// The socket to wait on for notifications, or -1 when not connected.
    var socket: Int32 { PQsocket(handle) }

    /// Reads whatever the server sent.
    /// - Throws: ``PostgresError`` with `connectionLost` when the connection failed.
    func consumeInput() throws {
        guard PQconsumeInput(handle) == 1, isConnected else {
            throw PostgresError(sqlState: "", message: lastMessage, connectionLost: true)
        }
    }

    /// The payloads of the notifications received so far, oldest first.
    func takeNotifications() -> [String] {
        var payloads: [String] = []
        while let notification = PQnotifies(handle) {
            payloads.append(String(cString: notification.pointee.extra))
            PQfreemem(notification)
        }
        return payloads
    }

    // MARK: Helpers

    private func error(_ result: OpaquePointer?, sql: String?) -> PostgresError {
        let field = { (code: UInt8) -> String? in
            guard let result, let value = PQresultErrorField(result, Int32(code)) else { return nil }
            return String(cString: value)
        }
        // Only the primary message: the detail may quote values ("Key (id)=(…) already exists").
        let message = field(UInt8(ascii: "M")) ?? lastMessage
        return PostgresError(
            sqlState: field(UInt8(ascii: "C")) ?? "",
            message: message.isEmpty ? "libpq reported a failure without a message" : message,
            sql: sql,
            connectionLost: !isConnected
        )
    }

    private static func silenceNotices(_ connection: OpaquePointer) {
        // The default processor prints every NOTICE to stderr ("relation already exists, skipping").
        _ = PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    private static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        return String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func cString(_ text: String) -> UnsafeMutableRawPointer {
        let utf8 = Array(text.utf8)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: utf8.count + 1, alignment: 1)
        utf8.withUnsafeBytes { raw in
            if let base = raw.baseAddress { buffer.copyMemory(from: base, byteCount: raw.count) }
        }
        buffer.storeBytes(of: 0, toByteOffset: utf8.count, as: UInt8.self)
        return buffer
    }

    private static func changedRows(_ result: OpaquePointer) -> Int {
        Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    private static func rows(_ result: OpaquePointer) -> [[SQLValue]] {
        let rowCount = PQntuples(result)
        let columnCount = PQnfields(result)
        let types = (0..<columnCount).map { PQftype(result, $0) }
        var rows: [[SQLValue]] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                if PQgetisnull(result, row, column) == 1 {
                    values.append(.null)
                    continue
                }
                let bytes = UnsafeRawBufferPointer(
                    start: PQgetvalue(result, row, column),
                    count: Int(PQgetlength(result, row, column))
                )
                values.append(PostgresType.value(text: bytes, type: types[Int(column)]))
            }
            rows.append(values)
        }
        return rows
    }
}
