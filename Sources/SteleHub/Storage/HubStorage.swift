import SteleSQL

/// Which database a ``HubStorage`` keeps the hub in.
public enum HubBackend: String, Sendable {
    case sqlite
    case postgresql
}

/// Where the hub keeps everything: accounts, rosters, sessions, mailboxes,
/// anchors. The service speaks one SQL dialect to it, the common part of SQLite
/// and PostgreSQL: numbered parameters `$1`, `$2`, … (each storage rewrites
/// them as it needs), `INSERT … ON CONFLICT`, `RETURNING`; types written as
/// `{blob}` in migrations. A hub process keeps no state of its own beyond
/// caches, so several processes may share one PostgreSQL database.
public protocol HubStorage: AnyObject, Sendable {
    var backend: HubBackend { get }

    /// Runs `body` in one transaction and commits it; a throw rolls it back.
    /// A serialization failure or deadlock (PostgreSQL) is retried a few times
    /// before it surfaces.
    /// - Throws: what `body` threw, or ``HubStorageError``.
    func transaction<T>(_ body: (any HubSQL) throws -> T) throws -> T

    /// Tells every hub process on this storage (this one included, through
    /// `listener`) that `key` changed. Called after the commit, never inside the
    /// transaction; may coalesce.
    func announce(_ key: String)

    /// Starts delivering other processes' announcements (and this one's) to
    /// `listener`; when the channel was lost and is back, `listener` gets `"*"`
    /// (every waiter looks again).
    func listen(_ listener: @escaping @Sendable (String) -> Void)

    /// Closes every connection; later calls throw `unavailable`.
    func close()

    /// Gives the pages a large deletion freed back to the file system, where the
    /// backend does not do it on its own (SQLite; PostgreSQL leaves dead rows to
    /// autovacuum). Best effort: a failure changes nothing.
    func reclaimSpace()

    /// What identifies the database's physical copy, so the hub can tell at start
    /// that it was put back from a backup or failed over (HubService+Rewind): for
    /// PostgreSQL the cluster's system identifier and timeline (a point-in-time
    /// restore or a promoted replica starts a new timeline). `nil` when it cannot
    /// tell (SQLite: the run id noted beside the file tells instead).
    func physicalIdentity() -> String?

    /// The storage holding `account` (hexadecimal id): this one, unless it is a
    /// ``ShardedHubStorage``.
    func shard(for account: String) -> any HubStorage

    /// Every storage the hub's accounts live in, the hub-wide one (invites) first.
    var shards: [any HubStorage] { get }
}

extension HubStorage {
    public func reclaimSpace() {}
    public func physicalIdentity() -> String? { nil }
    public func shard(for account: String) -> any HubStorage { self }
    public var shards: [any HubStorage] { [self] }
}

/// The statements of one transaction.
public protocol HubSQL {
    /// Runs a statement. - Returns: the number of rows it changed.
    @discardableResult
    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int
    /// Runs a query. - Returns: every row, columns in select order.
    func query(_ sql: String, _ arguments: [SQLValue]) throws -> [[SQLValue]]
    /// Holds the account's row locked until the transaction ends, so two hub
    /// processes serialize their changes to one account (PostgreSQL's
    /// `SELECT … FOR UPDATE`; SQLite's write transactions are serial already).
    func lockAccount(_ account: String) throws
    /// How many of `remaining` rows (`width` parameters each) the next
    /// multi-row statement carries; at least 1. See ``HubSQL/inPieces(_:width:_:)``.
    func rowsPerStatement(remaining: Int, width: Int) -> Int
}

extension HubSQL {
    /// The largest power of two up to `remaining`, at most 256: few distinct
    /// statement texts, so a storage that caches prepared statements by text
    /// (SQLite) keeps a handful per shape.
    public func rowsPerStatement(remaining: Int, width: Int) -> Int {
        var rows = 1
        while rows * 2 <= min(remaining, 256) { rows *= 2 }
        return rows
    }

    /// Calls `body` with consecutive pieces of `rows`, each of the size
    /// ``rowsPerStatement(remaining:width:)`` picks, for multi-row statements.
    public func inPieces<Row>(_ rows: [Row], width: Int, _ body: (ArraySlice<Row>) throws -> Void) rethrows {
        var start = rows.startIndex
        while start < rows.endIndex {
            let count = max(1, rowsPerStatement(remaining: rows.endIndex - start, width: width))
            let end = min(rows.endIndex, start + count)
            try body(rows[start..<end])
            start = end
        }
    }
}

/// Why the storage could not do what was asked.
public struct HubStorageError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// The database is unreachable or failed (the hub answers 503 and tries again later).
        case unavailable
        /// A uniqueness rule refused the write (two writers raced for one row).
        case conflict
        /// The database is damaged (a corrupt page, a file that is no database):
        /// no retry helps; the operator restores a backup (`stele-hub restored`).
        case damaged
        /// The schema is newer than this build.
        case newerSchema
        /// The server speaks PostgreSQL's protocol but lacks what the hub relies on
        /// (CockroachDB, YugabyteDB): the hub refuses to start rather than half-work.
        case unsupportedEngine
        /// The databases an account is routed over are not the ones its data was
        /// written under (another number or order of `--postgres`).
        case shardLayout
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// One numbered schema change, written once for both backends: `{blob}` is
/// `BLOB` on SQLite and `BYTEA` on PostgreSQL.
public struct HubMigration: Sendable {
    public let version: Int
    public let name: String
    public let statements: [String]

    public init(version: Int, name: String, _ statements: [String]) {
        self.version = version
        self.name = name
        self.statements = statements
    }

    /// The statements for `backend`.
    public func sql(for backend: HubBackend) -> [String] {
        statements.map { $0.replacingOccurrences(of: "{blob}", with: backend == .sqlite ? "BLOB" : "BYTEA") }
    }
}
