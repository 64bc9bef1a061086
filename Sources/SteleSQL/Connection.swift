import CSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a statement is found in the cache without hashing its text.
enum StatementKey: Hashable {
    case literal(UInt)
}

/// One SQLite connection and the cache of its prepared statements.
///
/// A connection is not `Sendable`: it has one owner (an actor or one serial
/// context) and never leaves it (STYLE "SQLite"). Every fallible `sqlite3_*`
/// call goes through ``check(_:sql:_:)``, the one funnel where ``faults`` can
/// force a failure.
public final class Connection {
    /// How to open the file.
    public enum OpenMode: Sendable {
        /// Read only; the file must exist. Nothing is written to it, and nothing
        /// is left beside it that was not there (``opensLeavingNoFiles(_:)``).
        case readOnly
        /// Read and write; the file must exist.
        case readWrite
        /// Read and write, creating the file if it is missing.
        case readWriteCreate
    }

    /// The journal and durability settings applied by ``configure(_:)``.
    public struct Configuration: Sendable {
        /// `journal_mode` (`WAL` by default).
        public var journalMode: String
        /// `synchronous` (`NORMAL` by default: durable across application crashes, and
        /// across power loss up to the last checkpoint, which is what WAL is designed for).
        public var synchronous: String
        /// How long to wait for another connection's lock before `SQLITE_BUSY`.
        public var busyTimeoutMilliseconds: Int32
        /// `auto_vacuum` for a file being created (`INCREMENTAL` by default, so
        /// ``returnFreePages()`` can give freed pages back to the file system). SQLite
        /// fixes it when the first page is written; on an existing file it changes nothing.
        public var autoVacuum: String
        /// `locking_mode`: `nil` leaves SQLite's `NORMAL`, which lets other
        /// connections and processes share the file. `EXCLUSIVE` keeps the locks
        /// from the first read and the WAL index in this process's memory: no lock
        /// calls per transaction, and no other connection can use the file while
        /// this one is open (the simulator, which holds each store through one
        /// handle).
        public var lockingMode: String?

        public init(journalMode: String = "WAL", synchronous: String = "NORMAL", busyTimeoutMilliseconds: Int32 = 5_000, autoVacuum: String = "INCREMENTAL") {
            self.journalMode = journalMode
            self.synchronous = synchronous
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
            self.autoVacuum = autoVacuum
        }

        /// WAL with `synchronous=NORMAL`.
        public static let standard = Configuration()
    }

    /// The path given at open (`:memory:` for an in-memory database).
    public let path: String
    /// Failures to force on the next matching calls; `nil` (the default) forces none.
    public var faults: SQLiteFaultPlan?

    let handle: OpaquePointer
    private var statementCache: [String: Statement] = [:]
    private var keyedStatementCache: [StatementKey: Statement] = [:]
    var transactionDepth = 0
    /// Rows changed per watched key (``countChanges(of:as:)``); `nil` until a table is watched.
    var changeCounts: ChangeCounts?

    /// Opens (or creates) a database file.
    ///
    /// Opening alone writes nothing to an existing file; call ``configure(_:)``
    /// once the file is known to be yours, or pass `configuration`.
    /// - Throws: ``SQLiteError`` with `cantOpen` for a missing file (unless
    ///   `readWriteCreate`), a directory, or a permission problem.
    public init(
        path: String, mode: OpenMode = .readWriteCreate,
        configuration: Configuration? = .standard, faults: SQLiteFaultPlan? = nil
    ) throws {
        self.path = path
        self.faults = faults
        var flags: Int32 = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        switch mode {
        case .readOnly: flags |= SQLITE_OPEN_READONLY
        case .readWrite: flags |= SQLITE_OPEN_READWRITE
        case .readWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        }
        var opened: OpaquePointer?
        let code: Int32
        if let forced = faults?.intercept(SQLiteCall(operation: .open, sql: nil)) {
            code = forced.rawValue
        } else if mode == .readOnly, let quiet = Self.opensLeavingNoFiles(path) ?? Self.opensAsItIs(path) {
            opened = quiet
            code = SQLITE_OK
        } else {
            code = sqlite3_open_v2(path, &opened, flags, nil)
        }
        guard code == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? SQLiteResultCode(rawValue: code).description
            if let opened { sqlite3_close_v2(opened) }
            throw SQLiteError(code: SQLiteResultCode(rawValue: code), message: "\(message) (\(path))", operation: .open)
        }
        handle = opened
        sqlite3_extended_result_codes(handle, 1)
        if let configuration {
            try configure(configuration)
        }
    }

    /// A reader of a WAL file makes its `-wal` and `-shm` files when they are
    /// missing, and a connection opened read-only cannot remove them when it
    /// closes: `stele inspect` left both beside a store that had none. When they
    /// are missing (no connection has the file open, and no write waits in a WAL
    /// to be checkpointed, nor in a rollback journal to be rolled back) and the
    /// file and its folder are writable, the file is
    /// opened read-write with `query_only` on instead: no statement can write,
    /// there is nothing to checkpoint, and SQLite removes both files when the
    /// last connection closes, as for any writer (and leaves them while another
    /// connection still uses them). Otherwise `nil`: a plain read-only open.
    private static func opensLeavingNoFiles(_ path: String) -> OpaquePointer? {
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:"), access(path + "-wal", F_OK) != 0, access(path + "-journal", F_OK) != 0,
            access(path, W_OK) == 0, access(folder(of: path), W_OK) == 0
        else { return nil }
        var opened: OpaquePointer?
        guard sqlite3_open_v2(path, &opened, SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let opened,
            sqlite3_exec(opened, "PRAGMA query_only=1", nil, nil, nil) == SQLITE_OK
        else {
            sqlite3_close_v2(opened)
            return nil
        }
        return opened
    }

    /// A WAL file read where its `-wal` and `-shm` files cannot be made (a
    /// read-only folder: a mounted snapshot, a backup's copy): a plain read-only
    /// open fails at its first read (`SQLITE_CANTOPEN`). With neither file there
    /// and none possible, no writer can have a commit in a WAL nor make one, so the
    /// file is read as immutable (SQLite's `immutable=1`: no locks, no `-shm`),
    /// which is then exact. Otherwise `nil`.
    private static func opensAsItIs(_ path: String) -> OpaquePointer? {
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:"), !path.hasPrefix("//"), access(path + "-wal", F_OK) != 0, access(path + "-shm", F_OK) != 0,
            access(path + "-journal", F_OK) != 0, !canMakeFilesBeside(path)
        else { return nil }
        // Letters, digits and `/-._~` as they are; every other byte as SQLite's URI reader
        // takes it, %HH (`?`, `#` and `%` would end or change the name).
        let hex = Array("0123456789ABCDEF".utf8)
        var escaped: [UInt8] = []
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "/"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                escaped.append(byte)
            default:
                escaped += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        var opened: OpaquePointer?
        guard sqlite3_open_v2("file:" + String(decoding: escaped, as: UTF8.self) + "?immutable=1", &opened, SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK,
            let opened
        else {
            sqlite3_close_v2(opened)
            return nil
        }
        return opened
    }

    /// Whether a file can be made in the folder of `path` (SQLite makes a WAL
    /// database's `-wal` and `-shm` files there).
    public static func canMakeFilesBeside(_ path: String) -> Bool { access(folder(of: path), W_OK) == 0 }

    /// The folder `path` names its file in (`.` for a bare name).
    public static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    deinit {
        // Statements must be finalized before the connection can close cleanly;
        // close_v2 defers the close if anything is still outstanding.
        for statement in statementCache.values { statement.finalize() }
        for statement in keyedStatementCache.values { statement.finalize() }
        statementCache.removeAll()
        keyedStatementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// How long a statement waits for another connection's lock (another
    /// process's WAL recovery, its write) before it fails with `SQLITE_BUSY`.
    public func setBusyTimeout(milliseconds: Int32) {
        sqlite3_busy_timeout(handle, milliseconds)
    }

    /// Applies journal mode, synchronous level and busy timeout.
    /// - Throws: ``SQLiteError`` if a pragma fails (for example on a file that is not a database).
    public func configure(_ configuration: Configuration) throws {
        sqlite3_busy_timeout(handle, configuration.busyTimeoutMilliseconds)
        // Before the journal mode: switching to WAL writes the first page.
        // Before the journal mode too: in exclusive mode WAL keeps its index in memory.
        if let lockingMode = configuration.lockingMode { _ = try scalarText("PRAGMA locking_mode=\(lockingMode)") }
        try execute("PRAGMA auto_vacuum=\(configuration.autoVacuum)")
        let mode = try scalarText("PRAGMA journal_mode=\(configuration.journalMode)")
        if path != ":memory:" && !path.isEmpty, mode?.lowercased() != configuration.journalMode.lowercased() {
            throw SQLiteError(
                code: .error, message: "journal_mode is \(mode ?? "unknown"), wanted \(configuration.journalMode)",
                sql: "PRAGMA journal_mode", operation: .configure)
        }
        try execute("PRAGMA synchronous=\(configuration.synchronous)")
        // Deleted content is overwritten, not left in free space: a delete must
        // erase (DESIGN §4 "erasure, not only invisibility"). Debian's SQLite is
        // built with this on; Apple's and others' are not, so it is set here.
        try execute("PRAGMA secure_delete=ON")
    }

    // MARK: - The funnel

    /// Runs one fallible SQLite call, unless the fault plan forces its result.
    /// Every fallible call in SteleSQL comes through here.
    @inline(__always)
    func call(_ operation: SQLiteOperation, sql: String?, _ body: () -> Int32) -> Int32 {
        if let faults, let forced = faults.intercept(SQLiteCall(operation: operation, sql: sql)) {
            return forced.rawValue
        }
        return body()
    }

    /// Runs one fallible call and throws unless it returned `SQLITE_OK`.
    @inline(__always)
    func check(_ operation: SQLiteOperation, sql: String?, _ body: () -> Int32) throws {
        let code = call(operation, sql: sql, body)
        if code != SQLITE_OK { throw error(code: code, operation: operation, sql: sql) }
    }

    /// Builds the error for a failed call. SQLite's message is used only when the
    /// code is really SQLite's (a forced code gets the generic text for the code).
    func error(code: Int32, operation: SQLiteOperation, sql: String?) -> SQLiteError {
        let resultCode = SQLiteResultCode(rawValue: code)
        let ownCode = sqlite3_extended_errcode(handle)
        let message = ownCode == code ? String(cString: sqlite3_errmsg(handle)) : resultCode.description
        return SQLiteError(code: resultCode, message: message, sql: sql, operation: operation)
    }

    // MARK: - Statements

    /// Prepares a statement that is not cached (finalized when released).
    /// - Throws: ``SQLiteError`` on a syntax error or a missing table.
    public func prepare(_ sql: String) throws -> Statement {
        var prepared: OpaquePointer?
        try check(.prepare, sql: sql) { sqlite3_prepare_v2(handle, sql, -1, &prepared, nil) }
        guard let prepared else {
            throw SQLiteError(code: .misuse, message: "the SQL text holds no statement", sql: sql, operation: .prepare)
        }
        return Statement(handle: prepared, sql: sql, connection: self)
    }

    /// The cached prepared statement for `sql`, reset and with bindings cleared.
    ///
    /// Statements are prepared once per SQL text; a statement whose step failed is
    /// evicted so the next use prepares it afresh.
    public func cached(_ sql: String) throws -> Statement {
        if let statement = statementCache[sql] {
            statement.reset()
            return statement
        }
        let statement = try prepare(sql)
        statement.isCached = true
        statementCache[sql] = statement
        return statement
    }

    /// The cached prepared statement for a SQL literal: the same as ``cached(_:)``
    /// but keyed by the literal's address, so hot paths skip hashing the text.
    public func cached(literal sql: StaticString) throws -> Statement {
        precondition(sql.hasPointerRepresentation, "SQL literals are text")
        return try cached(key: .literal(UInt(bitPattern: sql.utf8Start)), sql.description)
    }

    private func cached(key: StatementKey, _ sql: @autoclosure () -> String) throws -> Statement {
        if let statement = keyedStatementCache[key] {
            statement.reset()
            return statement
        }
        let statement = try prepare(sql())
        statement.cacheKey = key
        keyedStatementCache[key] = statement
        return statement
    }

    /// The number of statements in the cache.
    public var cachedStatementCount: Int { statementCache.count + keyedStatementCache.count }

    func evict(_ statement: Statement) {
        if let key = statement.cacheKey, keyedStatementCache[key] === statement {
            keyedStatementCache[key] = nil
            statement.cacheKey = nil
        }
        if statementCache[statement.sql] === statement {
            statementCache[statement.sql] = nil
            statement.isCached = false
        }
    }

    // MARK: - Convenience

    /// Runs a statement that returns no rows, with `arguments` bound in order.
    public func execute(_ sql: String, _ arguments: [SQLValue] = []) throws {
        let statement = try cached(sql)
        try statement.bind(arguments)
        while try statement.step() {}
    }

    /// Copies the write-ahead log into the database file and truncates it
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), so the pages a vacuum freed leave the
    /// disk. Outside a transaction only; a reader holding an old snapshot makes it
    /// a partial checkpoint, which is harmless.
    public func checkpoint() throws {
        try execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// Gives the file's free pages back to the file system (`PRAGMA incremental_vacuum`,
    /// stepped to the end: each step frees one page). A file made without
    /// `auto_vacuum=INCREMENTAL` is rebuilt with `VACUUM` instead, which also switches
    /// it to incremental for next time. Outside a transaction only.
    /// - Returns: the number of pages given back.
    /// - Parameter rebuild: rebuild the file with `VACUUM` instead, which also
    ///   packs half-empty pages: worth its cost (proportional to what is left)
    ///   after most of the file was deleted.
    @discardableResult
    public func returnFreePages(rebuild: Bool = false) throws -> Int {
        let before = try scalarInt("PRAGMA page_count") ?? 0
        if rebuild {
            try execute("PRAGMA auto_vacuum=INCREMENTAL")
            try executeScript("VACUUM")
        } else if try scalarInt("PRAGMA auto_vacuum") == 2 {
            try execute("PRAGMA incremental_vacuum")
        } else {
            try execute("PRAGMA auto_vacuum=INCREMENTAL")
            try executeScript("VACUUM")
        }
        return Int(before - (try scalarInt("PRAGMA page_count") ?? 0))
    }

    /// Runs a script of statements without bindings (schema changes, pragmas).
    public func executeScript(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let code = call(.execute, sql: sql) { sqlite3_exec(handle, sql, nil, nil, &message) }
        if code != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? SQLiteResultCode(rawValue: code).description
            sqlite3_free(message)
            throw SQLiteError(code: SQLiteResultCode(rawValue: code), message: text, sql: sql, operation: .execute)
        }
    }

    /// Runs a query and maps every row.
    public func query<T>(_ sql: String, _ arguments: [SQLValue] = [], _ row: (Statement) throws -> T) throws -> [T] {
        let statement = try cached(sql)
        try statement.bind(arguments)
        var rows: [T] = []
        while try statement.step() { rows.append(try row(statement)) }
        return rows
    }

    /// Runs a query and maps its first row, if any.
    public func queryFirst<T>(_ sql: String, _ arguments: [SQLValue] = [], _ row: (Statement) throws -> T) throws -> T? {
        let statement = try cached(sql)
        try statement.bind(arguments)
        guard try statement.step() else { return nil }
        let value = try row(statement)
        statement.reset()
        return value
    }

    /// SQLite's `PRAGMA data_version`: it changes whenever another connection (in
    /// this process or another) commits to the file, never for this one's own commits.
    public func dataVersion() throws -> Int64 {
        let statement = try cached(literal: "PRAGMA data_version")
        defer { statement.reset() }
        guard try statement.step() else { return 0 }
        return statement.int64(0)
    }

    /// The first column of the first row as an integer, if any.
    public func scalarInt(_ sql: String, _ arguments: [SQLValue] = []) throws -> Int64? {
        try queryFirst(sql, arguments) { $0.isNull(0) ? nil : $0.int64(0) } ?? nil
    }

    /// The first column of the first row as text, if any.
    public func scalarText(_ sql: String, _ arguments: [SQLValue] = []) throws -> String? {
        try queryFirst(sql, arguments) { $0.isNull(0) ? nil : $0.text(0) } ?? nil
    }

    /// The rowid of the most recent successful INSERT.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// Rows inserted, updated or deleted through this connection since it
    /// opened (triggers' included; a rolled-back change, too): with
    /// ``dataVersion()``, a file whose two numbers have not moved has not changed.
    public var totalChanges: Int64 { sqlite3_total_changes64(handle) }

    /// True while no transaction is open (SQLite's autocommit mode).
    public var isAutocommit: Bool { sqlite3_get_autocommit(handle) != 0 }
}
