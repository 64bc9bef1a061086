/// Each namespace keeps its rows in a table of its own, named after its kind and
/// local id (`causal_3`). A table of its own means rows are keyed by the key
/// alone: SQLite compares a leading text key with its fast path, and the B-tree
/// holds one namespace, so scans and sizes need no filtering (`local.put`,
/// `local.delete`: about a third less work than a shared table keyed by
/// (namespace, key)).
///
/// Every table is `WITHOUT ROWID`, so a row, and a retained tombstone, cost one
/// B-tree cell. Legal values are enforced by CHECK constraints, so a damaged or
/// hand-edited file fails loudly.
extension NamespaceKind {
    private var tablePrefix: String {
        switch self {
        case .causal: "causal"
        case .lww: "lww"
        case .log: "log"
        case .appendOnly: "append_only"
        case .local: "local"
        }
    }

    func tableName(id: Int64) -> String { "\(tablePrefix)_\(id)" }

    /// The DDL for a namespace's table (and its indexes) in the current layout.
    func createTableSQL(_ table: String) -> String {
        switch self {
        case .causal:
            // The row and its RowVersion bookkeeping in one cell (000 §4).
            // value/ts/writer/dot are the version reads show; concurrent versions
            // that also survive sit in siblings (rare). A tombstone keeps key and
            // vector only: everything else is NULL. Only the two checks that keep
            // reads honest run on every write: each CHECK costs a few percent of
            // `local.delete`, and the decoder rejects the rest (a live row without
            // its writer fails as corrupt).
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                vv BLOB NOT NULL,
                value BLOB,
                ts INTEGER,
                writer INTEGER,
                dot INTEGER,
                siblings BLOB,
                tombstoned INTEGER NOT NULL CHECK (tombstoned IN (0, 1)),
                CHECK ((tombstoned = 1) = (value IS NULL))
            ) WITHOUT ROWID;
            """
        case .lww:
            // A deleted row keeps its timestamp and writer: the merge needs them (000 §5).
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                value BLOB,
                ts INTEGER NOT NULL CHECK (ts >= 0),
                writer INTEGER NOT NULL,
                deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
                CHECK ((deleted = 1) = (value IS NULL))
            ) WITHOUT ROWID;
            """
        case .log:
            // Events and tombstone markers (000 §2); buried events are purged.
            """
            CREATE TABLE \(table) (
                id BLOB NOT NULL PRIMARY KEY CHECK (length(id) = 16),
                grp TEXT NOT NULL,
                marker INTEGER NOT NULL CHECK (marker IN (0, 1)),
                body BLOB NOT NULL,
                ts INTEGER NOT NULL CHECK (ts >= 0),
                writer INTEGER NOT NULL,
                CHECK (marker = 0 OR length(body) = 0)
            ) WITHOUT ROWID;
            CREATE INDEX \(table)_by_group ON \(table) (grp, marker);
            """
        case .appendOnly:
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                value BLOB NOT NULL,
                ts INTEGER NOT NULL CHECK (ts >= 0),
                writer INTEGER NOT NULL
            ) WITHOUT ROWID;
            """
        case .local:
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                value BLOB NOT NULL
            ) WITHOUT ROWID;
            """
        }
    }
}
