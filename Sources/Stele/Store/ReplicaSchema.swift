import SteleSQL

/// The replica file's schema, as numbered migrations (STYLE "SQLite").
///
/// Every replicated row table is `WITHOUT ROWID` keyed by (namespace id, key):
/// a row, and a retained tombstone, cost one B-tree cell. Legal values are
/// enforced by CHECK constraints, so a damaged or hand-edited file fails loudly.
enum ReplicaSchema {
    /// `PRAGMA application_id` of every Stele store: "Stel".
    static let applicationID: Int64 = 0x5374_656C

    static let migrator = Migrator([
        Migration(version: 1, name: "replica, devices, namespaces and the five kinds' tables") { connection in
            try connection.executeScript(
                """
                CREATE TABLE replica (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    account BLOB NOT NULL CHECK (length(account) = 16),
                    device BLOB NOT NULL CHECK (length(device) = 32),
                    generation INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),
                    own_counter INTEGER NOT NULL DEFAULT 0 CHECK (own_counter >= 0),
                    clock INTEGER NOT NULL DEFAULT 0 CHECK (clock >= 0),
                    created_ms INTEGER NOT NULL
                );
                -- Device ids are interned: vectors and writers on disk name a device by
                -- its small local index, which keeps a tombstone a few dozen bytes.
                CREATE TABLE devices (
                    idx INTEGER PRIMARY KEY,
                    id BLOB NOT NULL UNIQUE CHECK (length(id) = 32)
                );
                CREATE TABLE namespaces (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    kind TEXT NOT NULL CHECK (kind IN ('causal', 'lww', 'log', 'appendOnly', 'local'))
                );
                -- causal: the row and its RowVersion bookkeeping in one cell (000 §4).
                -- value/ts/writer/dot are the version reads show; concurrent versions
                -- that also survive sit in siblings (rare). A tombstone keeps key and
                -- vector only: everything else is NULL.
                CREATE TABLE causal_rows (
                    ns INTEGER NOT NULL,
                    key TEXT NOT NULL,
                    value BLOB,
                    vv BLOB NOT NULL,
                    ts INTEGER,
                    writer INTEGER,
                    dot INTEGER,
                    siblings BLOB,
                    tombstoned INTEGER NOT NULL CHECK (tombstoned IN (0, 1)),
                    CHECK ((tombstoned = 1) = (value IS NULL)),
                    CHECK ((tombstoned = 1) = (ts IS NULL AND writer IS NULL AND dot IS NULL)),
                    CHECK (tombstoned = 0 OR siblings IS NULL),
                    PRIMARY KEY (ns, key)
                ) WITHOUT ROWID;
                -- lww: a deleted row keeps its timestamp and writer: the merge needs them (000 §5).
                CREATE TABLE lww_rows (
                    ns INTEGER NOT NULL,
                    key TEXT NOT NULL,
                    value BLOB,
                    ts INTEGER NOT NULL CHECK (ts >= 0),
                    writer INTEGER NOT NULL,
                    deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
                    CHECK ((deleted = 1) = (value IS NULL)),
                    PRIMARY KEY (ns, key)
                ) WITHOUT ROWID;
                -- log: events and tombstone markers (000 §2); buried events are purged.
                CREATE TABLE log_events (
                    ns INTEGER NOT NULL,
                    id BLOB NOT NULL CHECK (length(id) = 16),
                    grp TEXT NOT NULL,
                    marker INTEGER NOT NULL CHECK (marker IN (0, 1)),
                    body BLOB NOT NULL,
                    ts INTEGER NOT NULL CHECK (ts >= 0),
                    writer INTEGER NOT NULL,
                    CHECK (marker = 0 OR length(body) = 0),
                    PRIMARY KEY (ns, id)
                ) WITHOUT ROWID;
                CREATE INDEX log_events_by_group ON log_events (ns, grp, marker);
                CREATE TABLE append_only_rows (
                    ns INTEGER NOT NULL,
                    key TEXT NOT NULL,
                    value BLOB NOT NULL,
                    ts INTEGER NOT NULL CHECK (ts >= 0),
                    writer INTEGER NOT NULL,
                    PRIMARY KEY (ns, key)
                ) WITHOUT ROWID;
                CREATE TABLE local_rows (
                    ns INTEGER NOT NULL,
                    key TEXT NOT NULL,
                    value BLOB NOT NULL,
                    PRIMARY KEY (ns, key)
                ) WITHOUT ROWID;
                """)
        },
    ])
}
