import CSQLite

/// A SQLite result code, primary or extended (`SQLITE_IOERR_WRITE` and friends).
///
/// Kept as an open struct rather than an enum: SQLite grows new extended codes,
/// and callers should match on ``primary`` (`error.code.primary == .busy`).
public struct SQLiteResultCode: Hashable, Sendable, CustomStringConvertible {
    /// The raw value SQLite returned, possibly an extended code.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary code: the low byte of an extended code.
    public var primary: SQLiteResultCode { SQLiteResultCode(rawValue: rawValue & 0xFF) }

    /// SQLite's own English text for the code (`sqlite3_errstr`).
    public var description: String { String(cString: sqlite3_errstr(rawValue)) }

    public static let ok = SQLiteResultCode(rawValue: SQLITE_OK)
    public static let error = SQLiteResultCode(rawValue: SQLITE_ERROR)
    public static let abort = SQLiteResultCode(rawValue: SQLITE_ABORT)
    public static let busy = SQLiteResultCode(rawValue: SQLITE_BUSY)
    public static let locked = SQLiteResultCode(rawValue: SQLITE_LOCKED)
    public static let readOnly = SQLiteResultCode(rawValue: SQLITE_READONLY)
    public static let ioError = SQLiteResultCode(rawValue: SQLITE_IOERR)
    public static let corrupt = SQLiteResultCode(rawValue: SQLITE_CORRUPT)
    public static let full = SQLiteResultCode(rawValue: SQLITE_FULL)
    public static let cantOpen = SQLiteResultCode(rawValue: SQLITE_CANTOPEN)
    public static let constraint = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT)
    public static let tooBig = SQLiteResultCode(rawValue: SQLITE_TOOBIG)
    public static let misuse = SQLiteResultCode(rawValue: SQLITE_MISUSE)
    public static let range = SQLiteResultCode(rawValue: SQLITE_RANGE)
    public static let notADatabase = SQLiteResultCode(rawValue: SQLITE_NOTADB)
    public static let row = SQLiteResultCode(rawValue: SQLITE_ROW)
    public static let done = SQLiteResultCode(rawValue: SQLITE_DONE)
}
