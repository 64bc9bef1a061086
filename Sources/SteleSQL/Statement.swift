import CSQLite

/// A prepared statement. Owned by its connection's cache or by the caller;
/// finalized in `deinit`. Not `Sendable`, like its connection.
public final class Statement {
    /// The SQL text (never with bound values).
    public let sql: String
    let handle: OpaquePointer
    unowned let connection: Connection
    var isCached = false
    /// Set when a step failed: holders of their own statement caches prepare afresh.
    public private(set) var hasFailed = false
    /// The key in the connection's cache of SQL literals, when cached there.
    var cacheKey: StatementKey?
    private var finalized = false

    init(handle: OpaquePointer, sql: String, connection: Connection) {
        self.handle = handle
        self.sql = sql
        self.connection = connection
    }

    deinit { finalize() }

    func finalize() {
        guard !finalized else { return }
        finalized = true
        sqlite3_finalize(handle)
    }

    // SQLITE_TRANSIENT does not import: it is the destructor value -1 (SQLite copies the bytes).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Resets the statement so it can run again and clears its bindings.
    public func reset() {
        // reset returns the error of the last step, which was already reported.
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Resets the statement but keeps its bindings: for callers that bind every
    /// parameter on every use (``StatementSlots``).
    public func resetKeepingBindings() {
        sqlite3_reset(handle)
    }

    // MARK: - Binding (parameters are 1-based, as in SQLite)

    public func bind(_ index: Int32, _ value: Int64) throws {
        try connection.check(.bind, sql: sql) { sqlite3_bind_int64(handle, index, value) }
    }

    public func bind(_ index: Int32, _ value: Double) throws {
        try connection.check(.bind, sql: sql) { sqlite3_bind_double(handle, index, value) }
    }

    public func bind(_ index: Int32, _ value: String) throws {
        var value = value
        try connection.check(.bind, sql: sql) {
            // The UTF-8 bytes with their length: no C-string copy, no strlen.
            value.withUTF8 { bytes in
                guard let base = bytes.baseAddress else { return sqlite3_bind_text(handle, index, "", 0, Self.transient) }
                return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text(handle, index, $0, Int32(bytes.count), Self.transient)
                }
            }
        }
    }

    /// Binds bytes as TEXT, as they are (SQLite does not check UTF-8): for key
    /// bounds cut from keys, which compare byte by byte under the BINARY collation.
    public func bind(_ index: Int32, textBytes value: [UInt8]) throws {
        try connection.check(.bind, sql: sql) {
            value.withUnsafeBufferPointer { buffer in
                guard let base = buffer.baseAddress else { return sqlite3_bind_text(handle, index, "", 0, Self.transient) }
                return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    sqlite3_bind_text(handle, index, $0, Int32(buffer.count), Self.transient)
                }
            }
        }
    }

    /// Binds bytes as a BLOB (an empty array binds a zero-length BLOB, not NULL).
    public func bind(_ index: Int32, _ value: [UInt8]) throws {
        try connection.check(.bind, sql: sql) {
            value.withUnsafeBytes { raw in
                if raw.count == 0 { return sqlite3_bind_zeroblob(handle, index, 0) }
                return sqlite3_bind_blob(handle, index, raw.baseAddress, Int32(raw.count), Self.transient)
            }
        }
    }

    /// Binds bytes that live only for the call (SQLite copies them) as a BLOB.
    public func bind(_ index: Int32, rawBytes value: UnsafeRawBufferPointer) throws {
        try connection.check(.bind, sql: sql) {
            if value.count == 0 { return sqlite3_bind_zeroblob(handle, index, 0) }
            return sqlite3_bind_blob(handle, index, value.baseAddress, Int32(value.count), Self.transient)
        }
    }

    public func bindNull(_ index: Int32) throws {
        try connection.check(.bind, sql: sql) { sqlite3_bind_null(handle, index) }
    }

    public func bind(_ index: Int32, _ value: SQLValue) throws {
        switch value {
        case .null: try bindNull(index)
        case .integer(let integer): try bind(index, integer)
        case .real(let real): try bind(index, real)
        case .text(let text): try bind(index, text)
        case .blob(let bytes): try bind(index, bytes)
        }
    }

    /// Binds all values in order, starting at parameter 1.
    public func bind(_ values: [SQLValue]) throws {
        for (offset, value) in values.enumerated() { try bind(Int32(offset + 1), value) }
    }

    // MARK: - Stepping

    /// Advances the statement: `true` when a row is ready, `false` when done.
    /// - Throws: ``SQLiteError``; the statement is reset and, if cached, evicted.
    @discardableResult
    public func step() throws -> Bool {
        try step(as: .step)
    }

    /// Steps, naming the call to the fault funnel as `operation` (transaction
    /// control statements are stepped as `.savepoint`, `.release`, ...).
    func step(as operation: SQLiteOperation) throws -> Bool {
        let code = connection.call(operation, sql: sql) { sqlite3_step(handle) }
        if code == SQLITE_ROW { return true }
        if code == SQLITE_DONE { return false }
        let error = connection.error(code: code, operation: operation, sql: sql)
        sqlite3_reset(handle)
        hasFailed = true
        if isCached || cacheKey != nil { connection.evict(self) }
        throw error
    }

    // MARK: - Columns (0-based, as in SQLite)

    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    public func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    public func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    public func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    public func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Calls `body` with the column's bytes in place (valid only during the call;
    /// empty for NULL): for reading a blob without copying it into an array.
    public func withBlob<Result>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column) else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The column as bytes, or `nil` when it is NULL.
    public func optionalBlob(_ column: Int32) -> [UInt8]? { isNull(column) ? nil : blob(column) }

    /// The column as an integer, or `nil` when it is NULL.
    public func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }

    public func value(_ column: Int32) -> SQLValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: .integer(int64(column))
        case SQLITE_FLOAT: .real(double(column))
        case SQLITE_TEXT: .text(text(column))
        case SQLITE_BLOB: .blob(blob(column))
        default: .null
        }
    }

    public var columnCount: Int32 { sqlite3_column_count(handle) }
}
